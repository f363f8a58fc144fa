"""`animus memory export|import` and redaction in `animus memory put`, in-process and for real."""

import json
import os
import shutil
import stat
import subprocess
import sys
import threading
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from typer.testing import CliRunner

from animus_flows.cli import app
from animus_flows.memory import MemoryLayer
from animus_flows.protocol import Scope
from animus_flows.stores import SQLiteStore, SyncStore

WORKFLOW = """\
version: 1
project: demo
stores:
  memory-local: {type: sqlite, path: .animus/memory.db}
  other: {type: sqlite, path: .animus/other.db}
agents: {a: {}}
workflows: {w: {phases: [{id: p, agent: a}]}}
"""
LOCAL = ("--plugin", "memory-local")
DEV = ("--scope", "agent", "--agent-id", "dev")


@pytest.fixture
def project(tmp_path, monkeypatch):
    (tmp_path / "animus.yaml").write_text(WORKFLOW)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def invoke(*args: str, stdin: str | None = None):
    return CliRunner().invoke(app, list(args), input=stdin)


def seed(project: Path, scope: Scope, *contents: str) -> list[str]:
    with MemoryLayer(SQLiteStore(project / ".animus" / "memory.db"), scope) as layer:
        return [layer.remember(content, tags=["seeded"]).id for content in contents]


def memories_in(project: Path, db: str, scope: Scope) -> list[str]:
    with MemoryLayer(SQLiteStore(project / ".animus" / db), scope) as layer:
        return sorted(m.content for m in layer.recall("", limit=100))


def test_export_prints_the_document_and_import_reads_it_back(project):
    seed(project, Scope("demo", agent_id="dev"), "first note", "second note")
    exported = invoke("memory", "export", *LOCAL, *DEV)
    assert exported.exit_code == 0, exported.output
    document = json.loads(exported.stdout)
    assert document["format"] == "animus-memories" and document["count"] == 2
    assert document["scope"] == {"project_id": "demo", "agent_id": "dev", "task_id": None}
    (project / "dev.json").write_text(exported.stdout)

    imported = invoke("memory", "import", "dev.json", "--plugin", "other", "--scope", "project")
    assert imported.exit_code == 0, imported.output
    assert imported.stdout == "imported 2 memories into project=demo\n"
    again = invoke(
        "memory", "import", "dev.json", "--plugin", "other", "--scope", "project", "--json"
    )
    assert json.loads(again.stdout) == {"imported": 2, "skipped": 0}
    assert memories_in(project, "other.db", Scope("demo")) == ["first note", "second note"]


def test_export_to_a_file_reports_the_count(project):
    seed(project, Scope("demo"), "shared note")
    result = invoke(
        "memory", "export", *LOCAL, "--scope", "project", "-o", "out/all.json", "--json"
    )
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == {"exported": 1, "path": "out/all.json"}
    assert json.loads((project / "out" / "all.json").read_text())["count"] == 1
    plain = invoke("memory", "export", *LOCAL, "--scope", "project", "--output", "all.json")
    assert plain.stdout == "exported 1 memories from project=demo to all.json\n"


def test_export_through_a_symlink_replaces_its_target_and_keeps_the_link(project):
    seed(project, Scope("demo"), "linked note")
    (project / "real.json").write_text("old")
    (project / "link.json").symlink_to("real.json")
    result = invoke("memory", "export", *LOCAL, "--scope", "project", "-o", "link.json")
    assert result.exit_code == 0, result.output
    assert (project / "link.json").is_symlink()
    assert os.readlink(project / "link.json") == "real.json"
    assert json.loads((project / "real.json").read_text())["count"] == 1
    assert sorted(p.name for p in project.glob("*.json")) == ["link.json", "real.json"]


def test_export_to_a_named_pipe_writes_into_the_pipe(project):
    seed(project, Scope("demo"), "piped note")
    pipe = project / "pipe"
    os.mkfifo(pipe)
    received: list[bytes] = []
    reader = threading.Thread(target=lambda: received.append(pipe.read_bytes()), daemon=True)
    reader.start()
    result = invoke("memory", "export", *LOCAL, "--scope", "project", "-o", "pipe")
    reader.join(timeout=10)
    assert result.exit_code == 0, result.output
    assert json.loads(received[0])["count"] == 1
    assert stat.S_ISFIFO(pipe.lstat().st_mode)  # still the pipe, not a file renamed over it
    assert [p.name for p in project.iterdir() if p.name.startswith(".pipe")] == []


