"""Secrets never reach output through an error: runner stderr, plugin stderr and stdout, echoed
flags, pasted keys, credentials in URLs and import data, each through the real `animus` process.
Every test also checks that the message still says what went wrong."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from prefect.client.orchestration import get_client
from prefect.client.schemas.filters import LogFilter, LogFilterFlowRunId
from prefect.logging.handlers import APILogHandler

from animus_flows import workflow_flow
from animus_flows.config.loader import load_workflow
from animus_flows.errors import StoreUnavailable
from animus_flows.jsonrpc import codec
from animus_flows.runtime.invoke import STDERR_TAIL_CHARS, stderr_tail
from animus_flows.stores.zep_http import status_error

ROOT = Path(__file__).resolve().parents[1]
FAULTY = json.dumps(str(ROOT / "tests" / "stores" / "faulty_plugin.py"))
PY = json.dumps(sys.executable)

# One secret per leak, so a failure names the path it came through.
RUNNER_KEY = "sk-ant-api03-" + "Cc7" * 15
PLUGIN_STDERR_KEY = "sk-ant-api03-" + "Ee7" * 15
PLUGIN_STDOUT_KEY = "sk-ant-api03-" + "Ff7" * 15
VALUE_KEY = "sk-ant-api03-" + "Aa7" * 15
TIER_KEY = "sk-ant-api03-" + "Bb7" * 15
PASTED_KEY = "z_supersecretkey1234567890abcdef"

RUNNER_WORKFLOW = f"""\
version: 1
project: demo
stores:
  local: {{type: sqlite, path: memory.db}}
agents:
  a:
    runner:
      command: [sh, -c, "echo 'auth failed for key {RUNNER_KEY}' >&2; exit 7"]
workflows: {{w: {{phases: [{{id: p, agent: a}}]}}}}
"""

PLUGIN_WORKFLOW = f"""\
version: 1
project: demo
stores:
  memory-local: {{type: sqlite, path: memory.db}}
  noisy:
    type: jsonrpc
    command: [{PY}, {FAULTY}, exit-early]
    env: {{FAULTY_PLUGIN_LINE: "cannot log in with {PLUGIN_STDERR_KEY}"}}
  chatty:
    type: jsonrpc
    command: [{PY}, {FAULTY}, garbage]
    env: {{FAULTY_PLUGIN_LINE: "token={PLUGIN_STDOUT_KEY}"}}
