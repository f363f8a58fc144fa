"""Seed 003's durable backend on real SQLite files: backends from arguments and the environment,
the ledger through the layer, optimistic updates that conflict (racing threads), redaction, and
configurations that cannot work."""

import sqlite3
import threading
from pathlib import Path

import pytest
from helpers import record_a_memorys_whole_life

from animus_flows.errors import ConfigError, ConflictError, InvalidRequest
from animus_flows.ledger import LedgerStore
from animus_flows.memory import AsyncMemoryLayer, MemoryLayer
from animus_flows.protocol import Scope
from animus_flows.stores import SQLiteLedgerStore, SQLiteStore, SyncStore

SECRET = "AKIAIOSFODNN7EXAMPLE"


@pytest.fixture(autouse=True)
def no_backend_in_the_environment(monkeypatch):
    monkeypatch.delenv("ANIMUS_MEMORY_BACKEND", raising=False)
    monkeypatch.delenv("ANIMUS_DATABASE_URL", raising=False)


@pytest.fixture
def url(tmp_path) -> str:
    return f"sqlite:///{tmp_path / 'durable.db'}"


def durable(url: str, workspace_id: str = "ws") -> MemoryLayer:
    return MemoryLayer(backend="durable", database_url=url, workspace_id=workspace_id)


def test_every_change_of_a_memory_is_in_its_ledger(url, tmp_path):
    with durable(url) as layer:
        assert layer.scope == Scope("ws")
        note, records = record_a_memorys_whole_life(layer)
        assert records[0].to_json()["memory"]["content"] == "Releases go out on Fridays"
        assert layer.get_ledger_events("no-such-memory") == []
    with SyncStore(SQLiteLedgerStore(tmp_path / "durable.db")) as store:  # the file's ledger
        assert len(store.ledger_events(Scope("ws"), note.id)) == 4


def test_a_recall_is_a_change_and_history_is_another_thing(url):
    with durable(url) as layer:
        first = layer.remember("The harbour crane is red")
        second = layer.update_with_version(first.id, content="The harbour crane is blue")
        (recalled,) = layer.recall("harbour crane")
        assert recalled.id == second.id and recalled.access_count == 1
        assert [m.version for m in layer.history(second.id)] == [1, 2]  # the version chain
        # each record has a ledger of its own: the new version was created, then recalled
        assert [(r.op, r.version) for r in layer.get_ledger_events(second.id)] == [
            ("create", 1), ("update", 2)
        ]  # fmt: skip
        # the parent was created, then moved to COLD and linked when the new version came
        parent = layer.get_ledger_events(first.id)
        assert [r.op for r in parent] == ["create", "update"]
        assert parent[-1].memory.superseded_by == second.id


@pytest.mark.parametrize("form", ["plain path", "path object", "absolute sqlite url"])
def test_database_urls_name_a_sqlite_file(tmp_path, form):
    path = tmp_path / "sub" / "durable.db"
    url = {
        "plain path": str(path),
        "path object": path,
        "absolute sqlite url": "sqlite:///" + str(path),  # sqlite:////tmp/...
    }[form]
    with durable(url) as layer:
        assert isinstance(layer.store, LedgerStore)
        layer.remember("kept in the file")
    assert path.is_file()


