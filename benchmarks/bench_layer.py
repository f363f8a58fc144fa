"""Memory layer: recall, history and lookups in one large scope, versions linked or not.

    .venv/bin/python benchmarks/bench_layer.py [--memories 100000] [--calls 30] [--imports 100000]
        [--expiring 5000]

Two scopes of the same SQLite file hold `--memories` memories each (30 words from bench_loader's
vocabulary) and one versioned memory (v1 to v3). In scope `linked` the records carry
`superseded_by`, as the layer writes them now; in scope `unlinked` they do not, as the layer
wrote them before, so finding newer versions takes a listing filtered on `parent_id`, which
SQLite answers by reading the scope (as every recall did before the links). The calls
alternate between the scopes; each figure is the median of `--calls` calls (prefix lookups:
a fifth as many). A recall writes its hits back, which links them: text recalls draw fresh
words each time, while the empty recall's hits are linked after its first call.

Then `redact` is timed on 30-word paragraphs, and `--imports` records are imported into a new
scope of a new file, and again into another file by a store whose `optimize()` does nothing;
4-word queries alternate between the two. Then the same records are imported again over
themselves, where each record's stored copy is read back for its version link. Last,
`--expiring` records carrying `expires_at` and as many without it are imported into new scopes,
alternated three times: an expiring record's TTL travels in the same `put_many`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import platform
import random
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_loader import vocabulary

from animus_flows.memory import AsyncMemoryLayer, Memory
from animus_flows.memory.store_form import to_store
from animus_flows.protocol import Scope
from animus_flows.stores import SQLiteStore

BATCH = 5000


async def fill(store: SQLiteStore, scope: Scope, count: int, *, linked: bool) -> None:
    rng, words = random.Random(7), vocabulary()
    for start in range(0, count, BATCH):
        entries = []
        for _ in range(min(BATCH, count - start)):
            memory = Memory(content=" ".join(rng.choices(words, k=30)))
            value, metadata = to_store(memory, agent=scope.agent_id or "shared")
            if not linked:  # as layers before links stored records: no link, a `_bucket`
                del value["superseded_by"]
                metadata["_bucket"] = memory.id[:2]
            entries.append((scope, memory.id, value, metadata))
        await store.put_many(entries)


async def chain(store: SQLiteStore, scope: Scope, *, linked: bool) -> list[str]:
    """v1 to v3 of one memory; unlinked, stored as the layer stored versions before links."""
    layer = AsyncMemoryLayer(store, scope)
    v1 = await layer.remember("the quarterly report on market volatility")
    v2 = await layer.update_with_version(v1.id, content="the quarterly report, revised")
    v3 = await layer.update_with_version(v2.id, content="the quarterly report, final")
    ids = [v1.id, v2.id, v3.id]
    if not linked:
        for memory_id in ids:
            item = await store.get(scope, memory_id)
            value = {k: v for k, v in item.value.items() if k != "superseded_by"}
            metadata = {**item.metadata, "_bucket": memory_id[:2]}
            await store.put(scope, memory_id, value, metadata=metadata)
    return ids


ORDER = ("not optimized", "optimized")


def redaction_cost(count: int = 2000) -> float:
    """Median microseconds `redact` takes on a 30-word paragraph holding no secret."""
    from animus_flows.redaction import redact

    rng, words = random.Random(17), vocabulary()
    texts = [" ".join(rng.choices(words, k=30)) for _ in range(count)]
    samples = []
    for text in texts:
        started = time.perf_counter()
        redact(text)
        samples.append((time.perf_counter() - started) * 1e6)
    return statistics.median(samples)


class UnoptimizedStore(SQLiteStore):
    """The SQLite store with `optimize()` a no-op: an import as it was before imports
    optimized."""

    async def optimize(self) -> None:
        return None


async def imports(folder: Path, count: int, calls: int) -> dict[str, dict[str, float]]:
    """`import_memories` of `count` records into a new scope, then 4-word queries, with the
    import's `optimize()` and without it."""
    rng, words = random.Random(13), vocabulary()
    text = json.dumps(
        [
            {"id": str(uuid.uuid4()), "content": " ".join(rng.choices(words, k=30))}
            for _ in range(count)
        ]
    )
    scope = Scope("bench", agent_id="imported")
    stores = {
        "not optimized": UnoptimizedStore(folder / "imported-unoptimized.db"),
        "optimized": SQLiteStore(folder / "imported.db"),
    }
    figures: dict[str, dict[str, float]] = {"import": {}}
    for name, store in stores.items():
        started = time.perf_counter()
        await AsyncMemoryLayer(store, scope).import_memories(text)
        figures["import"][name] = (time.perf_counter() - started) * 1000
    figures["query, 4 words"] = await alternated(
        calls,
        {
            name: lambda store=store: store.query(scope, " ".join(rng.sample(words, 4)))
            for name, store in stores.items()
        },
    )
    started = time.perf_counter()  # what the import's optimize() costs, measured apart
    await SQLiteStore.optimize(stores["not optimized"])
    figures["optimize() of the file afterwards"] = {
        "not optimized": (time.perf_counter() - started) * 1000
    }
    started = time.perf_counter()  # a re-import: every record's stored copy is read back
    await AsyncMemoryLayer(stores["optimized"], scope).import_memories(text)
    figures["the same import again, over the records"] = {
        "optimized": (time.perf_counter() - started) * 1000
    }
    for store in stores.values():
        await store.aclose()
    return figures


