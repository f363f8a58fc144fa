"""`make demo`: load the trade desk's seed memories, then query them the way a phase would.

Runs on the embedded SQLite store in examples/trade-desk/.animus/.
"""

import asyncio
import json
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ANIMUS = [sys.executable, "-m", "animus_flows"]
WORKFLOW = ["--workflow-file", str(HERE / "animus.yaml")]


def animus(*args: str) -> str:
    print(f"$ animus {' '.join(args)}")
    out = subprocess.run([*ANIMUS, *args], capture_output=True, text=True)
    sys.stderr.write(out.stderr)
    if out.returncode != 0:
        sys.exit(out.returncode)
    print(out.stdout)
    return out.stdout


def main() -> None:
    from seed import main as seed

    asyncio.run(seed())
    animus("validate", str(HERE / "animus.yaml"))
    animus(
        "memory",
        "query",
        *WORKFLOW,
        "--scope",
        "agent",
        "--agent-id",
        "trade-analyst",
        "--query",
        "EUR/USD range and ECB rates",
        "--top-k",
        "3",
    )
    animus("memory", "query", *WORKFLOW, "--scope", "project", "--query", "hedge ratio procedure")
    listed = json.loads(animus("memory", "list-scopes", *WORKFLOW, "--json"))
    print(f"{len(listed['scopes'])} scopes hold memories")


if __name__ == "__main__":
    sys.path.insert(0, str(HERE))
    main()
