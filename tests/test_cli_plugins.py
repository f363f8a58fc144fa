"""`animus memory ...` against `type: jsonrpc` stores: the example plugin, a served SQLite
store, and plugins that fail (one line on stderr, exit 2 for configuration, 1 at run time)."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from animus_flows.cli import app

ROOT = Path(__file__).resolve().parents[1]
DICT_PLUGIN = ROOT / "examples" / "plugins" / "dict_plugin.py"
FAULTY = ROOT / "tests" / "stores" / "faulty_plugin.py"
PY = json.dumps(sys.executable)

WORKFLOW = f"""\
version: 1
project: demo
stores:
  memory-dict:
    type: jsonrpc
    command: [{PY}, dict_plugin.py, --file, items.json]   # relative to this file's folder
  memory-local: {{type: sqlite, path: memory.db}}
  memory-served:
    type: jsonrpc
    command: [{PY}, -m, animus_flows, memory, serve, --plugin, memory-local]
    startup_timeout_ms: 20000
  unknown-command:
    type: jsonrpc
    command: [no-such-animus-plugin]
  crashing: {{type: jsonrpc, command: [{PY}, {json.dumps(str(FAULTY))}, crash-put]}}
  hanging:
    type: jsonrpc
    command: [{PY}, {json.dumps(str(FAULTY))}, hang-query]
    call_timeout_ms: 300
  chatty: {{type: jsonrpc, command: [{PY}, {json.dumps(str(FAULTY))}, garbage]}}
  too-new: {{type: jsonrpc, command: [{PY}, {json.dumps(str(FAULTY))}, version]}}
  early-exit: {{type: jsonrpc, command: [{PY}, {json.dumps(str(FAULTY))}, exit-early]}}
  old-protocol: {{type: jsonrpc, command: [{PY}, {json.dumps(str(FAULTY))}, ok]}}
