"""Bad input found by trying the package as an attacker would: each gets one bounded line, the
right exit code, and nothing stored (issue 25's reproductions)."""

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from animus_flows.config.loader import MAX_VALUES, parse_workflow
from animus_flows.errors import ConfigError, InvalidRequest
from animus_flows.protocol import Scope
from animus_flows.redaction import redact, redact_item
from animus_flows.stores import SQLiteStore, SyncStore
from animus_flows.stores.redacting import RedactingStore

AWS = "AKIAIOSFODNN7EXAMPLE"
GITHUB = "ghp_" + "a1B2" * 9

# -- secrets everywhere in a value ------------------------------------------------------------


def test_secrets_in_object_keys_are_redacted_in_values_and_metadata():
    value, metadata = redact_item({AWS: "x", "nested": {f"k {GITHUB}": 1}}, {AWS: "y"})
    assert value == {"[REDACTED:aws_access_key]": "x", "nested": {"k [REDACTED:github_token]": 1}}
    assert metadata == {
        "[REDACTED:aws_access_key]": "y",
        "_redaction_count": 3,
        "_redaction_types": ["aws_access_key", "github_token"],
    }


def test_two_secret_keys_redacted_alike_stay_two_keys():
    value, _ = redact_item({AWS: 1, "AKIAIOSFODNN7EXAMPL2": 2})
    assert sorted(value.values()) == [1, 2]


@pytest.mark.parametrize(
    "held", [["hunter2", "hunter3"], {"old": "hunter2"}, 12345678, 3.5, "hunter2!"]
)
def test_whatever_a_password_named_key_holds_is_redacted(held):
    value, metadata = redact_item({"db": {"password": held}, "api_key": held})
    assert value == {"db": {"password": "[REDACTED:password]"}, "api_key": "[REDACTED:api_key]"}
    assert metadata is None or metadata["_redaction_count"] == 2


def test_flags_and_placeholders_under_a_password_name_stay():
    value, _ = redact_item({"password": None, "require_password": True, "token": "${TOKEN}"})
    assert value == {"password": None, "require_password": True, "token": "${TOKEN}"}


@pytest.mark.parametrize(
    "text, kept",
    [
        ("Authorization: BEARER abcdef0123456789abcdef", "Authorization: BEARER "),
        ("redis://:s3cretpass@cache.internal:6379/0", "redis://:"),
        ("https://u:p/ss@host.example/path", "https://u:"),
        ("https://user:p@ss99@host.example", "https://user:"),
    ],
)
def test_schemes_and_url_passwords_in_any_shape_are_redacted(text, kept):
    found = redact(text)
    assert found.count == 1 and found.text.startswith(kept)
    assert "[REDACTED:" in found.text and "s3cret" not in found.text and "ss99" not in found.text


def test_a_port_before_a_path_with_an_at_is_no_password():
    assert redact("https://registry.example:443/@scope/pkg").count == 0


def test_json_encoded_inside_a_string_is_redacted_inside():
    inner = json.dumps({"access_token": "tok-9f8e7d6c5b4a", "user": "ann"})
    value, _ = redact_item({"content": json.dumps(inner)})  # encoded twice
    decoded = json.loads(json.loads(value["content"]))
    assert decoded == {"access_token": "[REDACTED:secret]", "user": "ann"}


# -- identities ---------------------------------------------------------------------------------


@pytest.fixture
def store(tmp_path):
    with SyncStore(RedactingStore(SQLiteStore(tmp_path / "m.db"))) as store:
        yield store


@pytest.mark.parametrize("key", ["a\nerror: forged", "tab\there", "bell\x07", "line\u2028sep"])
def test_a_key_with_a_control_character_is_refused(store, key):
    with pytest.raises(InvalidRequest, match="control character"):
        store.put(Scope("p"), key, "v")
    assert store.query(Scope("p"), "", top_k=5) == []


def test_a_key_or_scope_id_holding_a_secret_is_refused_and_nothing_stored(store):
    with pytest.raises(InvalidRequest, match=r"key 'deploy/\[REDACTED:aws_access_key\]'"):
        store.put(Scope("p"), f"deploy/{AWS}", "v")
    with pytest.raises(InvalidRequest, match=r"scope task_id '\[REDACTED:github_token\]'"):
        Scope("p", task_id=GITHUB)
    assert store.list_scopes().scopes == []


@pytest.mark.parametrize(
    "name",
    ["Sensitivity", "sensitivity ", " SENSITIVITY", "sensitivty", "sensitivit", "snsitivity"],
)
def test_a_misspelt_sensitivity_is_refused_not_read_as_public(store, name):
    with pytest.raises(InvalidRequest, match="did you mean 'sensitivity'"):
        store.put(Scope("p"), "k", "secret plan", metadata={name: "secret"})
    assert store.get(Scope("p"), "k") is None


def test_names_merely_like_sensitivity_are_fine(store):
    store.put(Scope("p"), "k", "v", metadata={"sensitive": True, "sensitivity_note": "x"})
    assert store.get(Scope("p"), "k").metadata["sensitive"] is True


