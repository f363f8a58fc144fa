"""The SQLite store's ledger: files of schema 4 migrate, every writer of a ledgered file records
its changes, racing processes, redaction, and the sync facade (the extension's own checks are
`test_sqlite_ledger_conformance.py`)."""

import shutil
import sqlite3
import sys
import textwrap
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest
from helpers import race_to_one_version

from animus_flows.errors import ConflictError, InvalidRequest, StoreTimeout, StoreUnavailable
from animus_flows.ledger import LedgerStore
from animus_flows.protocol import Scope
from animus_flows.stores import SQLiteLedgerStore, SQLiteStore, SyncStore
from animus_flows.stores.redacting import RedactingLedgerStore, RedactingStore, redacting
from animus_flows.stores.sqlite.schema import SCHEMA_VERSION

#: A store file written by animus-flows before the ledger (main at 88308bc, schema 4):
#: `SyncStore(SQLiteStore(path))` put "plain" into project `legacy` (metadata tier hot), an item
#: with a one-second TTL into `legacy`/dev/T-1 ("expired", long expired) and one with a
#: century's TTL into `legacy`/dev ("century"); `MemoryLayer(store, Scope("legacy", "dev"))`
#: remembered "The harbour crane was explored on Tuesday".
SCHEMA_4_FILE = Path(__file__).parent / "data" / "schema4.db"
LEGACY, DEV = Scope("legacy"), Scope("legacy", agent_id="dev")


def schema_4_copy(tmp_path: Path) -> Path:
    path = tmp_path / "memory.db"
    shutil.copyfile(SCHEMA_4_FILE, path)
    return path


def meta(path: Path) -> dict[str, str]:
    with sqlite3.connect(path) as conn:
        return dict(conn.execute("SELECT name, value FROM animus_meta"))


def test_a_schema_4_file_gains_the_ledger_table_without_indexing_again(tmp_path, caplog):
    path = schema_4_copy(tmp_path)
    with SyncStore(SQLiteStore(path)) as store:
        assert store.get(LEGACY, "plain").value == "written by schema 4 before the ledger"
        (memory,) = store.query(DEV, "exploring harbours")
        assert memory.value["content"] == "The harbour crane was explored on Tuesday"
    assert meta(path)["schema_version"] == str(SCHEMA_VERSION) == "5"
    assert "ledger_since" not in meta(path)  # a plain store keeps no ledger
    assert "indexed again" not in caplog.text


def test_a_schema_4_file_opened_for_its_ledger_starts_each_item_at_version_1(tmp_path):
    path = schema_4_copy(tmp_path)
    before = datetime.now(UTC)
    with SyncStore(SQLiteLedgerStore(path)) as store:
        (plain,) = store.ledger_events(LEGACY, "plain")
        item = store.get(LEGACY, "plain")
        assert (plain.version, plain.op, plain.value, plain.metadata) == (
            1, "create", item.value, {"tier": "hot"}
        )  # fmt: skip
        assert plain.valid_from == item.updated_at < before <= plain.recorded_at
        assert plain.valid_to is None
        (century,) = store.ledger_events(DEV, "century")
        assert century.valid_to == store.get(DEV, "century").expires_at
        # an item that had expired has no history: its last state ended before the ledger
        assert store.ledger_events(Scope("legacy", "dev", "T-1"), "expired") == []
        (remembered,) = store.query(DEV, "harbour crane")
        assert store.get_versioned(DEV, remembered.key).version == 1
        updated = store.put_versioned(LEGACY, "plain", "now ledgered", expected_version=1)
        assert updated.version == 2
    assert meta(path)["ledger_since"] >= before.isoformat()
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT count(*) FROM ledger").fetchone() == (4,)


def test_reading_first_turns_the_ledger_on(tmp_path):
    path = tmp_path / "memory.db"
    with SyncStore(SQLiteStore(path)) as store:
        store.put(LEGACY, "k", "v")
    with SyncStore(SQLiteLedgerStore(path)) as store:
        assert [e.op for e in store.ledger_events(LEGACY, "k")] == ["create"]
    assert "ledger_since" in meta(path)


def test_every_writer_of_a_ledgered_file_records_its_changes(tmp_path):
    path = tmp_path / "memory.db"
    with SyncStore(SQLiteStore(path)) as plain:  # open before the file keeps a ledger
        plain.put(LEGACY, "k", "before the ledger")
        with SyncStore(SQLiteLedgerStore(path)) as ledgered:
            assert ledgered.get_versioned(LEGACY, "k").version == 1
            plain.put(LEGACY, "k", "by a plain store")
            with pytest.raises(InvalidRequest, match="keeps none"):
                plain.ledger_events(LEGACY, "k")
            plain._run("put_many", [(LEGACY, "k", "in a batch", None), (LEGACY, "j", 1, None)])
            plain.delete(LEGACY, "k")
            plain.delete_scope(LEGACY)
            events = ledgered.ledger_events(LEGACY, "k")
            assert [(e.version, e.op) for e in events] == [
                (1, "create"), (2, "update"), (3, "update"), (4, "delete")
            ]  # fmt: skip
            assert [e.op for e in ledgered.ledger_events(LEGACY, "j")] == ["create", "delete"]


