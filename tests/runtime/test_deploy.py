"""The example deploys with `prefect deploy` and runs on a real worker, where a binding's
plugin resolves to a saved block through the `prefect.collections` entry point."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from prefect.client.orchestration import get_client
from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterId

from animus_flows.blocks import SQLiteMemoryStore
from animus_flows.protocol import Scope
from animus_flows.stores import SQLiteStore

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "trade-desk"
BIN = Path(sys.executable).parent

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("prefect_api")]


def prefect(*args: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    done = subprocess.run([str(BIN / "prefect"), *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=600)  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    return done


async def test_prefect_deploy_and_a_worker_run_with_a_block_plugin(tmp_path, prefect_api):
    project = tmp_path / "trade-desk"
    shutil.copytree(EXAMPLE, project, ignore=shutil.ignore_patterns(".animus", "__pycache__"))
    # a binding whose plugin is not in the file: it must resolve to the saved block below
    text = (project / "animus.yaml").read_text()
    (project / "animus.yaml").write_text(text.replace(
        "      - plugin: memory-confluence    # not installed: a warning, then a no-op",
        "      - plugin: desk-archive\n        binding: archive\n"
        "      - plugin: memory-confluence    # not installed: a warning, then a no-op",
    ))  # fmt: skip
    archive = tmp_path / "archive.db"
    store = SQLiteStore(archive)
    await store.put(Scope("trade-desk"), "archived-hedge", "EUR/USD hedge archive from 2024")
    await store.aclose()
    await SQLiteMemoryStore(path=str(archive)).save("desk-archive", overwrite=True)

    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_LOGGING")}
    env["PREFECT_API_URL"] = prefect_api
    env["PWD"] = str(project)  # what a shell sets; prefect.yaml's pull step reads it at deploy
    subprocess.run([sys.executable, "seed.py"], cwd=project, env=env, check=True)
    prefect("work-pool", "create", "animus-pool", "--type", "process", "--overwrite",
            cwd=project, env=env)  # fmt: skip
    prefect("--no-prompt", "deploy", "--all", cwd=project, env=env)
    async with get_client() as client:
        deployment = await client.read_deployment_by_name("research/research")
        generic = await client.read_deployment_by_name("animus-run-workflow/any-workflow")
        assert generic.entrypoint == "animus_flows.flows:run_workflow"
        run = await client.create_flow_run_from_deployment(
            deployment.id, parameters={"task_id": "RES-DEPLOY"}
        )
    worker = prefect("worker", "start", "--pool", "animus-pool", "--run-once", cwd=project, env=env)
    async with get_client() as client:
        finished = await client.read_flow_run(run.id)
        assert finished.state.is_completed(), worker.stdout[-3000:] + worker.stderr[-3000:]
        artifacts = await client.read_artifacts(
            flow_run_filter=FlowRunFilter(id=FlowRunFilterId(any_=[run.id]))
        )
    context = next(a.data for a in artifacts if a.key == "memory-context-research")
    assert "[archive/archived-hedge]" in context and "[market-context/" in context
