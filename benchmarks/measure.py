"""What the benchmarks share to measure: percentiles, and busy processes beside a measurement
(how a figure holds on a machine with other work)."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager


def percentile(samples: list[float], q: float) -> float:
    """The `q` quantile of `samples` (0.95: p95), nearest rank."""
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


#: Spins until its parent is gone: a benchmark killed outright leaves no spinner behind.
SPIN = "import os\nparent = os.getppid()\nwhile os.getppid() == parent:\n    pass\n"


@contextmanager
def busy_processes(count: int) -> Iterator[None]:
    """`count` processes that each keep a core busy while the block runs."""
    spinners = [subprocess.Popen([sys.executable, "-c", SPIN]) for _ in range(count)]
    time.sleep(0.3)  # they are running before the block measures anything
    try:
        yield
    finally:
        for spinner in spinners:
            spinner.kill()
            spinner.wait()
