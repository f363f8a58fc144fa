"""Export, import and backup: the document, strict validation, idempotency, atomic ZIPs."""

import asyncio
import json
import math
import sqlite3
import uuid
import zipfile

import pytest

from animus_flows.errors import InvalidRequest, StoreUnavailable
from animus_flows.memory import AsyncMemoryLayer, Memory, MemoryLayer
from animus_flows.memory.export import (
    EXPORT_FORMAT,
    export_document,
    parse_export,
    read_backup,
)
from animus_flows.memory.store_form import to_store
from animus_flows.memory.transfer import OPTIMIZE_AFTER_IMPORT
from animus_flows.protocol import Scope
from animus_flows.stores import SQLiteStore
from animus_flows.stores.sqlite.store import KEY_BATCH as GET_MANY_BATCH

SCOPE = Scope("demo", agent_id="dev")


def test_export_is_one_json_document_with_every_record(memory):
    first = memory.remember("first", tags=["a"], sensitivity="secret")
    second = memory.update_with_version(first.id, content="second")
    document = json.loads(memory.export_memories())
    assert document["format"] == EXPORT_FORMAT and document["version"] == 1
    assert document["scope"] == SCOPE.to_json() and document["count"] == 2
    assert [m["id"] for m in document["memories"]] == [first.id, second.id]
    assert document["memories"][0]["sensitivity"] == "secret"  # internal reads see everything
    assert Memory.from_json(document["memories"][1]) == memory.get_memory(second.id)


def test_export_then_import_elsewhere_reproduces_the_records(memory, db):
    memory.remember("fact", tags=["x"], metadata={"k": [1, 2]}, confidence=0.5)
    memory.remember_procedure("deploy", "release day", ["build", "ship"])
    text = memory.export_memories()
    with MemoryLayer(SQLiteStore(db), Scope("demo", agent_id="qa")) as other:
        assert other.import_memories(text) == 2
        assert json.loads(other.export_memories())["memories"] == json.loads(text)["memories"]


def test_import_is_idempotent_on_ids(memory):
    text = json.dumps([{"id": str(uuid.uuid4()), "content": f"n{n}"} for n in range(5)])
    assert memory.import_memories(text) == 5
    assert memory.import_memories(text) == 5
    assert len(memory.recall("", limit=50)) == 5


def _segments(db) -> int:
    conn = sqlite3.connect(db)
    (count,) = conn.execute("SELECT count(DISTINCT segid) FROM items_fts_idx").fetchone()
    conn.close()
    return count


def _records(count: int, word: str) -> str:
    return json.dumps([{"id": str(uuid.uuid4()), "content": f"{word} {n}"} for n in range(count)])


def test_a_bulk_import_leaves_the_full_text_index_in_one_segment(memory, db):
    # each write adds a segment to SQLite's full-text index; queries read every segment
    for word in ("alpha", "beta"):
        memory.import_memories(_records(OPTIMIZE_AFTER_IMPORT - 1, word))
    assert _segments(db) == 2
    memory.import_memories(_records(OPTIMIZE_AFTER_IMPORT, "gamma"))
    assert _segments(db) == 1
    assert len(memory.recall("beta", limit=5)) == 5


def test_an_import_into_an_empty_scope_reads_no_record_back(tmp_path):
    # a restore into a new scope: no stored copy can carry links, so none is read one by one
    async def reader_instructions(count: int) -> int:
        store = SQLiteStore(tmp_path / f"{count}.db")
        await store.put(Scope("demo", agent_id="other"), "k", "v")
        await store.get(SCOPE, "k")  # opens the reader connection
        ticks = 0

        def tick() -> int:  # SQLite calls this every 10 virtual-machine instructions
            nonlocal ticks
            ticks += 1
            return 0

        store._file._reader.set_progress_handler(tick, 10)
        assert await AsyncMemoryLayer(store, SCOPE).import_memories(_records(count, "w")) == count
        await store.aclose()
        return ticks

    small, large = asyncio.run(reader_instructions(20)), asyncio.run(reader_instructions(2000))
    assert large < 2 * small


def test_an_import_into_a_scope_holding_memories_reads_the_stored_copies_in_batches(tmp_path):
    # a re-import: each record's stored copy may carry a version link over, and SQLite reads
    # them GET_MANY_BATCH keys at a time instead of one `get` each
    async def reads(text: str) -> list[str]:
        store = SQLiteStore(tmp_path / "m.db")
        layer = AsyncMemoryLayer(store, SCOPE)
        assert await layer.import_memories(text) == 1200
        statements: list[str] = []
        store._file._reader.set_trace_callback(statements.append)
        assert await layer.import_memories(text) == 1200
        await store.aclose()
        return [s for s in statements if "AND i.key IN (" in s]

    statements = asyncio.run(reads(_records(1200, "w")))
    assert len(statements) == math.ceil(1200 / GET_MANY_BATCH)
    assert all("i.key IN" in s for s in statements)


