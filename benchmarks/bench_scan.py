"""Enumerating a scope: `export_memories` through the protocol's `list_items`.

    .venv/bin/python benchmarks/bench_scan.py [--memories 20000] [--rounds 3]

The memory layer enumerates a scope for `export_memories`, `backup`, `get_all_tags` and
`run_tier_review` with `list_items`, a page of 500 items at a time in key order; the SQLite
store reads each page from its (scope, key) index. One file of `--memories` imported memories
is exported `--rounds` times; the best is printed.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import platform
import tempfile
import time
import uuid
from pathlib import Path

from animus_flows.memory import AsyncMemoryLayer
from animus_flows.protocol import Scope
from animus_flows.stores import SQLiteStore


async def main(memories: int, rounds: int) -> None:
    print(f"# {platform.machine()}, Python {platform.python_version()}")
    with tempfile.TemporaryDirectory() as folder:
        store = SQLiteStore(Path(folder) / "scan.db")
        scope = Scope("bench", agent_id="a")
        walking = AsyncMemoryLayer(store, scope)
        records = [
            {"id": str(uuid.uuid4()), "content": f"note {n} on EUR/USD ranges and rate paths"}
            for n in range(memories)
        ]
        document = {"format": "animus-memories", "version": 1, "memories": records}
        started = time.perf_counter()
        await walking.import_memories(json.dumps(document))
        print(f"import of {memories}: {time.perf_counter() - started:.1f} s")
        seconds = []
        for _ in range(rounds):
            started = time.perf_counter()
            exported = json.loads(await walking.export_memories())
            seconds.append(time.perf_counter() - started)
            assert exported["count"] == memories
        print(f"export_memories of {memories} through list_items: best {min(seconds):.2f} s")
        await store.aclose()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--memories", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    asyncio.run(main(args.memories, args.rounds))
