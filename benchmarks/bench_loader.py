"""Memory loader: `load_for_agent` latency on 100k memories across 50 agents, budget 2,000.

    .venv/bin/python benchmarks/bench_loader.py [--memories 100000] [--agents 50] [--loads 1000]

Memories are memory-layer records (the layer's own store mapping) with 10-60 words of text:
English-like words taken from the cl100k_base vocabulary (one token each, as most English words
are), Zipf-distributed. 95% are spread over the agents' scopes, 5% sit in the shared project
scope; tiers 15% HOT, 55% WARM, 30% COLD; 85% PUBLIC; the five memory types evenly. Six agents
are seed 002's roles (dev, qa, ...) and load their role's sectors; the rest load every type.

Reported: the first load of every agent (nothing cached yet: every block is encoded), then
`--loads` loads of random agents (steady state: token counts of blocks seen before come from
the counter's cache), as wall-clock and as process CPU time.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import random
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from measure import percentile

from animus_flows.budget import load_encoding
from animus_flows.memory import AsyncMemoryLoader, Memory, MemoryTier, MemoryType, Sensitivity
from animus_flows.memory.store_form import to_store
from animus_flows.protocol import Scope
from animus_flows.stores import SQLiteStore

PROJECT = "bench"
BATCH = 5000
ROLES = ["dev", "qa", "architect", "pm", "po", "sm"]


def vocabulary(size: int = 5000) -> list[str]:
    """Lowercase English-like words that are single cl100k_base tokens (with a leading space)."""
    encoding = load_encoding("cl100k_base")
    words = []
    for token in range(encoding.n_vocab):
        try:
            piece = encoding.decode_single_token_bytes(token).decode("ascii")
        except (KeyError, UnicodeDecodeError):
            continue
        if re.fullmatch(r" [a-z]{3,10}", piece):
            words.append(piece[1:])
        if len(words) == size:
            break
    return words


def agent_ids(count: int) -> list[str]:
    # the six seed roles first, so role sectors are exercised, then generic agents
    return [*ROLES, *(f"agent-{n}" for n in range(count - len(ROLES)))][:count]


async def build(path: Path, memories: int, agents: list[str], rng: random.Random) -> float:
    words = vocabulary()
    weights = [1 / (rank + 1) for rank in range(len(words))]
    store = SQLiteStore(path)
    shared = Scope(PROJECT)
    scopes = [Scope(PROJECT, agent_id=agent) for agent in agents]
    tiers = [MemoryTier.HOT] * 15 + [MemoryTier.WARM] * 55 + [MemoryTier.COLD] * 30
    sensitivities = (
        [Sensitivity.PUBLIC] * 85 + [Sensitivity.PERSONAL] * 10 + [Sensitivity.SECRET] * 5
    )
    elapsed = 0.0
    for start in range(0, memories, BATCH):
        batch = []
        for n in range(start, min(memories, start + BATCH)):
            scope = shared if n % 20 == 0 else scopes[n % len(scopes)]
            memory = Memory(
                content=" ".join(rng.choices(words, weights, k=rng.randint(10, 60))),
                memory_type=rng.choice(list(MemoryType)),
                tier=rng.choice(tiers),
                sensitivity=rng.choice(sensitivities),
                tags=[f"t{rng.randrange(20)}"],
            )
            batch.append((scope, memory.id, *to_store(memory, agent=scope.agent_id or "shared")))
        started = time.perf_counter()  # time the store, not the record generator
        await store.put_many(batch)
        elapsed += time.perf_counter() - started
    await store.aclose()
    return memories / elapsed


async def timed_load(loader: AsyncMemoryLoader, agent: str, budget: int, seen: dict) -> tuple:
    wall, cpu = time.perf_counter(), time.process_time()
    result = await loader.load_for_agent(agent, budget=budget)
    sample = ((time.perf_counter() - wall) * 1000, (time.process_time() - cpu) * 1000)
    assert result.metadata.tokens_used <= budget, result.metadata
    assert all(m.agent in (agent, "shared") for m in result.memories)
    seen["tokens_used"] = max(seen["tokens_used"], result.metadata.tokens_used)
    seen["memories"] += result.metadata.count
    seen["loads"] += 1
    seen["statuses"].add(result.metrics.status)
    return sample


async def loads(path: Path, agents: list[str], count: int, budget: int) -> tuple:
    rng = random.Random(7)
    store = SQLiteStore(path)
    loader = AsyncMemoryLoader(store, PROJECT)
    await store.query(Scope(PROJECT), "", top_k=1)  # open the file
    seen: dict = {"tokens_used": 0, "memories": 0, "loads": 0, "statuses": set()}
    first = [await timed_load(loader, agent, budget, seen) for agent in agents]
    steady = [await timed_load(loader, rng.choice(agents), budget, seen) for _ in range(count)]
    await store.aclose()
    return first, steady, seen


def summary(samples: list[tuple[float, float]]) -> str:
    wall = [w for w, _ in samples]
    cpu = [c for _, c in samples]
    return (
        f"p50 {statistics.median(wall):.2f} ms, p95 {percentile(wall, 0.95):.2f} ms, "
        f"p99 {percentile(wall, 0.99):.2f} ms (CPU p50 {statistics.median(cpu):.2f} ms, "
        f"p95 {percentile(cpu, 0.95):.2f} ms)"
    )


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--memories", type=int, default=100_000)
    parser.add_argument("--agents", type=int, default=50)
    parser.add_argument("--loads", type=int, default=1000)
    parser.add_argument("--budget", type=int, default=2000)
    args = parser.parse_args()
    rng = random.Random(1)
    agents = agent_ids(args.agents)
    print(
        f"machine: {platform.machine()} {os.cpu_count()} cpus, Python {platform.python_version()}"
    )
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "loader.db"
        rate = await build(path, args.memories, agents, rng)
        load_before = os.getloadavg()[0]
        first, steady, seen = await loads(path, agents, args.loads, args.budget)
        load_after = os.getloadavg()[0]
    print(
        f"{args.memories:,} memories / {args.agents} agents + shared, budget {args.budget}; "
        f"batched ingest {rate:,.0f} memories/s"
    )
    print(f"  first load per agent ({len(first)}): {summary(first)}")
    print(f"  steady state ({len(steady)} loads):  {summary(steady)}")
    print(
        f"  {seen['memories'] / seen['loads']:.1f} memories per load, max tokens_used "
        f"{seen['tokens_used']}, statuses {sorted(seen['statuses'])}; load average "
        f"{load_before:.2f} before, {load_after:.2f} after"
    )


if __name__ == "__main__":
    asyncio.run(main())
