"""Memory loader: `load_for_agent` latency on 100k memories across 50 agents, budget 2,000.

    .venv/bin/python benchmarks/bench_loader.py [--memories 100000] [--agents 50] [--loads 1000]

Memories are memory-layer records (the layer's own store mapping) with 10-60 words of text
over a Zipf-distributed vocabulary: 95% spread over the agents' scopes, 5% in the shared
project scope; tiers 15% HOT, 55% WARM, 30% COLD; 85% PUBLIC; the five memory types evenly.
Each load picks a random agent with seed 002's role sectors where the agent is a known role.
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

from animus_flows.memory import AsyncMemoryLoader, Memory, MemoryTier, MemoryType, Sensitivity
from animus_flows.memory.records import to_store
from animus_flows.protocol import Scope
from animus_flows.stores import SQLiteStore

PROJECT = "bench"
BATCH = 5000
ROLES = ["dev", "qa", "architect", "pm", "po", "sm"]


def vocabulary(rng: random.Random, size: int = 5000) -> list[str]:
    letters = "abcdefghijklmnopqrstuvwxyz"
    words: set[str] = set()
    while len(words) < size:
        words.add("".join(rng.choice(letters) for _ in range(rng.randint(3, 9))))
    return sorted(words)


def percentile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def agent_ids(count: int) -> list[str]:
    # the six seed roles first, so role sectors are exercised, then generic agents
    return [*ROLES, *(f"agent-{n}" for n in range(count - len(ROLES)))][:count]


async def build(path: Path, memories: int, agents: list[str], rng: random.Random) -> float:
    words = vocabulary(rng)
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


async def loads(path: Path, agents: list[str], count: int, budget: int) -> tuple[list[float], dict]:
    rng = random.Random(7)
    store = SQLiteStore(path)
    loader = AsyncMemoryLoader(store, PROJECT)
    await loader.load_for_agent(agents[0], budget=budget)  # open the file, warm the caches
    samples: list[float] = []
    worst = {"tokens_used": 0, "count": 0, "statuses": set()}
    for _ in range(count):
        agent = rng.choice(agents)
        started = time.perf_counter()
        result = await loader.load_for_agent(agent, budget=budget)
        samples.append((time.perf_counter() - started) * 1000)
        assert result.metadata.tokens_used <= budget, result.metadata
        assert all(m.agent in (agent, "shared") for m in result.memories)
        worst["tokens_used"] = max(worst["tokens_used"], result.metadata.tokens_used)
        worst["count"] += result.metadata.count
        worst["statuses"].add(result.metrics.status)
    await store.aclose()
    worst["count"] /= count
    return samples, worst


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
        samples, seen = await loads(path, agents, args.loads, args.budget)
    print(
        f"{args.memories:,} memories / {args.agents} agents + shared, budget {args.budget}: "
        f"ingest {rate:,.0f} memories/s; load_for_agent p50 {statistics.median(samples):.2f} ms, "
        f"p95 {percentile(samples, 0.95):.2f} ms, p99 {percentile(samples, 0.99):.2f} ms, "
        f"max {max(samples):.2f} ms; {seen['count']:.1f} memories per load, "
        f"max tokens_used {seen['tokens_used']}, statuses {sorted(seen['statuses'])}"
    )


if __name__ == "__main__":
    asyncio.run(main())
