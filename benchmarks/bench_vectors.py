"""Vector index candidates at 10k and 100k vectors per scope (384-d): which one the stores use.

    .venv/bin/python benchmarks/bench_vectors.py [--sizes 10000,100000] [--queries 200]
        [--candidates numpy-exact,sqlite-vec,usearch-hnsw,hnswlib] [--json]
    .venv/bin/python benchmarks/bench_vectors.py --products

Each candidate and size runs in its own subprocess (clean memory figures), one after another in
the same run. Per candidate: build (bulk load of the scope), one write (add a new row, replace
one, remove one; mean of 200 each), top-50 query latency p50/p95, the resident memory the
index adds, and recall@50 against exact search.

Vectors imitate e5 embeddings: unit vectors sharing one common direction (so unrelated pairs
score about 0.7, as with multilingual-e5-small) around 1,000 topic centres; a query is a noisy
copy of a stored vector. Only the measured scope is loaded: the candidates that keep scopes
apart (numpy: one matrix per scope; sqlite-vec: a partition key; HNSW: one index per scope)
never look at other scopes' rows.

    numpy-exact    animus_flows.stores.vectors.VectorIndex (what ships): float32 matrix, exact.
    sqlite-vec     sqlite-vec 0.1.9 through apsw (this Python's sqlite3 cannot load
                   extensions); vec0 table, `scope` partition key, cosine, exact (brute force).
    usearch-hnsw   usearch 2.x, HNSW (connectivity 16, expansion 64 add / 64 search), f32.
    hnswlib        hnswlib 0.8 HNSW (M 16, ef_construction 200, ef 64); on PyPI as an sdist
                   only (no wheel for CPython 3.11+): needs a C++ compiler to install.

Only numpy-exact's needs are project dependencies; `pip install apsw sqlite-vec usearch
hnswlib` to compare the others (hnswlib builds from source), which print as unavailable
otherwise.

Figures of 2026-12-04, one run (2 shared cores, load average 2.5 to 4 from other work: the
latencies are noisy, recall is exact; build and write times in one thread):

    candidate      vectors  build s  mem MB  q p50 ms  q p95 ms  recall  add ms  repl ms  rm ms
    numpy-exact      10000     0.11      48      0.66      0.89   1.000   0.028    0.041  0.004
    sqlite-vec       10000     0.51       2     17.79     34.73   1.000   3.777    3.070  2.189
    usearch-hnsw     10000    15.50      17      0.51      7.48   0.729   1.646    1.721  0.001
    hnswlib          10000     8.57      17      0.27      4.40   0.732   1.662    8.955  0.000
    numpy-exact     100000     2.40     175      9.81     43.30   1.000   0.026    0.026  0.003
    sqlite-vec      100000     2.37       3     77.87     99.32   1.000   0.258    0.257  0.205
    usearch-hnsw    100000   188.42     181      0.95      5.12   0.995   2.034    4.414  0.002
    hnswlib         100000   197.94     181      0.36      0.83   0.990   1.353    5.438  0.000

    (mem: resident memory the index adds; the vectors themselves are 15 MB and 154 MB.
    numpy's 100k build is 0.2 s on its own, 2.4 s here with the page faults of a busy
    machine; sqlite-vec keeps its vectors on disk, in the page cache.)

Choice: numpy exact search (`VectorIndex`). Exact, so recall is 1 by construction, where both
HNSW libraries lose a quarter of the true top 50 at 10k on these anisotropic vectors with
their default parameters; writes cost microseconds, where HNSW builds a 100k scope in about
three minutes of one core and sqlite-vec writes cost milliseconds; a top-50 query takes under
a millisecond at 10k and about 10 ms at 100k, within the 500 ms query deadline, and 8 to 27
times faster than sqlite-vec, which also needs apsw (a second SQLite beside the store's
sqlite3: no shared transaction). Its cost is memory, 1.5 KiB per 384-d vector, as much as the
vectors take (HNSW needs the same plus its graph). `VectorIndex` computes the product with
numpy's own row-by-row dot rather than BLAS, whose threads spin while they wait for each other
and for work, and from 20,000 rows splits it in two halves, one on a helper thread.
`--products` times the three ways (p50 / p95 ms), idle and beside busy processes:

2026-12-06, Intel Xeon 2.1 GHz, 2 cores:

    rows     busy  BLAS `@`          row by row        VectorIndex
    2,000    0       0.07 /   0.11     0.17 /   0.19     0.17 /   0.19
    30,000   0       1.04 /   1.30     2.34 /   2.88     0.91 /   1.43
    100,000  0       5.67 /   6.25    15.70 /  17.08     6.07 /   7.05
    2,000    1       0.03 /   0.07     0.11 /   0.14     0.11 /   0.13
    30,000   1       5.01 /   8.01     1.68 /   5.78     1.76 /   3.77
    100,000  1      13.55 /  16.00    11.40 /  19.44    10.57 /  12.34
    2,000    2       0.03 /   8.00     0.16 /   4.16     0.16 /   0.20
    30,000   2       5.24 /   8.01     1.97 /   6.02     1.82 /   1.99
    100,000  2      15.99 /  20.01    18.02 /  31.49    14.01 /  14.99

BLAS is fastest idle, but its spinning threads cost a busy machine's small scopes 8 ms at p95
and took a core from the query embedding that followed in back-to-back hybrid hooks (45 ms p50
instead of 26); the halves come close to it idle and beat both when the machine is busy.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any

import numpy as np
from measure import busy_processes, percentile

DIMENSION = 384
K = 50
TOPICS = 1000
CANDIDATES = ("numpy-exact", "sqlite-vec", "usearch-hnsw", "hnswlib")
WRITES = 200


def dataset(n: int, queries: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(42)
    common = rng.standard_normal(DIMENSION).astype(np.float32)
    common /= np.linalg.norm(common)
    centres = rng.standard_normal((TOPICS, DIMENSION)).astype(np.float32)
    centres /= np.linalg.norm(centres, axis=1, keepdims=True)
    noise = rng.standard_normal((n, DIMENSION)).astype(np.float32)
    noise /= np.linalg.norm(noise, axis=1, keepdims=True)
    topic = rng.integers(0, TOPICS, n)
    data = 0.83 * common + 0.4 * centres[topic] + 0.4 * noise
    data /= np.linalg.norm(data, axis=1, keepdims=True)
    picks = rng.integers(0, n, queries)
    jitter = rng.standard_normal((queries, DIMENSION)).astype(np.float32)
    jitter /= np.linalg.norm(jitter, axis=1, keepdims=True)
    asked = data[picks] + 0.5 * jitter
    asked /= np.linalg.norm(asked, axis=1, keepdims=True)
    return data.astype(np.float32), asked.astype(np.float32)


def rss_mb() -> float:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 1e6


# -- candidates: build(data) -> object with add(id, v), remove(id), search(q) -> ids ----------


class NumpyExact:
    def __init__(self, data: np.ndarray) -> None:
        from animus_flows.stores.vectors import VectorIndex

        self.index = VectorIndex(DIMENSION, min_similarity=-1.0)
        self.index.add_many("scope", list(range(len(data))), data)

    def add(self, item: int, vector: np.ndarray) -> None:
        self.index.add("scope", item, vector)

    def remove(self, item: int) -> None:
        self.index.remove("scope", item)

    def search(self, query: np.ndarray) -> list[int]:
        return [item for item, _ in self.index.search("scope", query, K)]  # type: ignore[misc]


class SqliteVec:
    def __init__(self, data: np.ndarray) -> None:
        import apsw
        import sqlite_vec

        self.folder = tempfile.mkdtemp(prefix="bench-vec-")
        self.db = apsw.Connection(os.path.join(self.folder, "vectors.db"))
        self.db.enable_load_extension(True)
        self.db.load_extension(sqlite_vec.loadable_path())
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute(
            "CREATE VIRTUAL TABLE v USING vec0(scope TEXT PARTITION KEY,"
            f" embedding float[{DIMENSION}] distance_metric=cosine)"
        )
        with self.db:
            self.db.executemany(
                "INSERT INTO v (rowid, scope, embedding) VALUES (?, 'scope', ?)",
                ((i, row.tobytes()) for i, row in enumerate(data)),
            )

    def add(self, item: int, vector: np.ndarray) -> None:
        with self.db:
            self.db.execute("DELETE FROM v WHERE rowid = ?", (item,))
            self.db.execute(
                "INSERT INTO v (rowid, scope, embedding) VALUES (?, 'scope', ?)",
                (item, vector.tobytes()),
            )

    def remove(self, item: int) -> None:
        with self.db:
            self.db.execute("DELETE FROM v WHERE rowid = ?", (item,))

    def search(self, query: np.ndarray) -> list[int]:
        rows = self.db.execute(
            "SELECT rowid FROM v WHERE embedding MATCH ? AND k = ? AND scope = 'scope'",
            (query.tobytes(), K),
        )
        return [row[0] for row in rows]


class UsearchHnsw:
    def __init__(self, data: np.ndarray) -> None:
        from usearch.index import Index

        self.index = Index(ndim=DIMENSION, metric="cos", dtype="f32", connectivity=16)
        self.index.add(np.arange(len(data), dtype=np.uint64), data, threads=1)

    def add(self, item: int, vector: np.ndarray) -> None:
        if item in self.index:
            self.index.remove(item)
        self.index.add(item, vector)

    def remove(self, item: int) -> None:
        self.index.remove(item)

    def search(self, query: np.ndarray) -> list[int]:
        return [int(key) for key in self.index.search(query, K, threads=1).keys]


class Hnswlib:
    def __init__(self, data: np.ndarray) -> None:
        import hnswlib

        self.index = hnswlib.Index(space="cosine", dim=DIMENSION)
        self.index.init_index(max_elements=len(data) + 2 * WRITES, M=16, ef_construction=200)
        self.index.set_num_threads(1)
        self.index.add_items(data, np.arange(len(data)))
        self.index.set_ef(64)

    def add(self, item: int, vector: np.ndarray) -> None:
        self.index.add_items(vector.reshape(1, -1), [item], replace_deleted=False)

    def remove(self, item: int) -> None:
        self.index.mark_deleted(item)

    def search(self, query: np.ndarray) -> list[int]:
        labels, _ = self.index.knn_query(query, k=K)
        return [int(label) for label in labels[0]]


BUILDERS = {
    "numpy-exact": NumpyExact,
    "sqlite-vec": SqliteVec,
    "usearch-hnsw": UsearchHnsw,
    "hnswlib": Hnswlib,
}


#: Imported before the clock and the memory gauge start.
MODULES = {
    "numpy-exact": ["animus_flows.stores.vectors"],
    "sqlite-vec": ["apsw", "sqlite_vec"],
    "usearch-hnsw": ["usearch.index"],
    "hnswlib": ["hnswlib"],
}


def worker(name: str, n: int, queries: int) -> dict[str, Any]:
    for module in MODULES[name]:
        __import__(module)
    data, asked = dataset(n, queries)
    scores = data @ asked.T  # the exact top 50 of every query, in one product
    truth = [set(np.argpartition(-scores[:, i], K)[:K].tolist()) for i in range(queries)]
    del scores
    before = rss_mb()
    started = time.perf_counter()
    index = BUILDERS[name](data)
    build_s = time.perf_counter() - started
    memory = rss_mb() - before

    latencies, recalls = [], []
    for query, expected in zip(asked, truth, strict=True):
        started = time.perf_counter()
        found = index.search(query)
        latencies.append((time.perf_counter() - started) * 1000)
        recalls.append(len(expected & set(found)) / K)

    rng = np.random.default_rng(7)
    fresh = rng.standard_normal((WRITES, DIMENSION)).astype(np.float32)
    fresh /= np.linalg.norm(fresh, axis=1, keepdims=True)
    writes: dict[str, float] = {}
    for op in ("add", "replace", "remove"):
        started = time.perf_counter()
        for i in range(WRITES):
            if op == "add":
                index.add(n + i, fresh[i])
            elif op == "replace":
                index.add(i, fresh[i])
            else:
                index.remove(n + i)
        writes[op] = (time.perf_counter() - started) / WRITES * 1000
    return {
        "candidate": name,
        "size": n,
        "build_s": build_s,
        "memory_mb": memory,
        "vectors_mb": n * DIMENSION * 4 / 1e6,
        "query_ms_p50": percentile(latencies, 0.5),
        "query_ms_p95": percentile(latencies, 0.95),
        "recall_at_50": statistics.fmean(recalls),
        "write_ms": writes,
    }


def run_all(names: list[str], sizes: list[int], queries: int) -> list[dict[str, Any]]:
    results = []
    for size in sizes:
        for name in names:
            command = [sys.executable, __file__, "--worker", name, "--size", str(size)]
            proc = subprocess.run(
                [*command, "--queries", str(queries)],
                capture_output=True,
                text=True,
            )
            if proc.returncode != 0:
                tail = (proc.stderr.strip().splitlines() or ["no output"])[-1]
                results.append({"candidate": name, "size": size, "error": tail})
            else:
                results.append(json.loads(proc.stdout))
    return results


def table(results: list[dict[str, Any]]) -> str:
    head = (
        f"{'candidate':<13} {'vectors':>7} {'build s':>8} {'mem MB':>7} {'q p50 ms':>8} "
        f"{'q p95 ms':>8} {'recall':>6} {'add ms':>7} {'repl ms':>7} {'rm ms':>7}"
    )
    lines = [head, "-" * len(head)]
    for r in results:
        if "error" in r:
            lines.append(f"{r['candidate']:<13} {r['size']:>7} unavailable: {r['error'][:70]}")
            continue
        w = r["write_ms"]
        lines.append(
            f"{r['candidate']:<13} {r['size']:>7} {r['build_s']:>8.2f} {r['memory_mb']:>7.0f} "
            f"{r['query_ms_p50']:>8.2f} {r['query_ms_p95']:>8.2f} {r['recall_at_50']:>6.3f} "
            f"{w['add']:>7.3f} {w['replace']:>7.3f} {w['remove']:>7.3f}"
        )
    return "\n".join(lines)


def products() -> None:
    """A scope's cosines by BLAS, row by row and in two halves (what `VectorIndex` does), idle
    and beside busy processes."""
    from animus_flows.stores.vectors import _dot, _rows_dot

    data, asked = dataset(100_000, 1)
    query = asked[0]

    def timed(product: Any, matrix: np.ndarray) -> str:
        samples = []
        for _ in range(60):
            started = time.perf_counter()
            product(matrix, query)
            samples.append((time.perf_counter() - started) * 1000)
        return f"{statistics.median(samples):6.2f} / {percentile(samples, 0.95):6.2f}"

    ways = {"BLAS `@`": np.matmul, "row by row": _rows_dot, "VectorIndex": _dot}
    print(f"{'rows':<9}{'busy':<6}" + "".join(f"{way:<18}" for way in ways))
    for busy in (0, 1, 2):
        with busy_processes(busy):
            for rows in (2_000, 10_000, 30_000, 100_000):
                figures = [timed(way, data[:rows]) for way in ways.values()]
                print(f"{rows:<9,}{busy:<6}" + "".join(f"{f:<18}" for f in figures), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--products", action="store_true", help="BLAS against row by row")
    parser.add_argument("--sizes", default="10000,100000")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--candidates", default=",".join(CANDIDATES))
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--size", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.products:
        products()
        return
    if args.worker:
        print(json.dumps(worker(args.worker, args.size, args.queries)))
        return
    sizes = [int(size) for size in args.sizes.split(",")]
    results = run_all(args.candidates.split(","), sizes, args.queries)
    print(json.dumps(results, indent=2) if args.json else table(results))


if __name__ == "__main__":
    main()
