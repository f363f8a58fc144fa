"""bench_runtime's pre-phase hook: `memory_bindings`, timed, so a phase can be shown less it.

Named in the benchmark's workflow as `timed_hook:memory_bindings` (benchmarks/ is on the path).
Besides the hook's own duration it keeps the time its stores took to answer, as the audit
records it (each query's `latency_ms`), so a phase can also be shown less its stores' retrieval.
"""

import time

from animus_flows.hooks import memory_bindings as untimed
from animus_flows.hooks.context import PhaseContext

DURATIONS_MS: list[float] = []  # one per call, in order
STORE_MS: list[float] = []  # per call: the audited latency of its store calls, summed


async def memory_bindings(ctx: PhaseContext) -> None:
    recorded = len(ctx.audit.events())
    started = time.perf_counter()
    await untimed(ctx)
    DURATIONS_MS.append((time.perf_counter() - started) * 1000)
    # SQLite reads run inline, one after another: their latencies add up to the stores' time
    STORE_MS.append(sum(event.latency_ms for event in ctx.audit.events()[recorded:]))