"""


@pytest.fixture
def project(tmp_path, monkeypatch):
    (tmp_path / "animus.yaml").write_text(WORKFLOW)
    shutil.copy(DICT_PLUGIN, tmp_path / "dict_plugin.py")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def invoke(*args: str):
    return CliRunner().invoke(app, list(args))


def run_json(*args: str):
    result = invoke(*args, "--json")
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


AGENT = ("--scope", "agent", "--agent-id", "trade-analyst")


def test_the_example_plugin_through_every_memory_command(project):
    item = run_json(
        "memory", "put", "--plugin", "memory-dict", *AGENT, "--key", "fx",
        "--value", '{"content": "EUR/USD broke 1.10"}', "--metadata", '{"tier": "hot"}',
    )  # fmt: skip
    assert item["scope"] == {"project_id": "demo", "agent_id": "trade-analyst", "task_id": None}
    assert item["value"] == {"content": "EUR/USD broke 1.10"}
    # each command is a new plugin process; the plugin keeps its dict in items.json
    assert (project / "items.json").exists()
    got = run_json("memory", "get", "--plugin", "memory-dict", *AGENT, "--key", "fx")
    assert got["metadata"] == {"tier": "hot"}
    hits = run_json("memory", "query", "--plugin", "memory-dict", *AGENT, "--query", "EUR/USD")
    assert [hit["key"] for hit in hits["hits"]] == ["fx"]
    assert 0 < hits["hits"][0]["score"] <= 1
    scopes = run_json("memory", "list-scopes", "--plugin", "memory-dict")
    assert scopes == {"scopes": [item["scope"]], "next_cursor": None}
    assert run_json("memory", "prune", "--plugin", "memory-dict", *AGENT, "--dry-run") == {
        "would_delete": 1
    }
    assert run_json("memory", "prune", "--plugin", "memory-dict", *AGENT) == {"deleted": 1}
    missing = invoke("memory", "get", "--plugin", "memory-dict", *AGENT, "--key", "fx")
    assert missing.exit_code == 1


def test_a_store_served_by_animus_memory_serve(project):
    run_json(
        "memory", "put", "--plugin", "memory-served", "--scope", "project", "--key", "k",
        "--value", '"served walrus"', "--ttl", "3600",
    )  # fmt: skip
    # the served process wrote the SQLite file the other store entry reads directly
    direct = run_json(
        "memory", "get", "--plugin", "memory-local", "--scope", "project", "--key", "k"
    )
    assert direct["value"] == "served walrus" and direct["expires_at"] is not None


def test_the_console_script_drives_the_example_plugin(project):
    exe = Path(sys.executable).with_name("animus")
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}

    def animus(*args):
        return subprocess.run(
            [str(exe), "memory", *args, "--plugin", "memory-dict", "--scope", "project"],
            cwd=project, capture_output=True, text=True, env=env, timeout=60,
        )  # fmt: skip

    put = animus("put", "--key", "k", "--value", '"walrus facts"', "--json")
    assert put.returncode == 0, put.stderr
    query = animus("query", "--query", "walrus", "--json")
    assert query.returncode == 0, query.stderr
    assert [hit["key"] for hit in json.loads(query.stdout)["hits"]] == ["k"]
    assert query.stderr == ""  # the plugin's own stderr chatter is logged, not printed


@pytest.mark.parametrize(
    "plugin,args,code,message",
    [
        (
            "unknown-command",
            ("get", "--key", "k"),
            2,
            "error: plugin unknown-command: command 'no-such-animus-plugin' was not found",
        ),
        ("too-new", ("get", "--key", "k"), 2, "error: plugin too-new speaks protocol '9.0.0'"),
        (
            "crashing",
            ("put", "--key", "k", "--value", "1"),
            1,
            "error: plugin crashing exited with code 3; its stderr ended with: "
            "'faulty plugin: segfault in the storage engine'",
        ),
        (
            "hanging",
            ("query", "--query", "x"),
            1,
            "error: plugin hanging did not answer memory/query within 300 ms",
        ),
        ("chatty", ("get", "--key", "k"), 1, "error: plugin chatty wrote 'Loading model weights"),
        ("early-exit", ("get", "--key", "k"), 1, "error: plugin early-exit exited with code 4"),
    ],
)
def test_plugin_faults_are_one_line_and_the_right_exit_code(project, plugin, args, code, message):
    result = invoke("memory", args[0], "--plugin", plugin, "--scope", "project", *args[1:])
    assert result.exit_code == code, result.output
    assert result.stderr.startswith(message)
    assert len(result.stderr.strip().splitlines()) == 1
    assert result.stdout == ""
    if "exited with code" in message:  # the hint names the whole command, script included
        mode = {"crashing": "crash-put", "early-exit": "exit-early"}[plugin]
        assert f"faulty_plugin.py {mode}' by hand to see why" in result.stderr


def test_a_plugins_own_refusal_is_a_usage_error(project):
    result = invoke("memory", "list-scopes", "--plugin", "memory-dict", "--cursor", "bogus")
    assert result.exit_code == 2
    assert result.stderr.strip() == (
        "error: plugin memory-dict: cursor 'bogus' was not returned by this plugin"
    )


def test_delete_through_plugins_and_a_0_1_plugin_that_cannot(project):
    for plugin in ("memory-dict", "memory-served"):
        invoke("memory", "put", "--plugin", plugin, *AGENT, "--key", "fx", "--value", "1")
        delete = ["memory", "delete", "--plugin", plugin, *AGENT, "--key", "fx"]
        assert run_json(*delete) == {"deleted": True}
        assert run_json(*delete) == {"deleted": False}
    said = invoke("memory", "delete", "--plugin", "old-protocol", *AGENT, "--key", "fx")
    assert said.exit_code == 2 and said.stdout == ""
    assert said.stderr == (
        "error: plugin old-protocol speaks protocol 0.1.0, which has no memory/delete (added in "
        "0.2.0); upgrade the plugin to protocol 0.2.0\n"
    )
