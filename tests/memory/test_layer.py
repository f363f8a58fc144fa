"""The memory layer on a real SQLite store: every method, through the blocking facade and async."""

import asyncio
import inspect
import json
import uuid
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from animus_flows.blocks import SQLiteMemoryStore
from animus_flows.errors import InvalidRequest
from animus_flows.memory import (
    AsyncMemoryLayer,
    Entity,
    Memory,
    MemoryLayer,
    MemoryLoader,
    MemoryTier,
    MemoryType,
    Sensitivity,
    TierPolicy,
)
from animus_flows.memory.scan import SCAN_PAGE
from animus_flows.memory.store_form import to_store
from animus_flows.protocol import (
    RESERVED_METADATA_KEYS,
    Capabilities,
    Scope,
)
from animus_flows.stores import SQLiteStore, SyncStore

SCOPE = Scope("demo", agent_id="dev")


def record(content, memory_id=None, **fields):
    return {"id": memory_id or str(uuid.uuid4()), "content": content, **fields}


def export_of(*records):
    return json.dumps({"format": "animus-memories", "version": 1, "memories": list(records)})


# -- writing ---------------------------------------------------------------------------------


def test_remember_stores_a_record_any_store_reader_can_filter(memory, raw):
    stored = memory.remember(
        "User prefers dark mode",
        MemoryType.SEMANTIC,
        {"origin": "chat"},
        ["Preference", "UI"],
        "inferred",
        0.7,
        "preference",
        "mcp",
        Sensitivity.PERSONAL,
        MemoryTier.HOT,
    )
    assert (stored.content, stored.tags, stored.subtype) == (
        "User prefers dark mode",
        ["preference", "ui"],
        "preference",
    )
    assert (stored.source, stored.confidence, stored.provenance) == ("inferred", 0.7, "mcp")
    item = raw.get(SCOPE, stored.id)
    assert item.value["content"] == "User prefers dark mode"
    assert item.metadata["memory_type"] == "semantic" and item.metadata["tier"] == "hot"
    assert item.metadata["sensitivity"] == "personal" and item.metadata["agent"] == "dev"
    assert item.metadata["origin"] == "chat"
    assert set(item.metadata) >= RESERVED_METADATA_KEYS - {
        "parent_id",
        "_redaction_count",
        "_redaction_types",
    }
    assert [hit.key for hit in raw.query(SCOPE, "", filters={"tier": "hot"})] == [stored.id]
    assert memory.get_memory(stored.id) == stored


def test_the_project_scope_is_recorded_as_shared(db, raw):
    with MemoryLayer(SQLiteStore(db), Scope("demo")) as shared:
        stored = shared.remember("The API is REST")
    assert raw.get(Scope("demo"), stored.id).metadata["agent"] == "shared"


def test_remember_refuses_reserved_metadata_keys(memory):
    with pytest.raises(InvalidRequest, match="tier are reserved by the memory layer"):
        memory.remember("x", metadata={"tier": "hot"})


def test_remember_fact_keeps_the_triple(memory):
    fact = memory.remember_fact("User", "prefers", "dark mode", category="preference")
    assert fact.content == "User prefers dark mode"
    assert fact.memory_type is MemoryType.SEMANTIC and fact.subtype == "preference"
    assert fact.metadata == {"subject": "User", "predicate": "prefers", "object": "dark mode"}
    assert memory.remember_fact("Sky", "is", "blue").subtype == "fact"
    with pytest.raises(InvalidRequest, match="fact object '' must be non-empty"):
        memory.remember_fact("Sky", "is", "")


def test_remember_procedure_numbers_the_steps(memory):
    procedure = memory.remember_procedure(
        "morning-routine", "waking up", ["check email", "review calendar", "plan day"]
    )
    assert procedure.content == (
        "Procedure: morning-routine\nTrigger: waking up\nSteps:\n"
        "1. check email\n2. review calendar\n3. plan day"
    )
    assert procedure.memory_type is MemoryType.PROCEDURAL and procedure.subtype == "workflow"
    assert procedure.metadata["steps"] == ["check email", "review calendar", "plan day"]
    with pytest.raises(InvalidRequest, match="steps 'check email' must be a non-empty list"):
        memory.remember_procedure("x", "y", "check email")


def test_every_write_path_redacts_secrets(memory, raw):
    stored = memory.remember(
        "deploy with AKIAIOSFODNN7EXAMPLE",
        metadata={"note": "password=hunter2"},
        tags=["ghp_16C7e42F292c6912E7710c838347Ae178B4a"],
    )
    assert stored.content == "deploy with [REDACTED:aws_access_key]"
    assert stored.metadata == {
        "note": "password=[REDACTED:password]",
        "_redaction_count": 3,
        "_redaction_types": ["aws_access_key", "github_token", "password"],
    }
    item = raw.get(SCOPE, stored.id)
    assert "AKIA" not in json.dumps(item.to_json()) and "hunter2" not in json.dumps(item.to_json())
    assert item.metadata["_redaction_count"] == 3

    stored.content += " and sk-proj-Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z"
    assert memory.update_memory(stored)
    assert stored.metadata["_redaction_count"] == 4
    assert "openai_api_key" in stored.metadata["_redaction_types"]

    version = memory.update_with_version(stored.id, content="rotated: password=n3wpass")
    assert version.content == "rotated: password=[REDACTED:password]"
    assert version.metadata["_redaction_count"] == 1  # this version's own text
    kept = memory.update_with_version(version.id, tags=["ops"])
    assert kept.metadata["_redaction_count"] == 1  # inherited text, inherited record

    assert memory.add_tag(kept.id, "xoxb-123456789012-abcdef")
    assert "[redacted:slack_token]" in memory.get_memory(kept.id).tags


