"""Scale-out: flow runs of the deployed trade-desk example on 1 and on 3 process workers.

    .venv/bin/python benchmarks/bench_scaleout.py [--runs 40] [--limit 4] [--rounds 1]

A Prefect server on a throwaway PostgreSQL cluster (asyncpg), the example deployed to a process
work pool with `prefect deploy`, its store turned into one PostgreSQL store on the same cluster
(`animus_flows.testing.scaleout`). Each round submits `--runs` flow runs at once to 1 worker,
then to 3 (each worker running at most `--limit` runs at once), and prints the time from the
submission to the end of the last run, the runs per minute, and how busy the machine's CPUs
were meanwhile (from /proc/stat): every flow run is a fresh Python process that imports
Prefect and animus-flows, so on a small machine the CPUs, not the workers, set the pace.
Every run is checked as the test checks it (state, artifacts, write-back items).
"""

from __future__ import annotations

import argparse
import os
import platform
import tempfile
from pathlib import Path

from animus_flows.testing.postgres import TemporaryCluster
from animus_flows.testing.scaleout import ScaleOut

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "trade-desk"


def cpu_ticks() -> tuple[int, int]:
    """(busy, total) jiffies of every CPU since boot."""
    fields = [int(x) for x in Path("/proc/stat").read_text().split("\n")[0].split()[1:]]
    idle = fields[3] + fields[4]  # idle and iowait
    return sum(fields) - idle, sum(fields)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=40)
    parser.add_argument("--limit", type=int, default=4, help="flow runs per worker at once")
    parser.add_argument("--rounds", type=int, default=1)
    args = parser.parse_args()
    print(f"{platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}")
    with (
        tempfile.TemporaryDirectory(prefix="animus-bench-scaleout-") as name,
        TemporaryCluster() as cluster,
        ScaleOut(cluster, EXAMPLE, Path(name)) as scale_out,
    ):
        rates: dict[int, list[float]] = {1: [], 3: []}
        for _ in range(args.rounds):
            for workers in (1, 3):
                busy, total = cpu_ticks()
                report = scale_out.run(workers=workers, runs=args.runs, limit=args.limit)
                after = cpu_ticks()
                busy, total = after[0] - busy, after[1] - total
                problems = report.problems()
                rates[workers].append(report.runs_per_minute)
                print(
                    f"  {workers} worker(s): {report.runs} runs in {report.seconds:.1f} s, "
                    f"{report.runs_per_minute:.1f} runs/min, CPUs {100 * busy / total:.0f}% busy, "
                    f"{len(problems)} problem(s)" + (f": {problems[:3]}" if problems else "")
                )
        one, three = (sum(rates[w]) / len(rates[w]) for w in (1, 3))
        print(f"3 workers against 1: {three / one:.2f}x the runs per minute")


if __name__ == "__main__":
    main()
