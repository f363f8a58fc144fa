"""JSON-RPC and Zep overhead: what the wire and our store code add to a memory call.

    .venv/bin/python benchmarks/bench_plugins.py [--items 5000] [--calls 3000]

1. JSON-RPC: scoped top-8 `query` against one SQLite file, called in process and through
   `animus memory serve` (the `jsonrpc` store), plus a bare `initialize` round trip,
   interleaved call by call in random order in one run so all see the same machine state.
   Overhead = served minus in-process, at p50 and p95.
2. Zep: the Zep store against the respx fake of Zep's API (tests/stores/zep_fake.py, index
   delay 0). The baseline sends the same HTTP requests straight through httpx to the same
   fake, so the difference is our code plus the SDK's, never the network.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import os
import platform
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from measure import percentile  # noqa: E402

from animus_flows.protocol import Scope  # noqa: E402
from animus_flows.stores import SQLiteStore  # noqa: E402
from animus_flows.stores import zep_wire as wire  # noqa: E402
from animus_flows.stores.jsonrpc import JsonRpcStore  # noqa: E402
from animus_flows.stores.zep import ZepStore  # noqa: E402

SCOPES = 50
#: Documents are 20 words drawn from this vocabulary; queries are 3 of its words.
WORDS = [f"{stem}{n}" for stem in ("rate", "bank", "oil", "bond", "fx", "hedge") for n in range(40)]


def summary(samples: list[float]) -> tuple[float, float]:
    return statistics.median(samples), percentile(samples, 0.95)


async def timed(call: Callable[..., Awaitable[object]], *args: object, **kwargs: object) -> float:
    started = time.perf_counter()
    await call(*args, **kwargs)
    return (time.perf_counter() - started) * 1000


# -- JSON-RPC --------------------------------------------------------------------------------


async def jsonrpc(items: int, calls: int) -> None:
    rng = random.Random(3)
    with tempfile.TemporaryDirectory() as folder:
        base = Path(folder)
        (base / "animus.yaml").write_text(
            "version: 1\nstores:\n  memory-local: {type: sqlite, path: memory.db}\n"
        )
        local = SQLiteStore(base / "memory.db")
        await local.put_many(
            (
                Scope("bench", agent_id=f"agent-{n % SCOPES}"),
                f"k{n}",
                " ".join(rng.choices(WORDS, k=20)),
                {"n": n},
            )
            for n in range(items)
        )
        served = JsonRpcStore(
            [sys.executable, "-m", "animus_flows", "memory", "serve", "--plugin", "memory-local"],
            plugin_id="bench",
            cwd=base,
            startup_timeout_ms=30000,
        )
        await served.connect()
        in_process: list[float] = []
        over_wire: list[float] = []
        bare: list[float] = []  # a request the plugin answers without touching the store
        for n in range(calls + 200):  # the first 200 warm everything up and are not counted
            scope = Scope("bench", agent_id=f"agent-{rng.randrange(SCOPES)}")
            text = " ".join(rng.sample(WORDS, 3))
            measurements = [
                (in_process, local.query, (scope, text), {"top_k": 8}),
                (over_wire, served.query, (scope, text), {"top_k": 8}),
                (bare, served.process.call, ("initialize", {}), {}),
            ]
            rng.shuffle(measurements)  # no call always runs right after another
            for samples, call, args, kwargs in measurements:
                elapsed = await timed(call, *args, **kwargs)
                if n >= 200:
                    samples.append(elapsed)
        await served.aclose()
        await local.aclose()
    (lp50, lp95), (wp50, wp95) = summary(in_process), summary(over_wire)
    bp50, bp95 = summary(bare)
    print(f"JSON-RPC memory/query, top 8, {items:,} items in {SCOPES} scopes, {calls:,} calls each")
    print("| path | p50 ms | p95 ms |")
    print("| --- | ---: | ---: |")
    print(f"| SQLite in process | {lp50:.3f} | {lp95:.3f} |")
    print(f"| SQLite via `animus memory serve` | {wp50:.3f} | {wp95:.3f} |")
    print(f"| added by JSON-RPC | {wp50 - lp50:.3f} | {wp95 - lp95:.3f} |")
    print(f"| bare round trip (`initialize`, no store work) | {bp50:.3f} | {bp95:.3f} |")


# -- Zep --------------------------------------------------------------------------------------


def load_fake():
    path = ROOT / "tests" / "stores" / "zep_fake.py"
    spec = importlib.util.spec_from_file_location("zep_fake", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules["zep_fake"] = module
    spec.loader.exec_module(module)
    return module.ZepFake


async def zep(calls: int) -> None:
    fake = load_fake()(index_delay_s=0)
    scope = Scope("bench", agent_id="analyst")
    async with fake.client() as client:
        store = ZepStore(fake.api_key, base_url=fake.base_url, http_client=client)
        for n in range(20):
            await store.put(scope, f"k{n}", f"note {n} on rates and the bank")
        session = wire.session_id(scope)
        headers = {"Authorization": f"Api-Key {fake.api_key}"}
        api = f"{fake.base_url}/api/v2"
        search_body = {
            "text": "rates bank",
            "user_id": wire.user_id("bench"),
            "session_ids": [session],
            "search_scope": "messages",
        }

        async def raw_get() -> None:
            await client.get(
                f"{api}/sessions/{session}/messages",
                params={"limit": 100, "cursor": 1},
                headers=headers,
            )

        async def raw_query() -> None:
            await client.post(
                f"{api}/sessions/search", params={"limit": 16}, json=search_body, headers=headers
            )

        operations = {
            "get (1 request)": (lambda: store.get(scope, "k3"), raw_get),
            "query (1 request)": (lambda: store.query(scope, "rates bank", top_k=8), raw_query),
        }
        print(f"\nZep store against the respx fake, 20 items in the scope, {calls:,} calls each")
        print(
            "| operation | store p50 ms | raw httpx p50 ms | overhead p50 ms | overhead p95 ms "
            "| overhead CPU ms/call |"
        )
        print("| --- | ---: | ---: | ---: | ---: | ---: |")
        for name, (ours, raw) in operations.items():
            store_samples: list[float] = []
            raw_samples: list[float] = []
            cpu = {"store": 0.0, "raw": 0.0}  # CPU time: immune to other processes' load
            for n in range(calls + 100):
                started = time.process_time()
                a = await timed(ours)
                middle = time.process_time()
                b = await timed(raw)
                if n >= 100:
                    store_samples.append(a)
                    raw_samples.append(b)
                    cpu["store"] += middle - started
                    cpu["raw"] += time.process_time() - middle
            (sp50, sp95), (rp50, rp95) = summary(store_samples), summary(raw_samples)
            cpu_ms = (cpu["store"] - cpu["raw"]) / calls * 1000
            print(
                f"| {name} | {sp50:.3f} | {rp50:.3f} | {sp50 - rp50:.3f} | {sp95 - rp95:.3f} "
                f"| {cpu_ms:.3f} |"
            )
        await store.aclose()


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--items", type=int, default=5000)
    parser.add_argument("--calls", type=int, default=3000)
    args = parser.parse_args()
    print(
        f"machine: {platform.machine()}, {os.cpu_count()} cpus, "
        f"Python {platform.python_version()}\n"
    )
    await jsonrpc(args.items, args.calls)
    await zep(args.calls)


if __name__ == "__main__":
    asyncio.run(main())
