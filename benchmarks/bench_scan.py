"""Enumerating a scope: the SQLite store's key-order walk against `_bucket` listings.

    .venv/bin/python benchmarks/bench_scan.py [--memories 20000] [--rounds 3]

The memory layer enumerates a scope for `export_memories`, `backup`, `get_all_tags` and
`run_tier_review`. Through a store that offers `scope_items` (`protocol.ScopeReads`: the SQLite
store) it walks the scope's key index a page at a time; through any other it lists the scope in
16 or 256 slices filtered on `_bucket`, each a read of the whole scope. Both run here on one
file of `--memories` imported memories, alternated, `--rounds` times each; the best is printed.
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


class ProtocolOnly:
    """The SQLite store's five protocol methods alone: what a plugin store offers."""

    def __init__(self, store: SQLiteStore) -> None:
        self.capabilities = store.capabilities
        self.put, self.get, self.query = store.put, store.get, store.query
        self.list_scopes, self.delete_scope = store.list_scopes, store.delete_scope


async def main(memories: int, rounds: int) -> None:
    print(f"# {platform.machine()}, Python {platform.python_version()}")
    with tempfile.TemporaryDirectory() as folder:
        store = SQLiteStore(Path(folder) / "scan.db")
        scope = Scope("bench", agent_id="a")
        walking = AsyncMemoryLayer(store, scope)
        slicing = AsyncMemoryLayer(ProtocolOnly(store), scope)  # type: ignore[arg-type]
        records = [
            {"id": str(uuid.uuid4()), "content": f"note {n} on EUR/USD ranges and rate paths"}
            for n in range(memories)
        ]
        document = {"format": "animus-memories", "version": 1, "memories": records}
        started = time.perf_counter()
        await walking.import_memories(json.dumps(document))
        print(f"import of {memories}: {time.perf_counter() - started:.1f} s")
        timings: dict[str, list[float]] = {"key-order walk": [], "_bucket listings": []}
        for _ in range(rounds):
            for name, layer in (("key-order walk", walking), ("_bucket listings", slicing)):
                started = time.perf_counter()
                exported = json.loads(await layer.export_memories())
                timings[name].append(time.perf_counter() - started)
                assert exported["count"] == memories
        for name, seconds in timings.items():
            print(f"export_memories of {memories}, {name}: best {min(seconds):.2f} s")
        await store.aclose()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--memories", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    asyncio.run(main(args.memories, args.rounds))