def test_the_subtype_and_imported_entity_names_are_redacted_too(memory, raw):
    fact = memory.remember_fact("deploy", "uses", "the staging key", category="password=hunter2")
    assert fact.subtype == "password=[REDACTED:password]"
    assert fact.metadata["_redaction_count"] == 1
    imported = record(
        "a note",
        subtype="token ghp_16C7e42F292c6912E7710c838347Ae178B4a",
        entities=[{"name": "AKIAIOSFODNN7EXAMPLE", "type": "person"}, {"name": "Alice"}],
    )
    memory.import_memories(export_of(imported))
    stored = memory.get_memory(imported["id"])
    assert stored.subtype == "token [REDACTED:github_token]"
    assert stored.entities == [Entity("Alice")]  # a secret is no entity name: dropped
    assert stored.metadata["_redaction_count"] == 2
    everything = json.dumps([item.to_json() for item in raw.query(SCOPE, "", top_k=100)])
    for secret in ("hunter2", "ghp_16C7", "AKIAIOSFODNN7EXAMPLE"):
        assert secret not in everything


# -- reading ---------------------------------------------------------------------------------


def test_recall_ranks_by_relevance_and_lists_by_recent_activity_without_a_query(memory):
    first = memory.remember("EUR/USD ranges between 1.07 and 1.10")
    second = memory.remember("The hedge ratio for EUR exposure is 0.8")
    third = memory.remember("Lunch is at noon")
    assert [m.id for m in memory.recall("", limit=2)] == [third.id, second.id]
    assert memory.recall("EUR/USD range")[0].id == first.id
    assert {m.id for m in memory.recall("EUR")} == {first.id, second.id}
    assert memory.recall("nothing matches this") == []
    # a recall is activity: what was recalled last comes first
    memory.recall("lunch")
    assert memory.recall("")[0].id == third.id


def test_recall_applies_every_filter(memory):
    memory.remember("alpha fact", MemoryType.SEMANTIC, tags=["a", "b"], source="stated")
    memory.remember(
        "alpha event", MemoryType.EPISODIC, tags=["a"], source="learned", confidence=0.4, tier="hot"
    )
    memory.remember(
        "alpha secret", MemoryType.SEMANTIC, tags=["a", "b", "c"], sensitivity="secret", tier="cold"
    )

    def contents(**filters):
        return sorted(m.content for m in memory.recall("alpha", **filters))

    assert contents(tier="cold") == ["alpha secret"]
    assert contents(tier=MemoryTier.HOT) == ["alpha event"]
    # recalling the cold memory warmed it up
    assert contents(tier=MemoryTier.WARM) == ["alpha fact", "alpha secret"]
    assert contents(tier="cold") == []
    assert contents() == ["alpha event", "alpha fact", "alpha secret"]
    assert contents(memory_type="episodic") == ["alpha event"]
    assert contents(memory_type=MemoryType.SEMANTIC) == ["alpha fact", "alpha secret"]
    assert contents(tags=["a", "b"]) == ["alpha fact", "alpha secret"]
    assert contents(tags=["B", "C"]) == ["alpha secret"]
    assert contents(source="learned") == ["alpha event"]
    assert contents(min_confidence=0.5) == ["alpha fact", "alpha secret"]
    assert contents(allowed_tiers=[Sensitivity.PUBLIC]) == ["alpha event", "alpha fact"]
    assert contents(allowed_tiers=["secret", "personal"]) == ["alpha secret"]
    assert len(memory.recall("alpha", limit=1)) == 1
    with pytest.raises(InvalidRequest, match="limit 0 must be an integer >= 1"):
        memory.recall("alpha", limit=0)
    with pytest.raises(InvalidRequest, match="memory_type 'dream' is not one of"):
        memory.recall("alpha", memory_type="dream")


def test_recall_asks_for_more_when_filters_drop_hits(memory):
    for n in range(30):
        memory.remember(f"busy note {n}", confidence=0.1)
    wanted = memory.remember("busy note that matters", confidence=0.9)
    assert [m.id for m in memory.recall("busy", min_confidence=0.5, limit=1)] == [wanted.id]


