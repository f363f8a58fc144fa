"""Memory records: enums on the wire, validation, JSON round trips, the store mapping."""

from datetime import UTC, datetime

import pytest

from animus_flows.errors import InvalidRequest
from animus_flows.memory import Entity, Memory, MemoryTier, MemoryType, Sensitivity
from animus_flows.memory.records import RECORD_FIELDS, check_user_metadata
from animus_flows.memory.store_form import from_store, to_store
from animus_flows.protocol import RESERVED_METADATA_KEYS
from animus_flows.retrieval.disclosure import metadata_filter

SEED_003_FIELDS = {
    "id",
    "content",
    "memory_type",
    "created_at",
    "updated_at",
    "tags",
    "source",
    "confidence",
    "subtype",
    "version",
    "parent_id",
    "change_summary",
    "provenance",
    "sensitivity",
    "tier",
    "access_count",
    "last_accessed",
}


def test_enum_values_are_the_seeds_lowercase_strings():
    assert [t.value for t in MemoryType] == [
        "episodic",
        "semantic",
        "procedural",
        "active",
        "reflective",
    ]
    assert [s.value for s in Sensitivity] == ["public", "personal", "confidential", "secret"]
    assert [t.value for t in MemoryTier] == ["hot", "warm", "cold"]
    assert MemoryType.SEMANTIC == "semantic" and f"{MemoryTier.HOT}" == "hot"


def test_a_record_has_every_field_of_seed_003_plus_metadata_entities_and_its_successor():
    assert SEED_003_FIELDS | {"metadata", "entities", "superseded_by"} == set(RECORD_FIELDS)
    memory = Memory(content="x")
    assert set(memory.to_json()) == set(RECORD_FIELDS)


def test_defaults_follow_seed_003():
    memory = Memory(content="User prefers dark mode")
    assert memory.memory_type is MemoryType.SEMANTIC
    assert memory.sensitivity is Sensitivity.PUBLIC
    assert memory.tier is MemoryTier.WARM
    assert (memory.source, memory.provenance, memory.confidence) == ("stated", "direct", 1.0)
    assert (memory.version, memory.parent_id, memory.access_count) == (1, None, 0)
    assert memory.last_accessed is None and memory.tags == [] and memory.metadata == {}
    assert len(memory.id) == 36 and memory.created_at.tzinfo is not None


def test_strings_become_enums_and_tags_are_normalized():
    memory = Memory(
        content="x",
        memory_type="Episodic",
        sensitivity="SECRET",
        tier="hot",
        tags=["UI", " Dark   Mode ", "ui"],
    )
    assert memory.memory_type is MemoryType.EPISODIC
    assert memory.sensitivity is Sensitivity.SECRET and memory.tier is MemoryTier.HOT
    assert memory.tags == ["ui", "dark mode"]


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"memory_type": "dream"}, "memory_type 'dream' is not one of episodic, semantic"),
        ({"sensitivity": "internal"}, "sensitivity 'internal' is not one of public"),
        ({"tier": "lukewarm"}, "tier 'lukewarm' is not one of hot, warm, cold"),
        ({"confidence": 1.5}, "confidence 1.5 must be a number from 0.0 to 1.0"),
        ({"confidence": float("nan")}, "confidence nan must be a number"),
        ({"version": 0}, "version 0 must be an integer >= 1"),
        ({"access_count": -1}, "access_count -1 must be an integer >= 0"),
        ({"tags": "ui"}, "tags 'ui' is a string; pass a list"),
        ({"tags": ["  "]}, "tag '  ' is empty"),
        ({"source": ""}, "source '' must be a non-empty string"),
        ({"metadata": {1: "x"}}, "metadata {1: 'x'} must be an object with string keys"),
        ({"content": None}, "content None is a NoneType; pass text"),
        ({"confidence": True}, "confidence True must be a number from 0.0 to 1.0"),
        ({"version": 2.0}, "version 2.0 must be an integer >= 1"),
        ({"id": ""}, "memory id '' must be a non-empty string"),
        ({"created_at": "2026-01-01"}, "created_at '2026-01-01' must be a datetime"),
        ({"parent_id": 7}, "parent_id 7 must be a string or None"),
        ({"colour": "red"}, "colour is not a field of a memory; a record has id, content,"),
    ],
)
def test_invalid_fields_name_the_field_and_the_fix(fields, message):
    """Memory is a pydantic model: every refusal is our InvalidRequest, on one line."""
    with pytest.raises(InvalidRequest) as caught:
        Memory(**{"content": "x", **fields})
    assert message in str(caught.value)


def test_json_round_trip_keeps_every_field():
    memory = Memory(
        content="Story MIS-4 completed",
        memory_type=MemoryType.EPISODIC,
        tags=["milestone"],
        source="learned",
        confidence=0.8,
        subtype="event",
        version=3,
        parent_id="3f2a9c1b-8d7e-4f5a-9b3c-2d1e0f9a8b7c",
        change_summary="v3: Content updated",
        provenance="sync",
        sensitivity=Sensitivity.PERSONAL,
        tier=MemoryTier.HOT,
        access_count=4,
        last_accessed=datetime(2026, 2, 9, 12, tzinfo=UTC),
        metadata={"story": "MIS-4"},
        entities=[Entity("MIS", "project")],
    )
    assert Memory.from_json(memory.to_json()) == memory
    assert memory.to_json()["tier"] == "hot" and memory.to_json()["sensitivity"] == "personal"