def test_export_to_dash_prints_the_document(project):
    seed(project, Scope("demo"), "printed note")
    result = invoke("memory", "export", *LOCAL, "--scope", "project", "-o", "-")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["count"] == 1
    assert not (project / "-").exists()


@pytest.mark.parametrize(
    ("output", "reason"),
    [
        ("/proc/animus-export.json", "No such file or directory"),
        ("animus.yaml/export.json", "a file is in the way of its folder"),
    ],
)
def test_an_unwritable_output_is_one_line_naming_the_path(project, output, reason):
    seed(project, Scope("demo"), "kept note")
    result = invoke("memory", "export", *LOCAL, "--scope", "project", "-o", output)
    assert result.exit_code == 2, result.output
    assert result.stderr == f"error: cannot write {output} ({reason}); pass a writable file path\n"
    assert result.stdout == ""


def test_import_reads_stdin(project):
    seed(project, Scope("demo", agent_id="dev"), "piped note")
    text = invoke("memory", "export", *LOCAL, *DEV).stdout
    result = invoke("memory", "import", "-", "--plugin", "other", *DEV, stdin=text)
    assert result.exit_code == 0, result.output
    assert memories_in(project, "other.db", Scope("demo", agent_id="dev")) == ["piped note"]


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("{not json", "import data is not valid JSON (Expecting property name"),
        ('{"format": "zip"}', "import data has format 'zip', not 'animus-memories'"),
        (
            '[{"id": "3f2a9c1b-8d7e-4f5a-9b3c-2d1e0f9a8b7c", "content": "ok"}, {"id": "x"}]',
            "memories[1]: missing 'content'; every record needs one",
        ),
        (
            '[{"id": "3f2a9c1b-8d7e-4f5a-9b3c-2d1e0f9a8b7c", "content": "ok", "tier": "tepid"}]',
            "memories[0]: tier 'tepid' is not one of hot, warm, cold",
        ),
        pytest.param(
            '[{"id": "3f2a9c1b-8d7e-4f5a-9b3c-2d1e0f9a8b7c", "content": "a lone \\ud800"}]',
            "value contains the lone surrogate '\\ud800', which is not valid Unicode; "
            "pass valid UTF-8 text",
            id="a-lone-surrogate",
        ),
        pytest.param(
            '[{"id": "ok-1", "content": "ok"}, '
            '{"id": "ghp_16C7e42F292c6912E7710c838347Ae178B4a", "content": "x"}]',
            "memories[1]: key '[REDACTED:github_token]' holds a secret (github_token); name the "
            "memory in its key",
            id="an-id-holding-a-secret",
        ),
        pytest.param(
            '[{"id": "ok-1", "content": "x", "version": 2, "parent_id": "AKIAIOSFODNN7EXAMPLE"}]',
            "memories[0]: parent_id '[REDACTED:aws_access_key]' holds a secret (aws_access_key)",
            id="a-parent-id-holding-a-secret",
        ),
        pytest.param(
            "[" * 100_000 + "]" * 100_000,
            "import data is not a memory export (JSON nested too deeply to read)",
            id="nested-too-deeply",
        ),
        pytest.param(
            json.dumps(
                [
                    {
                        "id": "3f2a9c1b-8d7e-4f5a-9b3c-2d1e0f9a8b7c",
                        "content": "ok",
                        "metadata": {"a": json.loads("[" * 700 + "]" * 700)},
                    }
                ]
            ),
            "a value nests lists or objects too deeply to check for secrets",
            id="a-record-nested-too-deeply",
        ),
    ],
)
def test_bad_import_input_is_exit_2_one_line_and_writes_nothing(project, content, message):
    (project / "bad.json").write_text(content)
    result = invoke("memory", "import", "bad.json", *LOCAL, "--scope", "project")
    assert result.exit_code == 2, result.output
    # the message names the file
    assert result.stderr.startswith(f"error: bad.json: {message}")
    assert result.stderr.count("\n") == 1
    assert result.stdout == ""
    assert memories_in(project, "memory.db", Scope("demo")) == []