async def expiring_imports(folder: Path, count: int, rounds: int = 3) -> dict[str, float]:
    """Median milliseconds of importing `count` records with `expires_at`, and without, into
    new scopes of one SQLite file, the two alternated `rounds` times."""
    later = (datetime.now(UTC) + timedelta(days=1)).isoformat()
    rng, words = random.Random(17), vocabulary()

    def records(expiring: bool) -> str:
        return json.dumps(
            [
                {"id": str(uuid.uuid4()), "content": " ".join(rng.choices(words, k=30))}
                | ({"expires_at": later} if expiring else {})
                for _ in range(count)
            ]
        )

    store = SQLiteStore(folder / "expiring.db")
    samples: dict[str, list[float]] = {"expiring": [], "permanent": []}
    for n in range(rounds):
        for name in samples:
            text = records(name == "expiring")
            layer = AsyncMemoryLayer(store, Scope("bench", agent_id=f"{name}-{n}"))
            started = time.perf_counter()
            await layer.import_memories(text)
            samples[name].append((time.perf_counter() - started) * 1000)
    await store.aclose()
    return {name: statistics.median(times) for name, times in samples.items()}


async def alternated(
    calls: int, scopes: dict[str, Callable[[], Awaitable[object]]]
) -> dict[str, float]:
    """Median milliseconds of each scope's call, the scopes' calls alternated."""
    samples: dict[str, list[float]] = {name: [] for name in scopes}
    for _ in range(calls):
        for name, call in scopes.items():
            started = time.perf_counter()
            await call()
            samples[name].append((time.perf_counter() - started) * 1000)
    return {name: statistics.median(times) for name, times in samples.items()}


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--memories", type=int, default=100_000)
    parser.add_argument("--calls", type=int, default=30)
    parser.add_argument("--imports", type=int, default=100_000)
    parser.add_argument("--expiring", type=int, default=5_000)
    args = parser.parse_args()
    print(f"{platform.machine()}, Python {platform.python_version()}, {args.memories:,} per scope")

    with tempfile.TemporaryDirectory() as folder:
        store = SQLiteStore(Path(folder) / "layer.db")
        scopes = {name: Scope("bench", agent_id=name) for name in ("linked", "unlinked")}
        ids = {}
        started = time.perf_counter()
        for name, scope in scopes.items():
            await fill(store, scope, args.memories, linked=name == "linked")
            ids[name] = await chain(store, scope, linked=name == "linked")
        await store.optimize()
        print(f"seeded in {time.perf_counter() - started:.0f} s")

        rng, words = random.Random(11), vocabulary()
        layers = {name: AsyncMemoryLayer(store, scope) for name, scope in scopes.items()}
        for name, layer in layers.items():
            v1, _, v3 = ids[name]
            assert [m.id for m in await layer.history(v1)] == ids[name]
            found = {m.id for m in await layer.recall("quarterly report", limit=50)}
            assert v3 in found and not found & set(ids[name][:2])

        def each(call: Callable[[AsyncMemoryLayer, list[str]], Awaitable[object]]) -> dict:
            return {name: lambda name=name: call(layers[name], ids[name]) for name in layers}

        figures = {
            "recall, 4 words": await alternated(
                args.calls, each(lambda layer, _: layer.recall(" ".join(rng.sample(words, 4))))
            ),
            "recall, empty text": await alternated(
                args.calls, each(lambda layer, _: layer.recall(""))
            ),
            "history of 3 versions": await alternated(
                args.calls, each(lambda layer, chain: layer.history(chain[0]))
            ),
            "get_memory(v1), full id": await alternated(
                args.calls, each(lambda layer, chain: layer.get_memory(chain[0]))
            ),
            "get_memory(v1), 8-character prefix": await alternated(
                max(3, args.calls // 5), each(lambda layer, chain: layer.get_memory(chain[0][:8]))
            ),
        }
        await store.aclose()
        imported = await imports(Path(folder), args.imports, 10 * args.calls)
        expiring = await expiring_imports(Path(folder), args.expiring)

    print("\n| call | linked records | records without links |\n| --- | ---: | ---: |")
    for call, medians in figures.items():
        print(f"| {call} | {medians['linked']:.2f} ms | {medians['unlinked']:.2f} ms |")
    print(f"\nredact(), a 30-word paragraph without secrets: {redaction_cost():.1f} µs (median)")
    print(f"\n{args.imports:,} records imported into a new scope, then SQLite queries there:")
    print("| | import without optimize() | import optimizes |\n| --- | ---: | ---: |")
    for call, medians in imported.items():
        cells = [f"{medians[n]:.2f} ms" if n in medians else "-" for n in ORDER]
        print(f"| {call} | {' | '.join(cells)} |")
    print(
        f"\n{args.expiring:,} records imported into a new scope (median of 3, alternated): "
        f"with expires_at {expiring['expiring']:.0f} ms, without {expiring['permanent']:.0f} ms"
    )


if __name__ == "__main__":
    asyncio.run(main())