def test_the_environment_chooses_the_backend(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("ANIMUS_MEMORY_BACKEND", "durable")
    monkeypatch.setenv("ANIMUS_DATABASE_URL", "sqlite:///env.db")
    with MemoryLayer(workspace_id="ws") as layer:
        assert isinstance(layer.store, LedgerStore)
        note = layer.remember("configured by the environment")
        assert [r.op for r in layer.get_ledger_events(note.id)] == ["create"]
    assert (tmp_path / "env.db").is_file()
    with MemoryLayer(backend="sqlite", workspace_id="ws") as layer:  # arguments win
        assert not isinstance(layer.store, LedgerStore)
        assert layer.get_memory(note.id).content == "configured by the environment"
    with SyncStore(SQLiteStore(tmp_path / "other.db")) as store:  # a store passed is used
        assert not isinstance(MemoryLayer(store, Scope("ws")).store, LedgerStore)
    monkeypatch.setenv("ANIMUS_MEMORY_BACKEND", "sqlite")
    monkeypatch.delenv("ANIMUS_DATABASE_URL")
    with MemoryLayer(scope=Scope("ws", agent_id="dev")) as layer:
        layer.remember("in the default file")
    assert (tmp_path / ".animus" / "memory.db").is_file()


def test_a_stale_expected_version_conflicts_and_writes_nothing(url):
    with durable(url) as mine, durable(url) as theirs:
        note = mine.remember("The deploy window is 14:00")
        read = mine.get_memory(note.id)
        copy = theirs.get_memory(note.id)
        copy.content = "The deploy window is 15:00"
        assert theirs.update_memory(copy, expected_version=copy.ledger_version)
        read.content = "The deploy window is 16:00"
        with pytest.raises(ConflictError) as raised:
            mine.update_memory(read, expected_version=read.ledger_version)
        assert str(raised.value) == (
            f"key '{note.id}' in project=ws is at version 2, not the expected version 1: "
            "another writer changed it since it was read, and nothing was written; read it "
            "again and retry with its current version"
        )
        assert mine.get_memory(note.id).content == "The deploy window is 15:00"
        assert len(mine.get_ledger_events(note.id)) == 2
        fresh = mine.get_memory(note.id)  # read again and retry: it lands
        fresh.content = "The deploy window is 16:00"
        assert mine.update_memory(fresh, expected_version=fresh.ledger_version)
        assert fresh.ledger_version == 3


def test_two_threads_racing_on_one_version_let_exactly_one_write(url):
    with durable(url) as layer:
        note = layer.remember("The on-call engineer is Ada")
    start = threading.Barrier(2)
    outcomes: dict[str, object] = {}

    def writer(name: str) -> None:
        with durable(url) as own:  # its own store: its own connection to the file
            memory = own.get_memory(note.id)
            memory.content = f"The on-call engineer is {name}"
            start.wait()
            try:
                outcomes[name] = own.update_memory(memory, expected_version=1)
            except ConflictError as exc:
                outcomes[name] = exc

    threads = [threading.Thread(target=writer, args=(name,)) for name in ("Grace", "Linus")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    winners = [name for name, outcome in outcomes.items() if outcome is True]
    assert len(winners) == 1, outcomes
    (loser,) = set(outcomes) - set(winners)
    assert isinstance(outcomes[loser], ConflictError)
    with durable(url) as layer:
        assert layer.get_memory(note.id).content == f"The on-call engineer is {winners[0]}"
        assert [r.op for r in layer.get_ledger_events(note.id)] == ["create", "update"]


def test_the_ledger_never_keeps_an_unredacted_secret(url, tmp_path):
    with durable(url) as layer:
        note = layer.remember(f"deploy with {SECRET}", metadata={"hint": f"api_key={SECRET}"})
        note.content = f"rotate {SECRET} on Friday"
        layer.update_memory(note, expected_version=note.ledger_version)
        layer.update_with_version(note.id, content=f"rotated {SECRET}")
        records = layer.get_ledger_events(note.id)
        assert records and SECRET not in repr(records)
        assert "[REDACTED:aws_access_key]" in records[-1].memory.content
    with sqlite3.connect(tmp_path / "durable.db") as conn:
        dump = "\n".join(conn.iterdump())
    assert "[REDACTED:aws_access_key]" in dump and SECRET not in dump


async def test_the_async_layer_opens_the_durable_backend_too(url):
    layer = AsyncMemoryLayer(backend="durable", database_url=url, workspace_id="ws")
    note = await layer.remember("async and durable")
    note.tier = "hot"
    assert await layer.update_memory(note, expected_version=1)
    assert [r.version for r in await layer.get_ledger_events(note.id)] == [1, 2]
    await layer.store.aclose()


def test_a_plain_layer_keeps_working_without_a_ledger(tmp_path):
    with SyncStore(SQLiteStore(tmp_path / "plain.db")) as store:
        layer = MemoryLayer(store, Scope("ws"))
        note = layer.remember("no ledger here")
        assert note.ledger_version is None and layer.get_memory(note.id).ledger_version is None
        note.content = "changed"
        with pytest.raises(InvalidRequest) as raised:
            layer.update_memory(note, expected_version=1)
        assert str(raised.value).startswith(
            "update_memory(..., expected_version=...) needs a store that keeps a ledger: "
            "MemoryLayer(backend='durable', database_url=...)"
        )
        with pytest.raises(InvalidRequest, match="get_ledger_events needs a store that keeps"):
            layer.get_ledger_events(note.id)
        assert layer.get_memory(note.id).content == "no ledger here"  # nothing was written
        assert layer.update_memory(note) is True  # and without expected_version, as before


@pytest.mark.parametrize("expected", [0, -1, True, "1", 1.0], ids=repr)
def test_a_bad_expected_version_is_refused_before_anything_is_written(url, expected):
    with durable(url) as layer:
        note = layer.remember("unchanged")
        note.content = "changed"
        with pytest.raises(InvalidRequest, match=r"expected_version .* must be an integer >= "):
            layer.update_memory(note, expected_version=expected)
        assert layer.get_memory(note.id).content == "unchanged"
        assert len(layer.get_ledger_events(note.id)) == 1


BAD_CONFIGURATIONS = [
    (
        {"backend": "durable", "workspace_id": "ws"},
        {},
        "backend 'durable' needs database_url= (or ANIMUS_DATABASE_URL): sqlite:///PATH (or a "
        "file path) or postgresql://USER@HOST/DB",
    ),
    (
        {"backend": "chroma", "workspace_id": "ws"},
        {},
        "backend 'chroma' is not a memory backend; use 'sqlite' (a local file) or 'durable' (a "
        "ledger of every change, with database_url)",
    ),
    (
        {"workspace_id": "ws"},
        {"ANIMUS_MEMORY_BACKEND": "json"},
        "ANIMUS_MEMORY_BACKEND 'json' is not a memory backend; use 'sqlite' (a local file) or "
        "'durable' (a ledger of every change, with database_url)",
    ),
    (
        {"backend": "durable", "database_url": "mysql://app:hunter2@db/prod", "workspace_id": "w"},
        {},
        "database_url 'mysql://app:[REDACTED:url_password]@db/prod' has the scheme 'mysql', "
        "which no memory store speaks; use sqlite:///PATH (or a file path) or "
        "postgresql://USER@HOST/DB",
    ),
    (
        {"workspace_id": "ws"},
        {"ANIMUS_MEMORY_BACKEND": "durable", "ANIMUS_DATABASE_URL": "sqlite:///:memory:"},
        "ANIMUS_DATABASE_URL 'sqlite:///:memory:' names no SQLite file; write "
        "sqlite:///relative/path or sqlite:////absolute/path (the store needs a file, shared "
        "by every process)",
    ),
    (
        {"backend": "sqlite", "database_url": "postgresql://app:hunter2@db/prod"},
        {},
        "database_url names a PostgreSQL database, not a SQLite file, and backend 'sqlite' "
        "keeps one; pass backend='durable' (or set ANIMUS_MEMORY_BACKEND=durable) for that "
        "database",
    ),
    (
        {"backend": "sqlite", "database_url": "mysql://app:hunter2@db/prod"},
        {},
        "database_url 'mysql://app:[REDACTED:url_password]@db/prod' is no SQLite file, and "
        "backend 'sqlite' keeps one; pass backend='durable' (or set "
        "ANIMUS_MEMORY_BACKEND=durable) for that database",
    ),
    (
        {"backend": "durable", "database_url": "sqlite:///x.db"},
        {},
        "a layer that opens its backend needs workspace_id= (its memories' project), or "
        "scope=Scope(project_id, agent_id=...)",
    ),
    (
        {"backend": "durable", "database_url": "x.db", "workspace_id": "w", "scope": Scope("w")},
        {},
        "pass workspace_id= or scope=, not both: workspace_id names the scope Scope(workspace_id)",
    ),
    (
        {"store": "a store", "backend": "durable", "workspace_id": "w"},
        {},
        "pass either a store or backend=, workspace_id=, not both: a store passed is used as it is",
    ),
    (
        {"backend": "durable", "database_url": ":memory:", "workspace_id": "w"},
        {},
        "database_url ':memory:' names no SQLite file; write sqlite:///relative/path or "
        "sqlite:////absolute/path (the store needs a file, shared by every process)",
    ),
    ({"backend": "", "workspace_id": "w"}, {}, "backend '' must be a non-empty string, or None"),
]


@pytest.mark.parametrize(("arguments", "environment", "message"), BAD_CONFIGURATIONS)
def test_a_configuration_that_cannot_work_is_one_line_naming_the_fix(
    tmp_path, monkeypatch, arguments, environment, message
):
    monkeypatch.chdir(tmp_path)
    for name, value in environment.items():
        monkeypatch.setenv(name, value)
    arguments = dict(arguments)
    store, scope = arguments.pop("store", None), arguments.pop("scope", None)
    with pytest.raises(ConfigError) as raised:
        MemoryLayer(store, scope, **arguments)
    assert str(raised.value) == message
    assert raised.value.exit_code == 2
    assert list(Path(tmp_path).iterdir()) == []  # nothing was created


def test_a_workspace_id_is_checked_as_a_scope_id(url):
    with pytest.raises(InvalidRequest, match="workspace_id 'a\\\\nb' contains the control"):
        durable(url, workspace_id="a\nb")
