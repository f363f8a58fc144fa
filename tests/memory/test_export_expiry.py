"""Export and import keep when memories expire: `expires_at` in the records, the time left on
import, expired records skipped and counted; on SQLite (which reads them in batches)
and on a JSON-RPC plugin (a get each, and no transactions)."""

import json
import sys
from datetime import datetime, timedelta
from pathlib import Path

from animus_flows.memory import AsyncMemoryLayer, MemoryLayer
from animus_flows.memory.export import read_backup
from animus_flows.protocol import Scope, utcnow
from animus_flows.stores import SQLiteStore
from animus_flows.stores.jsonrpc import JsonRpcStore

SCOPE = Scope("demo", agent_id="dev")
COPY = Scope("demo", agent_id="qa")
DICT_PLUGIN = Path(__file__).resolve().parents[2] / "examples" / "plugins" / "dict_plugin.py"


def _near(moment: datetime | None, expected: datetime) -> bool:
    return moment is not None and abs(moment - expected) < timedelta(seconds=2)


def _records(text: str) -> dict[str, dict]:
    return {record["id"]: record for record in json.loads(text)["memories"]}


def test_an_expiring_memory_keeps_its_expiry_through_export_and_import(memory, raw, db, tmp_path):
    raw.put(SCOPE, "session-note", {"content": "call the desk back"}, ttl_seconds=3600)
    permanent = memory.remember("the desk closes at five")
    expires = raw.get(SCOPE, "session-note").expires_at
    text = memory.export_memories()
    records = _records(text)
    assert datetime.fromisoformat(records["session-note"]["expires_at"]) == expires
    assert records["session-note"]["expires_at"].endswith("+00:00")
    assert "expires_at" not in records[permanent.id]  # older readers' records stay as they were
    with MemoryLayer(SQLiteStore(db), COPY) as copy:
        count = copy.import_memories(text)
    assert (count, count.skipped) == (2, 0)
    assert _near(raw.get(COPY, "session-note").expires_at, expires)
    assert raw.get(COPY, permanent.id).expires_at is None
    backup = _records(read_backup(memory.backup(tmp_path / "dev.zip")))
    assert backup["session-note"]["expires_at"] == records["session-note"]["expires_at"]


def _export(*records: dict) -> str:
    return json.dumps({"format": "animus-memories", "version": 1, "memories": list(records)})


def test_a_record_whose_expiry_has_passed_is_skipped_and_counted(memory, raw):
    later = utcnow() + timedelta(hours=1)
    count = memory.import_memories(
        _export(
            {"id": "gone", "content": "expired", "expires_at": "2020-01-01T00:00:00+00:00"},
            {"id": "soon", "content": "expires later", "expires_at": later.isoformat()},
            {"id": "kept", "content": "never expires"},
        )
    )
    assert (count, count.skipped) == (2, 1)
    assert raw.get(SCOPE, "gone") is None
    assert _near(raw.get(SCOPE, "soon").expires_at, later)
    assert raw.get(SCOPE, "kept").expires_at is None


def test_the_record_not_the_stored_item_says_whether_a_memory_expires(memory, raw):
    raw.put(SCOPE, "was-expiring", {"content": "old"}, ttl_seconds=3600)
    raw.put(SCOPE, "was-permanent", {"content": "old"})
    later = utcnow() + timedelta(minutes=5)
    memory.import_memories(_export({"id": "was-expiring", "content": "restored"}))
    restored = raw.get(SCOPE, "was-expiring")
    assert (restored.value["content"], restored.expires_at) == ("restored", None)
    memory.import_memories(
        _export({"id": "was-permanent", "content": "now", "expires_at": later.isoformat()})
    )
    assert _near(raw.get(SCOPE, "was-permanent").expires_at, later)


def test_an_expires_at_without_a_zone_is_read_as_utc(memory, raw):
    later = utcnow() + timedelta(hours=1)
    naive = later.replace(tzinfo=None).isoformat()
    memory.import_memories(_export({"id": "k", "content": "x", "expires_at": naive}))
    assert _near(raw.get(SCOPE, "k").expires_at, later)


def _dict_plugin(tmp_path: Path) -> JsonRpcStore:
    """The example dict plugin: no batched reads, no transactions, no native TTL."""
    command = [sys.executable, str(DICT_PLUGIN), "--file", str(tmp_path / "items.json")]
    return JsonRpcStore(command, plugin_id="dict")


async def test_a_plugin_store_keeps_expiries_through_export_and_import(tmp_path):
    store = _dict_plugin(tmp_path)
    try:
        await store.put(SCOPE, "session-note", {"content": "call back"}, ttl_seconds=3600)
        await store.put(COPY, "session-note", {"content": "older copy"})
        await store.put(COPY, "permanent", {"content": "older copy"}, ttl_seconds=3600)
        await store.put(SCOPE, "permanent", {"content": "kept for good"})
        expires = (await store.get(SCOPE, "session-note")).expires_at
        text = await AsyncMemoryLayer(store, SCOPE).export_memories()
        records = _records(text)
        assert datetime.fromisoformat(records["session-note"]["expires_at"]) == expires
        assert "expires_at" not in records["permanent"]
        gone = {"id": "gone", "content": "x", "expires_at": "2020-01-01T00:00:00Z"}
        data = _export(*records.values(), gone)
        count = await AsyncMemoryLayer(store, COPY).import_memories(data)
        assert (count, count.skipped) == (2, 1)
        assert _near((await store.get(COPY, "session-note")).expires_at, expires)
        assert (await store.get(COPY, "permanent")).expires_at is None
        assert await store.get(COPY, "gone") is None
    finally:
        await store.aclose()


async def test_sqlite_writes_several_expiring_records_in_one_transaction(tmp_path):
    # put_many carries TTLs, so an import or a new version that writes expiring records is one
    # transaction on SQLite, not a put each with an undo on failure; a forget that relinks is
    # a delete and a put (the protocol's put_many deletes nothing), undone on failure
    store = SQLiteStore(tmp_path / "memory.db")
    layer = AsyncMemoryLayer(store, SCOPE)
    await store.put(SCOPE, "window", {"content": "the window is open"}, ttl_seconds=600)
    statements: list[str] = []
    await store._file.run(lambda conn: conn.set_trace_callback(statements.append))

    def transactions() -> int:
        count = sum(statement == "BEGIN IMMEDIATE" for statement in statements)
        statements.clear()
        return count

    later = (utcnow() + timedelta(hours=1)).isoformat()
    count = await layer.import_memories(
        _export(*({"id": f"n{i}", "content": "note", "expires_at": later} for i in range(5)))
    )
    assert (count, transactions()) == (5, 1)
    child = await layer.update_with_version("window", content="the window is open until six")
    assert transactions() == 1
    assert await layer.forget(child.id) is True
    assert transactions() == 2
    assert (await store.get(SCOPE, "window")).expires_at is not None  # current again, expiring
    assert await layer.get_memory(child.id) is None
    await store.aclose()
