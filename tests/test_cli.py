"""The `animus` CLI: in-process with typer's CliRunner, and as a real subprocess."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from animus_flows.cli import app

WORKFLOW = """\
version: 1
project: demo
stores:
  memory-local: {type: sqlite, path: .animus/memory.db}
agents: {a: {}}
workflows: {w: {phases: [{id: p, agent: a}]}}
"""


@pytest.fixture
def project(tmp_path, monkeypatch):
    (tmp_path / "animus.yaml").write_text(WORKFLOW)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def invoke(*args: str):
    return CliRunner().invoke(app, list(args))


def run_json(*args: str):
    result = invoke(*args, "--json")
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


PUT = ["memory", "put", "--scope", "project", "--key", "k"]
DEEP = "[" * 100_000 + "]" * 100_000
DEEP_OBJECT = '{"a": ' + DEEP + "}"
AWKWARD = ["a%b", "a_b", "it's", 'say "hi"', "café/東京", "zz1"]


@pytest.mark.parametrize("agent", AWKWARD)
def test_put_get_query_round_trip_in_awkward_scopes(project, agent):
    item = run_json(
        "memory",
        "put",
        "--scope",
        "agent",
        "--agent-id",
        agent,
        "--key",
        "k",
        "--value",
        '{"content": "EUR/USD rallied"}',
        "--metadata",
        '{"tier": "hot"}',
    )
    assert item["scope"] == {"project_id": "demo", "agent_id": agent, "task_id": None}
    assert set(item) == {
        "scope",
        "key",
        "value",
        "metadata",
        "created_at",
        "updated_at",
        "expires_at",
    }
    got = run_json("memory", "get", "--scope", "agent", "--agent-id", agent, "--key", "k")
    assert got["value"] == {"content": "EUR/USD rallied"} and got["metadata"] == {"tier": "hot"}
    hits = run_json(
        "memory",
        "query",
        "--scope",
        "agent",
        "--agent-id",
        agent,
        "--query",
        "EUR rally",
        "--top-k",
        "3",
    )["hits"]
    assert [set(hit) for hit in hits] == [{"key", "value", "score", "metadata"}]
    # the project scope does not see the agent's item
    assert run_json("memory", "query", "--scope", "project", "--query", "EUR")["hits"] == []


def test_list_scopes_and_prune(project):
    assert invoke("memory", "list-scopes").stdout == "no scopes hold items\n"
    for agent in ("x", "y"):
        invoke(
            "memory", "put", "--scope", "agent", "--agent-id", agent, "--key", "k", "--value", "1"
        )
    invoke("memory", "put", "--scope", "task", "--task-id", "T-1", "--key", "k", "--value", "1")
    page = run_json("memory", "list-scopes", "--project-id", "demo")
    assert page["next_cursor"] is None and len(page["scopes"]) == 3
    first = run_json("memory", "list-scopes", "--limit", "2")
    assert len(first["scopes"]) == 2 and first["next_cursor"]
    rest = run_json("memory", "list-scopes", "--limit", "2", "--cursor", first["next_cursor"])
    assert len(rest["scopes"]) == 1 and rest["next_cursor"] is None
    assert run_json("memory", "prune", "--scope", "agent", "--agent-id", "x", "--dry-run") == {
        "would_delete": 1
    }
    assert run_json("memory", "prune", "--scope", "agent", "--agent-id", "x") == {"deleted": 1}
    assert run_json("memory", "prune", "--scope", "agent", "--agent-id", "x") == {"deleted": 0}


def test_delete_removes_one_item_and_is_idempotent(project):
    for key in ("k", "other"):
        invoke("memory", "put", "--scope", "agent", "--agent-id", "x", "--key", key, "--value", "1")
    delete = ["memory", "delete", "--scope", "agent", "--agent-id", "x", "--key", "k"]
    assert run_json(*delete) == {"deleted": True}
    assert run_json(*delete) == {"deleted": False}
    assert (
        invoke("memory", "get", "--scope", "agent", "--agent-id", "x", "--key", "k").exit_code == 1
    )
    assert run_json("memory", "get", "--scope", "agent", "--agent-id", "x", "--key", "other")
    invoke("memory", "put", "--scope", "agent", "--agent-id", "x", "--key", "k", "--value", "1")
    said = invoke(*delete)
    assert (said.exit_code, said.stdout) == (0, "deleted 'k' from project=demo/agent=x\n")
    said = invoke(*delete)
    assert (said.exit_code, said.stdout) == (
        0,
        "no item 'k' in project=demo/agent=x; nothing to delete\n",
    )


def test_ttl_flag_sets_expiry(project):
    item = run_json(
        "memory", "put", "--scope", "project", "--key", "k", "--value", '"v"', "--ttl", "60"
    )
    assert item["expires_at"] is not None


@pytest.mark.parametrize(
    "args,code,message",
    [
        (
            ["memory", "put", "--scope", "project", "--key", "k", "--value", "not json"],
            2,
            "--value 'not json' is not valid JSON",
        ),
        (
            [
                "memory",
                "put",
                "--scope",
                "project",
                "--key",
                "k",
                "--value",
                "1",
                "--metadata",
                "[1]",
            ],
            2,
            "--metadata '[1]' must be a JSON object",
        ),
        (["memory", "get", "--scope", "agent", "--key", "k"], 2, "--scope agent needs --agent-id"),
        (["memory", "get", "--scope", "team", "--key", "k"], 2, "--scope 'team' is not a scope"),
        (
            ["memory", "get", "--scope", "project", "--agent-id", "a", "--key", "k"],
            2,
            "--agent-id is only used with --scope agent",
        ),
        (
            ["memory", "get", "--scope", "project", "--key", "missing"],
            1,
            "no item 'missing' in project=demo",
        ),
        (
            ["memory", "get", "--scope", "project", "--key", "k", "--plugin", "nope"],
            2,
            "unknown plugin 'nope'",
        ),
        (
            ["memory", "get", "--scope", "project", "--key", "", "--plugin", "memory-local"],
            2,
            "key '' must be a non-empty string",
        ),
        (
            ["memory", "get", "--scope", "project", "--key", "k", "--workflow-file", "nope.yaml"],
            2,
            "no workflow file nope.yaml",
        ),
        (["memory", "list-scopes", "--cursor", "bogus"], 2, "cursor 'bogus' was not returned"),
        (["memory", "list-scopes", "--cursor", "²"], 2, "cursor '²' was not returned"),
        (["memory", "list-scopes", "--cursor", "9" * 23], 2, f"cursor '{'9' * 23}' was not"),
        (
            [*PUT, "--value", '"v"', "--metadata", '{"_animus_expires_at": "not-a-date"}'],
            2,
            "metadata key '_animus_expires_at' is reserved: keys starting with '_animus_' "
            "belong to the store machinery; pass ttl_seconds= instead",
        ),
        (
            [*PUT, "--value", '{"text": "a lone \\ud800"}'],
            2,
            "error: value contains the lone surrogate '\\ud800', which is not valid Unicode; "
            "pass valid UTF-8 text\n",
        ),
        (
            # the quoted head is cut inside the key: it is redacted before the cut
            [*PUT, "--value", '{"AKIAIOSFODNN7EXAMPLE": ' + DEEP + "}"],
            2,
            """--value '{"[REDACTED:aws_acce'... is JSON nested too deeply to read""",
        ),
        (
            ["memory", "query", "--scope", "project", "--query", "x", "--top-k", "0"],
            2,
            "Invalid value for '--top-k'",
        ),
        (
            [*PUT, "--value", DEEP],
            2,
            "--value '[[[[[[[[[[[[[[[[[[[['... is JSON nested too deeply to read",
        ),
        (
            [*PUT, "--value", "1", "--metadata", DEEP_OBJECT],
            2,
            "--metadata '{\"a\": [[[[[[[[[[[[[['... is JSON nested too deeply to read",
        ),
        (
            [*PUT, "--value", "[" * 900 + "]" * 900],
            2,
            "a value nests lists or objects too deeply to check for secrets",
        ),
        *(
            (
                [*PUT, "--value", "1", "--ttl", ttl],
                2,
                f"ttl_seconds {ttl} is over the maximum, 3155760000 (100 years)",
            )
            for ttl in ("99999999999999999999", "9999999999999", "3155760001")
        ),
    ],
)
def test_bad_input_is_one_line_and_the_right_exit_code(project, args, code, message):
    result = invoke(*args)
    assert result.exit_code == code, result.output
    assert message in result.stderr
    assert "Traceback" not in result.output
    assert result.stdout == ""


@pytest.mark.parametrize(
    "command",
    [
        [*PUT, "--value", '"v"'],
        ["memory", "export", "--scope", "project"],
        ["memory", "prune", "--scope", "project"],
    ],
)
def test_an_empty_project_id_is_refused_not_replaced_by_the_files(project, command):
    result = invoke(*command, "--project-id", "")
    assert result.exit_code == 2, result.output
    assert result.stderr == "error: --project-id is empty; pass an id or leave the flag out\n"
    assert invoke("memory", "get", "--scope", "project", "--key", "k").exit_code == 1


@pytest.mark.parametrize("kind,flag", [("agent", "--agent-id"), ("task", "--task-id")])
def test_an_empty_agent_or_task_id_names_its_flag(project, kind, flag):
    result = invoke("memory", "get", "--scope", kind, flag, "", "--key", "k")
    assert result.exit_code == 2, result.output
    assert result.stderr == f"error: {flag} is empty; pass an id or leave the flag out\n"


def test_run_refuses_an_empty_task_id(project):
    result = invoke("run", "animus.yaml", "--task-id", "")
    assert result.exit_code == 2, result.output
    assert result.stderr == "error: --task-id is empty; pass a task id or leave the flag out\n"
    assert result.stdout == ""


def test_several_stores_require_plugin(project):
    (project / "animus.yaml").write_text(
        WORKFLOW.replace("stores:\n", "stores:\n  other: {type: sqlite, path: other.db}\n")
    )
    result = invoke("memory", "get", "--scope", "project", "--key", "k")
    assert result.exit_code == 2
    assert "2 stores are available (other, memory-local); choose one with --plugin" in (
        result.stderr
    )


def test_a_corrupt_store_is_a_runtime_error(project):
    db = project / ".animus" / "memory.db"
    db.parent.mkdir()
    db.write_bytes(b"garbage" * 200)
    result = invoke("memory", "put", "--scope", "project", "--key", "k", "--value", "1")
    assert result.exit_code == 1
    assert "is not a usable animus SQLite store" in result.stderr
    assert db.read_bytes() == b"garbage" * 200


def test_debug_shows_the_traceback(project):
    result = invoke(
        "--debug", "memory", "put", "--scope", "project", "--key", "k", "--value", "nope"
    )
    assert result.exit_code != 0
    assert result.exception is not None


def test_validate_and_schema(project):
    ok = invoke("validate", "animus.yaml")
    assert ok.exit_code == 0 and "ok (project demo" in ok.stdout
    (project / "bad.yaml").write_text(WORKFLOW.replace("agent: a", "agent: b"))
    bad = invoke("validate", "bad.yaml")
    assert bad.exit_code == 2
    assert bad.stderr.startswith("error: bad.yaml:6:") and "unknown agent 'b'" in bad.stderr
    schema = json.loads(invoke("schema").stdout)
    assert schema["properties"]["version"]


def _animus(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    exe = Path(sys.executable).with_name("animus")
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    return subprocess.run(
        [str(exe), *args], cwd=cwd, capture_output=True, text=True, env=env, timeout=60
    )


def test_the_installed_console_script_end_to_end(project):
    put = _animus(
        "memory",
        "put",
        "--scope",
        "agent",
        "--agent-id",
        "ünï",
        "--key",
        "k",
        "--value",
        '"walrus facts"',
        "--json",
        cwd=project,
    )
    assert put.returncode == 0, put.stderr
    assert json.loads(put.stdout)["scope"]["agent_id"] == "ünï"
    query = _animus(
        "memory",
        "query",
        "--scope",
        "agent",
        "--agent-id",
        "ünï",
        "--query",
        "walrus",
        "--json",
        cwd=project,
    )
    assert [hit["key"] for hit in json.loads(query.stdout)["hits"]] == ["k"]
    missing = _animus("memory", "get", "--scope", "project", "--key", "nope", cwd=project)
    assert missing.returncode == 1 and missing.stderr.count("\n") == 1
    delete = ["memory", "delete", "--scope", "agent", "--agent-id", "ünï", "--key", "k", "--json"]
    deleted = _animus(*delete, cwd=project)
    assert (deleted.returncode, json.loads(deleted.stdout)) == (0, {"deleted": True})
    again = _animus(*delete, cwd=project)
    assert (again.returncode, json.loads(again.stdout)) == (0, {"deleted": False})
    bad = _animus("memory", "put", "--scope", "project", "--key", "k", "--value", "{", cwd=project)
    assert bad.returncode == 2 and "Traceback" not in bad.stderr
    usage = _animus("memory", "put", "--bogus", cwd=project)
    assert usage.returncode == 2


@pytest.mark.parametrize(
    "args,line",
    [
        (
            ["memory", "query", "--scope", "project", "--top-k", "abc"],
            "error: Invalid value for '--top-k': Input should be a valid integer, unable to "
            "parse string as an integer (got 'abc'); see 'animus memory query --help'",
        ),
        (
            ["memory", "list-scopes", "--limit=5000"],
            "error: Invalid value for '--limit': Input should be less than or equal to 1000 "
            "(got '5000'); see 'animus memory list-scopes --help'",
        ),
        (
            ["memory", "query", "--scope", "project", "--topk", "3"],
            "error: No such option: --topk (Possible options: --scope, --top-k); "
            "see 'animus memory query --help'",
        ),
        (["memroy"], "error: No such command 'memroy'. Did you mean 'memory'? see 'animus --help'"),
    ],
)
def test_bad_flags_and_commands_are_one_line_naming_what_was_typed(project, args, line):
    result = _animus(*args, cwd=project)
    assert result.returncode == 2
    assert result.stdout == "" and result.stderr.splitlines() == [line]


def test_a_command_group_run_bare_shows_its_help(project):
    result = _animus("memory", cwd=project)
    assert result.returncode == 2
    assert result.stderr.startswith("Usage: animus memory [OPTIONS] COMMAND")
    assert "list-scopes" in result.stderr


@pytest.mark.parametrize("agent", ["x\nerror: fake", "ab\x01", "a\u2028b"])
def test_scope_ids_with_control_characters_are_refused(project, agent):
    put = _animus(
        *("memory", "put", "--scope", "agent", "--agent-id", agent),
        *("--key", "k", "--value", '"v"'),
        cwd=project,
    )
    assert put.returncode == 2
    (line,) = put.stderr.splitlines()  # the id cannot forge a second line
    assert line.startswith("error: scope agent_id ") and "control character" in line
    assert "stored" not in put.stdout


def test_scope_ids_holding_a_secret_are_refused(project):
    put = _animus(
        *("memory", "put", "--scope", "task", "--task-id", "ghp_" + "a1" * 18),
        *("--key", "k", "--value", '"v"'),
        cwd=project,
    )
    assert put.returncode == 2
    assert put.stderr.splitlines() == [
        "error: scope task_id '[REDACTED:github_token]' holds a secret (github_token); use an id "
        "that names the project, agent or task, and keep secrets out of ids"
    ]


@pytest.mark.parametrize(
    "agent,shown",
    [
        ("x/task=y", "project=demo/agent='x/task=y'"),
        ("ünï 100%_x", "project=demo/agent=ünï 100%_x"),
    ],
)
def test_scope_ids_that_could_blur_the_output_are_shown_quoted(project, agent, shown):
    put = _animus(
        *("memory", "put", "--scope", "agent", "--agent-id", agent),
        *("--key", "k", "--value", '"v"'),
        cwd=project,
    )
    assert put.returncode == 0, put.stderr
    assert put.stdout.splitlines() == [f"stored 'k' in {shown}"]
    listed = _animus("memory", "list-scopes", cwd=project)
    assert shown in listed.stdout.splitlines()


def _on_a_terminal(args: list[str], answer: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """`animus ARGS` with its stdin and stdout on a pseudo-terminal (util-linux `script`)."""
    exe = Path(sys.executable).with_name("animus")
    command = " ".join([str(exe), *args])
    return subprocess.run(
        ["script", "-qec", command, "/dev/null"],
        input=answer,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONWARNINGS": "ignore"},
    )


def test_prune_asks_on_a_terminal_and_deletes_nothing_unless_told_yes(project):
    invoke("memory", "put", "--scope", "project", "--key", "k", "--value", "1")
    refused = _on_a_terminal(["memory", "prune", "--scope", "project"], "n\n", project)
    assert "delete all 1 item(s) of project=demo?" in refused.stdout
    assert refused.returncode == 1 and "aborted" in refused.stdout
    assert run_json("memory", "get", "--scope", "project", "--key", "k")["value"] == 1
    told = _on_a_terminal(["memory", "prune", "--scope", "project", "--yes"], "", project)
    assert told.returncode == 0 and "deleted 1 item(s)" in told.stdout
    assert "--yes" in invoke("memory", "prune", "--help").stdout
    assert "EVERY item" in invoke("memory", "prune", "--help").stdout


def test_reindex_rebuilds_the_index_of_a_sqlite_store(project):
    invoke("memory", "put", "--scope", "project", "--key", "k", "--value", '"exploring Lisbon"')
    assert run_json("memory", "reindex") == {"reindexed": 1}
    hits = run_json("memory", "query", "--scope", "project", "--query", "explored")["hits"]
    assert [hit["key"] for hit in hits] == ["k"]
