"""Seed 003's durable backend on the session's PostgreSQL cluster: a memory's whole history,
versioned updates racing from several processes, the environment's configuration, and a DSN
that no error shows."""

import itertools
import sys
import textwrap

import pytest
from helpers import race_to_one_version, record_a_memorys_whole_life

from animus_flows.errors import ConfigError, ConflictError, StoreUnavailable
from animus_flows.memory import MemoryLayer
from animus_flows.protocol import Scope
from animus_flows.stores import SyncStore
from animus_flows.stores.postgres import PostgresStore

SECRET = "s3cret-Pa55word"
_workspaces = itertools.count()


@pytest.fixture(autouse=True)
def no_backend_in_the_environment(monkeypatch):
    monkeypatch.delenv("ANIMUS_MEMORY_BACKEND", raising=False)
    monkeypatch.delenv("ANIMUS_DATABASE_URL", raising=False)


@pytest.fixture(scope="module")
def url(postgres_cluster) -> str:
    """A database of its own: the durable layer keeps its store in the default schema."""
    return postgres_cluster.create_database("animus_durable")


@pytest.fixture
def workspace() -> str:
    return f"ws{next(_workspaces)}"


def durable(url: str, workspace: str) -> MemoryLayer:
    return MemoryLayer(backend="durable", database_url=url, workspace_id=workspace)


def test_every_change_of_a_memory_is_in_the_postgresql_ledger(url, workspace):
    with durable(url, workspace) as layer:
        assert isinstance(layer.store.inner, PostgresStore)
        note, _ = record_a_memorys_whole_life(layer)
        stale = layer.remember("The deploy window is 14:00")
        fresh = layer.get_memory(stale.id)
        fresh.content = "The deploy window is 15:00"
        layer.update_memory(fresh, expected_version=fresh.ledger_version)
        stale.content = "The deploy window is 16:00"
        with pytest.raises(ConflictError, match="is at version 2, not the expected version 1"):
            layer.update_memory(stale, expected_version=1)
        assert layer.get_memory(stale.id).content == "The deploy window is 15:00"
    with SyncStore(PostgresStore(url)) as store:  # the schema's ledger, read by a plain store
        assert len(store.ledger_events(Scope(workspace), note.id)) == 4


RACER = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from animus_flows.errors import ConflictError
    from animus_flows.memory import MemoryLayer

    url, workspace, memory_id, go, name = sys.argv[1:]
    with MemoryLayer(backend="durable", database_url=url, workspace_id=workspace) as layer:
        memory = layer.get_memory(memory_id)
        memory.content = f"The on-call engineer is {name}"
        print("ready", flush=True)
        while not Path(go).exists():
            time.sleep(0.001)
        try:
            layer.update_memory(memory, expected_version=memory.ledger_version)
        except ConflictError as exc:
            print("conflict", exc, flush=True)
        else:
            print("won", memory.ledger_version, flush=True)
    """
)


def test_processes_racing_on_one_version_let_exactly_one_write(url, workspace, tmp_path):
    with durable(url, workspace) as layer:
        note = layer.remember("The on-call engineer is Ada")
    racer = [sys.executable, "-c", RACER, url, workspace, note.id, str(tmp_path / "go")]
    winner, outputs = race_to_one_version(racer, tmp_path / "go")
    for n, out in enumerate(outputs):
        if n != winner:
            assert out.startswith(
                f"conflict key '{note.id}' in project={workspace} is at version 2"
            )
    with durable(url, workspace) as layer:
        assert layer.get_memory(note.id).content == f"The on-call engineer is writer-{winner}"
        assert [r.op for r in layer.get_ledger_events(note.id)] == ["create", "update"]


def test_the_environment_opens_the_postgresql_store(url, workspace, monkeypatch):
    monkeypatch.setenv("ANIMUS_MEMORY_BACKEND", "durable")
    monkeypatch.setenv("ANIMUS_DATABASE_URL", url)
    with MemoryLayer(workspace_id=workspace) as layer:
        assert isinstance(layer.store.inner, PostgresStore)
        note = layer.remember("configured by the environment")
        assert [r.op for r in layer.get_ledger_events(note.id)] == ["create"]
    monkeypatch.setenv("ANIMUS_DATABASE_URL", url.replace("postgresql://", "postgres://"))
    with MemoryLayer(workspace_id=workspace) as layer:
        assert layer.get_memory(note.id).content == "configured by the environment"


@pytest.mark.parametrize(
    ("url", "error", "message"),
    [
        (
            f"postgresql://app:{SECRET}@127.0.0.1:1/prod",
            StoreUnavailable,
            "PostgreSQL store (schema animus): cannot reach PostgreSQL",
        ),
        (
            f"postgresql://app:{SECRET}@127.0.0.1:1/prod?sslmode=nonsense",
            StoreUnavailable,
            "PostgreSQL store (schema animus): cannot reach PostgreSQL",
        ),
        (
            f"postgresql://app:{SECRET}@127.0.0.1:1/prod?no_such_option={SECRET}",
            ConfigError,
            "ANIMUS_DATABASE_URL: PostgreSQL store (schema animus): the DSN is not a PostgreSQL "
            "connection string",
        ),
    ],
    ids=["unreachable", "bad-option-value", "unknown-option"],
)
def test_no_error_shows_the_database_url(monkeypatch, workspace, url, error, message):
    monkeypatch.setenv("ANIMUS_MEMORY_BACKEND", "durable")
    monkeypatch.setenv("ANIMUS_DATABASE_URL", url)
    with pytest.raises(error) as raised, MemoryLayer(workspace_id=workspace) as layer:
        layer.remember("never written")
    shown = str(raised.value)
    assert shown.startswith(message)
    assert SECRET not in shown and url not in shown and "\n" not in shown