class UnoptimizableStore(SQLiteStore):
    async def optimize(self) -> None:
        raise StoreUnavailable(f"SQLite store {self.path} failed: disk I/O error")


def test_an_import_stands_when_optimizing_the_store_fails(db, caplog):
    with MemoryLayer(UnoptimizableStore(db), SCOPE) as layer:
        assert layer.import_memories(_records(OPTIMIZE_AFTER_IMPORT, "delta")) == 1000
        assert len(layer.recall("delta", limit=3)) == 3
    assert "could not optimize the store: SQLite store" in caplog.text


def test_import_accepts_a_bare_list_and_defaults_provenance(memory):
    memory_id = "3f2a9c1b-8d7e-4f5a-9b3c-2d1e0f9a8b7c"
    assert memory.import_memories(json.dumps([{"id": memory_id, "content": "bare"}])) == 1
    stored = memory.get_memory(memory_id)
    assert (stored.content, stored.provenance) == ("bare", "import")


def test_parsing_keeps_every_id_as_the_key_it_names():
    # ids are store keys: the layer's UUIDs, and the keys other tools chose (`memory put --key`,
    # seed scripts), in any case; links name them the same way
    text = json.dumps(
        [
            {"id": "desk-limits", "content": "limits v1", "superseded_by": "Limits-2"},
            {"id": "Limits-2", "content": "limits v2", "version": 2, "parent_id": "desk-limits"},
            {"id": "3F2A9C1B-8D7E-4F5A-9B3C-2D1E0F9A8B7C", "content": "an upper-case uuid"},
            {"id": "d41d8cd98f00b204e9800998ecf8427e", "content": "an md5, not re-keyed"},
        ]
    )
    memories = parse_export(text)
    assert [m.id for m in memories] == [
        "desk-limits",
        "Limits-2",
        "3F2A9C1B-8D7E-4F5A-9B3C-2D1E0F9A8B7C",
        "d41d8cd98f00b204e9800998ecf8427e",
    ]
    assert (memories[0].superseded_by, memories[1].parent_id) == ("Limits-2", "desk-limits")
    assert {m.provenance for m in memories} == {"import"}
    # records carry no slice key: a scope is enumerated with list_items, whatever its ids
    assert not any("_bucket" in to_store(m, agent="dev")[1] for m in memories)


def test_an_import_writes_each_record_under_its_own_key(memory, raw):
    memory.import_memories(json.dumps([{"id": "Desk-Limits", "content": "max 100M"}]))
    assert raw.get(SCOPE, "Desk-Limits").value["content"] == "max 100M"
    assert memory.get_memory("Desk-Limits").content == "max 100M"


