"""The store form of a memory record: one protocol item, and how items read back as memories.

A memory is stored through the protocol with key = its id, value = `{"content", ...}` holding
the record's own fields, and metadata = the caller's metadata plus the reserved keys of the
protocol (`memory_type`, `sensitivity`, `tier`, `tags`, ...), so any store can filter on them and
the `memory_bindings` hook can read them without knowing this layer. Items other tools wrote
read as memories too, and so do files of layers before protocol 0.2.0 (`LEGACY_BUCKET_KEY`,
`LEGACY_TOMBSTONE_KEY`). The version links of records (`superseded_by`) are kept here too.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

from animus_flows.errors import InvalidRequest
from animus_flows.memory.records import (
    ENTITIES_KEY,
    LAYER_KEYS,
    LEGACY_BUCKET_KEY,
    LEGACY_TOMBSTONE_KEY,
    Entity,
    Memory,
    MemoryTier,
    MemoryType,
    Sensitivity,
    aware,
    check_user_metadata,
    entity_from_json,
    iso,
    redaction_record,
)
from animus_flows.protocol import JSON, RESERVED_METADATA_KEYS, MemoryItem, indexed_text, utcnow
from animus_flows.retrieval.disclosure import memory_type_of as memory_type_name
from animus_flows.retrieval.disclosure import sensitivity_of, tier_of

# Record fields kept in the stored value rather than in metadata.
_VALUE_FIELDS = (
    "content",
    "subtype",
    "change_summary",
    "created_at",
    "updated_at",
    "access_count",
    "last_accessed",
    "entities",
    "superseded_by",
)


def to_store(memory: Memory, *, agent: str) -> tuple[dict[str, JSON], dict[str, JSON]]:
    """The `(value, metadata)` a store keeps for `memory`; `agent` is the owning scope's agent
    (`"shared"` for the project scope)."""
    metadata = check_user_metadata(memory.metadata, redaction=True)
    metadata.update(
        {
            "memory_type": memory.memory_type.value,
            "sensitivity": memory.sensitivity.value,
            "tier": memory.tier.value,
            "tags": list(memory.tags),
            "agent": agent,
            "version": memory.version,
            "source": memory.source,
            "confidence": memory.confidence,
            "provenance": memory.provenance,
        }
    )
    if memory.parent_id is not None:
        metadata["parent_id"] = memory.parent_id
    if memory.entities:
        metadata[ENTITIES_KEY] = list(dict.fromkeys(entity.key for entity in memory.entities))
    value: dict[str, JSON] = {
        "content": memory.content,
        "subtype": memory.subtype,
        "change_summary": memory.change_summary,
        "created_at": iso(memory.created_at),
        "updated_at": iso(memory.updated_at),
        "access_count": memory.access_count,
        "last_accessed": iso(memory.last_accessed),
        "superseded_by": memory.superseded_by,
    }
    if memory.entities:
        value["entities"] = [entity.to_json() for entity in memory.entities]
    return value, metadata


def is_legacy_tombstone(metadata: Mapping[str, JSON]) -> bool:
    """Whether an item is what `forget` left behind before protocol 0.2.0 (it expired after a
    second, but a file may hold one): it reads as deleted."""
    return metadata.get(LEGACY_TOMBSTONE_KEY) is True


def successor_unknown(value: JSON, metadata: Mapping[str, JSON]) -> bool:
    """Whether a stored memory may have newer versions its record does not point to.

    The layer writes `superseded_by` into every record it stores, None when no newer version
    exists. Records the layer wrote before it did so (they carry `_bucket` but no
    `superseded_by`) may have newer versions; other tools' items get one only through the layer,
    which then rewrites them.
    """
    return LEGACY_BUCKET_KEY in metadata and not (
        isinstance(value, dict) and "superseded_by" in value
    )


def stored_time(value: JSON, name: str) -> datetime | None:
    """A timestamp the layer wrote into a stored value, or None when it has none."""
    if isinstance(value, dict) and isinstance(value.get(name), str):
        try:
            return aware(datetime.fromisoformat(value[name]))
        except ValueError:
            return None
    return None


def from_store(
    key: str,
    value: JSON,
    metadata: Mapping[str, JSON],
    *,
    created_at: datetime | None = None,
    updated_at: datetime | None = None,
) -> Memory:
    """The memory a store item holds.

    Reads leniently, so items written by other tools (the CLI, the write-back hook) read as
    memories too: a plain value is the content, missing fields take their defaults, unknown
    value fields land in `metadata`, and sensitivity and tier go through `disclosure.py` (an
    unrecognized sensitivity reads as SECRET). `created_at`/`updated_at` are the store's times,
    used when the value carries none.
    """
    body = value if isinstance(value, dict) and isinstance(value.get("content"), str) else None
    extra: dict[str, JSON] = {}
    owned = RESERVED_METADATA_KEYS | LAYER_KEYS
    if body is not None:
        extra = {k: v for k, v in body.items() if k not in _VALUE_FIELDS and k not in owned}
    user = {k: v for k, v in metadata.items() if k not in owned and not k.startswith("_animus")}
    user.update(redaction_record(metadata))
    fields: dict[str, Any] = body or {}
    created = stored_time(value, "created_at") or created_at or utcnow()
    return Memory(
        id=key,
        content=content_of(value),
        memory_type=memory_type_of(metadata),
        created_at=created,
        updated_at=stored_time(value, "updated_at") or updated_at or created,
        tags=tags_of(metadata),
        source=_text(metadata.get("source"), "stated"),
        confidence=_confidence(metadata.get("confidence")),
        subtype=_optional_text(fields.get("subtype")),
        version=_count(metadata.get("version"), 1),
        parent_id=_optional_text(metadata.get("parent_id")),
        change_summary=_optional_text(fields.get("change_summary")),
        provenance=_text(metadata.get("provenance"), "direct"),
        sensitivity=Sensitivity(sensitivity_of(metadata)),
        tier=MemoryTier(tier_of(metadata)),
        access_count=_count(fields.get("access_count"), 0),
        last_accessed=stored_time(value, "last_accessed"),
        metadata={**extra, **user},
        entities=_lenient_entities(fields.get("entities")),
        superseded_by=_optional_text(fields.get("superseded_by")),
        successor_unknown=successor_unknown(value, metadata),
    )


# Cheap readers of single fields, for callers (the loader) that inspect many items and build
# few memories; `from_store` uses them too, so both read an item the same way.


def content_of(value: JSON) -> str:
    """A stored value's text: the layer's `content`, else what the store indexes."""
    if isinstance(value, dict) and isinstance(value.get("content"), str):
        return value["content"]
    return indexed_text(value)


def memory_type_of(metadata: Mapping[str, JSON]) -> MemoryType:
    """An item's memory type; absent or unknown reads as SEMANTIC, the seed's default."""
    return MemoryType(memory_type_name(metadata))


def tags_of(metadata: Mapping[str, JSON]) -> list[str]:
    """An item's tags, normalized; anything malformed reads as no tags."""
    value = metadata.get("tags")
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list):
        return []
    return list(dict.fromkeys(" ".join(t.split()).lower() for t in value if isinstance(t, str)))


