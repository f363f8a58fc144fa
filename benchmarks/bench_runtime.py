"""Runtime costs: the memory_bindings hook, a phase with the full audit, and `animus run`.

    .venv/bin/python benchmarks/bench_runtime.py [--items 100000] [--small-items 1000]
        [--phases 30] [--flow-runs 6] [--runs 5] [--parts 1,2,3]

1. Hook latency in-process: 3 bindings over 3 SQLite stores of `--items` items each (store a:
   50 agents' scopes, the binding reads one; store b: one project scope holding all of them, the
   worst case; store c: 50 task scopes), top_k 8, budget 2,000 per binding; the prompt is 12
   words drawn like the documents' text (bench_sqlite's Zipf corpus); no Prefect involved.
   Wall-clock time, and the thread's CPU time (they match when the hook is CPU-bound).
   1b. The hook's CPU time again, back to back as in 1, and after 5 ms asleep or 5 ms busy
   spinning, the three taking turns call by call: what the same work costs when something
   else ran first, as in a phase, where Prefect's task engine runs before the hook.
2. Per-phase orchestration with the full audit (hooks, logs, events, artifacts, all sent
   through the outbox) against a bare Prefect task doing nothing, side by side in one process
   and one Prefect server: in every phase slot of a flow run each kind runs once, in an order
   that rotates from slot to slot. The bare task is configured like the phase tasks (no cache
   key, no result persistence); a task with Prefect's defaults (plain `@task`) is timed beside
   it for reference; the ratio stays against the former. Then the outbox's drain at the end of
   each run, and what two synchronous artifact calls per phase would have added. The phase is also
   shown less its stores' own query time (the audited `latency_ms` of its three queries: the
   retrieval that benchmark 1 times, which grows with the stores while the orchestration does
   not) and less its whole pre-phase hook (timed by benchmarks/timed_hook.py), and the whole
   comparison runs again over stores of `--small-items` items. The phases'
   runner is the built-in `echo`, which returns at once: the outbox sends while a runner
   works, so here everything waits for the drain.
3. `animus run` on the trade-desk example against a bare Prefect flow with the same phases,
   each a fresh process with its own temporary server, alternated, medians compared.
4. `animus preflight` on the trade-desk example with no Prefect server configured (no
   PREFECT_API_URL, a fresh PREFECT_HOME): it starts no temporary server, so it takes the
   imports, the store's open and one query; fresh processes, median and slowest.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))  # bench_sqlite's corpus

WARM_UP = 20  # hooks run before any is timed
Pause = Callable[[], Awaitable[None]] | None


def pct(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def fmt(samples: list[float]) -> str:
    return f"p50 {statistics.median(samples):.2f} ms, p95 {pct(samples, 0.95):.2f} ms"


WORKFLOW = """
version: 1
project: bench
stores:
  a: {{type: sqlite, path: a.db}}
  b: {{type: sqlite, path: b.db}}
  c: {{type: sqlite, path: c.db}}
agents:
  analyst:
    memory_bindings:
      - {{plugin: a, binding: market, scope: {{kind: agent}}, budget_tokens: 2000}}
      - {{plugin: b, binding: playbook, budget_tokens: 2000}}
      - {{plugin: c, binding: history, scope: {{kind: task}}, budget_tokens: 2000}}
workflows:
  w:
    hooks: {{pre_phase: [timed_hook:memory_bindings], post_phase: []}}
    phases:
{phases}
"""


def prompts(count: int) -> list[str]:
    """Phase prompts of 12 words drawn like the stores' text, then the task id."""
    from bench_sqlite import Corpus

    rng, corpus = random.Random(5), Corpus()
    return [
        " ".join(rng.choices(corpus.words, corpus.weights, k=12)) + " for {task_id}"
        for _ in range(count)
    ]


def make_workflow(folder: Path, phases: int) -> Path:
    lines = "\n".join(
        f'      - {{id: p{n}, agent: analyst, prompt: "{prompt}"}}'
        for n, prompt in enumerate(prompts(phases))
    )
    path = folder / "animus.yaml"
    path.write_text(WORKFLOW.format(phases=lines))
    return path


def hook_layouts() -> dict[str, list[Any]]:
    """The scopes of stores a, b and c: the bound one first (a: an agent's of 50, b: the
    project's, c: a task's of 50)."""
    from animus_flows.protocol import Scope

    return {
        "a": [Scope("bench", agent_id="analyst")]
        + [Scope("bench", agent_id=f"a{n}") for n in range(49)],
        "b": [Scope("bench")],
        "c": [Scope("bench", task_id="T0")]
        + [Scope("bench", task_id=f"T{n}") for n in range(1, 50)],
    }