def test_recall_counts_access_and_heats_memories_up(db, raw):
    layer = MemoryLayer(SQLiteStore(db), SCOPE, tier_policy=TierPolicy(promote_after=2))
    cold = layer.remember("archived runbook", tier="cold")
    (first,) = layer.recall("runbook")
    assert (first.access_count, first.tier) == (1, MemoryTier.WARM)
    assert first.last_accessed is not None
    (second,) = layer.recall("runbook")
    assert (second.access_count, second.tier) == (2, MemoryTier.HOT)
    stored = layer.get_memory(cold.id)
    assert (stored.access_count, stored.tier, stored.updated_at) == (2, "hot", cold.updated_at)
    assert raw.get(SCOPE, cold.id).metadata["tier"] == "hot"
    layer.close(close_store=True)


def test_recall_by_tags_needs_all_tags(memory):
    both = memory.remember("ui preference", tags=["preference", "ui"])
    memory.remember("other preference", tags=["preference"])
    assert [m.id for m in memory.recall_by_tags(["UI", "preference"])] == [both.id]
    assert len(memory.recall_by_tags(["preference"])) == 2
    assert len(memory.recall_by_tags(["preference"], limit=1)) == 1
    with pytest.raises(InvalidRequest, match="at least one tag"):
        memory.recall_by_tags([])


@pytest.fixture(params=["sqlite", "jsonrpc"])
def any_store_memory(request, db, served_sqlite):
    """The layer on SQLite in process, and on a JSON-RPC plugin (SQLite served by `animus
    memory serve`): the same protocol calls, over the wire."""
    store = SQLiteStore(db) if request.param == "sqlite" else served_sqlite(db.parent)
    layer = MemoryLayer(store, SCOPE)
    yield layer
    layer.close(close_store=True)


def test_get_memory_by_id_or_unique_prefix(any_store_memory):
    memory = any_store_memory
    memory.import_memories(
        export_of(
            record("one", "aaaa1111-0000-4000-8000-000000000001"),
            record("two", "aaaa2222-0000-4000-8000-000000000002"),
            record("three", "b0000000-0000-4000-8000-000000000003"),
        )
    )
    assert memory.get_memory("aaaa1111-0000-4000-8000-000000000001").content == "one"
    assert memory.get_memory("aaaa2").content == "two"
    assert memory.get_memory("AAAA2222").content == "two"
    assert memory.get_memory("b").content == "three"
    assert memory.get_memory("c0ffee") is None
    with pytest.raises(InvalidRequest) as ambiguous:
        memory.get_memory("aaaa")
    assert str(ambiguous.value) == (
        "memory id prefix 'aaaa' is ambiguous: it matches "
        "aaaa1111-0000-4000-8000-000000000001, aaaa2222-0000-4000-8000-000000000002; "
        "pass more characters"
    )
    with pytest.raises(InvalidRequest, match="must be a non-empty string"):
        memory.get_memory("  ")


def test_ids_that_other_tools_wrote_are_found_by_prefix_as_typed(any_store_memory, raw):
    for key in ("FX-Note", "fx-%_'é"):
        raw.put(SCOPE, key, "EUR/USD broke 1.10")
    assert any_store_memory.get_memory("FX-N").id == "FX-Note"
    assert any_store_memory.get_memory("fx-%_'").id == "fx-%_'é"
    assert any_store_memory.get_memory("fx-_") is None  # no pattern characters


def reader_steps(tmp_path, items: int, setup, measured) -> int:
    """SQLite's virtual-machine instructions, in tens, that the store's reader executes for
    `await measured(layer, await setup(layer))` in a scope of `items` filler memories."""

    async def run() -> int:
        store = SQLiteStore(tmp_path / f"{items}.db")
        layer = AsyncMemoryLayer(store, SCOPE)
        await layer.import_memories(json.dumps([record(f"filler {i}") for i in range(items)]))
        prepared = await setup(layer)
        ticks = 0

        def tick() -> int:  # SQLite calls this every 10 virtual-machine instructions
            nonlocal ticks
            ticks += 1
            return 0

        await store.get(SCOPE, "any")  # opens the reader connection
        store._file._reader.set_progress_handler(tick, 10)
        await measured(layer, prepared)
        await store.aclose()
        return ticks

    return asyncio.run(run())


def test_an_id_prefix_costs_the_same_in_any_scope(tmp_path):
    # A lookup by prefix is `list_items(prefix=...)`, a range of SQLite's key index; listing
    # the id's `_bucket` slice, as layers before protocol 0.2.0 did, read the whole scope
    # (half a second at 100,000 memories).
    async def setup(layer):
        return await layer.remember("the rates desk hedges EUR exposure")

    async def lookup(layer, wanted):
        assert (await layer.get_memory(wanted.id[:8].upper())).id == wanted.id

    small, large = (reader_steps(tmp_path, items, setup, lookup) for items in (20, 3000))
    assert large < 2 * small


def test_forget_deletes_the_item(any_store_memory, raw):
    memory = any_store_memory
    kept = memory.remember("keep me")
    gone = memory.remember("forget me: password=hunter2 (already redacted)")
    assert memory.forget(gone.id[:8])
    assert memory.get_memory(gone.id) is None
    assert [m.id for m in memory.recall("")] == [kept.id]
    assert memory.forget(gone.id) is False
    # the item itself is gone, for any reader (`raw` opens the same file): no tombstone
    assert raw.get(SCOPE, gone.id) is None
    assert [item.key for item in raw.list_items(SCOPE).items] == [kept.id]