RACER = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from animus_flows.errors import ConflictError
    from animus_flows.protocol import Scope
    from animus_flows.stores import SQLiteLedgerStore, SyncStore

    path, go, name = sys.argv[1:]
    with SyncStore(SQLiteLedgerStore(path)) as store:
        assert store.get_versioned(Scope("race"), "k").version == 1
        print("ready", flush=True)
        while not Path(go).exists():
            time.sleep(0.001)
        try:
            written = store.put_versioned(Scope("race"), "k", name, expected_version=1)
        except ConflictError as exc:
            print("conflict", exc, flush=True)
        else:
            print("won", written.version, flush=True)
    """
)


def test_racing_processes_with_one_expected_version_let_exactly_one_write(tmp_path):
    path, go = tmp_path / "memory.db", tmp_path / "go"
    with SyncStore(SQLiteLedgerStore(path)) as store:
        store.put(Scope("race"), "k", "start")
    winner, outputs = race_to_one_version([sys.executable, "-c", RACER, str(path), str(go)], go)
    for n, out in enumerate(outputs):
        if n != winner:
            assert out.startswith("conflict key 'k' in project=race is at version 2, not the ")
    with SyncStore(SQLiteLedgerStore(path)) as store:
        events = store.ledger_events(Scope("race"), "k")
        assert [e.value for e in events] == ["start", f"writer-{winner}"]
        assert store.get(Scope("race"), "k").value == f"writer-{winner}"


SECRET = "AKIAIOSFODNN7EXAMPLE"


def test_the_ledger_never_keeps_a_secret_the_wrapper_redacts(tmp_path):
    path = tmp_path / "memory.db"
    store = redacting(SQLiteLedgerStore(path))
    assert isinstance(store, RedactingLedgerStore) and isinstance(store, LedgerStore)
    assert isinstance(RedactingStore(SQLiteLedgerStore(path)), RedactingLedgerStore)
    assert not isinstance(RedactingStore(SQLiteStore(path)), LedgerStore)
    with SyncStore(store) as sync:
        sync.put(LEGACY, "a", f"key {SECRET}", metadata={"note": f"password={SECRET}"})
        written = sync.put_versioned(
            LEGACY, "a", {"content": f"still {SECRET}"}, expected_version=1
        )
        assert SECRET not in str(written.item)
        sync._run("put_many", [(LEGACY, "b", [SECRET], {"api_key": SECRET})])
        sync.delete(LEGACY, "a")
        events = sync.ledger_events(LEGACY, "a") + sync.ledger_events(LEGACY, "b")
        assert len(events) == 4 and SECRET not in repr(events)
    with sqlite3.connect(path) as conn:  # nowhere in the file, history included
        dump = "\n".join(conn.iterdump())
    assert "[REDACTED:aws_access_key]" in dump and SECRET not in dump


def test_the_sync_facade_passes_the_extension_through(tmp_path):
    with SyncStore(SQLiteLedgerStore(tmp_path / "l.db")) as store:
        first = store.put_versioned(LEGACY, "k", "v", expected_version=0, ttl_seconds=60)
        assert first.version == 1 and first.item.expires_at is not None
        with pytest.raises(ConflictError):
            store.put_versioned(LEGACY, "k", "v", expected_version=0)
        assert store.get_versioned(LEGACY, "k") == first
        assert [e.version for e in store.ledger_events(LEGACY, "k")] == [1]
    with SyncStore(SQLiteStore(tmp_path / "p.db")) as store:
        for call in (
            lambda: store.get_versioned(LEGACY, "k"),
            lambda: store.put_versioned(LEGACY, "k", "v"),
            lambda: store.ledger_events(LEGACY, "k"),
        ):
            with pytest.raises(InvalidRequest) as raised:
                call()
            assert "\n" not in str(raised.value)
            assert str(raised.value).endswith(
                f"; <SQLiteStore({str(tmp_path / 'p.db')!r})> keeps none"
            )
        assert store.get(LEGACY, "k") is None  # nothing was written


def test_a_busy_file_times_out_instead_of_skipping_the_ledger(tmp_path):
    path = tmp_path / "memory.db"
    with SyncStore(SQLiteLedgerStore(path)) as store:
        store.put(LEGACY, "k", "v")
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    try:
        started = time.monotonic()
        with (
            SyncStore(SQLiteLedgerStore(path, busy_timeout_ms=200)) as store,
            pytest.raises(StoreTimeout, match="stayed locked"),
        ):
            store.put_versioned(LEGACY, "k", "w", expected_version=1)
        assert time.monotonic() - started < 10
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    with SyncStore(SQLiteLedgerStore(path)) as store:
        assert [e.value for e in store.ledger_events(LEGACY, "k")] == ["v"]


def test_a_versioned_write_into_a_file_without_its_ledger_flag_writes_nothing(tmp_path):
    path = tmp_path / "memory.db"
    with SyncStore(SQLiteLedgerStore(path)) as store:
        store.put(LEGACY, "k", "v")
        with sqlite3.connect(path) as conn:  # the flag removed by hand, behind the store's back
            conn.execute("DELETE FROM animus_meta WHERE name = 'ledger_since'")
        with pytest.raises(StoreUnavailable, match="keeps no ledger, so the expected version"):
            store.put_versioned(LEGACY, "k", "w", expected_version=1)
        assert store.get(LEGACY, "k").value == "v"