async def fill_hook_store(store: Any, scopes: list[Any], items: int, rng: random.Random) -> None:
    """`items` corpus documents over `scopes` in batches of 10,000, tiered at random, then
    `optimize()` (as the README advises after a bulk load)."""
    from bench_sqlite import Corpus

    corpus = Corpus()
    for start in range(0, items, 10_000):
        await store.put_many(
            [
                (
                    scopes[n % len(scopes)],
                    f"k{n}",
                    corpus.doc(rng),
                    {"tier": rng.choice(["hot", "warm", "warm", "cold"])},
                )
                for n in range(start, min(items, start + 10_000))
            ]
        )
    await store.optimize()


async def seed(folder: Path, items: int) -> None:
    from animus_flows.stores import SQLiteStore

    rng = random.Random(3)
    for name, scopes in hook_layouts().items():
        store = SQLiteStore(folder / f"{name}.db")
        await fill_hook_store(store, scopes, items, rng)
        await store.aclose()


async def hook_latency(
    workflow_path: Path, rounds: int, pauses: Sequence[Pause] = (None,)
) -> tuple[list[float], list[float]]:
    """Wall-clock and CPU milliseconds of each round after the warm-up. Round n is preceded,
    untimed, by `pauses[n % len(pauses)]` (None: nothing)."""
    from animus_flows.budget import TokenBudget, TokenCounter
    from animus_flows.config.loader import load_workflow
    from animus_flows.hooks import memory_bindings
    from animus_flows.hooks.context import PhaseContext
    from animus_flows.hooks.contract import RuntimeContract
    from animus_flows.retrieval.audit import AuditTrail
    from animus_flows.stores.registry import PluginRegistry

    workflow = load_workflow(workflow_path)
    plugins = PluginRegistry(workflow, use_blocks=False)
    counter = TokenCounter()
    phase = workflow.workflows["w"].phases[0]
    texts = prompts(rounds + WARM_UP)
    samples: list[float] = []
    cpu: list[float] = []
    for n in range(rounds + WARM_UP):
        contract = RuntimeContract(
            project_id="bench",
            workflow="w",
            phase_id=phase.id,
            agent_id="analyst",
            task_id=f"T{n % 50}",
            prompt=texts[n].format(task_id=f"T{n % 50}"),
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
        pause = pauses[n % len(pauses)]
        if pause is not None:
            await pause()
        started, started_cpu = time.perf_counter(), time.thread_time()
        await memory_bindings(ctx)
        if n >= WARM_UP:  # first queries load pages and the vocabulary
            samples.append((time.perf_counter() - started) * 1000)
            cpu.append((time.thread_time() - started_cpu) * 1000)
    await plugins.aclose()
    return samples, cpu


def spin(seconds: float) -> None:
    """Keep this thread busy, touching almost no memory."""
    until = time.perf_counter() + seconds
    while time.perf_counter() < until:
        pass


async def after_other_work(workflow_path: Path, rounds: int) -> dict[str, list[float]]:
    """The hook's CPU time back to back, and after 5 ms asleep or busy elsewhere, the three
    taking turns call by call on the same stores."""

    async def asleep() -> None:
        await asyncio.sleep(0.005)

    async def busy() -> None:
        spin(0.005)

    pauses: dict[str, Pause] = {
        "back to back": None,
        "after 5 ms asleep": asleep,
        "after 5 ms busy": busy,
    }
    cpu = (await hook_latency(workflow_path, 3 * rounds, list(pauses.values())))[1]
    first = WARM_UP % len(pauses)  # the pause before the first timed round
    return {name: cpu[(k - first) % len(pauses) :: len(pauses)] for k, name in enumerate(pauses)}


def orchestration(workflow_path: Path, phases: int, rounds: int) -> dict[str, list[float]]:
    """Per-phase milliseconds of each kind, side by side: in every phase slot of a flow run a
    bare task, a task with Prefect's defaults, an animus phase with the full audit and one with
    no audit run one after another, in an order that rotates from slot to slot, so each kind
    sees the same machine state and follows each other kind as often."""
    import timed_hook
    from prefect import flow, get_run_logger, task
    from prefect.artifacts import acreate_markdown_artifact, acreate_table_artifact
    from prefect.cache_policies import NONE

    from animus_flows.config.loader import load_workflow
    from animus_flows.runtime.engine import RunState, compile_workflow, finish_run
    from animus_flows.runtime.flows import prefect_sinks, run_phase_task
    from animus_flows.runtime.sinks import Outbox
    from animus_flows.stores.registry import PluginRegistry

    compiled = compile_workflow(load_workflow(workflow_path), "w")
    times: dict[str, list[float]] = {
        "bare": [],
        "defaults": [],
        "animus": [],
        "without_hook": [],
        "without_stores": [],
        "no_audit": [],
        "sync_artifacts": [],
        "drain": [],
    }

    @task(cache_policy=NONE, persist_result=False)
    async def nothing() -> None:
        return None

    @task
    async def nothing_by_default() -> None:  # a task as most users write one: Prefect's defaults
        return None

    @flow(name="side-by-side", persist_result=False)
    async def side_by_side() -> None:
        outbox, plugins = Outbox(), PluginRegistry(compiled.workflow)
        sinks = prefect_sinks(get_run_logger(), None, "w", outbox, plugins)
        audited = RunState.start(compiled, "T0", None, sinks, outbox, plugins=plugins)
        # the same phases with no logs, events or artifacts: our own orchestration alone
        quiet = RunState.start(compiled, "T0", None, [], None)
        for slot, phase in enumerate(compiled.phases):
            kinds: list[tuple[str, Callable[[], Awaitable[None]]]] = [
                ("bare", nothing),
                ("defaults", nothing_by_default),
                ("animus", lambda phase=phase: run_phase_task(audited, phase)),
                ("no_audit", lambda phase=phase: run_phase_task(quiet, phase)),
            ]
            turn = slot % len(kinds)
            for name, run in kinds[turn:] + kinds[:turn]:
                started = time.perf_counter()
                await run()
                elapsed = (time.perf_counter() - started) * 1000
                times[name].append(elapsed)
                if name == "animus":
                    times["without_hook"].append(elapsed - timed_hook.DURATIONS_MS[-1])
                    times["without_stores"].append(elapsed - timed_hook.STORE_MS[-1])
        finish_run(audited)
        started = time.perf_counter()
        await outbox.drain()
        times["drain"].append((time.perf_counter() - started) * 1000)
        for state in (audited, quiet):
            await state.plugins.aclose()
        for phase in compiled.phases[:10]:  # what synchronous artifact calls would cost
            started = time.perf_counter()
            await acreate_table_artifact([{"op": "query"}], key=f"bench-ops-{phase.id}")
            await acreate_markdown_artifact("# bench", key=f"bench-context-{phase.id}")
            times["sync_artifacts"].append((time.perf_counter() - started) * 1000)

    for _ in range(rounds):
        asyncio.run(side_by_side())
    return times


BARE_FLOW = textwrap.dedent(
    """
    import asyncio
    from prefect import flow, task

    @task
    async def research():
        return "research"

    @task
    async def plan():
        return "plan"

    @flow(name="research")
    async def bare(task_id: str = "RES-001"):
        return [await research(), await plan()]

    asyncio.run(bare())
    """
)


def cli_runs(runs: int) -> tuple[list[float], list[float]]:
    work = Path(tempfile.mkdtemp(prefix="animus-bench-run-"))
    shutil.copytree(
        ROOT / "examples" / "trade-desk",
        work / "trade-desk",
        ignore=shutil.ignore_patterns(".animus"),
    )
    (work / "bare.py").write_text(BARE_FLOW)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_API_URL")}
    env["PREFECT_HOME"] = str(work / "prefect-home")
    env["PREFECT_SERVER_ANALYTICS_ENABLED"] = "false"
    env["PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS"] = "120"
    subprocess.run(
        [sys.executable, "seed.py"],
        cwd=work / "trade-desk",
        env=env,
        check=True,
        capture_output=True,
    )
    animus = [str(Path(sys.executable).with_name("animus")), "run", "animus.yaml", "--task-id", "B"]
    bare = [sys.executable, str(work / "bare.py")]
    subprocess.run(bare, env=env, capture_output=True, check=True)  # migrate the database once
    timings: tuple[list[float], list[float]] = ([], [])
    for _ in range(runs):
        for command, into in ((animus, timings[0]), (bare, timings[1])):
            started = time.perf_counter()
            subprocess.run(
                command, cwd=work / "trade-desk", env=env, check=True, capture_output=True
            )
            into.append(time.perf_counter() - started)
    shutil.rmtree(work, ignore_errors=True)
    return timings


def preflight_runs(runs: int) -> list[float]:
    work = Path(tempfile.mkdtemp(prefix="animus-bench-preflight-"))
    example = work / "trade-desk"
    shutil.copytree(
        ROOT / "examples" / "trade-desk", example, ignore=shutil.ignore_patterns(".animus")
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_API_URL")}
    env["PREFECT_HOME"] = str(work / "prefect-home")
    env["PREFECT_SERVER_ANALYTICS_ENABLED"] = "false"
    subprocess.run(
        [sys.executable, "seed.py"], cwd=example, env=env, check=True, capture_output=True
    )
    command = [str(Path(sys.executable).with_name("animus")), "preflight", "animus.yaml"]
    timings = []
    for _ in range(runs):
        started = time.perf_counter()
        subprocess.run(command, cwd=example, env=env, check=True, capture_output=True)
        timings.append(time.perf_counter() - started)
    shutil.rmtree(work, ignore_errors=True)
    return timings


def report_orchestration(title: str, times: dict[str, list[float]]) -> None:
    bare, ours = statistics.median(times["bare"]), statistics.median(times["animus"])
    defaults = statistics.median(times["defaults"])
    lean = statistics.median(times["without_hook"])
    orchestration_only = statistics.median(times["without_stores"])
    quiet = statistics.median(times["no_audit"])
    drain, sync = statistics.median(times["drain"]), statistics.median(times["sync_artifacts"])
    per_run = len(times["animus"]) // len(times["drain"])
    print(
        f"{title}, median over {len(times['bare'])}: bare Prefect task {bare:.1f} ms, "
        f"animus phase with full audit {ours:.1f} ms -> {ours / bare:.2f}x "
        f"(less its stores' own query time, as audited: {orchestration_only:.1f} ms -> "
        f"{orchestration_only / bare:.2f}x; less its whole pre-phase hook: {lean:.1f} ms -> "
        f"{lean / bare:.2f}x; "
        f"no logs, events or artifacts: {quiet:.1f} ms -> {quiet / bare:.2f}x); "
        f"a task with Prefect's defaults {defaults:.1f} ms (the phase {ours / defaults:.2f}x it); "
        f"the outbox's drain at the end of each run of {per_run} phases {drain:.0f} ms; "
        f"two synchronous artifact calls would add {sync:.0f} ms per phase"
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--items", type=int, default=100_000)
    parser.add_argument("--small-items", type=int, default=1_000)
    parser.add_argument("--phases", type=int, default=30)
    parser.add_argument("--rounds", type=int, default=500)
    parser.add_argument("--flow-runs", type=int, default=6, help="flow runs of benchmark 2")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--parts", default="1,2,3,4", help="which of the figures to measure")
    args = parser.parse_args()
    parts = set(args.parts.split(","))
    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    os.environ.setdefault("PREFECT_LOGGING_HANDLERS_CONSOLE_LEVEL", "WARNING")
    print(
        f"machine: {platform.machine()}, {os.cpu_count()} cpus, Python {platform.python_version()}"
    )
    with tempfile.TemporaryDirectory() as folder:
        folder_path = Path(folder)
        path = make_workflow(folder_path, args.phases)
        if parts & {"1", "2"}:
            asyncio.run(seed(folder_path, args.items))
        if "1" in parts:
            samples, cpu = asyncio.run(hook_latency(path, args.rounds))
            print(
                f"1. memory_bindings hook, 3 bindings x {args.items:,} items, top_k 8, "
                f"budget 2,000: {fmt(samples)} (CPU time: {fmt(cpu)})"
            )
            paused = asyncio.run(after_other_work(path, args.rounds))
            print(
                "1b. the same hook's CPU time, alternated: "
                + "; ".join(f"{name} {fmt(times)}" for name, times in paused.items())
            )
        if "2" in parts:
            report_orchestration(
                f"2. per phase, {args.items:,}-item stores",
                orchestration(path, args.phases, args.flow_runs),
            )
            small = folder_path / "small"
            small.mkdir()
            small_path = make_workflow(small, args.phases)
            asyncio.run(seed(small, args.small_items))
            report_orchestration(
                f"2b. the same over {args.small_items:,}-item stores",
                orchestration(small_path, args.phases, args.flow_runs),
            )
    if "3" in parts:
        animus, bare_runs = cli_runs(args.runs)
        a, b = statistics.median(animus), statistics.median(bare_runs)
        print(
            f"3. `animus run` on examples/trade-desk {a:.2f} s vs a bare Prefect flow with the "
            f"same phases {b:.2f} s (medians of {args.runs}, fresh processes) -> {a / b:.2f}x"
        )
    if "4" in parts:
        timings = preflight_runs(args.runs)
        print(
            f"4. `animus preflight` on examples/trade-desk without a Prefect server: median "
            f"{statistics.median(timings):.2f} s, slowest {max(timings):.2f} s "
            f"({args.runs} fresh processes)"
        )


if __name__ == "__main__":
    main()