def test_tombstones_and_slice_keys_of_older_layers_read_as_deleted_and_are_ignored(memory, raw):
    # what `forget` wrote before protocol 0.2.0 had `delete`, kept by a store that did not
    # expire it; and a record with the `_bucket` key layers wrote to list scopes in slices
    tombstone = {"_deleted": True, "sensitivity": "secret", "tier": "cold", "_bucket": "ab"}
    raw.put(SCOPE, "ab000000-0000-4000-8000-000000000001", {"content": ""}, metadata=tombstone)
    kept = memory.remember("kept: the desk closes at five")
    value, metadata = to_store(kept, agent="dev")
    raw.put(SCOPE, kept.id, value, metadata={**metadata, "_bucket": kept.id[:2]})
    assert memory.get_memory("ab000000-0000-4000-8000-000000000001") is None
    assert memory.get_memory("ab000000") is None
    assert [m.id for m in memory.recall("")] == [kept.id]
    assert [m["id"] for m in json.loads(memory.export_memories())["memories"]] == [kept.id]
    assert memory.get_memory(kept.id).metadata == {}  # `_bucket` is no metadata of yours
    assert memory.get_all_tags() == {} and memory.run_tier_review() == (0, 0)
    with MemoryLoader(raw.store, SCOPE.project_id, timeout_ms=None) as loader:
        loaded = loader.load_for_agent("dev", layers=(1, 2, 3)).memories
    assert [m.id for m in loaded] == [kept.id]
    memory.add_tag(kept.id, "desk")  # a rewrite writes the record as the layer does now
    assert "_bucket" not in raw.get(SCOPE, kept.id).metadata


def test_items_other_tools_wrote_read_as_memories_and_convert_on_write(memory, raw):
    raw.put(SCOPE, "cli-note", "EUR/USD broke 1.10", metadata={"tier": "hot", "desk": "fx"})
    (found,) = memory.recall("EUR/USD")
    assert (found.id, found.content, found.tier, found.metadata) == (
        "cli-note",
        "EUR/USD broke 1.10",
        MemoryTier.HOT,
        {"desk": "fx"},
    )
    assert found.created_at == raw.get(SCOPE, "cli-note").created_at
    converted = raw.get(SCOPE, "cli-note")
    assert converted.value["content"] == "EUR/USD broke 1.10" and converted.value["access_count"]


def test_every_rewrite_keeps_the_expiry_of_an_item_stored_with_a_ttl(memory, raw):
    # an item put with a TTL (`animus memory put --ttl`, an agent's MCP put) reads as a memory;
    # the layer's writes to it (a recall's access count, a tag, tier moves, a new version's
    # demoted parent) must not make it permanent
    raw.put(SCOPE, "window", {"content": "the deploy window is open"}, ttl_seconds=600)
    expires_at = raw.get(SCOPE, "window").expires_at
    [found] = memory.recall("deploy window")
    found.confidence = 0.9
    memory.update_memory(found)
    memory.add_tag("window", "ops")
    memory.promote_memory("window")
    memory.run_tier_review(now=datetime.now(UTC) + timedelta(days=2))
    memory.update_with_version("window", content="the deploy window is open until 18:00")
    item = raw.get(SCOPE, "window")
    assert item.value["superseded_by"] is not None and item.metadata["tags"] == ["ops"]
    assert item.expires_at is not None
    assert abs(item.expires_at - expires_at) <= timedelta(seconds=2)


def test_a_new_version_of_an_expiring_memory_expires_with_it(memory, raw):
    # an edit must not turn a memory stored for ten minutes into a permanent one
    raw.put(SCOPE, "window", {"content": "the deploy window is open"}, ttl_seconds=600)
    expires_at = raw.get(SCOPE, "window").expires_at
    child = memory.update_with_version("window", content="the window is open until 18:00")
    grandchild = memory.update_with_version(child.id, tags=["ops"])
    for key in ("window", child.id, grandchild.id):
        item = raw.get(SCOPE, key)
        assert item.expires_at is not None and abs(item.expires_at - expires_at) <= timedelta(
            seconds=2
        )
    lasting = memory.remember("the desk closes at 17:00")
    assert (
        raw.get(SCOPE, memory.update_with_version(lasting.id, tags=["ops"]).id).expires_at is None
    )


# -- updates and versions --------------------------------------------------------------------


def test_update_memory_changes_it_in_place(memory):
    stored = memory.remember("draft")
    before = stored.updated_at
    stored.content = "final"
    stored.tags = ["Done"]
    assert memory.update_memory(stored) is True
    assert stored.updated_at > before and stored.tags == ["done"]
    assert memory.get_memory(stored.id).content == "final"
    assert memory.update_memory(Memory(content="never stored")) is False
    with pytest.raises(InvalidRequest, match="takes a Memory"):
        memory.update_memory({"content": "x"})


