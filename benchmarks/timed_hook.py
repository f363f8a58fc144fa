"""bench_runtime's pre-phase hook: `memory_bindings`, timed, so a phase can be shown less it.

Named in the benchmark's workflow as `timed_hook:memory_bindings` (benchmarks/ is on the path).
"""

import time

from animus_flows.hooks import memory_bindings as untimed
from animus_flows.phase import PhaseContext

DURATIONS_MS: list[float] = []  # one per call, in order


async def memory_bindings(ctx: PhaseContext) -> None:
    started = time.perf_counter()
    await untimed(ctx)
    DURATIONS_MS.append((time.perf_counter() - started) * 1000)
