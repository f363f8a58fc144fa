"""What the ledger costs on SQLite: writes with and without it, versioned writes, history reads.

    .venv/bin/python benchmarks/bench_ledger.py [--puts 2000] [--batch 10000] [--rounds 3]

Two files side by side in one process: a plain `SQLiteStore` and a `SQLiteLedgerStore`,
written call by call in turn (so the machine's noise falls on both):
  - single puts that overwrite 200 keys (the ledger records an update and closes the previous
    state each time), and `put_versioned` with the expected version (the compare-and-set the
    durable layer uses), each call first in turn;
  - `put_many` of `--batch` new 30-word items in one transaction, `--rounds` rounds each;
  - `ledger_events` of a key with 100 events;
and the size of each file at the end.
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

from measure import percentile

from animus_flows.protocol import Scope
from animus_flows.stores import SQLiteLedgerStore, SQLiteStore

SCOPE = Scope("bench", agent_id="ledger")
KEYS = 200


WORDS = [f"w{n}" for n in range(5000)]


def text(rng: random.Random) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(30))


def line(name: str, samples: list[float]) -> str:
    ms = [s * 1000 for s in samples]
    return f"  {name:<34} p50 {statistics.median(ms):6.3f} ms   p95 {percentile(ms, 0.95):6.3f} ms"


async def main(puts: int, batch: int, rounds: int) -> None:
    rng = random.Random(1)
    folder = Path(tempfile.mkdtemp(prefix="bench-ledger-"))
    plain, ledgered = SQLiteStore(folder / "plain.db"), SQLiteLedgerStore(folder / "ledger.db")
    for store in (plain, ledgered):  # open, create the schema, warm up
        for n in range(KEYS):
            await store.put(SCOPE, f"k{n}", text(rng))
    timings: dict[str, list[float]] = {"plain put": [], "ledger put": [], "put_versioned": []}
    versions = {f"k{n}": 1 for n in range(KEYS)}

    async def plain_put(key: str, value: str) -> None:
        await plain.put(SCOPE, key, value)

    async def ledger_put(key: str, value: str) -> None:
        await ledgered.put(SCOPE, key, value)
        versions[key] += 1

    async def put_versioned(key: str, value: str) -> None:
        written = await ledgered.put_versioned(SCOPE, key, value, expected_version=versions[key])
        versions[key] = written.version

    calls = [("plain put", plain_put), ("ledger put", ledger_put), ("put_versioned", put_versioned)]
    for n in range(puts):
        key, value = f"k{n % KEYS}", text(rng)
        for name, call in calls[n % 3 :] + calls[: n % 3]:  # each goes first in turn
            started = time.perf_counter()
            await call(key, value)
            timings[name].append(time.perf_counter() - started)
    rates: dict[str, list[float]] = {"plain put_many": [], "ledger put_many": []}
    for round_ in range(rounds):
        entries = [(SCOPE, f"r{round_}-{n}", text(rng), None) for n in range(batch)]
        for name, store in (("plain put_many", plain), ("ledger put_many", ledgered)):
            started = time.perf_counter()
            await store.put_many(entries)
            rates[name].append(batch / (time.perf_counter() - started))
    history = "history"
    for _ in range(100):
        await ledgered.put(SCOPE, history, text(rng))
    reads = []
    for _ in range(500):
        started = time.perf_counter()
        events = await ledgered.ledger_events(SCOPE, history)
        reads.append(time.perf_counter() - started)
    assert len(events) == 100
    await plain.aclose()
    await ledgered.aclose()

    python = platform.python_version()
    print(f"machine: {platform.machine()}, {os.cpu_count()} CPUs, Python {python}")
    print(f"SQLite {sqlite3.sqlite_version}, load average {os.getloadavg()[0]:.2f}")
    print(f"single writes ({puts} each, over {KEYS} keys, interleaved):")
    for name, samples in timings.items():
        print(line(name, samples))
    print(f"put_many of {batch} new items, {rounds} rounds (median):")
    for name, samples in rates.items():
        print(f"  {name:<34} {statistics.median(samples):9,.0f} items/s")
    print(line("ledger_events (100 events)", reads))
    for name in ("plain.db", "ledger.db"):
        size = sum(p.stat().st_size for p in folder.glob(f"{name}*"))
        print(f"  size of {name:<26} {size / 1e6:8.1f} MB")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--puts", type=int, default=2000)
    parser.add_argument("--batch", type=int, default=10000)
    parser.add_argument("--rounds", type=int, default=3)
    options = parser.parse_args()
    asyncio.run(main(options.puts, options.batch, options.rounds))
