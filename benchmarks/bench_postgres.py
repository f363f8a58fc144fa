"""PostgreSQL store: batched ingest, scoped top-8 query latency at 1M items in 500 scopes, the
memory_bindings hook over 3 bindings x 100k items, and 8 writer processes at once.

    .venv/bin/python benchmarks/bench_postgres.py [--items 1000000] [--queries 2000]
        [--hook-items 100000] [--rounds 300] [--writers 8] [--writer-items 5000]
        [--parts ingest,query,hook,writers]

A throwaway cluster from the system's binaries (animus_flows.testing.postgres), durable (fsync
and synchronous commit on, as a server keeps them) with `shared_buffers` 2GB (a server's usual
quarter of this machine's memory); the store reaches it over TCP on 127.0.0.1.

1. Ingest: `--items` synthetic 30-word documents (bench_sqlite's Zipf corpus) in 500 scopes,
   one `put_many` of 2,000 per scope; items/s over the store calls only. Then the same with two
   writers at once, each its own process (the machine has two cores).
2. Queries: 2,000 per mix in random scopes, top_k 8, through the public async API: "natural"
   (4 words drawn like the text: common words included, as in a phase prompt) and "keywords"
   (3 words drawn uniformly: mostly rare), as bench_sqlite.
3. The hook: bench_runtime's layout on three PostgreSQL stores (schemas) of `--hook-items`
   items each (a: 50 agents' scopes, the binding reads one; b: one project scope holding them
   all; c: 50 task scopes), top_k 8, budget 2,000 per binding, 12-word prompts drawn like the
   text; the three bindings' queries run at once, as in a phase.
4. Writers: `--writers` processes at once, each writing `--writer-items` items (batches of 250
   into its own scope, and one single put in ten into a scope all of them share); throughput
   over the wall time, then every key is checked present exactly once and the statistics exact.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import os
import platform
import random
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))  # bench_sqlite's corpus, bench_runtime's hook

from bench_sqlite import Corpus, timed_queries  # noqa: E402
from measure import percentile  # noqa: E402

from animus_flows.stores.postgres import PostgresStore  # noqa: E402
from animus_flows.testing.postgres import TemporaryCluster  # noqa: E402

SCOPES = 500
SETTINGS = {"shared_buffers": "2GB"}


def summary(samples: list[float]) -> str:
    return (
        f"p50 {statistics.median(samples):.2f} ms, p95 {percentile(samples, 0.95):.2f} ms, "
        f"p99 {percentile(samples, 0.99):.2f} ms"
    )


def load() -> str:
    one, five, _ = os.getloadavg()
    return f"load {one:.1f} (5 min {five:.1f})"


# -- 1. ingest ------------------------------------------------------------------------------

INGEST = textwrap.dedent(
    """
    import asyncio, random, sys, time
    sys.path.insert(0, sys.argv[4])
    from bench_sqlite import Corpus
    from animus_flows.stores.postgres import PostgresStore
    dsn, first, last = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])

    async def main():
        corpus, store, spent = Corpus(), PostgresStore(dsn, schema="ingest"), 0.0
        for index in range(first, last):
            rng = random.Random(index)
            batch = [(corpus.scopes[index % 500], f"k{index}-{n}", corpus.doc(rng), {"n": n})
                     for n in range(2000)]
            started = time.perf_counter()
            await store.put_many(batch)
            spent += time.perf_counter() - started
        await store.aclose()
        print(spent)

    asyncio.run(main())
    """
)


def ingest(dsn: str, first: int, last: int, writers: int) -> float:
    """Batches `first`..`last` (2,000 items each) over `writers` processes; items/s over the
    wall time of the slowest (store calls only)."""
    bounds = [first + (last - first) * w // writers for w in range(writers + 1)]
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", INGEST, dsn, str(a), str(b), str(ROOT / "benchmarks")],
            stdout=subprocess.PIPE,
            text=True,
        )
        for a, b in itertools.pairwise(bounds)
    ]
    spent = [float(proc.communicate()[0]) for proc in procs]
    return (last - first) * 2000 / max(spent)


# -- 2. queries -----------------------------------------------------------------------------


async def query_latency(dsn: str, corpus: Corpus, queries: int, mix: str) -> list[float]:
    rng = random.Random(7)
    store = PostgresStore(dsn, schema="ingest")
    for scope in corpus.scopes[:20]:
        await store.query(scope, " ".join(rng.sample(corpus.words, 4)), top_k=8)
    samples = await timed_queries(store, corpus, queries, mix, rng)
    await store.aclose()
    return samples


# -- 3. the hook ----------------------------------------------------------------------------

HOOK_WORKFLOW = """
version: 1
project: bench
stores:
  a: {type: postgres, schema: hook_a}
  b: {type: postgres, schema: hook_b}
  c: {type: postgres, schema: hook_c}
