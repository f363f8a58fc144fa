"""Scale-out, for real: 40 flow runs of the deployed example on 3 process workers, a Prefect
server on PostgreSQL, and one PostgreSQL memory store shared by every run
(`animus_flows.testing.scaleout`; the benchmark is benchmarks/bench_scaleout.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from animus_flows.testing.scaleout import ScaleOut

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "trade-desk"

pytestmark = pytest.mark.slow


def test_forty_runs_on_three_workers_share_one_postgres_store(postgres_cluster, tmp_path):
    with ScaleOut(postgres_cluster, EXAMPLE, tmp_path) as scale_out:
        report = scale_out.run(workers=3, runs=40)
    assert report.runs == 40
    # every run completed (Degraded counts: the example's wiki binding has no store), left
    # its artifacts, and stored each phase's output once in the shared store
    assert report.problems() == []
    assert sum(report.write_backs.values()) == 40 * report.expected_write_backs
