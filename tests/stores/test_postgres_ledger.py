"""The PostgreSQL store's ledger: the ledger conformance suite (every check of the store
conformance suite too), a schema of version 1 gaining its ledger, and a version recorded twice
(processes racing through the durable layer: `tests/memory/test_durable_postgres.py`)."""

import asyncio
import itertools
import re
from datetime import UTC, datetime
from pathlib import Path

import psycopg
import pytest

from animus_flows.errors import ConflictError
from animus_flows.protocol import Scope
from animus_flows.stores import SyncStore
from animus_flows.stores.postgres import PostgresStore
from animus_flows.stores.postgres.schema import SCHEMA_VERSION
from animus_flows.testing.ledger import LedgerConformance

_schemas = itertools.count()


@pytest.fixture
def schema(postgres_dsn):
    return f"l{next(_schemas)}"


class TestPostgresLedgerConformance(LedgerConformance):
    @pytest.fixture
    def store(self, postgres_dsn, schema):
        return PostgresStore(postgres_dsn, schema=schema)


#: A schema written before the ledger (see the file's header).
SCHEMA_1_DUMP = Path(__file__).parent / "data" / "postgres_schema1.sql"
LEGACY, DEV = Scope("legacy"), Scope("legacy", agent_id="dev")


def load_schema_1(dsn: str, schema: str) -> None:
    script = SCHEMA_1_DUMP.read_text().replace("animus_schema1", schema)
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(script)


def test_a_schema_of_version_1_gains_its_ledger_each_live_item_at_version_1(postgres_dsn, schema):
    load_schema_1(postgres_dsn, schema)
    before = datetime.now(UTC)
    with SyncStore(PostgresStore(postgres_dsn, schema=schema)) as store:
        (plain,) = store.ledger_events(LEGACY, "plain")
        item = store.get(LEGACY, "plain")
        assert (plain.version, plain.op, plain.value, plain.metadata) == (
            1, "create", "written by schema 1 before the ledger", {"tier": "hot"}
        )  # fmt: skip
        assert plain.valid_from == item.updated_at < before <= plain.recorded_at
        assert plain.valid_to is None
        (century,) = store.ledger_events(DEV, "century")
        assert century.valid_to == store.get(DEV, "century").expires_at
        # an item that had expired has no history: its last state ended before the ledger
        expired = Scope("legacy", agent_id="dev", task_id="T-1")
        assert store.ledger_events(expired, "expired") == []
        assert [hit.key for hit in store.query(DEV, "exploring harbours")] == ["harbour"]
        assert store.get_versioned(DEV, "harbour").version == 1
        assert store.put_versioned(LEGACY, "plain", "ledgered", expected_version=1).version == 2
        assert store.put_versioned(expired, "expired", "again", expected_version=0).version == 1
    migrated = f'SELECT version FROM "{schema}".schema_migrations ORDER BY version'
    with psycopg.connect(postgres_dsn) as conn:
        versions = [version for (version,) in conn.execute(migrated)]
    assert versions == list(range(1, SCHEMA_VERSION + 1))


async def test_a_version_another_writer_recorded_first_is_a_conflict(postgres_dsn, schema):
    """Writers record a key's versions in turn, under their scope's lock; a writer that took no
    lock and recorded the version first still makes the second writer's record a conflict."""
    store, scope = PostgresStore(postgres_dsn, schema=schema), Scope("p")
    await store.put(scope, "other", "makes the scope")
    async with await psycopg.AsyncConnection.connect(postgres_dsn) as rogue:
        await rogue.execute(
            f'INSERT INTO "{schema}".ledger (scope_id, key, version, op, value, metadata,'
            " valid_from, recorded_at) SELECT id, 'k', 1, 'create', '\"theirs\"', '{}', now(),"
            f" now() FROM \"{schema}\".scopes WHERE project_id = 'p'"
        )
        write = asyncio.ensure_future(store.put_versioned(scope, "k", "mine", expected_version=0))
        async with asyncio.timeout(30):  # until the write waits for the rogue's version 1
            while not await _waiting_for_a_lock(rogue):
                await asyncio.sleep(0.01)
        await rogue.commit()
    with pytest.raises(ConflictError) as raised:
        await write
    assert str(raised.value) == (
        f"PostgreSQL store (schema {schema}): another writer recorded a change of the same key "
        "at the same moment, and nothing was written; read it again and retry"
    )
    assert await store.get(scope, "k") is None
    assert [e.value for e in await store.ledger_events(scope, "k")] == ["theirs"]
    await store.aclose()


async def _waiting_for_a_lock(conn: psycopg.AsyncConnection) -> bool:
    cursor = await conn.execute(
        "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
        " AND datname = current_database() AND pid <> pg_backend_pid()"
    )
    (waiting,) = await cursor.fetchone()
    return waiting > 0


def test_the_ledger_snippet_of_the_store_docs_runs(postgres_cluster, monkeypatch, capsys):
    text = (Path(__file__).parents[2] / "docs" / "stores" / "postgres.md").read_text()
    section = text[text.index("\n## The ledger\n") : text.index("\n## Search\n")]
    (snippet,) = re.findall(r"```python\n(.*?)```", section, re.S)
    monkeypatch.setenv("ANIMUS_DATABASE_URL", postgres_cluster.create_database("animus_docs"))
    exec(compile(snippet, "docs/stores/postgres.md", "exec"), {"__name__": "__docs__"})
    assert capsys.readouterr().out == "[(1, 'create'), (2, 'update'), (3, 'delete')]\n"
