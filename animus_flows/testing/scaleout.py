"""Scale-out, for real: a Prefect server on PostgreSQL, process workers, one shared store.

    with TemporaryCluster() as cluster, ScaleOut(cluster, Path("examples/trade-desk"), tmp) as s:
        result = s.run(workers=3, runs=40)
        assert result.problems() == []

`ScaleOut` starts `prefect server start` with its database on the cluster (asyncpg), copies an
example into a folder of its own with every SQLite store turned into a `type: postgres` store
on the same cluster (the one change a team makes when it outgrows one machine), seeds it,
creates a process work pool and deploys the example with `prefect deploy`. `run` starts
`workers` process workers, submits `runs` flow runs of the deployment at once, waits for all
of them, stops the workers, and checks what every run left: its final state, its artifacts,
and its write-back items in the shared store.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import yaml

from animus_flows.testing.postgres import TemporaryCluster
from animus_flows.testing.prefect_server import PrefectServer, start_prefect_server
from animus_flows.testing.processes import ProcessGroup

BIN = Path(sys.executable).parent
POOL = "animus-pool"
WORKERS_ONLINE_S = 120  # workers start in a few seconds; a loaded machine takes longer
TERMINAL = {"COMPLETED", "FAILED", "CRASHED", "CANCELLED"}


@dataclass
class RunReport:
    """What one batch of flow runs left behind."""

    workers: int
    seconds: float  # from the submission of the first run to the end of the last
    states: dict[str, str]  # flow run id -> final state name (Completed, Degraded, Failed...)
    state_types: dict[str, str]  # flow run id -> state type (COMPLETED, FAILED, ...)
    artifacts: dict[str, set[str]]  # flow run id -> artifact keys
    write_backs: Counter[str] = field(default_factory=Counter)  # flow run id -> items stored
    expected_artifacts: set[str] = field(default_factory=set)
    expected_write_backs: int = 0

    @property
    def runs(self) -> int:
        return len(self.states)

    @property
    def runs_per_minute(self) -> float:
        return 60 * self.runs / self.seconds

    def problems(self) -> list[str]:
        """Every way a run fell short: not completed, an artifact missing, a write-back item
        missing or stored twice; empty when all is well."""
        found = []
        for run_id, kind in sorted(self.state_types.items()):
            if kind != "COMPLETED":
                found.append(f"flow run {run_id} ended {self.states[run_id]} ({kind})")
            missing = self.expected_artifacts - self.artifacts.get(run_id, set())
            if missing:
                found.append(f"flow run {run_id} lacks artifacts {sorted(missing)}")
            if self.write_backs[run_id] != self.expected_write_backs:
                found.append(
                    f"flow run {run_id} stored {self.write_backs[run_id]} write-back items, "
                    f"not {self.expected_write_backs}"
                )
        return found


class ScaleOut:
    """A Prefect server on PostgreSQL with an example deployed to a process work pool.

    Args:
        cluster: the PostgreSQL cluster: the Prefect server's database and the memory store.
        example: an example folder with `animus.yaml`, `prefect.yaml` and `seed.py`.
        folder: an empty folder for the server's home, the example's copy and the logs.
        deployment: `<flow>/<deployment>` to run.
    """

    def __init__(
        self,
        cluster: TemporaryCluster,
        example: Path,
        folder: Path,
        *,
        deployment: str = "research/research",
    ) -> None:
        self.cluster = cluster
        self.example = example
        self.folder = folder
        self.deployment = deployment
        self.copy = folder / example.name
        self.store_dsn = ""
        self.server: PrefectServer | None = None
        self._deployment_id = ""

    # -- setting up ----------------------------------------------------------------------

    def __enter__(self) -> ScaleOut:
        database = self.cluster.create_database("prefect")
        self.store_dsn = self.cluster.create_database("animus_memory")
        try:
            self.server = start_prefect_server(
                self.folder / "server",
                env={
                    "PREFECT_API_DATABASE_CONNECTION_URL": database.replace(
                        "postgresql://", "postgresql+asyncpg://", 1
                    )
                },
            )
            self._prepare_example()
            self._prefect("work-pool", "create", POOL, "--type", "process", "--overwrite")
            self._prefect("--no-prompt", "deploy", "--all", cwd=self.copy)
            self._deployment_id = self.api("GET", f"/deployments/name/{self.deployment}")["id"]
        except BaseException:
            self.__exit__()
            raise
        return self

    def __exit__(self, *exc_info: object) -> None:
        if self.server is not None:
            self.server.stop()
            self.server = None

    def client_env(self, home: str) -> dict[str, str]:
        """The environment of a client of the server (the CLI, a worker, its flow runs)."""
        assert self.server is not None, "the server is not running"
        return {
            **self.server.client_env(home),
            "ANIMUS_DATABASE_URL": self.store_dsn,
            # Workers look for runs every second (the default is every 10 s).
            "PREFECT_WORKER_QUERY_SECONDS": "1",
        }

    def api(self, method: str, path: str, **kwargs: Any) -> Any:
        assert self.server is not None, "the server is not running"
        return self.server.api(method, path, **kwargs)

    def _prepare_example(self) -> None:
        shutil.copytree(
            self.example, self.copy, ignore=shutil.ignore_patterns(".animus", "__pycache__")
        )
        workflow_file = self.copy / "animus.yaml"
        config = yaml.safe_load(workflow_file.read_text())
        for name, spec in config.get("stores", {}).items():
            if spec.get("type") == "sqlite":  # the one change: the store everyone shares
                config["stores"][name] = {
                    "type": "postgres",
                    **({"embedder": spec["embedder"]} if "embedder" in spec else {}),
                }
        workflow_file.write_text(yaml.safe_dump(config, sort_keys=False))
        subprocess.run(
            [sys.executable, "seed.py"],
            cwd=self.copy,
            env=self.client_env("client-home"),
            check=True,
            capture_output=True,
            timeout=300,
        )

    def _prefect(self, *args: str, cwd: Path | None = None) -> None:
        cwd = cwd or self.folder
        done = subprocess.run(
            [str(BIN / "prefect"), *args],
            cwd=cwd,
            # as a shell's `cd` would: prefect.yaml's pull step names "{{ $PWD }}"
            env={**self.client_env("client-home"), "PWD": str(cwd)},
            capture_output=True,
            text=True,
            timeout=300,
        )
        if done.returncode != 0:
            raise RuntimeError(f"prefect {' '.join(args)} failed:\n{done.stdout}\n{done.stderr}")

    # -- one batch -----------------------------------------------------------------------

    def run(self, *, workers: int, runs: int, limit: int = 4, timeout_s: float = 900) -> RunReport:
        """Start `workers` workers (each running at most `limit` flow runs at once), submit
        `runs` flow runs at once, wait for every one to end, and report on them."""
        group = [self._start_worker(n, limit) for n in range(workers)]
        try:
            self._wait_for_workers(workers)
            started = time.monotonic()
            ids = asyncio.run(self._submit(runs))
            flow_runs = self._wait_for(ids, timeout_s)
            seconds = time.monotonic() - started
        finally:
            for worker in group:
                worker.stop()
        return self._report(workers, seconds, flow_runs)

    def _start_worker(self, n: int, limit: int) -> ProcessGroup:
        command = [str(BIN / "prefect"), "worker", "start", "--pool", POOL, "--limit", str(limit)]
        command += ["--name", f"worker-{n}-{time.monotonic_ns()}", "--install-policy", "never"]
        with (self.folder / f"worker-{n}.log").open("ab") as log:
            return ProcessGroup(
                command,
                cwd=self.copy,
                env=self.client_env(f"worker-home-{n}"),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
            )

    def _wait_for_workers(self, count: int) -> None:
        """Until `count` workers of the pool are online (they start in a few seconds)."""
        deadline = time.monotonic() + WORKERS_ONLINE_S
        while time.monotonic() < deadline:
            online = self.api("POST", f"/work_pools/{POOL}/workers/filter", json={})
            if sum(1 for w in online if w.get("status") == "ONLINE") >= count:
                return
            time.sleep(0.5)
        raise RuntimeError(f"{count} workers did not come online within {WORKERS_ONLINE_S} s")

    async def _submit(self, runs: int) -> list[str]:
        assert self.server is not None
        async with httpx.AsyncClient(base_url=self.server.api_url, timeout=60) as client:

            async def submit(n: int) -> str:
                response = await client.post(
                    f"/deployments/{self._deployment_id}/create_flow_run",
                    # four tasks, so that runs share scopes as a team's do
                    json={"parameters": {"task_id": f"SCALE-{n % 4}"}},
                )
                response.raise_for_status()
                return response.json()["id"]

            return list(await asyncio.gather(*(submit(n) for n in range(runs))))

    def _wait_for(self, ids: list[str], timeout_s: float) -> list[dict[str, Any]]:
        deadline = time.monotonic() + timeout_s
        while True:
            flow_runs = self.api(
                "POST", "/flow_runs/filter", json={"flow_runs": {"id": {"any_": ids}}}
            )
            if all(run["state_type"] in TERMINAL for run in flow_runs):
                return flow_runs
            if time.monotonic() > deadline:
                waiting = Counter(run["state_name"] for run in flow_runs)
                raise TimeoutError(f"runs still waiting after {timeout_s:.0f} s: {waiting}")
            time.sleep(0.5)

    def _report(self, workers: int, seconds: float, flow_runs: list[dict[str, Any]]) -> RunReport:
        ids = [run["id"] for run in flow_runs]
        artifacts: dict[str, set[str]] = {run_id: set() for run_id in ids}
        offset = 0
        while True:  # the API pages at 200
            page = self.api(
                "POST",
                "/artifacts/filter",
                json={"artifacts": {"flow_run_id": {"any_": ids}}, "limit": 200, "offset": offset},
            )
            for artifact in page:
                artifacts[artifact["flow_run_id"]].add(artifact["key"])
            if len(page) < 200:
                break
            offset += 200
        phases, writable = self._phases_and_writable_bindings()
        workflow = self.deployment.split("/")[0]
        report = RunReport(
            workers=workers,
            seconds=seconds,
            states={run["id"]: run["state_name"] for run in flow_runs},
            state_types={run["id"]: run["state_type"] for run in flow_runs},
            artifacts=artifacts,
            expected_artifacts={f"token-budget-{workflow}"}
            | {f"{kind}-{phase}" for phase in phases for kind in ("memory-ops", "memory-context")},
            expected_write_backs=len(phases) * writable,
        )
        report.write_backs = asyncio.run(self._write_backs(set(ids)))
        return report

    def _phases_and_writable_bindings(self) -> tuple[list[str], int]:
        """The deployed workflow's phases, and how many bindings each phase writes back to."""
        from animus_flows import load_workflow

        workflow = load_workflow(self.copy / "animus.yaml")
        flow = workflow.workflows[self.deployment.split("/")[0]]
        phases = [phase.id for phase in flow.phases]
        bindings = {phase.agent for phase in flow.phases}
        agent_bindings = [b for agent in bindings for b in workflow.agents[agent].memory_bindings]
        return phases, sum(1 for b in [*agent_bindings, *flow.memory_bindings] if b.write)

    async def _write_backs(self, ids: set[str]) -> Counter[str]:
        """Write-back items per flow run, read from the shared store (every item of every
        scope of the project, page by page)."""
        from animus_flows import load_workflow
        from animus_flows.stores.registry import PluginRegistry

        os.environ["ANIMUS_DATABASE_URL"] = self.store_dsn  # the store's dsn_env
        workflow = load_workflow(self.copy / "animus.yaml")
        registry = PluginRegistry(workflow, use_blocks=False)
        counts: Counter[str] = Counter()
        try:
            for name in workflow.stores:
                store = registry.get(name)
                cursor = None
                while True:
                    page = await store.list_scopes(project_id=workflow.project_id, cursor=cursor)
                    for scope in page.scopes:
                        items_cursor = None
                        while True:
                            items = await store.list_items(
                                scope, prefix="phase-output/", cursor=items_cursor
                            )
                            for item in items.items:
                                run_id = item.metadata.get("flow_run_id")
                                if run_id in ids:
                                    counts[run_id] += 1
                            items_cursor = items.next_cursor
                            if items_cursor is None:
                                break
                    cursor = page.next_cursor
                    if cursor is None:
                        break
        finally:
            await registry.aclose()
        return counts