def test_import_of_a_missing_file_is_a_usage_error(project):
    result = invoke("memory", "import", "nope.json", *LOCAL, "--scope", "project")
    assert result.exit_code == 2
    assert result.stderr == "error: nope.json: no such file; pass the path of a memory export\n"


def test_export_and_import_follow_the_store_flag_conventions(project):
    unchosen = invoke("memory", "export", "--scope", "project")
    assert unchosen.exit_code == 2 and "choose one with --plugin" in unchosen.stderr
    no_agent = invoke("memory", "export", *LOCAL, "--scope", "agent")
    assert no_agent.exit_code == 2 and "--scope agent needs --agent-id ID" in no_agent.stderr
    (project / "x.json").write_text("[]")
    no_file = invoke(
        "memory",
        "import",
        "x.json",
        *LOCAL,
        "--scope",
        "project",
        "--workflow-file",
        "missing.yaml",
    )
    assert no_file.exit_code == 2 and "no workflow file missing.yaml" in no_file.stderr


def test_put_redacts_secrets_in_the_value_and_metadata(project):
    result = invoke(
        "memory",
        "put",
        *LOCAL,
        "--scope",
        "project",
        "--key",
        "deploy",
        "--value",
        '{"content": "use AKIAIOSFODNN7EXAMPLE", "password": "hunter2"}',
        "--metadata",
        '{"note": "token ghp_16C7e42F292c6912E7710c838347Ae178B4a"}',
        "--json",
    )
    assert result.exit_code == 0, result.output
    item = json.loads(result.stdout)
    assert item["value"] == {
        "content": "use [REDACTED:aws_access_key]",
        "password": "[REDACTED:password]",
    }
    assert item["metadata"] == {
        "note": "token [REDACTED:github_token]",
        "_redaction_count": 3,
        "_redaction_types": ["aws_access_key", "github_token", "password"],
    }
    plain = invoke(
        "memory", "put", *LOCAL, "--scope", "project", "--key", "k", "--value", '"password=hunter2"'
    )
    assert plain.stdout == "stored 'k' in project=demo (1 secret(s) redacted)\n"
    clean = invoke("memory", "put", *LOCAL, "--scope", "project", "--key", "k2", "--value", "1")
    assert clean.stdout == "stored 'k2' in project=demo\n"


@pytest.mark.parametrize(
    ("key", "shown"),
    [
        ("creds/AKIAIOSFODNN7EXAMPLE", "creds/[REDACTED:aws_access_key]"),
        ("password=hunter2", "password=[REDACTED:password]"),
    ],
)
def test_put_refuses_a_key_that_holds_a_secret_and_stores_nothing(project, key, shown):
    put = ("memory", "put", *LOCAL, "--scope", "project")
    refused = invoke(*put, "--key", key, "--value", '"desk credentials"')
    assert refused.exit_code == 2, refused.output
    assert refused.stderr.startswith(f"error: key '{shown}' holds a secret (")
    assert refused.stderr.count("\n") == 1 and "AKIAIOSFODNN7EXAMPLE" not in refused.output
    assert "hunter2" not in refused.output
    found = invoke("memory", "query", *LOCAL, "--scope", "project", "--query", "credentials")
    assert found.stdout == "no hits in project=demo\n"


