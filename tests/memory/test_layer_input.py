"""Bad input to the memory layer is refused with an InvalidRequest that names the value and the
fix, before anything is written; a closed layer says so."""

import json
import math
import warnings
from datetime import datetime

import pytest

from animus_flows.errors import InvalidRequest
from animus_flows.memory import MemoryLayer
from animus_flows.memory.tiers import TierPolicy
from animus_flows.protocol import Scope
from animus_flows.stores import SQLiteStore

SCOPE = Scope("demo", agent_id="dev")  # the `memory` fixture's


def stored_count(raw):
    return len(raw.query(SCOPE, "", top_k=100))


# -- tags ------------------------------------------------------------------------------------


def test_a_string_of_tags_is_refused_on_every_write_path(memory, raw):
    kept = memory.remember("kept", tags=["ok"])
    with pytest.raises(InvalidRequest, match=r"tags 'urgent' is a string; pass a list such as"):
        memory.remember("x", tags="urgent")
    with pytest.raises(InvalidRequest, match="tags 'abc' is a string"):
        memory.update_with_version(kept.id, tags="abc")
    with pytest.raises(InvalidRequest, match="tags 'abc' is a string"):
        memory.remember_fact("User", "likes", "tea", tags="abc")
    changed = memory.get_memory(kept.id)
    changed.tags = "abc"
    with pytest.raises(InvalidRequest, match="tags 'abc' is a string"):
        memory.update_memory(changed)
    assert stored_count(raw) == 1
    assert memory.get_memory(kept.id).tags == ["ok"]


# -- update_memory re-checks the fields a caller changed -------------------------------------


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("tier", "bogus", "tier 'bogus' is not one of hot, warm, cold"),
        ("content", None, "content None is a NoneType; pass text"),
        ("content", "  ", "content '  ' must be non-empty text"),
        ("confidence", math.nan, "confidence nan must be a number from 0.0 to 1.0"),
        ("source", "bogus", "source 'bogus' is not one of stated, inferred, learned"),
        ("provenance", "bogus", "provenance 'bogus' is not one of direct, sync"),
        ("created_at", "2020", "created_at '2020' must be a datetime"),
    ],
)
def test_update_memory_checks_the_fields_again(memory, field, value, message):
    stored = memory.remember("original")
    changed = memory.get_memory(stored.id)
    setattr(changed, field, value)
    with pytest.raises(InvalidRequest, match=message):
        memory.update_memory(changed)
    assert memory.get_memory(stored.id).content == "original"


def test_update_memory_keeps_the_stored_redaction_record(memory):
    stored = memory.remember("key AKIAIOSFODNN7EXAMPLE")
    changed = memory.get_memory(stored.id)
    changed.metadata["_redaction_count"] = "abc"
    changed.metadata["desk"] = "fx"
    assert memory.update_memory(changed)
    assert memory.get_memory(stored.id).metadata == {
        "desk": "fx",
        "_redaction_count": 1,
        "_redaction_types": ["aws_access_key"],
    }


# -- remember --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"content": ""}, "content '' must be non-empty text"),
        ({"content": " \n"}, "content ' \\\\n' must be non-empty text"),
        ({"source": "bogus"}, "source 'bogus' is not one of stated, inferred, learned"),
        ({"provenance": "bogus"}, "provenance 'bogus' is not one of direct, sync, consolidation"),
        ({"metadata": {"_redaction_count": "abc"}}, "_redaction_count are reserved"),
        ({"metadata": {"_redaction_types": {"a": 1}}}, "_redaction_types are reserved"),
        ({"metadata": {"_redaction_count": 5}}, "the layer writes them itself"),
        ({"metadata": {"score": math.nan}}, "metadata key 'score' is not JSON-serializable"),
    ],
)
def test_remember_refuses_bad_values(memory, raw, arguments, message):
    with pytest.raises(InvalidRequest, match=message):
        memory.remember(**{"content": "x", **arguments})
    assert stored_count(raw) == 0


def test_update_with_version_refuses_bad_values_before_reading(memory, raw):
    parent = memory.remember("v1")
    for arguments, message in [
        ({"content": ""}, "content '' must be non-empty text"),
        ({"provenance": "bogus"}, "provenance 'bogus' is not one of"),
        ({"metadata": {"_redaction_count": 1}}, "_redaction_count are reserved"),
    ]:
        with pytest.raises(InvalidRequest, match=message):
            memory.update_with_version(parent.id, **arguments)
    assert stored_count(raw) == 1


