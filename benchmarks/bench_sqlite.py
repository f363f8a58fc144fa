"""SQLite store: scoped top-8 query latency at 10k / 100k / 1M items, ingest rates.

    .venv/bin/python benchmarks/bench_sqlite.py [--sizes 10000,100000,1000000] [--queries 2000]

Items are synthetic ~30-word documents over a Zipf-distributed 5,000-word vocabulary, spread
evenly over 500 scopes; queries are 3 random vocabulary words in a random scope.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from animus_flows.protocol import Scope
from animus_flows.stores import SQLiteStore

SCOPES = 500
WORDS_PER_DOC = 30
BATCH = 5000


def vocabulary(rng: random.Random, size: int = 5000) -> list[str]:
    letters = "abcdefghijklmnopqrstuvwxyz"
    words = set()
    while len(words) < size:
        words.add("".join(rng.choice(letters) for _ in range(rng.randint(3, 9))))
    return sorted(words)


def percentile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def build(path: Path, size: int, words: list[str], weights: list[float]) -> float:
    rng = random.Random(size)
    store = SQLiteStore(path)
    scopes = [Scope("bench", agent_id=f"agent-{index}") for index in range(SCOPES)]
    elapsed = 0.0
    for start in range(0, size, BATCH):
        docs = rng.choices(words, weights, k=BATCH * WORDS_PER_DOC)
        batch = [
            (
                scopes[n % SCOPES],
                f"k{n}",
                " ".join(docs[(n - start) * WORDS_PER_DOC : (n - start + 1) * WORDS_PER_DOC]),
                {"n": n},
            )
            for n in range(start, min(size, start + BATCH))
        ]
        started = time.perf_counter()  # time the store, not the text generator
        await store.put_many(batch)
        elapsed += time.perf_counter() - started
    await store.aclose()
    return size / elapsed


async def query_latency(path: Path, words: list[str], queries: int) -> list[float]:
    rng = random.Random(7)
    store = SQLiteStore(path)
    await store.query(Scope("bench", agent_id="agent-0"), "warm up", top_k=8)
    samples = []
    for _ in range(queries):
        scope = Scope("bench", agent_id=f"agent-{rng.randrange(SCOPES)}")
        text = " ".join(rng.sample(words[:2000], 3))
        started = time.perf_counter()
        await store.query(scope, text, top_k=8)
        samples.append((time.perf_counter() - started) * 1000)
    await store.aclose()
    return samples


async def single_puts(path: Path, count: int = 2000) -> float:
    store = SQLiteStore(path)
    scope = Scope("bench", agent_id="single")
    started = time.perf_counter()
    for n in range(count):
        await store.put(scope, f"single-{n}", f"one item at a time number {n}")
    elapsed = time.perf_counter() - started
    await store.aclose()
    return count / elapsed


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="10000,100000,1000000")
    parser.add_argument("--queries", type=int, default=2000)
    args = parser.parse_args()
    rng = random.Random(1)
    words = vocabulary(rng)
    weights = [1 / (rank + 1) for rank in range(len(words))]
    print(
        f"machine: {platform.machine()} {os.cpu_count()} cpus, Python {platform.python_version()}"
    )
    with tempfile.TemporaryDirectory() as folder:
        for size in (int(s) for s in args.sizes.split(",")):
            path = Path(folder) / f"bench-{size}.db"
            rate = await build(path, size, words, weights)
            samples = await query_latency(path, words, args.queries)
            print(
                f"{size:>9,} items / {SCOPES} scopes: batched ingest {rate:>8,.0f} items/s; "
                f"scoped top-8 query p50 {statistics.median(samples):.3f} ms, "
                f"p95 {percentile(samples, 0.95):.3f} ms, p99 {percentile(samples, 0.99):.3f} ms"
            )
        rate = await single_puts(Path(folder) / "single.db")
        print(f"single put (one transaction each, WAL): {rate:,.0f} puts/s")


if __name__ == "__main__":
    asyncio.run(main())
