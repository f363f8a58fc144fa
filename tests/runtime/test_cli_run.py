"""`animus run` and `animus preflight`: in-process and as real subprocesses."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from animus_flows.cli import app
from animus_flows.protocol import Scope
from animus_flows.stores import SQLiteStore, SyncStore

pytestmark = pytest.mark.usefixtures("prefect_api")

WORKFLOW = """\
version: 1
project: desk
stores:
  local: {type: sqlite, path: memory.db}
budget: {flow_tokens: 2000}
agents:
  analyst:
    memory_bindings:
      - {plugin: local, binding: market, scope: {kind: agent}}
      - {plugin: nowhere, binding: wiki}
workflows:
  research:
    phases:
      - {id: research, agent: analyst, prompt: "EUR/USD research for {task_id}"}
"""


@pytest.fixture
def project(tmp_path, monkeypatch):
    (tmp_path / "animus.yaml").write_text(WORKFLOW)
    with SyncStore(SQLiteStore(tmp_path / "memory.db")) as store:
        store.put(Scope("desk", agent_id="analyst"), "fx", "EUR/USD ranges 1.07-1.10")
    monkeypatch.chdir(tmp_path)
    return tmp_path


ANIMUS = str(Path(sys.executable).with_name("animus"))


def user_env(prefect_api: str) -> dict[str, str]:
    """The environment a user runs `animus` in: no console settings from this test session."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_LOGGING")}
    env["PREFECT_API_URL"] = prefect_api
    return env


