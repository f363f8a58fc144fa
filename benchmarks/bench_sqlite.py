"""SQLite store: scoped top-8 query latency at 10k / 100k / 1M items, and ingest rates.

    .venv/bin/python benchmarks/bench_sqlite.py [--sizes 10000,100000,1000000] [--queries 2000]

Items are synthetic 30-word documents over a 5,000-word vocabulary with a Zipf distribution
(like natural text: a few words are everywhere), spread evenly over 500 scopes. Two query
mixes, each in a random scope, top_k 8, through the public async API:
  - "natural": 4 words drawn with the same Zipf weights as the text (common words included,
    as in a phase prompt);
  - "keywords": 3 words drawn uniformly from the vocabulary (mostly rare words).
Ingest is measured per-scope batches (how imports and seeding write) and mixed batches
(5,000 items spread over all 500 scopes, the worst case for a scope-partitioned index).
Queries run after `SQLiteStore.optimize()`, as the docs advise after a bulk load.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import random
import sqlite3
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from measure import percentile

from animus_flows.protocol import Scope
from animus_flows.stores import SQLiteStore

SCOPES = 500
WORDS_PER_DOC = 30
MIXED_BATCH = 5000


def vocabulary(rng: random.Random, size: int = 5000) -> list[str]:
    letters = "abcdefghijklmnopqrstuvwxyz"
    words: set[str] = set()
    while len(words) < size:
        words.add("".join(rng.choice(letters) for _ in range(rng.randint(3, 9))))
    return sorted(words)


class Corpus:
    def __init__(self) -> None:
        rng = random.Random(1)
        self.words = vocabulary(rng)
        rng.shuffle(self.words)  # Zipf rank independent of spelling
        self.weights = [1 / (rank + 1) for rank in range(len(self.words))]
        self.scopes = [Scope("bench", agent_id=f"agent-{i}") for i in range(SCOPES)]

    def doc(self, rng: random.Random) -> str:
        return " ".join(rng.choices(self.words, self.weights, k=WORDS_PER_DOC))


async def ingest(path: Path, corpus: Corpus, size: int, mixed: bool) -> float:
    """Write `size` items; returns items/s, timing only the store calls."""
    rng = random.Random(size)
    store = SQLiteStore(path)
    elapsed = 0.0
    per_scope = size // SCOPES
    batches: list[list] = []
    if mixed:
        for start in range(0, size, MIXED_BATCH):
            batches.append(
                [
                    (corpus.scopes[n % SCOPES], f"k{n}", None, {"n": n})
                    for n in range(start, min(size, start + MIXED_BATCH))
                ]
            )
    else:
        for index, scope in enumerate(corpus.scopes):
            base = index * per_scope
            batches.append(
                [(scope, f"k{base + n}", None, {"n": base + n}) for n in range(per_scope)]
            )
    for batch in batches:
        batch = [(scope, key, corpus.doc(rng), meta) for scope, key, _, meta in batch]
        started = time.perf_counter()
        await store.put_many(batch)
        elapsed += time.perf_counter() - started
    await store.aclose()
    return size / elapsed


async def timed_queries(
    store: Any, corpus: Corpus, queries: int, mix: str, rng: random.Random
) -> list[float]:
    """Milliseconds of each of `queries` top-8 queries of `mix` ("natural": 4 words drawn with
    the corpus's weights; else 3 drawn uniformly), each in a random scope."""
    samples = []
    for _ in range(queries):
        scope = corpus.scopes[rng.randrange(SCOPES)]
        if mix == "natural":
            words = rng.choices(corpus.words, corpus.weights, k=4)
        else:
            words = rng.sample(corpus.words, 3)
        started = time.perf_counter()
        await store.query(scope, " ".join(words), top_k=8)
        samples.append((time.perf_counter() - started) * 1000)
    return samples


async def query_latency(path: Path, corpus: Corpus, queries: int, mix: str) -> list[float]:
    store = SQLiteStore(path)
    await store.query(corpus.scopes[0], "warm up", top_k=8)
    samples = await timed_queries(store, corpus, queries, mix, random.Random(7))
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


def summary(samples: list[float]) -> str:
    return (
        f"p50 {statistics.median(samples):.3f} ms, p95 {percentile(samples, 0.95):.3f} ms, "
        f"p99 {percentile(samples, 0.99):.3f} ms"
    )


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="10000,100000,1000000")
    parser.add_argument("--queries", type=int, default=2000)
    args = parser.parse_args()
    corpus = Corpus()
    print(
        f"machine: {platform.machine()}, {os.cpu_count()} cpus, Python "
        f"{platform.python_version()}, SQLite {sqlite3.sqlite_version}"
    )
    with tempfile.TemporaryDirectory() as folder:
        for size in (int(s) for s in args.sizes.split(",")):
            path = Path(folder) / f"bench-{size}.db"
            rate = await ingest(path, corpus, size, mixed=False)
            store = SQLiteStore(path)
            started = time.perf_counter()
            await store.optimize()  # as after any bulk load
            optimize_s = time.perf_counter() - started
            await store.aclose()
            print(
                f"{size:>9,} items / {SCOPES} scopes: ingest in per-scope batches "
                f"{rate:,.0f} items/s; optimize() {optimize_s:.1f} s"
            )
            for mix in ("natural", "keywords"):
                samples = await query_latency(path, corpus, args.queries, mix)
                print(f"{'':>11}scoped top-8 query, {mix:<8} words: {summary(samples)}")
            path.unlink()
        mixed = await ingest(Path(folder) / "mixed.db", corpus, 100_000, mixed=True)
        print(
            f"ingest of 100,000 items in mixed batches of {MIXED_BATCH:,} over {SCOPES} scopes: "
            f"{mixed:,.0f} items/s"
        )
        rate = await single_puts(Path(folder) / "single.db")
        print(f"single put (one transaction each, WAL, synchronous=NORMAL): {rate:,.0f} puts/s")


if __name__ == "__main__":
    asyncio.run(main())
