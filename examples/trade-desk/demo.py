"""`make demo`: seed the trade desk's memories, run its research workflow, show what happened.

Runs on the embedded SQLite store in examples/trade-desk/.animus/ and a temporary Prefect
server (or yours, when PREFECT_API_URL is set).
"""

import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def animus(*args: str) -> None:
    print(f"\n$ animus {' '.join(args)}", flush=True)
    done = subprocess.run([sys.executable, "-m", "animus_flows", *args], cwd=HERE)
    if done.returncode != 0:
        sys.exit(done.returncode)


def main() -> None:
    subprocess.run([sys.executable, str(HERE / "seed.py")], check=True)
    animus("validate", "animus.yaml")
    animus("run", "animus.yaml", "--task-id", "RES-001")
    print(
        "\nThis run's artifacts (memory-ops-*, memory-context-*, token-budget-research) are in"
        " the Prefect UI when PREFECT_API_URL points at your server (prefect server start)."
    )


if __name__ == "__main__":
    main()