def test_the_allowed_sources_and_provenances_are_accepted(memory):
    for source in ("stated", "inferred", "learned"):
        assert memory.remember("x", source=source).source == source
    for provenance in ("direct", "sync", "consolidation", "import", "mcp"):
        assert memory.remember("x", provenance=provenance).provenance == provenance


# -- recall filters --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"min_confidence": math.nan}, "min_confidence nan must be a number from 0.0 to 1.0"),
        ({"min_confidence": 2}, "min_confidence 2 must be a number from 0.0 to 1.0"),
        ({"source": 1}, "source 1 must be a non-empty string"),
    ],
)
def test_recall_refuses_filters_that_match_nothing_by_mistake(memory, arguments, message):
    memory.remember("x")
    with pytest.raises(InvalidRequest, match=message):
        memory.recall("", **arguments)


# -- construction, tiers, backup -------------------------------------------------------------


def test_an_agent_scope_named_shared_is_refused(db):
    with pytest.raises(InvalidRequest, match=r"agent_id 'shared' names the shared project scope"):
        MemoryLayer(SQLiteStore(db), Scope("proj", agent_id="shared"))


def test_the_tier_policy_must_be_a_tier_policy(db):
    with pytest.raises(InvalidRequest, match="tier_policy 5 is not a TierPolicy"):
        MemoryLayer(SQLiteStore(db), Scope("proj"), tier_policy=5)
    assert MemoryLayer(SQLiteStore(db), Scope("proj"), tier_policy=TierPolicy()).tier_policy


def test_run_tier_review_needs_a_datetime(memory):
    memory.remember("x")
    with pytest.raises(InvalidRequest, match="now '2020' must be a datetime"):
        memory.run_tier_review(now="2020")
    assert memory.run_tier_review(now=datetime(2020, 1, 1)) == (0, 0)  # naive: taken as UTC


def test_backup_needs_a_path_and_writes_to_devices(memory):
    memory.remember("x")
    with pytest.raises(InvalidRequest, match="backup path None must be a file path"):
        memory.backup(None)
    assert str(memory.backup("/dev/null")) == "/dev/null"


# -- import ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("records", "message"),
    [
        (
            [{"id": "self", "content": "x", "parent_id": "self", "version": 2}],
            r"memories\[0\]: the version chain of id self loops back to it \(self -> self\)",
        ),
        (
            [
                {"id": "c0", "content": "root"},
                {"id": "c1", "content": "x", "parent_id": "c2", "version": 2},
                {"id": "c2", "content": "y", "parent_id": "c1", "version": 3},
            ],
            r"memories\[1\]: the version chain of id c1 loops back to it \(c1 -> c2 -> c1\)",
        ),
        (
            [{"id": "t", "content": "x", "created_at": "0001-01-01T00:00:00+14:00"}],
            r"memories\[0\]: created_at '0001-01-01T00:00:00\+14:00' has no UTC time",
        ),
        (
            [{"id": "a", "content": "x"}, {"id": "n", "content": "x", "metadata": {"v": math.nan}}],
            r"memories\[1\]: metadata key 'v' is not JSON-serializable",
        ),
        (
            [{"id": "r", "content": "x", "metadata": {"_redaction_count": "abc"}}],
            r"memories\[0\]: metadata _redaction_count 'abc' is not a redaction record",
        ),
    ],
)
def test_an_import_refuses_bad_records_and_writes_nothing(memory, raw, records, message):
    with pytest.raises(InvalidRequest, match=message):
        memory.import_memories(json.dumps(records))
    assert stored_count(raw) == 0


def test_an_import_keeps_a_well_formed_redaction_record(memory):
    record = {"id": "r", "content": "x", "metadata": {"_redaction_count": 2}}
    assert memory.import_memories(json.dumps([record])) == 1
    assert memory.get_memory("r").redaction_count == 2


def test_a_version_chain_without_a_loop_still_imports(memory):
    records = [
        {"id": "v1", "content": "one"},
        {"id": "v2", "content": "two", "parent_id": "v1", "version": 2},
        {"id": "v3", "content": "three", "parent_id": "v2", "version": 3},
    ]
    assert memory.import_memories(json.dumps(records)) == 3
    assert [m.content for m in memory.recall("")] == ["three"]


# -- a closed layer --------------------------------------------------------------------------


def test_a_closed_layer_says_so_and_closes_once(db):
    layer = MemoryLayer(SQLiteStore(db), Scope("proj"))
    layer.remember("x")
    layer.close(close_store=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no "coroutine was never awaited"
        with pytest.raises(RuntimeError, match="^MemoryLayer is closed; create a new one"):
            layer.recall("")
        layer.close(close_store=True)  # a second close does nothing
        layer.close()