def test_update_with_version_keeps_history(memory):
    v1 = memory.remember(
        "User prefers dark mode", tags=["preference", "ui"], metadata={"origin": "chat"}, tier="hot"
    )
    v2 = memory.update_with_version(v1.id, content="User prefers light mode", tags=["preference"])
    assert (v2.version, v2.parent_id, v2.tier) == (2, v1.id, MemoryTier.HOT)
    assert v2.id != v1.id and v2.metadata == {"origin": "chat"}
    assert v2.change_summary == "v2: Content updated; tags removed: ui"
    v3 = memory.update_with_version(
        v2.id[:10],
        metadata={"origin": "review"},
        change_summary="confirmed in review",
        provenance="sync",
    )
    assert (v3.version, v3.content, v3.tags) == (3, "User prefers light mode", ["preference"])
    assert (v3.change_summary, v3.provenance) == ("confirmed in review", "sync")
    unchanged = memory.update_with_version(v3.id)
    assert unchanged.change_summary == "v4: No changes"

    assert memory.get_memory(v1.id).tier is MemoryTier.COLD  # history is archival
    assert [m.id for m in memory.recall("prefers")] == [unchanged.id]
    for any_version in (v1.id, v2.id, v3.id, unchanged.id[:8]):
        assert [m.version for m in memory.history(any_version)] == [1, 2, 3, 4]
    assert memory.history("c0ffee") == []
    assert memory.update_with_version("c0ffee", content="x") is None


def test_a_new_version_links_its_parent_and_keeps_the_link_through_rewrites(memory, raw):
    v1 = memory.remember("EUR/USD ranges between 1.05 and 1.10")
    stale = memory.get_memory(v1.id)
    v2 = memory.update_with_version(v1.id, content="EUR/USD ranges between 1.08 and 1.11")
    assert memory.get_memory(v1.id).superseded_by == v2.id and v2.superseded_by is None
    assert raw.get(SCOPE, v1.id).value["superseded_by"] == v2.id
    # rewrites of the old version, even from a copy read before v2 existed, keep it history
    memory.update_memory(stale)
    memory.promote_memory(v1.id)
    memory.add_tag(v1.id, "old")
    assert memory.get_memory(v1.id).superseded_by == v2.id
    assert [m.id for m in memory.recall("EUR/USD")] == [v2.id]


def test_recall_reads_as_little_of_a_large_scope_as_of_a_small_one(tmp_path):
    # Newer versions are found through the links on the records. Recall used to list the scope
    # filtered on parent_id, which SQLite answers by reading every item: 165 ms at 100k.
    async def setup(layer):
        v1 = await layer.remember("the rates desk hedges EUR exposure")
        return await layer.update_with_version(v1.id, content="the rates desk hedges USD exposure")

    async def recall(layer, v2):
        assert [m.id for m in await layer.recall("rates desk")] == [v2.id]

    small, large = (reader_steps(tmp_path, items, setup, recall) for items in (20, 3000))
    assert large < 2 * small


def test_forgetting_the_newest_version_makes_the_one_before_it_current(memory):
    v1 = memory.remember("the desk closes at 17:00")
    v2 = memory.update_with_version(v1.id, content="the desk closes at 18:00")
    memory.forget(v2.id)
    assert memory.get_memory(v1.id).superseded_by is None
    assert [m.id for m in memory.recall("desk closes")] == [v1.id]
    assert [m.id for m in memory.history(v1.id)] == [v1.id]

    # versions can branch (an old id versioned again): the parent stays history while either
    # newer version remains
    left = memory.update_with_version(v1.id, content="the desk closes at 18:30")
    right = memory.update_with_version(v1.id, content="the desk closes at 19:00")
    assert sorted(m.id for m in memory.recall("desk closes")) == sorted([left.id, right.id])
    memory.forget(right.id)
    assert memory.get_memory(v1.id).superseded_by == left.id
    assert [m.id for m in memory.recall("desk closes")] == [left.id]
    memory.forget(left.id)
    assert [m.id for m in memory.recall("desk closes")] == [v1.id]


def test_forgetting_a_middle_version_joins_the_chain_around_it(any_store_memory, db):
    memory = any_store_memory
    v1 = memory.remember("the desk closes at 17:00")
    v2 = memory.update_with_version(v1.id, content="the desk closes at 18:00")
    v3 = memory.update_with_version(v2.id, content="the desk closes at 19:00")
    assert memory.forget(v2.id)
    # v1 is still history: only the newest version is recalled, loaded or reviewed
    assert [m.id for m in memory.recall("desk closes")] == [v3.id]
    assert [m.id for m in memory.history(v1.id)] == [v1.id, v3.id]
    assert [m.id for m in memory.history(v3.id)] == [v1.id, v3.id]
    assert memory.get_memory(v3.id).parent_id == v1.id
    assert memory.get_all_tags() == {} and memory.run_tier_review() == (0, 0)
    with MemoryLoader(SQLiteStore(db), SCOPE.project_id, timeout_ms=None) as loader:
        assert [m.id for m in loader.load_for_agent("dev", layers=(1, 2, 3)).memories] == [v3.id]
    # forgetting v3 now makes v1 current again, as forgetting the newest version does
    memory.forget(v3.id)
    assert [m.id for m in memory.recall("desk closes")] == [v1.id]