agents:
  analyst:
    memory_bindings:
      - {plugin: a, binding: market, scope: {kind: agent}, budget_tokens: 2000, top_k: 8}
      - {plugin: b, binding: playbook, budget_tokens: 2000, top_k: 8}
      - {plugin: c, binding: history, scope: {kind: task}, budget_tokens: 2000, top_k: 8}
workflows:
  w:
    phases:
      - {id: p0, agent: analyst, prompt: "research"}
"""


async def seed_hook(dsn: str, items: int) -> None:
    from bench_runtime import fill_hook_store, hook_layouts

    rng = random.Random(3)
    for name, scopes in hook_layouts().items():
        store = PostgresStore(dsn, schema=f"hook_{name}")
        await fill_hook_store(store, scopes, items, rng)
        await store.aclose()


async def hook_latency(folder: Path, rounds: int) -> list[float]:
    from bench_runtime import WARM_UP, prompts

    from animus_flows.budget import TokenBudget, TokenCounter
    from animus_flows.config.loader import load_workflow
    from animus_flows.hooks import memory_bindings
    from animus_flows.hooks.context import PhaseContext
    from animus_flows.hooks.contract import RuntimeContract
    from animus_flows.retrieval.audit import AuditTrail
    from animus_flows.stores.registry import PluginRegistry

    (folder / "animus.yaml").write_text(HOOK_WORKFLOW)
    workflow = load_workflow(folder / "animus.yaml")
    plugins = PluginRegistry(workflow, use_blocks=False)
    counter, phase = TokenCounter(), workflow.workflows["w"].phases[0]
    texts = prompts(rounds + WARM_UP)
    samples = []
    for n in range(rounds + WARM_UP):
        task_id = f"T{n % 50}"
        contract = RuntimeContract(
            project_id="bench",
            workflow="w",
            phase_id=phase.id,
            agent_id="analyst",
            task_id=task_id,
            prompt=texts[n].format(task_id=task_id),
        )
        ctx = PhaseContext(
            workflow,
            "w",
            phase,
            workflow.agents["analyst"],
            contract,
            TokenBudget(),
            counter,
            AuditTrail(),
            plugins,
        )
        started = time.perf_counter()
        await memory_bindings(ctx)
        if n >= WARM_UP:
            samples.append((time.perf_counter() - started) * 1000)
        statuses = {event.status for event in ctx.audit.events()}
        assert statuses == {"ok"}, statuses  # a timed-out binding would look fast
    await plugins.aclose()
    return samples


# -- 4. writers -----------------------------------------------------------------------------

WRITER = textwrap.dedent(
    """
    import asyncio, sys
    from animus_flows.protocol import Scope
    from animus_flows.stores.postgres import PostgresStore
    dsn, worker, items = sys.argv[1], sys.argv[2], int(sys.argv[3])

    async def main():
        store = PostgresStore(dsn, schema="writers")
        await store.list_scopes(limit=1)  # connected and checked before the start
        print("ready", flush=True)
        sys.stdin.readline()
        own, shared = Scope("w", agent_id=worker), Scope("w")
        singles = items // 10
        for n in range(singles):
            await store.put(shared, f"{worker}-{n}", f"worker {worker} writes walrus {n}")
        for start in range(0, items - singles, 250):
            await store.put_many([
                (own, f"k{n}", f"worker {worker} batch walrus {n}", None)
                for n in range(start, min(items - singles, start + 250))
            ])
        await store.aclose()

    asyncio.run(main())
    """
)


async def writers(dsn: str, count: int, items: int) -> tuple[float, str]:
    """`count` processes write at once, released together once all are connected: items/s
    over the wall time from the release to the last one's end, and what the check found."""
    import psycopg

    store = PostgresStore(dsn, schema="writers")
    await store.list_scopes()  # the schema is made before the race
    await store.aclose()
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER, dsn, str(n), str(items)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for n in range(count)
    ]
    for proc in procs:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    started = time.perf_counter()
    for proc in procs:
        assert proc.stdin is not None
        proc.stdin.write("go\n")
        proc.stdin.flush()
    codes = [proc.wait() for proc in procs]
    elapsed = time.perf_counter() - started
    assert codes == [0] * count, codes
    with psycopg.connect(dsn) as conn:
        total, distinct = conn.execute(
            "SELECT count(*), count(DISTINCT (scope_id, key)) FROM writers.items"
        ).fetchone()
        drift = conn.execute(
            "SELECT count(*) FROM (SELECT scope_id, lexeme, count(*) FROM writers.items,"
            " unnest(tsvector_to_array(tsv)) lexeme GROUP BY 1, 2"
            " EXCEPT SELECT scope_id, lexeme, df FROM writers.term_df) d"
        ).fetchone()[0]
    expected = count * items
    verdict = (
        f"{total:,} items of {expected:,} expected, {total - distinct} duplicated, "
        f"{expected - distinct} lost, statistics {'exact' if drift == 0 else 'DRIFTED'}"
    )
    return expected / elapsed, verdict


