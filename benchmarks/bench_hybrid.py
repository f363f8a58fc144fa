"""The hook over lexical and hybrid (words + meaning) stores, and what ingest costs each.

    .venv/bin/python benchmarks/bench_hybrid.py [--items 100000] [--rounds 200]
        [--parts hook,ingest] [--ingest-runs 1]

1. Hook latency: the 3 bindings and stores of bench_runtime.py's benchmark 1 (`--items` items
   per store; store b's binding reads one scope holding all of them, a's and c's one of 50
   scopes), budget 2,000 per binding, once with top_k 8 and once with the binding defaults (no
   top_k: as many as fit). The same files are read by stores without an embedder (lexical) and
   with the local model (hybrid); the configurations take turns round by round, so the
   machine's noise falls on all alike. The hybrid stores' vectors are random unit vectors
   written into the store's table, since embedding 300,000 items would take hours here and a
   search costs the same whatever the vectors hold; every query is embedded by the real model
   (a prompt is embedded once per hook: the three bindings share it, and the stores rank words
   while the model embeds). The query's embedding costs about 1 ms per model token on one core:
   the corpus's prompts are 12 made-up words and a task id, which the model's vocabulary cuts
   into about 65 tokens, so a last configuration asks the hybrid stores the quality corpus's
   English questions instead (about 12 tokens each), the cost of a question a person writes.
2. Batched ingest: `put_many` of 10,000-item batches into a new lexical store (items/s; each of
   `--ingest-runs` runs a new store), and of 500-item batches into a hybrid one, embedding with
   the real model (items/s).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import platform
import random
import sqlite3
import tempfile
import time
from pathlib import Path

from bench_runtime import WARM_UP, fmt, prompts, seed
from bench_sqlite import Corpus

from animus_flows.budget import TokenBudget, TokenCounter
from animus_flows.config.loader import load_workflow
from animus_flows.hooks import memory_bindings
from animus_flows.hooks.context import PhaseContext
from animus_flows.hooks.contract import RuntimeContract
from animus_flows.protocol import Scope
from animus_flows.retrieval.audit import AuditTrail
from animus_flows.stores import SQLiteStore, semantic
from animus_flows.stores.registry import PluginRegistry

STORE = "{{type: sqlite, path: {name}.db{embedder}}}"
WORKFLOW = """
version: 1
project: bench
stores:
  a: {a}
  b: {b}
  c: {c}
agents:
  analyst:
    memory_bindings:
      - {{plugin: a, binding: market, scope: {{kind: agent}}, budget_tokens: 2000{top_k}}}
      - {{plugin: b, binding: playbook, budget_tokens: 2000{top_k}}}
      - {{plugin: c, binding: history, scope: {{kind: task}}, budget_tokens: 2000{top_k}}}
workflows:
  w:
    phases:
      - {{id: p, agent: analyst, prompt: x}}
"""


def workflow(folder: Path, name: str, *, hybrid: bool, top_k: int | None) -> Path:
    embedder = ", embedder: {type: local}" if hybrid else ""
    stores = {s: STORE.format(name=s, embedder=embedder) for s in "abc"}
    text = WORKFLOW.format(**stores, top_k="" if top_k is None else f", top_k: {top_k}")
    path = folder / f"{name}.yaml"
    path.write_text(text)
    return path


def add_random_vectors(path: Path, label: str, dimension: int) -> None:
    """Give every item of a store file a random unit vector, as its embedder would have."""
    import numpy as np

    rng = np.random.default_rng(1)
    conn = sqlite3.connect(path)
    ids = [item_id for (item_id,) in conn.execute("SELECT id FROM items")]
    for start in range(0, len(ids), 10_000):
        batch = ids[start : start + 10_000]
        rows = rng.standard_normal((len(batch), dimension)).astype("<f4")
        rows /= np.linalg.norm(rows, axis=1, keepdims=True)
        conn.executemany(
            "INSERT OR REPLACE INTO item_vectors VALUES (?, ?)",
            [(item_id, row.tobytes()) for item_id, row in zip(batch, rows, strict=True)],
        )
    conn.execute("DELETE FROM vector_pending")
    conn.execute("INSERT OR REPLACE INTO animus_meta VALUES ('embedder', ?)", (label,))
    conn.commit()
    conn.close()


class Hook:
    """The hook over one workflow file's stores, called with one prompt at a time."""

    def __init__(self, path: Path) -> None:
        self.workflow = load_workflow(path)
        self.plugins = PluginRegistry(self.workflow, use_blocks=False)
        self.counter = TokenCounter()
        self.phase = self.workflow.workflows["w"].phases[0]

    async def __call__(self, prompt: str, task_id: str) -> tuple[float, int]:
        contract = RuntimeContract(
            project_id="bench",
            workflow="w",
            phase_id="p",
            agent_id="analyst",
            task_id=task_id,
            prompt=prompt,
        )
        ctx = PhaseContext(
            self.workflow,
            "w",
            self.phase,
            self.workflow.agents["analyst"],
            contract,
            TokenBudget(),
            self.counter,
            AuditTrail(),
            self.plugins,
        )
        semantic._queries.clear()  # every hook pays for its query's embedding, even a repeat
        started = time.perf_counter()
        await memory_bindings(ctx)
        return (time.perf_counter() - started) * 1000, len(ctx.contract.memory_context.items)