"""


def animus(
    *args: str, cwd: Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    exe = Path(sys.executable).with_name("animus")
    full_env = {**os.environ, "PYTHONWARNINGS": "ignore", **(env or {})}
    return subprocess.run(
        [str(exe), *args], cwd=cwd, capture_output=True, text=True, env=full_env, timeout=300
    )


def output(result: subprocess.CompletedProcess[str]) -> str:
    return result.stdout + result.stderr


# -- runners ---------------------------------------------------------------------------------


def test_runner_stderr_is_redacted_in_animus_run(tmp_path, prefect_api):
    (tmp_path / "animus.yaml").write_text(RUNNER_WORKFLOW)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_LOGGING")}
    env["PREFECT_API_URL"] = prefect_api
    result = animus("run", "animus.yaml", cwd=tmp_path, env=env)
    assert result.returncode == 1, output(result)
    assert RUNNER_KEY not in output(result)
    assert (
        "error: runner command 'sh' exited with code 7 in phase 'p': "
        "auth failed for key [REDACTED:anthropic_api_key]"
    ) in result.stderr


async def flow_run_log_text(state) -> str:
    """Every log line Prefect stored for the flow run that ended in `state`."""
    await APILogHandler.aflush()
    async with get_client() as client:
        logs = await client.read_logs(
            LogFilter(flow_run_id=LogFilterFlowRunId(any_=[state.state_details.flow_run_id]))
        )
    return "\n".join(log.message for log in logs)


async def test_runner_stderr_is_redacted_in_the_flow_run_state_and_logs(tmp_path, prefect_api):
    (tmp_path / "animus.yaml").write_text(RUNNER_WORKFLOW)
    state = await workflow_flow(load_workflow(tmp_path / "animus.yaml"), "w")(return_state=True)
    assert state.is_failed()
    assert "exited with code 7" in state.message and RUNNER_KEY not in state.message
    text = await flow_run_log_text(state)
    assert "exited with code 7" in text
    assert RUNNER_KEY not in text


@pytest.mark.parametrize("failing", ["runner", "hook"])
async def test_a_python_runners_or_hooks_exception_is_redacted_in_the_logs(
    tmp_path, prefect_api, failing
):
    # Prefect logs a failed task's whole exception chain: the cause, user code's exception,
    # carries the secret unless it is redacted too.
    # the key arrives at run time (as from a credential store), not as a literal in the source
    # that the traceback would quote
    assert RUNNER_KEY == "sk-ant-api03-" + "Cc7" * 15
    (tmp_path / "agent.py").write_text(
        "class LoginError(Exception):\n    pass\n\n"
        "def fail(arg):\n    key = 'sk-ant-api03-' + 'Cc7' * 15\n"
        "    raise LoginError(f'auth failed for key {key}')\n"
    )
    use = "runner: agent.py:fail" if failing == "runner" else "runner: animus_flows.runners:echo"
    hooks = "{pre_phase: [agent.py:fail]}" if failing == "hook" else "{}"
    (tmp_path / "animus.yaml").write_text(
        f"version: 1\nproject: demo\nagents:\n  a:\n    {use}\n"
        f"workflows: {{w: {{hooks: {hooks}, phases: [{{id: p, agent: a}}]}}}}\n"
    )
    state = await workflow_flow(load_workflow(tmp_path / "animus.yaml"), "w")(return_state=True)
    assert state.is_failed() and RUNNER_KEY not in state.message
    text = await flow_run_log_text(state)
    assert "LoginError: auth failed for key [REDACTED:anthropic_api_key]" in text
    assert RUNNER_KEY not in text


def test_a_runner_stderr_tail_never_starts_inside_a_secret():
    # Cut first, the tail would begin with the secret's last 29 characters, which no pattern
    # recognises on their own.
    stderr = f"token {RUNNER_KEY}\n{'x' * (STDERR_TAIL_CHARS - 30)}".encode()
    tail = stderr_tail(stderr)
    assert RUNNER_KEY[-29:] not in tail and tail.endswith("x" * 100)
    assert len(tail) <= STDERR_TAIL_CHARS


# -- plugins ---------------------------------------------------------------------------------


@pytest.fixture
def plugins(tmp_path):
    (tmp_path / "animus.yaml").write_text(PLUGIN_WORKFLOW)
    return tmp_path


@pytest.mark.parametrize(
    "plugin,key,message",
    [
        (
            "noisy",  # its stderr holds the key
            PLUGIN_STDERR_KEY,
            "error: plugin noisy exited with code 4; its stderr ended with: "
            "'cannot log in with [REDACTED:anthropic_api_key]'",
        ),
        (
            "chatty",  # it prints the key on stdout, where only protocol messages belong
            PLUGIN_STDOUT_KEY,
            "error: plugin chatty wrote 'token=[REDACTED:anthropic_api_key]' to stdout, which "
            "is not a JSON-RPC response",
        ),
    ],
)
def test_plugin_output_is_redacted_in_memory_get(plugins, plugin, key, message):
    got = animus(
        "memory", "get", "--plugin", plugin, "--scope", "project", "--key", "k", cwd=plugins
    )
    assert got.returncode == 1, output(got)
    assert key not in output(got)
    assert got.stderr.startswith(message)


def test_plugin_stderr_is_redacted_in_preflight(plugins):
    report = animus("preflight", "animus.yaml", cwd=plugins)
    assert report.returncode == 0, output(report)
    assert PLUGIN_STDERR_KEY not in output(report)
    assert "noisy (jsonrpc): UNREACHABLE: plugin noisy exited with code 4" in report.stdout


def test_a_plugins_error_message_is_redacted_before_it_is_shortened():
    # The key straddles the 500-character cut: shortened first, its first 19 characters would
    # survive, too few for the pattern to recognise.
    message = "x" * 480 + " " + PLUGIN_STDERR_KEY
    error = codec.error_from_response({"code": -32000, "message": message}, "plugin p")
    assert isinstance(error, StoreUnavailable)
    assert PLUGIN_STDERR_KEY[:19] not in str(error) and str(error).startswith("plugin p: xxx")


# -- flags, workflow files and import data ----------------------------------------------------


def test_bad_json_in_value_is_redacted(plugins):
    value = f'{{"content": "{VALUE_KEY}", '
    result = animus(
        "memory", "put", "--plugin", "memory-local", "--scope", "project", "--key", "k",
        "--value", value, cwd=plugins,
    )  # fmt: skip
    assert result.returncode == 2, output(result)
    assert VALUE_KEY not in output(result)
    assert result.stderr.startswith(
        'error: --value \'{"content": "[REDACTED:anthropic_api_key]", \' is not valid JSON'
    )


def zep_workflow(folder: Path, **fields: object) -> None:
    spec = ", ".join(f"{name}: {json.dumps(value)}" for name, value in fields.items())
    (folder / "animus.yaml").write_text(
        f"version: 1\nproject: demo\nstores:\n  memory-zep: {{type: zep, {spec}}}\n"
    )


def test_a_key_pasted_as_api_key_env_fails_validation_without_showing_it(tmp_path):
    zep_workflow(tmp_path, api_key_env=PASTED_KEY)
    result = animus("validate", "animus.yaml", cwd=tmp_path)
    assert result.returncode == 2, output(result)
    assert PASTED_KEY not in output(result)
    assert result.stderr == (
        "error: animus.yaml:4:40: stores.memory-zep.api_key_env: looks like an API key, not the "
        "name of an environment variable; put the key in an environment variable such as "
        "ZEP_API_KEY and write the variable's name here (api_key_env: ZEP_API_KEY)\n"
    )


@pytest.mark.parametrize(
    "value,message",
    [
        ("ZEP-KEY", "stores.memory-zep.api_key_env: 'ZEP-KEY' is not an environment variable name"),
        (12, "stores.memory-zep.api_key_env: must be a string, got 12"),
    ],
)
def test_api_key_env_must_be_a_variable_name(tmp_path, value, message):
    zep_workflow(tmp_path, api_key_env=value)
    result = animus("validate", "animus.yaml", cwd=tmp_path)
    assert result.returncode == 2, output(result)
    assert message in result.stderr and len(result.stderr.splitlines()) == 1


def test_credentials_in_a_zep_base_url_are_never_shown(tmp_path):
    password = "z_supersecretpassword0123456789"
    zep_workflow(tmp_path, base_url=f"https://user:{password}@127.0.0.1:9/", timeout_s=0.5)
    env = {"ZEP_API_KEY": "z_test_key"}
    got = animus("memory", "get", "--scope", "project", "--key", "k", cwd=tmp_path, env=env)
    report = animus("preflight", "animus.yaml", cwd=tmp_path, env=env)
    assert got.returncode == 1 and report.returncode == 0, output(got) + output(report)
    for result in (got, report):
        assert password not in output(result) and "user:" not in output(result)
    assert got.stderr.startswith("error: cannot reach Zep at https://***@127.0.0.1:9/api/v2")
    assert "UNREACHABLE: cannot reach Zep at https://***@127.0.0.1:9/api/v2" in report.stdout


def test_a_zep_answer_quoting_the_key_is_scrubbed_before_it_is_shortened():
    key = "zk" + "7" * 30
    error = status_error(
        500, "x" * 190 + " " + key, where="memory.get_session", base_url="u", secret=key
    )
    assert error is not None and key[:9] not in str(error)


def test_import_errors_redact_the_values_they_quote(plugins):
    record = {"id": "3f2a9c1b-8d7e-4f5a-9b3c-2d1e0f9a8b7c", "content": "ok", "tier": TIER_KEY}
    (plugins / "bad.json").write_text(json.dumps([record]))
    result = animus(
        "memory", "import", "bad.json", "--plugin", "memory-local", "--scope", "project",
        cwd=plugins,
    )  # fmt: skip
    assert result.returncode == 2, output(result)
    assert TIER_KEY not in output(result)
    assert result.stderr == (
        "error: bad.json: memories[0]: tier '[REDACTED:anthropic_api_key]' is not one of "
        "hot, warm, cold\n"
    )