def test_versions_stored_before_records_kept_links_still_read_as_history(memory, raw):
    # The layer's records before `superseded_by`: the same layout without it.
    def put_unlinked(record: Memory) -> None:
        value, metadata = to_store(record, agent="dev")
        del value["superseded_by"]
        raw.put(SCOPE, record.id, value, metadata={**metadata, "_bucket": record.id[:2]})

    v1 = Memory(content="the desk trades bunds", tier="cold")
    v2 = Memory(content="the desk trades bunds and gilts", version=2, parent_id=v1.id)
    put_unlinked(v1)
    put_unlinked(v2)
    exported = json.loads(memory.export_memories())["memories"]  # a scan sees every version
    assert {r["id"]: r["superseded_by"] for r in exported} == {v1.id: v2.id, v2.id: None}
    assert [m.id for m in memory.recall("desk trades")] == [v2.id]
    assert [m.id for m in memory.history(v1.id)] == [v1.id, v2.id]
    memory.promote_memory(v1.id)  # a rewrite looks the link up and records it
    assert raw.get(SCOPE, v1.id).value["superseded_by"] == v2.id
    assert memory.get_memory(v1.id).superseded_by == v2.id
    assert [m.id for m in memory.recall("desk trades")] == [v2.id]
    # so does an import over it of a record that names no newer version
    put_unlinked(v1)
    memory.import_memories(export_of(record("the desk trades bunds", v1.id, tier="cold")))
    assert raw.get(SCOPE, v1.id).value["superseded_by"] == v2.id
    assert [m.id for m in memory.recall("desk trades")] == [v2.id]


def test_an_import_links_versions_its_records_do_not(any_store_memory):
    # on SQLite the stored copies are read in batches (get_many), on a plugin a get each
    memory = any_store_memory
    parent, child = str(uuid.uuid4()), str(uuid.uuid4())
    # an export written before records carried superseded_by
    memory.import_memories(
        export_of(
            record("v1 of the plan", parent),
            record("v2 of the plan", child, version=2, parent_id=parent),
        )
    )
    assert memory.get_memory(parent).superseded_by == child
    assert [m.id for m in memory.recall("plan")] == [child]
    # a newer version imported alone links the parent already stored
    newest = str(uuid.uuid4())
    memory.import_memories(export_of(record("v3 of the plan", newest, version=3, parent_id=child)))
    assert memory.get_memory(child).superseded_by == newest
    assert [m.id for m in memory.recall("plan")] == [newest]
    exported = json.loads(memory.export_memories())["memories"]
    assert {r["id"]: r["superseded_by"] for r in exported} == {
        parent: child,
        child: newest,
        newest: None,
    }
    # an older export restored over newer versions leaves them newer
    before = memory.export_memories()
    latest = memory.update_with_version(newest, content="v4 of the plan")
    memory.import_memories(before)
    assert memory.get_memory(newest).superseded_by == latest.id
    assert [m.id for m in memory.recall("plan")] == [latest.id]


# -- tags and tiers --------------------------------------------------------------------------


def test_tag_management(memory):
    first = memory.remember("a", tags=["ui"])
    second = memory.remember("b", tags=["ui", "preference"])
    assert memory.add_tag(first.id, "  Preference ") is True
    assert memory.add_tag(first.id, "PREFERENCE") is False
    assert memory.add_tag("c0ffee", "x") is False
    assert memory.get_memory(first.id).tags == ["ui", "preference"]
    assert memory.remove_tag(second.id, "UI") is True
    assert memory.remove_tag(second.id, "ui") is False
    assert memory.remove_tag("c0ffee", "ui") is False
    assert memory.get_all_tags() == {"preference": 2, "ui": 1}
    memory.update_with_version(second.id, tags=["renamed"])
    assert memory.get_all_tags() == {"preference": 1, "renamed": 1, "ui": 1}


def test_promote_and_demote_one_tier_at_a_time(memory):
    stored = memory.remember("x")
    assert memory.promote_memory(stored.id) and memory.get_memory(stored.id).tier == "hot"
    assert memory.promote_memory(stored.id) is False
    assert memory.demote_memory(stored.id) and memory.demote_memory(stored.id)
    assert memory.get_memory(stored.id).tier is MemoryTier.COLD
    assert memory.demote_memory(stored.id) is False
    assert memory.promote_memory("c0ffee") is False and memory.demote_memory("c0ffee") is False


def test_a_manual_tier_move_is_not_undone_by_the_next_review(memory):
    # a memory untouched for 40 days that a person promotes today is not idle since 40 days
    long_ago = (datetime.now(UTC) - timedelta(days=40)).isoformat()
    old = record("old, promoted by hand", tier="warm", updated_at=long_ago)
    memory.import_memories(export_of(old))
    assert memory.promote_memory(old["id"])
    assert memory.run_tier_review() == (0, 0)
    assert memory.get_memory(old["id"]).tier is MemoryTier.HOT
    assert memory.run_tier_review(now=datetime.now(UTC) + timedelta(days=2)) == (1, 0)