def english_questions(count: int) -> list[str]:
    """The quality corpus's questions, in turn (`count` of them, repeating if need be)."""
    corpus = json.loads((Path(__file__).parent / "quality" / "corpus.json").read_text())
    questions = [question["question"] for question in corpus["questions"]]
    return [questions[n % len(questions)] for n in range(count)]


async def hook_latency(folder: Path, rounds: int) -> None:
    configs = {
        f"{kind}, {label}": Hook(
            workflow(folder, f"{kind}-{label}", hybrid=kind == "hybrid", top_k=top_k)
        )
        for kind in ("lexical", "hybrid")
        for label, top_k in (("top_k 8", 8), ("defaults", None))
    }
    configs["hybrid, defaults, English"] = Hook(
        workflow(folder, "hybrid-english", hybrid=True, top_k=None)
    )
    names = list(configs)
    # Each configuration its own prompts (drawn alike): stores share one cache of query
    # vectors per process, so a prompt another configuration embedded would cost no model.
    drawn = prompts((rounds + WARM_UP) * len(names))
    texts = {name: drawn[i :: len(names)] for i, name in enumerate(names)}
    texts["hybrid, defaults, English"] = english_questions(rounds + WARM_UP)
    samples: dict[str, list[float]] = {name: [] for name in configs}
    injected: dict[str, list[int]] = {name: [] for name in configs}
    for n in range(rounds + WARM_UP):
        task = f"T{n % 50}"
        for name in names[n % len(names) :] + names[: n % len(names)]:  # the order rotates
            ms, items = await configs[name](texts[name][n].format(task_id=task), task)
            if n >= WARM_UP:
                samples[name].append(ms)
                injected[name].append(items)
    for name in names:
        average = sum(injected[name]) / len(injected[name])
        print(f"  hook, {name:26s} {fmt(samples[name])} ({average:.0f} items injected)")
    for hook in configs.values():
        await hook.plugins.aclose()


async def ingest(folder: Path, runs: int) -> None:
    corpus, rng = Corpus(), random.Random(9)
    scope = Scope("bench", agent_id="ingest")
    docs = [corpus.doc(rng) for _ in range(50_000)]
    for run in range(runs):
        lexical = SQLiteStore(folder / f"ingest-lexical-{run}.db")
        started = time.perf_counter()
        for start in range(0, len(docs), 10_000):
            await lexical.put_many(
                [(scope, f"k{n}", docs[n], None) for n in range(start, start + 10_000)]
            )
        rate = len(docs) / (time.perf_counter() - started)
        print(f"  lexical put_many, 10,000 per batch: {rate:,.0f} items/s")
        await lexical.aclose()

    from animus_flows.embedders import LocalEmbedder

    hybrid = SQLiteStore(folder / "ingest-hybrid.db", embedder=LocalEmbedder())
    await hybrid.put_many([(scope, "warm-up", "load the model first", None)])
    started = time.perf_counter()
    for start in range(0, 1000, 500):
        await hybrid.put_many([(scope, f"k{n}", docs[n], None) for n in range(start, start + 500)])
    rate = 1000 / (time.perf_counter() - started)
    print(f"  hybrid put_many, 500 per batch (multilingual-e5-small): {rate:,.0f} items/s")
    await hybrid.aclose()


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=200)
    parser.add_argument("--parts", default="hook,ingest")
    parser.add_argument("--ingest-runs", type=int, default=1)
    args = parser.parse_args()
    parts = set(args.parts.split(","))
    print(f"{platform.machine()}, {platform.python_version()}, SQLite {sqlite3.sqlite_version}")
    with tempfile.TemporaryDirectory(prefix="animus-bench-hybrid-") as name:
        folder = Path(name)
        if "hook" in parts:
            await seed(folder, args.items)
            from animus_flows.embedders import LocalEmbedder

            model = LocalEmbedder()
            label = f"{model.model}/{model.dimension}"
            for store in "abc":
                add_random_vectors(folder / f"{store}.db", label, model.dimension)  # type: ignore[arg-type]
            print(f"1. hook latency, 3 bindings over {args.items:,}-item stores:")
            await hook_latency(folder, args.rounds)
        if "ingest" in parts:
            print("2. batched ingest:")
            await ingest(folder, args.ingest_runs)


if __name__ == "__main__":
    asyncio.run(main())