def _animus(*args: str, cwd: Path, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    exe = Path(sys.executable).with_name("animus")
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    return subprocess.run(
        [str(exe), *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        input=stdin,
    )


def test_export_and_import_as_real_processes(project):
    seed(project, Scope("demo", agent_id="dev"), "process note one", "process note two")
    exported = _animus(
        "memory", "export", *LOCAL, *DEV, "--output", "dev.json", "--json", cwd=project
    )
    assert exported.returncode == 0, exported.stderr
    assert json.loads(exported.stdout) == {"exported": 2, "path": "dev.json"}
    imported = _animus(
        "memory", "import", "dev.json", "--plugin", "other", *DEV, "--json", cwd=project
    )
    assert imported.returncode == 0, imported.stderr
    assert json.loads(imported.stdout) == {"imported": 2, "skipped": 0}
    bad = _animus("memory", "import", "-", *LOCAL, *DEV, cwd=project, stdin="[{]")
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1
    assert bad.stderr.startswith("error: stdin: import data is not valid JSON")
    assert memories_in(project, "other.db", Scope("demo", agent_id="dev")) == [
        "process note one",
        "process note two",
    ]


def test_export_and_import_as_real_processes_keep_expiries_and_skip_expired_records(project):
    put = _animus(
        "memory", "put", *LOCAL, *DEV, "--key", "session-note", "--value", '{"content": "call"}',
        "--ttl", "3600", "--json", cwd=project,
    )  # fmt: skip
    assert put.returncode == 0, put.stderr
    expires = datetime.fromisoformat(json.loads(put.stdout)["expires_at"])
    seed(project, Scope("demo", agent_id="dev"), "never expires")
    exported = _animus("memory", "export", *LOCAL, *DEV, "-o", "dev.json", cwd=project)
    assert exported.returncode == 0, exported.stderr
    document = json.loads((project / "dev.json").read_text())
    gone = {"id": "gone", "content": "too late", "expires_at": "2020-01-01T00:00:00+00:00"}
    document["memories"].append(gone)
    (project / "dev.json").write_text(json.dumps(document))

    other = ("--plugin", "other", *DEV)
    imported = _animus("memory", "import", "dev.json", *other, "--json", cwd=project)
    assert imported.returncode == 0, imported.stderr
    assert json.loads(imported.stdout) == {"imported": 2, "skipped": 1}
    again = _animus("memory", "import", "dev.json", *other, cwd=project)
    assert again.stdout == (
        "imported 2 memories into project=demo/agent=dev (skipped 1 that had expired)\n"
    )
    dev = Scope("demo", agent_id="dev")
    with SyncStore(SQLiteStore(project / ".animus" / "other.db")) as raw:
        assert abs(raw.get(dev, "session-note").expires_at - expires) < timedelta(seconds=2)
        assert raw.get(dev, "gone") is None
        assert raw.get(dev, document["memories"][1]["id"]).expires_at is None  # never expires


TRADE_DESK = Path(__file__).resolve().parents[1] / "examples" / "trade-desk"


def test_what_export_writes_imports_back_with_the_same_keys_and_content(tmp_path):
    # the example's seed items have keys such as "desk-broker-credentials", not UUIDs
    project = tmp_path / "trade-desk"
    shutil.copytree(TRADE_DESK, project, ignore=shutil.ignore_patterns(".animus", "__pycache__"))
    subprocess.run([sys.executable, "seed.py"], cwd=project, check=True, capture_output=True)
    store = ("--workflow-file", "animus.yaml", "--plugin", "memory-local")
    agent = ("--scope", "agent", "--agent-id", "trade-analyst")
    for source, target in [
        (("--scope", "project"), ("--scope", "project", "--project-id", "other")),
        (("--scope", "project"), ("--scope", "project")),  # back into the same scope
        (agent, ("--scope", "agent", "--agent-id", "analyst-copy")),
    ]:
        exported = _animus("memory", "export", *store, *source, "-o", "out.json", cwd=project)
        assert exported.returncode == 0, exported.stderr
        records = json.loads((project / "out.json").read_text())["memories"]
        imported = _animus("memory", "import", "out.json", *store, *target, "--json", cwd=project)
        assert imported.returncode == 0, imported.stderr
        assert json.loads(imported.stdout) == {"imported": len(records), "skipped": 0}
        again = _animus("memory", "export", *store, *target, cwd=project)
        assert json.loads(again.stdout)["memories"] == records, target
    seeded = json.loads((TRADE_DESK / "seed.json").read_text())
    with SyncStore(SQLiteStore(project / ".animus" / "memory.db")) as raw:
        for item in seeded:
            scope = (
                Scope("other")
                if item["scope"] == "project"
                else Scope("trade-desk", agent_id="analyst-copy")
            )
            copy = raw.get(scope, item["key"])
            assert copy.value["content"] == item["value"]["content"], item["key"]
            assert copy.metadata["tier"] == item["metadata"]["tier"]