def test_import_redacts_like_any_write(memory):
    text = json.dumps([{"id": str(uuid.uuid4()), "content": "key AKIAIOSFODNN7EXAMPLE"}])
    memory.import_memories(text)
    (stored,) = memory.recall("key")
    assert stored.content == "key [REDACTED:aws_access_key]"
    assert stored.metadata["_redaction_count"] == 1


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ("not json", "import data is not valid JSON (Expecting value at line 1 column 1)"),
        ('{"format": "other"}', "import data has format 'other', not 'animus-memories'"),
        ('{"format": "animus-memories", "version": 9, "memories": []}', "export version 9"),
        ('{"format": "animus-memories", "version": 1}', "import data has no list of memories"),
        ('"text"', "import data has no list of memories"),
        ('[{"id": 7, "content": "x"}]', "memories[1]: memory id 7 must be a non-empty string"),
        ('[{"id": "", "content": "x"}]', "memories[1]: memory id '' must be a non-empty string"),
        (
            json.dumps([{"id": "k" * 1025, "content": "x"}]),
            "memories[1]: key 'kkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkk'... is 1025 characters",
        ),
        (
            '[{"id": "3f2a9c1b-8d7e-4f5a-9b3c-2d1e0f9a8b7c", "content": "x", "parent_id": 7}]',
            "memories[1]: parent_id 7 must be a string or None",
        ),
        (
            '[{"id": "3f2a9c1b-8d7e-4f5a-9b3c-2d1e0f9a8b7c", "content": "x", "superseded_by": 7}]',
            "memories[1]: superseded_by 7 must be a string or None",
        ),
        (
            '[{"id": "3f2a9c1b-8d7e-4f5a-9b3c-2d1e0f9a8b7c", "content": "x"},'
            ' {"id": "3f2a9c1b-8d7e-4f5a-9b3c-2d1e0f9a8b7c", "content": "y"}]',
            "memories[2]: id 3f2a9c1b-8d7e-4f5a-9b3c-2d1e0f9a8b7c repeats memories[1]",
        ),
        (
            '[{"id": "3f2a9c1b-8d7e-4f5a-9b3c-2d1e0f9a8b7c", "content": "x", "confidence": 2}]',
            "memories[1]: confidence 2 must be a number from 0.0 to 1.0",
        ),
        (
            '[{"id": "3f2a9c1b-8d7e-4f5a-9b3c-2d1e0f9a8b7c", "content": "x",'
            ' "metadata": {"tier": "hot"}}]',
            "memories[1]: metadata key(s) tier are reserved by the memory layer",
        ),
        (
            '[{"id": "3f2a9c1b-8d7e-4f5a-9b3c-2d1e0f9a8b7c", "content": "x",'
            ' "expires_at": "next week"}]',
            "memories[1]: expires_at 'next week' is not an ISO 8601 time such as",
        ),
        (
            '[{"id": "3f2a9c1b-8d7e-4f5a-9b3c-2d1e0f9a8b7c", "content": "x", "expires_at": 7}]',
            "memories[1]: expires_at 7 is not an ISO 8601 time",
        ),
        (
            '[{"id": "3f2a9c1b-8d7e-4f5a-9b3c-2d1e0f9a8b7c", "content": "x",'
            ' "expires_at": "0001-01-01T00:00:00+14:00"}]',
            "memories[1]: expires_at '0001-01-01T00:00:00+14:00' has no UTC time",
        ),
    ],
)
def test_bad_imports_are_refused_whole(memory, raw, data, message):
    good = [{"id": str(uuid.uuid4()), "content": "would be fine"}]
    if data.startswith("["):  # a valid record comes first (memories[0]); it is not written
        data = json.dumps(good)[:-1] + ", " + data[1:]
    with pytest.raises(InvalidRequest) as caught:
        memory.import_memories(data)
    assert message in str(caught.value)
    assert raw.query(SCOPE, "", top_k=10) == []


def test_import_takes_text_only(memory):
    with pytest.raises(InvalidRequest, match="takes JSON text, not list"):
        memory.import_memories([])


def test_backup_is_a_zip_with_the_export_and_a_checked_manifest(memory, tmp_path):
    memory.remember("backed up")
    path = memory.backup(tmp_path / "backups" / "demo.zip")
    assert path == tmp_path / "backups" / "demo.zip"
    with zipfile.ZipFile(path) as zf:
        assert sorted(zf.namelist()) == ["manifest.json", "memories.json"]
        manifest = json.loads(zf.read("manifest.json"))
    assert manifest["count"] == 1 and manifest["scope"] == SCOPE.to_json()
    text = read_backup(path)
    assert [m.content for m in parse_export(text)] == ["backed up"]
    assert list((tmp_path / "backups").iterdir()) == [path]  # no partial files left


def test_a_backup_replaces_the_old_file_whole_and_checks_its_contents(memory, tmp_path):
    target = tmp_path / "b.zip"
    memory.remember("one")
    memory.backup(target)
    memory.remember("two")
    memory.backup(target)
    assert len(parse_export(read_backup(target))) == 2
    with zipfile.ZipFile(target) as zf:
        manifest = zf.read("manifest.json")
    with zipfile.ZipFile(target, "w") as zf:
        zf.writestr("manifest.json", manifest)
        zf.writestr("memories.json", "tampered")
    with pytest.raises(InvalidRequest, match="does not match its manifest checksum"):
        read_backup(target)
    with pytest.raises(InvalidRequest, match="is a folder"):
        memory.backup(tmp_path)


def test_a_backup_through_a_symlink_replaces_its_target(memory, tmp_path):
    memory.remember("linked")
    (tmp_path / "link.zip").symlink_to("real.zip")
    memory.backup(tmp_path / "link.zip")
    assert (tmp_path / "link.zip").is_symlink()
    assert [m.content for m in parse_export(read_backup(tmp_path / "real.zip"))] == ["linked"]


def test_a_backup_to_an_unwritable_path_names_it_and_the_reason(memory, tmp_path):
    (tmp_path / "file").write_text("in the way")
    target = tmp_path / "file" / "b.zip"
    with pytest.raises(InvalidRequest) as caught:
        memory.backup(target)
    assert str(caught.value) == (
        f"cannot write {target} (a file is in the way of its folder); pass a writable file path"
    )


def test_the_export_document_is_ordered_oldest_first():
    older = Memory(content="a")
    newer = Memory(content="b")
    document = export_document([newer, older], SCOPE)
    assert [m["content"] for m in document["memories"]] == ["a", "b"]