@pytest.mark.parametrize(
    ("record", "message"),
    [
        ([], "memories[2]: [] is not an object"),
        ({"content": "x"}, "memories[2]: missing 'id'"),
        ({"id": "a", "content": "x", "colour": "red"}, "unknown field(s) colour"),
        ({"id": "a", "content": "x", "created_at": "yesterday"}, "created_at 'yesterday' is not"),
        ({"id": "a", "content": "x", "entities": [{"nom": "x"}]}, "entity {'nom': 'x'} must be"),
    ],
)
def test_from_json_names_the_record_and_the_problem(record, message):
    with pytest.raises(InvalidRequest) as caught:
        Memory.from_json(record, where="memories[2]")
    assert message in str(caught.value)


def test_the_store_mapping_puts_filterable_fields_in_reserved_metadata():
    memory = Memory(
        content="User prefers dark mode",
        tags=["preference"],
        sensitivity="personal",
        tier="hot",
        parent_id="p",
        version=2,
        metadata={"origin": "chat", "_redaction_count": 1, "_redaction_types": ["jwt"]},
        entities=[Entity("Alice", "person")],
    )
    value, metadata = to_store(memory, agent="dev")
    assert value["content"] == "User prefers dark mode"
    assert {k for k in metadata if k in RESERVED_METADATA_KEYS} == RESERVED_METADATA_KEYS
    assert metadata["agent"] == "dev" and metadata["tier"] == "hot"
    assert metadata["sensitivity"] == "personal" and metadata["tags"] == ["preference"]
    assert metadata["origin"] == "chat" and metadata["_entities"] == ["alice"]
    assert "_bucket" not in metadata  # protocol 0.2.0 lists scopes: no slices to keep
    assert from_store(memory.id, value, metadata) == memory


def test_items_written_by_other_tools_read_as_memories():
    plain = from_store("cli-key", "EUR/USD broke 1.10", {"tier": "hot", "note": "desk"})
    assert (plain.id, plain.content, plain.tier) == ("cli-key", "EUR/USD broke 1.10", "hot")
    assert plain.memory_type is MemoryType.SEMANTIC and plain.metadata == {"note": "desk"}
    shaped = from_store("k", {"content": "phase output", "phase": "research", "tier": "x"}, {})
    assert shaped.content == "phase output" and shaped.metadata == {"phase": "research"}
    assert shaped.tier is MemoryTier.WARM  # the value's "tier" is data, not the record's tier
    listed = from_store("k", [1, 2], {"sensitivity": "TOP-SECRET", "tags": "solo"})
    assert listed.content == "[1,2]" and listed.tags == ["solo"]
    assert listed.sensitivity is Sensitivity.SECRET  # unknown reads as the strictest


def test_the_caller_may_not_set_keys_the_layer_owns():
    with pytest.raises(InvalidRequest, match="tier are reserved by the memory layer"):
        check_user_metadata({"tier": "hot", "colour": "red"})
    # keys older layers wrote, which their files may still hold
    for legacy in ("_bucket", "_deleted"):
        with pytest.raises(InvalidRequest, match=f"{legacy} are reserved"):
            check_user_metadata({legacy: "ab"})
    # the redaction record is the layer's: refused from callers, kept on its own writes
    with pytest.raises(InvalidRequest, match="_redaction_count are reserved.*rename the key"):
        check_user_metadata({"_redaction_count": 2})
    assert check_user_metadata({"_redaction_count": 2}, redaction=True) == {"_redaction_count": 2}


def test_filters_match_items_that_omit_a_key_with_the_default_value_and_any_spelling():
    assert metadata_filter("tier", ["warm"]) == ["warm", "WARM", "Warm", None]
    assert metadata_filter("tier", ["hot"]) == ["hot", "HOT", "Hot"]
    assert metadata_filter("sensitivity", ["public", "personal"]) == [
        *("public", "PUBLIC", "Public", "personal", "PERSONAL", "Personal", None)
    ]
    assert metadata_filter("memory_type", ["episodic", "episodic"]) == [
        *("episodic", "EPISODIC", "Episodic")
    ]


def test_a_changed_memory_is_checked_again_by_validate():
    memory = Memory(content="x")
    memory.tier = "HOT"
    memory.tags = ["A", "a"]
    memory.validate()
    assert memory.tier is MemoryTier.HOT and memory.tags == ["a"]
    memory.confidence = float("nan")
    with pytest.raises(InvalidRequest, match="^confidence nan must be a number from 0.0 to 1.0$"):
        memory.validate()


def test_records_of_older_layers_read_as_they_meant():
    # a record of a layer before `superseded_by`: `_bucket`, no link; it may have newer versions
    legacy = from_store(
        "ab12", {"content": "x", "created_at": "2026-01-01T00:00:00+00:00"}, {"_bucket": "ab"}
    )
    assert legacy.successor_unknown and "_bucket" not in legacy.metadata
    assert "successor_unknown" not in legacy.to_json()
    legacy.link("cd34")
    assert (legacy.superseded_by, legacy.successor_unknown) == ("cd34", False)
    assert not from_store(
        "k", {"content": "x", "superseded_by": None}, {"_bucket": "ab"}
    ).successor_unknown
    assert not from_store("k", "a plain item", {}).successor_unknown