# -- the workflow file ----------------------------------------------------------------------------


def _bomb(levels: int = 8) -> str:
    lines = ["version: 1", "a0: &a0 [x, x, x, x, x, x, x, x, x]"]
    for n in range(1, levels):
        lines.append(f"a{n}: &a{n} [" + ", ".join([f"*a{n - 1}"] * 9) + "]")
    return "\n".join(lines) + "\n"


def _error(text: str) -> str:
    with pytest.raises(ConfigError) as raised:
        parse_workflow(text, "w.yaml")
    return str(raised.value)


def test_an_alias_bomb_is_refused_before_it_expands():
    assert len(_bomb()) < 600
    started = time.monotonic()
    message = _error(_bomb())
    assert time.monotonic() - started < 1
    assert message.startswith("w.yaml:") and f"more than {MAX_VALUES} values" in message
    assert "\n" not in message and len(message) < 200


def test_an_expanded_value_is_quoted_short():
    text = "version: 1\nx: &a [yyyy, yyyy, yyyy, yyyy]\nproject: [*a, *a, *a, *a, *a, *a]\n"
    line = _error(text).splitlines()[-1]
    assert line.startswith("w.yaml:3:10: project: must be a string, got [[")
    assert line.endswith("...") and len(line) < 160


@pytest.mark.parametrize(
    "text, expected",
    [
        ("version: 1\nproject: " + "[" * 3000 + "]" * 3000 + "\n", "nest more than 64 levels"),
        (
            "version: 1\nbudget: {flow_tokens: " + "9" * 5000 + "}\n",
            "2:23: invalid YAML: the number 99999999999999999999... has 5000 digits",
        ),
        (
            "version: 1\nproject: a\x00b\n",
            "2:11: invalid YAML: the character '\\x00' is not allowed",
        ),
        ("version: true\n", "1:10: version: must be the integer 1, got 'True'"),
        ("version: 1.0\n", "1:10: version: must be the integer 1, got '1.0'"),
        ("version: 1\nx: &a [1, *a]\n", "an alias refers to a value that contains it"),
    ],
)
def test_hostile_documents_get_one_located_line(text, expected):
    message = _error(text)
    assert expected in message and "\n" not in message and len(message) < 200


LABEL_CLASH = """\
version: 1
stores: {m: {type: sqlite}}
agents:
  a:
    memory_bindings:
      - {plugin: m, binding: ctx, inject_when: {phases: [p]}}
workflows:
  w:
    memory_bindings:
      - {plugin: m, binding: ctx, scope: {kind: project}}
    phases:
      - {id: p, agent: a, prompt: x}
      - {id: q, agent: a, prompt: y}
"""


def test_two_bindings_of_one_phase_may_not_share_a_label():
    assert _error(LABEL_CLASH) == (
        "w.yaml:10:30: workflows.w.memory_bindings[0].binding: label 'ctx' is also "
        "agents.a.memory_bindings[0]'s, and both apply to phase 'p'; bindings of one phase share "
        "a budget and an audit line by label: give each a distinct label"
    )
    # when they never meet in a phase, the same label is fine
    parse_workflow(
        LABEL_CLASH.replace("phases: [p]", "phases: [q_only]")
        .replace("{id: q, agent: a", "{id: q_only, agent: b")
        .replace("agents:\n", "agents:\n  b: {}\n"),
        "w.yaml",
    )


# -- through the real CLI and plugin server -----------------------------------------------------


def _run(*args: str, cwd: Path, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "animus_flows", *args],
        cwd=cwd,
        input=stdin,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONWARNINGS": "ignore"},
        timeout=60,
    )


def test_validate_answers_an_alias_bomb_with_one_short_line(tmp_path):
    (tmp_path / "animus.yaml").write_text(_bomb(9))
    result = _run("validate", "animus.yaml", cwd=tmp_path)
    assert result.returncode == 2 and result.stdout == ""
    (line,) = result.stderr.splitlines()
    assert "more than 100000 values" in line and len(line) < 220


def test_memory_serve_redacts_what_it_stores(tmp_path):
    (tmp_path / "animus.yaml").write_text(
        "version: 1\nproject: demo\nstores:\n  local: {type: sqlite, path: m.db}\n"
    )
    put = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "memory/put",
        "params": {
            "scope": {"project_id": "demo"},
            "key": "creds",
            "value": {"content": f"deploy with {AWS}", AWS: "x"},
            "metadata": {"password": "hunter2!"},
        },
    }
    result = _run(
        "memory", "serve", "--plugin", "local", cwd=tmp_path, stdin=json.dumps(put) + "\n"
    )
    assert result.returncode == 0, result.stderr
    answer = json.loads(result.stdout)["result"]
    assert AWS not in result.stdout and "hunter2" not in result.stdout
    assert answer["metadata"]["_redaction_count"] == 3
    with SyncStore(SQLiteStore(tmp_path / "m.db")) as raw:  # what is on disk
        item = raw.get(Scope("demo"), "creds")
    assert AWS not in json.dumps(item.to_json()) and "hunter2" not in json.dumps(item.to_json())