def test_tier_review_demotes_stale_and_promotes_busy_memories(memory):
    now = datetime(2026, 3, 1, tzinfo=UTC)
    day = timedelta(days=1)

    def at(moment):
        return moment.isoformat()

    records = [
        record("stale hot", tier="hot", updated_at=at(now - 2 * day)),
        record("fresh hot", tier="hot", last_accessed=at(now - day / 2), access_count=1),
        record("stale warm", tier="warm", updated_at=at(now - 31 * day)),
        record("busy warm", tier="warm", access_count=5, last_accessed=at(now - day / 4)),
        record("quiet warm", tier="warm", access_count=5, last_accessed=at(now - 3 * day)),
        record("used cold", tier="cold", access_count=1, last_accessed=at(now - day / 2)),
        record("old cold", tier="cold", updated_at=at(now - 400 * day)),
    ]
    memory.import_memories(export_of(*records))
    assert memory.run_tier_review(now=now) == (2, 2)
    tiers = {r["content"]: memory.get_memory(r["id"]).tier.value for r in records}
    assert tiers == {
        "stale hot": "warm",
        "fresh hot": "hot",
        "stale warm": "cold",
        "busy warm": "hot",
        "quiet warm": "warm",
        "used cold": "warm",
        "old cold": "cold",
    }


# -- egress ----------------------------------------------------------------------------------


def test_egress_reads_return_public_memories_only(memory, raw):
    public = memory.remember("release notes", tags=["ship"])
    for level in ("personal", "confidential", "secret"):
        memory.remember(f"release {level} notes", tags=["ship"], sensitivity=level)
    raw.put(
        SCOPE, "typo", "release typo notes", metadata={"sensitivity": "pubic", "tags": ["ship"]}
    )
    raw.put(SCOPE, "plain", "release plain notes", metadata={"tags": ["ship"]})
    assert {m.id for m in memory.recall_for_egress("release")} == {public.id, "plain"}
    assert {m.id for m in memory.recall_by_tags_for_egress(["ship"])} == {public.id, "plain"}
    assert len(memory.recall("release")) == 6


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    memories=st.lists(
        st.tuples(
            st.sampled_from(["public", "personal", "confidential", "secret", None, "PUBLIC", "x"]),
            st.sampled_from(["hot", "warm", "cold"]),
            st.lists(st.sampled_from(["a", "b", "c"]), max_size=2),
        ),
        min_size=1,
        max_size=12,
    ),
    query=st.sampled_from(["", "notes", "alpha notes"]),
    tags=st.lists(st.sampled_from(["a", "b", "c"]), min_size=1, max_size=2),
)
def test_no_non_public_memory_on_any_egress_path(raw, db, memories, query, tags):
    scope = Scope(f"p-{uuid.uuid4()}", agent_id="dev")
    for n, (sensitivity, tier, item_tags) in enumerate(memories):
        metadata = {"tier": tier, "tags": item_tags}
        if sensitivity is not None:
            metadata["sensitivity"] = sensitivity
        raw.put(scope, f"k{n}", {"content": f"alpha notes {n}"}, metadata=metadata)
    # "PUBLIC" reads as public, but the shared store filter (EGRESS_FILTER) only matches the
    # spelling the layer writes: withholding it is the safe direction.
    public_keys = {f"k{n}" for n, (s, _, _) in enumerate(memories) if s in (None, "public")}
    readable = public_keys | {f"k{n}" for n, (s, _, _) in enumerate(memories) if s == "PUBLIC"}
    with MemoryLayer(SQLiteStore(db), scope) as layer:
        recalled = layer.recall_for_egress(query, limit=50)
        tagged = layer.recall_by_tags_for_egress(tags, limit=50)
    for found in (*recalled, *tagged):
        assert found.sensitivity is Sensitivity.PUBLIC and found.id in readable
    assert public_keys <= {m.id for m in recalled}


# -- entities --------------------------------------------------------------------------------


def test_entity_linking_extracts_links_and_recalls(db):
    with MemoryLayer(SQLiteStore(db), SCOPE, entities=True) as layer:
        review = layer.remember("Review pull request from Alice on the Animus project")
        assert review.entities == [Entity("Alice", "person"), Entity("Animus", "project")]
        layer.remember("Alice prefers small commits")
        layer.remember("alice blue is a colour")  # lowercase: not an entity
        linked = layer.recall_by_entity("ALICE")
        assert {m.content for m in linked} == {
            "Review pull request from Alice on the Animus project",
            "Alice prefers small commits",
        }
        layer.import_memories(
            export_of(record("Reviewed the pull request", entities=[{"name": "Bob Lee"}]))
        )
        assert [m.content for m in layer.recall("what did bob lee say")] == [
            "Reviewed the pull request"
        ]
        assert [m.content for m in layer.recall("bob lee")] == ["Reviewed the pull request"]