# -- main -----------------------------------------------------------------------------------


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--items", type=int, default=1_000_000)
    parser.add_argument("--queries", type=int, default=2000)
    parser.add_argument("--hook-items", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=300)
    parser.add_argument("--writers", type=int, default=8)
    parser.add_argument("--writer-items", type=int, default=5000)
    parser.add_argument("--parts", default="ingest,query,hook,writers")
    args = parser.parse_args()
    parts = set(args.parts.split(","))
    corpus = Corpus()
    with TemporaryCluster(durable=True, settings=SETTINGS) as cluster:
        dsn = cluster.create_database("bench")
        import psycopg

        with psycopg.connect(dsn) as conn:
            (version,) = conn.execute("SHOW server_version").fetchone()
        print(
            f"machine: {platform.machine()}, {os.cpu_count()} cpus, Python "
            f"{platform.python_version()}, PostgreSQL {version}, {load()}"
        )
        if parts & {"ingest", "query"}:
            batches = args.items // 2000
            single = ingest(dsn, 0, batches, writers=1)
            print(
                f"ingest of {args.items:,} items in {SCOPES} scopes, put_many of 2,000 per "
                f"scope: {single:,.0f} items/s ({load()})"
            )
            if "ingest" in parts:
                two = ingest(dsn, batches, batches + 100, writers=2)
                print(f"same, two writer processes at once: {two:,.0f} items/s ({load()})")
            store = PostgresStore(dsn, schema="ingest")
            await store.optimize()  # as after any bulk load
            await store.aclose()
        if "query" in parts:
            for mix in ("natural", "keywords"):
                samples = await query_latency(dsn, corpus, args.queries, mix)
                print(f"scoped top-8 query, {mix:<8} words: {summary(samples)} ({load()})")
        if "hook" in parts:
            await seed_hook(dsn, args.hook_items)
            os.environ["ANIMUS_DATABASE_URL"] = dsn
            with tempfile.TemporaryDirectory() as folder:
                samples = await hook_latency(Path(folder), args.rounds)
            print(
                f"hook, 3 bindings x {args.hook_items:,} items, top_k 8: {summary(samples)} "
                f"({load()})"
            )
        if "writers" in parts:
            rate, verdict = await writers(dsn, args.writers, args.writer_items)
            print(f"{args.writers} writer processes at once: {rate:,.0f} items/s; {verdict}")


if __name__ == "__main__":
    asyncio.run(main())