def _lenient_entities(value: object) -> list[Entity]:
    if not isinstance(value, list):
        return []
    entities = []
    for item in value:
        try:
            entities.append(entity_from_json(item, "entities"))
        except InvalidRequest:
            continue
    return entities


def _text(value: object, default: str) -> str:
    return value if isinstance(value, str) and value else default


def _optional_text(value: object) -> str | None:
    return value if isinstance(value, str) else None


def _confidence(value: object) -> float:
    if isinstance(value, (int, float)) and not isinstance(value, bool) and not math.isnan(value):
        return min(1.0, max(0.0, float(value)))
    return 1.0


def _count(value: object, least: int) -> int:
    if isinstance(value, int) and not isinstance(value, bool) and value >= least:
        return value
    return least


def newest_versions(memories: Iterable[Memory]) -> dict[str, Memory]:
    """For each parent id among `memories`, its newest child (highest version, then latest)."""
    newest: dict[str, Memory] = {}
    for memory in memories:
        parent = memory.parent_id
        if parent is not None and (
            parent not in newest
            or (memory.version, memory.created_at)
            > (newest[parent].version, newest[parent].created_at)
        ):
            newest[parent] = memory
    return newest


def link_to_newest(memories: Iterable[Memory], newest: Mapping[str, Memory]) -> None:
    """Link each memory to its newest version in `newest` (see `newest_versions`), or to none."""
    for memory in memories:
        child = newest.get(memory.id)
        memory.link(None if child is None else child.id)


def link_whole_scope(memories: list[Memory]) -> None:
    """Link the memories of `memories` whose successor is unknown to their newest versions:
    they are every memory of the scope, so every newer version there is is among them."""
    unknown = [memory for memory in memories if memory.successor_unknown]
    link_to_newest(unknown, newest_versions(memories))


def memory_of(item: MemoryItem) -> Memory:
    """The memory a store item holds, with the store's times for a value that has none."""
    return from_store(
        item.key, item.value, item.metadata, created_at=item.created_at, updated_at=item.updated_at
    )