def animus_process(cwd: Path, prefect_api: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [ANIMUS, *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        env=user_env(prefect_api),
        timeout=300,
    )


def test_run_json_prints_exactly_the_summary(project):
    result = CliRunner().invoke(app, ["run", "animus.yaml", "--task-id", "RES-1", "--json"])
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    assert summary["workflow"] == "research"
    assert summary["phases"][0]["memory_context"]["items"][0]["key"] == "fx"
    assert summary["budget"]["flow_tokens"] == 2000
    assert "plugin 'nowhere' is not under `stores`;" in result.stderr
    # the unmatched binding degraded the run: the same line as the flow run's state message
    assert result.stderr.splitlines()[-1] == "1 memory operation degraded: 1 unmatched (wiki)"
    assert summary["degraded"] == [
        {
            "phase": "research",
            "op": "query",
            "binding": "wiki",
            "plugin": "nowhere",
            "status": "unmatched",
            "detail": "no store or saved memory-store block named 'nowhere'",
        }
    ]
    assert "no task id" not in result.stderr


def test_run_text_shows_what_each_phase_received(project):
    result = CliRunner().invoke(app, ["run", "animus.yaml", "--task-id", "RES-2"])
    assert result.exit_code == 0, result.output
    assert "== phase research (agent analyst): 1 memories" in result.stdout
    assert "market/fx" in result.stdout and "budget:" in result.stdout


@pytest.mark.parametrize(
    "args,code,message",
    [
        (["run", "nope.yaml"], 2, "nope.yaml: no such file"),
        (["run", "animus.yaml", "--workflow", "other"], 2, "no workflow 'other'"),
    ],
)
def test_run_usage_errors(project, args, code, message):
    result = CliRunner().invoke(app, args)
    assert result.exit_code == code and message in result.stderr


def test_preflight_json_lists_matched_and_unmatched_bindings(project):
    result = CliRunner().invoke(app, ["preflight", "animus.yaml", "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["stores"][0]["plugin_id"] == "local" and report["stores"][0]["reachable"]
    assert report["stores"][0]["capabilities"]["strong_consistency"] is True
    assert [b["binding"] for b in report["memory_bindings"]["matched"]] == ["market"]
    assert [b["plugin"] for b in report["memory_bindings"]["unmatched"]] == ["nowhere"]
    # a server is configured (the session's): the plugin was looked up among saved blocks,
    # and the one binding gets one warning
    assert [w for w in report["warnings"] if "nowhere" in w] == [
        "agents.analyst: binding 'wiki': no store or saved memory-store block is named "
        "'nowhere'; the binding is a no-op (audited as unmatched: the run ends Degraded)"
    ]
    assert report["skipped"] == [] and report["errors"] == []


def test_preflight_says_matched_for_a_saved_block_and_does_not_warn_about_it(project):
    from animus_flows.blocks import SQLiteMemoryStore

    document_id = SQLiteMemoryStore(path=str(project / "saved.db")).save(
        "desk-saved", overwrite=True
    )
    (project / "saved.yaml").write_text(WORKFLOW.replace("plugin: nowhere", "plugin: desk-saved"))
    result = CliRunner().invoke(app, ["preflight", "saved.yaml"])
    assert result.exit_code == 0, result.output
    assert (
        "  matched   agents.analyst: wiki -> desk-saved "
        "(saved block animus-sqlite-memory-store/desk-saved)"
    ) in result.stdout.splitlines()
    assert "warning" not in result.stdout and "unmatched" not in result.stdout
    assert document_id is not None


def test_preflight_reports_a_misspelled_runner_with_its_line_and_a_suggestion(project):
    (project / "typo.yaml").write_text(
        WORKFLOW.replace("  analyst:\n", "  analyst:\n    runner: animus_flows.runners:ecko\n")
    )
    result = CliRunner().invoke(app, ["preflight", "typo.yaml", "--json"])
    assert result.exit_code == 2
    report = json.loads(result.stdout)  # the rest of the report is still there
    assert report["stores"][0]["reachable"]
    message = (
        "typo.yaml:8:13: agents.analyst.runner: 'animus_flows.runners:ecko': "
        "'animus_flows.runners' has no callable 'ecko'; did you mean 'echo'?"
    )
    assert report["errors"] == [message]
    assert result.stderr.splitlines() == [f"error: {message}"]
    run = CliRunner().invoke(app, ["run", "typo.yaml", "--task-id", "T"])
    assert run.exit_code == 2 and run.stderr.splitlines()[-1] == f"error: {message}"


def test_preflight_without_a_server_skips_saved_blocks_and_says_so(project):
    env = {k: v for k, v in user_env("").items() if k != "PREFECT_API_URL"}
    env["PREFECT_HOME"] = str(project / "prefect-home")  # no profile that names a server
    out = subprocess.run(
        [ANIMUS, "preflight", "animus.yaml"], cwd=project, capture_output=True, text=True,
        env=env, timeout=120,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert (
        "  unmatched agents.analyst: wiki -> nowhere (no-op; saved blocks not looked up)" in lines
    )
    assert [line for line in lines if "nowhere" in line and line.startswith("warning")] == [
        "warning: agents.analyst: binding 'wiki': plugin 'nowhere' is not under stores: and "
        "saved blocks were not looked up; the binding is a no-op unless a saved block has "
        "that name"
    ]
    assert any(
        line.startswith("not checked: saved Prefect blocks were not looked up") for line in lines
    )
    assert not (project / "prefect-home" / "prefect.db").exists()  # no temporary server ran


def test_run_as_a_real_subprocess_keeps_stdout_clean(project, prefect_api):
    out = animus_process(project, prefect_api, "run", "animus.yaml", "--task-id", "RES-3", "--json")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["phases"][0]["id"] == "research"
    assert "Traceback" not in out.stderr
    failing = project / "fail.yaml"
    failing.write_text(WORKFLOW.replace("  analyst:\n", "  analyst:\n    runner: bad.py:run\n"))
    (project / "bad.py").write_text("def run(contract):\n    raise RuntimeError('boom')\n")
    out = animus_process(project, prefect_api, "run", "fail.yaml")
    assert out.returncode == 1
    assert "Traceback" not in out.stderr and out.stdout == ""
    # what failed, then which flow run and where to read it
    failed, where = out.stderr.splitlines()[-2:]
    assert failed == "error: runner 'bad.py:run' failed in phase 'research': RuntimeError: boom"
    flow_run_id = where.split()[3]
    ui = prefect_api.removesuffix("/api")
    assert where == (
        f"error: flow run {flow_run_id} ended Failed: see its logs, task runs and artifacts at "
        f"{ui}/runs/flow-run/{flow_run_id}"
    )
    # no --task-id: the prompt's {task_id} rendered empty, said once
    warnings = [line for line in out.stderr.splitlines() if "no task id" in line]
    assert warnings == [
        "warning: no task id: {task_id} renders empty in the prompt of phase 'research'; "
        "pass --task-id ID (or the flow's task_id parameter)"
    ]


def test_without_a_server_a_failed_run_says_how_to_read_it_locally(monkeypatch):
    from prefect.settings import PREFECT_API_URL, temporary_settings

    from animus_flows.cli.support import where_to_look

    monkeypatch.delenv("PREFECT_API_URL", raising=False)
    with temporary_settings(restore_defaults={PREFECT_API_URL}):
        where = where_to_look("f00d", "Failed")
    assert where == (
        "flow run f00d ended Failed: `prefect flow-run logs f00d` prints its logs; for its task "
        "runs and artifacts, start `prefect server start` and open "
        "http://127.0.0.1:4200/runs/flow-run/f00d"
    )


def test_a_hung_sync_runner_past_its_deadline_does_not_hold_the_process_open(project, prefect_api):
    (project / "hung.yaml").write_text(
        WORKFLOW.replace(
            "  analyst:\n", "  analyst:\n    runner: {python: 'hung.py:run', timeout_s: 0.5}\n"
        )
    )
    (project / "hung.py").write_text("import time\ndef run(contract):\n    time.sleep(600)\n")
    # without the fix the interpreter waits 600 s for the runner's thread (the call's timeout)
    out = animus_process(project, prefect_api, "run", "hung.yaml")
    assert out.returncode == 1, out.stderr
    assert out.stderr.strip().splitlines()[-2] == (
        "error: runner 'hung.py:run' did not finish within timeout_s 0.5 in phase 'research'; "
        "its thread was abandoned (a thread cannot be stopped)"
    )
    assert "Traceback" not in out.stderr and out.stdout == ""


def test_an_unwritable_audit_path_is_a_configuration_error_before_anything_runs(project):
    (project / "taken").mkdir()
    (project / "audited.yaml").write_text(WORKFLOW + "audit: {path: taken}\n")
    for command in (["preflight", "audited.yaml"], ["run", "audited.yaml", "--task-id", "R-4"]):
        result = CliRunner().invoke(app, command)
        assert result.exit_code == 2, result.output
        assert "audit.path" in result.stderr and "taken' cannot be written (is a folder)" in (
            result.stderr
        )
        assert "Traceback" not in result.stderr and "== phase" not in result.stdout


def test_without_a_server_saved_blocks_are_still_found_by_name(tmp_path):
    # No PREFECT_API_URL: loading a block starts Prefect's temporary server. Preflight must not
    # count that start against a store's 3 s reachability deadline, and a store command given
    # `--plugin NAME` that the file does not declare must look among saved blocks.
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_API")}
    env["PREFECT_HOME"] = str(tmp_path / "prefect-home")
    saved = tmp_path / "saved.db"
    save = (
        "from animus_flows.blocks import SQLiteMemoryStore\n"
        f"SQLiteMemoryStore(path={str(saved)!r}).save('desk-saved')\n"
    )
    subprocess.run([sys.executable, "-c", save], env=env, check=True, timeout=300)
    (tmp_path / "animus.yaml").write_text(
        "version: 1\nproject: desk\nstores:\n"
        "  saved: {type: block, block: animus-sqlite-memory-store/desk-saved}\n"
    )
    (tmp_path / "plain.yaml").write_text(
        "version: 1\nproject: desk\nstores:\n  local: {type: sqlite, path: local.db}\n"
    )

    def animus(*args: str) -> subprocess.CompletedProcess[str]:
        command = [sys.executable, "-m", "animus_flows", *args]
        return subprocess.run(
            command, cwd=tmp_path, capture_output=True, text=True, env=env, timeout=300
        )

    out = animus("preflight", "animus.yaml", "--json")
    assert out.returncode == 0, out.stderr
    (store,) = json.loads(out.stdout)["stores"]
    assert store["reachable"] and store["error"] is None, store
    assert store["latency_ms"] < 3000

    out = animus(
        *("memory", "put", "--workflow-file", "plain.yaml", "--plugin", "desk-saved"),
        *("--scope", "project", "--key", "fx", "--value", '"EUR/USD ranges"'),
    )
    assert out.returncode == 0, out.stderr
    with SyncStore(SQLiteStore(saved)) as store:
        assert store.get(Scope("desk"), "fx").value == "EUR/USD ranges"
    assert not (tmp_path / "local.db").exists()


def test_sigterm_stops_a_run_with_one_line_and_exit_143(project, prefect_api):
    (project / "slow.yaml").write_text(
        WORKFLOW.replace(
            "  analyst:\n",
            '  analyst:\n    runner: {command: [sh, -c, "touch started; sleep 60"]}\n',
        )
    )
    run = subprocess.Popen(
        [ANIMUS, "run", "slow.yaml", "--task-id", "RES-5"],
        cwd=project,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=user_env(prefect_api),
    )
    try:
        for _ in range(1200):  # the runner has started: the run is inside its phase task
            if (project / "started").exists() or run.poll() is not None:
                break
            time.sleep(0.1)
        run.send_signal(signal.SIGTERM)
        _, stderr = run.communicate(timeout=120)
    finally:
        run.kill()
    assert run.returncode == 128 + signal.SIGTERM, stderr
    assert stderr.splitlines()[-1] == "error: stopped by signal 15 (SIGTERM)"
    assert "Traceback" not in stderr