def test_entity_linking_is_off_by_default(memory):
    assert memory.remember("Review pull request from Alice").entities == []
    memory.import_memories(export_of(record("Reviewed it", entities=[{"name": "Bob"}])))
    assert memory.recall("bob") == []
    assert [m.content for m in memory.recall_by_entity("bob")] == ["Reviewed it"]
    # a new version of the same text keeps its links, so the entity still finds the memory
    (linked,) = memory.recall_by_entity("bob")
    version = memory.update_with_version(linked.id, tags=["done"])
    assert version.entities == [Entity("Bob")]
    assert [m.id for m in memory.recall_by_entity("bob")] == [version.id]


# -- enumeration past the store's top_k cap ---------------------------------------------------


class SmallSQLiteStore(SQLiteStore):
    """A real SQLite store that answers at most 20 hits per query."""

    capabilities = Capabilities(
        native_ttl=True, native_key_get=True, strong_consistency=True, max_query_top_k=20
    )


def test_a_scope_larger_than_max_query_top_k_is_enumerated_whole(tmp_path):
    # every layer id, and keys other tools chose ("fx-3"), past the store's top_k cap
    keyed = [record(f"keyed {n}", f"fx-{n}") for n in range(10)]
    notes = [record(f"note {n}", tags=["t"]) for n in range(150)]
    with MemoryLayer(SmallSQLiteStore(tmp_path / "m.db"), SCOPE) as layer:
        layer.import_memories(export_of(*keyed, *notes))
        assert layer.get_all_tags() == {"t": 150}
        ids = [m["id"] for m in json.loads(layer.export_memories())["memories"]]
        assert len(ids) == 160 and {f"fx-{n}" for n in range(10)} <= set(ids)
        assert layer.get_memory("fx-7").content == "keyed 7"
        some = layer.recall("", limit=1)[0]
        assert layer.get_memory(some.id[:8]).id == some.id


def test_a_scope_walk_reads_page_after_page(tmp_path):
    count = 2 * SCAN_PAGE + 1
    with MemoryLayer(SQLiteStore(tmp_path / "m.db"), SCOPE) as layer:
        layer.import_memories(export_of(*(record(f"note {n}", tags=["t"]) for n in range(count))))
        layer.forget(layer.recall("note 7", limit=1)[0].id)
        assert layer.get_all_tags() == {"t": count - 1}


def test_newer_versions_past_max_query_top_k_are_all_found(tmp_path):
    # 25 old versions stored before links, then restored from an export: looking up their
    # newer versions finds 25, more than the store answers per query
    parents = [Memory(content=f"plan {n}", tier="cold") for n in range(25)]
    children = [Memory(content=f"{p.content} v2", version=2, parent_id=p.id) for p in parents]
    with SyncStore(SQLiteStore(tmp_path / "m.db")) as raw:
        for stored in parents + children:
            value, metadata = to_store(stored, agent="dev")
            del value["superseded_by"]  # as layers before links stored it
            raw.put(SCOPE, stored.id, value, metadata={**metadata, "_bucket": stored.id[:2]})
    with MemoryLayer(SmallSQLiteStore(tmp_path / "m.db"), SCOPE) as layer:
        layer.import_memories(export_of(*(record(p.content, p.id) for p in parents)))
        links = {p.id: layer.get_memory(p.id).superseded_by for p in parents}
        assert links == {p.id: c.id for p, c in zip(parents, children, strict=True)}


# -- the facade, async use, blocks -----------------------------------------------------------

PUBLIC_METHODS = sorted(
    name
    for name, member in inspect.getmembers(AsyncMemoryLayer, inspect.iscoroutinefunction)
    if not name.startswith("_")
)


def test_the_blocking_facade_mirrors_every_async_method():
    assert len(PUBLIC_METHODS) >= 22
    for name in PUBLIC_METHODS:
        blocking = getattr(MemoryLayer, name)
        assert not inspect.iscoroutinefunction(blocking)
        assert inspect.signature(blocking) == inspect.signature(getattr(AsyncMemoryLayer, name))
        assert blocking.__doc__ == getattr(AsyncMemoryLayer, name).__doc__


async def test_the_facade_refuses_inside_a_running_loop_and_names_the_await_form(db):
    layer = MemoryLayer(SQLiteStore(db), SCOPE)
    with pytest.raises(RuntimeError, match=r"use `await AsyncMemoryLayer\(store, scope\)"):
        layer.recall("x")
    await asyncio.to_thread(layer.close, close_store=True)


async def test_the_async_layer_is_the_implementation(db):
    layer = AsyncMemoryLayer(SQLiteStore(db), SCOPE)
    stored = await layer.remember("async note", tags=["a"])
    assert [m.id for m in await layer.recall("async")] == [stored.id]
    assert await layer.get_all_tags() == {"a": 1}
    assert await layer.forget(stored.id)
    await layer.store.aclose()


def test_a_memory_store_block_or_a_sync_store_can_be_passed(db, tmp_path):
    block = SQLiteMemoryStore(path=str(db))
    with MemoryLayer(block, SCOPE) as layer:
        stored = layer.remember("via a block")
    with SyncStore(SQLiteStore(db)) as sync:
        assert MemoryLayer(sync, SCOPE).get_memory(stored.id).content == "via a block"
    with pytest.raises(InvalidRequest, match="is not a memory store"):
        MemoryLayer(object(), SCOPE)
