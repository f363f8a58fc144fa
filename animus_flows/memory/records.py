"""Memory records: the enums, the `Memory` dataclass, and its one mapping onto a store item.

A memory is stored through the protocol with key = its id, value = `{"content", ...}` holding
the record's own fields, and metadata = the caller's metadata plus the reserved keys of the
protocol (`memory_type`, `sensitivity`, `tier`, `tags`, ...), so any store can filter on them and
the `memory_bindings` hook can read them without knowing this layer.
"""

from __future__ import annotations

import math
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

from animus_flows.errors import InvalidRequest
from animus_flows.protocol import JSON, RESERVED_METADATA_KEYS, indexed_text, utcnow
from animus_flows.retrieval.disclosure import memory_type_of as memory_type_name
from animus_flows.retrieval.disclosure import (
    sensitivity_of,
    tier_of,
)
from animus_flows.stores.base import check_json


class MemoryType(StrEnum):
    """How a memory was acquired and what it represents (seed 003; `reflective` from seed 002)."""

    EPISODIC = "episodic"  # events and conversations: what happened
    SEMANTIC = "semantic"  # facts and knowledge: what is true
    PROCEDURAL = "procedural"  # workflows and patterns: how to do things
    ACTIVE = "active"  # live session state not yet consolidated
    REFLECTIVE = "reflective"  # insights and lessons: what was learned


class Sensitivity(StrEnum):
    """Who may see a memory; only PUBLIC ones may leave the system (egress)."""

    PUBLIC = "public"
    PERSONAL = "personal"
    CONFIDENTIAL = "confidential"
    SECRET = "secret"


class MemoryTier(StrEnum):
    """Temperature tier: retention priority and the order of progressive disclosure."""

    HOT = "hot"
    WARM = "warm"
    COLD = "cold"


#: Tiers from coldest to hottest: promotion moves right, demotion left.
TIER_LADDER = (MemoryTier.COLD, MemoryTier.WARM, MemoryTier.HOT)

#: What an absent metadata key means, so store filters can include items that omit it.

#: Reserved keys only the layer writes: its record of what redaction replaced. An import may
#: carry them (a restore is faithful); every other write refuses them.
REDACTION_KEYS = ("_redaction_count", "_redaction_types")

#: The `source` values the layer's write methods accept (how the memory was acquired).
SOURCES = ("stated", "inferred", "learned")
#: The `provenance` values the layer's write methods accept (which path wrote the memory).
PROVENANCES = ("direct", "sync", "consolidation", "import", "mcp")

# Layer bookkeeping in store metadata. `_bucket` (the id's first two hex digits) lets the layer
# enumerate a scope in slices and find ids by prefix despite the store's top_k cap; `_entities`
# holds linked entity keys so stores can filter on them; `_deleted` marks a forgotten memory.
BUCKET_KEY = "_bucket"
ENTITIES_KEY = "_entities"
DELETED_KEY = "_deleted"
LAYER_KEYS = frozenset({BUCKET_KEY, ENTITIES_KEY, DELETED_KEY})

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


def normalize_tag(tag: object) -> str:
    """A tag as stored: lowercase, inner whitespace collapsed; empty tags are an error."""
    if not isinstance(tag, str):
        raise InvalidRequest(f"tag {tag!r} is a {type(tag).__name__}; tags are strings")
    normalized = " ".join(tag.split()).lower()
    if not normalized:
        raise InvalidRequest(f"tag {tag!r} is empty; pass a word such as 'preference'")
    return normalized


def normalize_tags(tags: Iterable[object] | None) -> list[str]:
    """Normalized tags, first occurrence kept, order preserved; the one check every read and
    write path runs, so a string is refused rather than split into letters."""
    if tags is None:
        return []
    if isinstance(tags, str):
        raise InvalidRequest(f"tags {tags!r} is a string; pass a list such as [{tags!r}]")
    if not isinstance(tags, Iterable) or isinstance(tags, Mapping):
        raise InvalidRequest(f"tags {tags!r} must be a list of strings such as ['preference']")
    return list(dict.fromkeys(normalize_tag(tag) for tag in tags))


def check_choice(name: str, value: object, choices: tuple[str, ...]) -> str:
    """`value` when it is one of `choices` (`source`, `provenance`), else refused."""
    if not isinstance(value, str) or value not in choices:
        raise InvalidRequest(f"{name} {value!r} is not one of {', '.join(choices)}")
    return value


def entity_key(name: str) -> str:
    """The key two mentions of one entity share: lowercase, whitespace collapsed."""
    return " ".join(name.split()).lower()


@dataclass(frozen=True)
class Entity:
    """A named thing a memory mentions (a person, a project, ...), found by `entities.py`."""

    name: str
    type: str = "unknown"

    @property
    def key(self) -> str:
        return entity_key(self.name)

    def to_json(self) -> dict[str, str]:
        return {"name": self.name, "type": self.type}


def _aware(moment: datetime) -> datetime:
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def _iso(moment: datetime | None) -> str | None:
    return None if moment is None else moment.astimezone(UTC).isoformat()


@dataclass(kw_only=True)
class Memory:
    """One memory: seed 003's record fields plus free-form `metadata`, linked `entities` and
    `superseded_by`.

    Enum fields accept their lowercase values (`memory_type="episodic"`); tags are normalized
    to lowercase. `metadata` carries the caller's keys and, after redaction, `_redaction_count`
    and `_redaction_types`. `superseded_by` is the id of the newer version that
    `update_with_version` made of this memory (the reverse of the newer one's `parent_id`), None
    while it is current; the layer keeps it, so recall need not search for newer versions.

    Example:
        ```python
        from animus_flows.memory import Memory, MemoryType

        memory = Memory(content="User prefers dark mode", memory_type=MemoryType.SEMANTIC,
                        tags=["preference", "UI"])
        memory.tags  # ['preference', 'ui']
        ```
    """

    id: str = field(default_factory=lambda: str(uuid.uuid4()))
    content: str
    memory_type: MemoryType = MemoryType.SEMANTIC
    created_at: datetime = field(default_factory=utcnow)
    updated_at: datetime = field(default_factory=utcnow)
    tags: list[str] = field(default_factory=list)
    source: str = "stated"
    confidence: float = 1.0
    subtype: str | None = None
    version: int = 1
    parent_id: str | None = None
    change_summary: str | None = None
    provenance: str = "direct"
    sensitivity: Sensitivity = Sensitivity.PUBLIC
    tier: MemoryTier = MemoryTier.WARM
    access_count: int = 0
    last_accessed: datetime | None = None
    metadata: dict[str, JSON] = field(default_factory=dict)
    entities: list[Entity] = field(default_factory=list)
    superseded_by: str | None = None

    def __post_init__(self) -> None:
        self.validate()

    def validate(self) -> None:
        """Check every field and normalize it in place (enum values, tags, aware times).

        Runs when a memory is made, and again when `update_memory` writes one whose fields
        were changed since.

        Raises:
            InvalidRequest: naming the field, its value and what it must be.
        """
        if not isinstance(self.id, str) or not self.id or "\x00" in self.id:
            raise InvalidRequest(f"memory id {self.id!r} must be a non-empty string")
        if not isinstance(self.content, str):
            raise InvalidRequest(
                f"content {self.content!r} is a {type(self.content).__name__}; pass text"
            )
        self.memory_type = _enum(MemoryType, self.memory_type, "memory_type")
        self.sensitivity = _enum(Sensitivity, self.sensitivity, "sensitivity")
        self.tier = _enum(MemoryTier, self.tier, "tier")
        self.tags = normalize_tags(self.tags)
        for name in ("source", "provenance"):
            value = getattr(self, name)
            if not isinstance(value, str) or not value:
                raise InvalidRequest(f"{name} {value!r} must be a non-empty string")
        for name in ("subtype", "parent_id", "change_summary", "superseded_by"):
            value = getattr(self, name)
            if value is not None and not isinstance(value, str):
                raise InvalidRequest(f"{name} {value!r} must be a string or None")
        confidence = self.confidence
        if (
            isinstance(confidence, bool)
            or not isinstance(confidence, (int, float))
            or math.isnan(confidence)
            or not 0.0 <= confidence <= 1.0
        ):
            raise InvalidRequest(f"confidence {confidence!r} must be a number from 0.0 to 1.0")
        self.confidence = float(confidence)
        for name, least in (("version", 1), ("access_count", 0)):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < least:
                raise InvalidRequest(f"{name} {value!r} must be an integer >= {least}")
        for name in ("created_at", "updated_at", "last_accessed"):
            value = getattr(self, name)
            if value is None and name == "last_accessed":
                continue
            if not isinstance(value, datetime):
                raise InvalidRequest(f"{name} {value!r} must be a datetime")
            setattr(self, name, _in_range(_aware(value), name))
        if not isinstance(self.metadata, dict) or not all(
            isinstance(key, str) for key in self.metadata
        ):
            raise InvalidRequest(f"metadata {self.metadata!r} must be an object with string keys")
        self.entities = [
            entity if isinstance(entity, Entity) else _entity_from_json(entity, "entities")
            for entity in self.entities
        ]

    @property
    def redaction_count(self) -> int:
        """How many secrets were replaced by markers when this memory was written."""
        count = self.metadata.get("_redaction_count", 0)
        return count if isinstance(count, int) else 0

    def to_json(self) -> dict[str, JSON]:
        """The record as JSON: every field, enums as lowercase strings, times in ISO 8601."""
        return {
            "id": self.id,
            "content": self.content,
            "memory_type": self.memory_type.value,
            "created_at": _iso(self.created_at),
            "updated_at": _iso(self.updated_at),
            "tags": list(self.tags),
            "source": self.source,
            "confidence": self.confidence,
            "subtype": self.subtype,
            "version": self.version,
            "parent_id": self.parent_id,
            "change_summary": self.change_summary,
            "provenance": self.provenance,
            "sensitivity": self.sensitivity.value,
            "tier": self.tier.value,
            "access_count": self.access_count,
            "last_accessed": _iso(self.last_accessed),
            "metadata": dict(self.metadata),
            "entities": [entity.to_json() for entity in self.entities],
            "superseded_by": self.superseded_by,
        }

    @classmethod
    def from_json(cls, data: object, *, where: str = "memory") -> Memory:
        """A memory from its JSON record; `id` and `content` are required, the rest defaults.

        Raises:
            InvalidRequest: naming `where`, the field and what it must be.
        """
        if not isinstance(data, Mapping):
            raise InvalidRequest(f"{where}: {data!r} is not an object; pass a memory record")
        unknown = sorted(set(data) - set(RECORD_FIELDS))
        if unknown:
            raise InvalidRequest(
                f"{where}: unknown field(s) {', '.join(unknown)}; "
                f"a record has {', '.join(RECORD_FIELDS)}"
            )
        for required in ("id", "content"):
            if required not in data:
                raise InvalidRequest(f"{where}: missing {required!r}; every record needs one")
        fields = dict(data)
        try:
            for name in ("created_at", "updated_at", "last_accessed"):
                if fields.get(name) is not None:
                    fields[name] = _parse_time(fields[name], name)
                elif name != "last_accessed":
                    fields.pop(name, None)
            for name in ("tags", "metadata", "entities"):
                if fields.get(name) is None:
                    fields.pop(name, None)
            if "entities" in fields:
                if not isinstance(fields["entities"], list):
                    raise InvalidRequest(f"entities {fields['entities']!r} must be a list")
                fields["entities"] = [_entity_from_json(e, "entities") for e in fields["entities"]]
            return cls(**fields)
        except InvalidRequest as exc:
            raise InvalidRequest(f"{where}: {exc}") from None


RECORD_FIELDS = tuple(name for name in Memory.__dataclass_fields__)


def _enum(kind: type[StrEnum], value: object, name: str) -> Any:
    try:
        return kind(value.lower() if isinstance(value, str) else value)
    except ValueError:
        choices = ", ".join(member.value for member in kind)
        raise InvalidRequest(f"{name} {value!r} is not one of {choices}") from None


def parse_record_time(value: object, name: str) -> datetime | None:
    """A record's time field `name` as an aware datetime (None stays None), checked as the
    record's own times are: ISO 8601, read as UTC without a zone, with a UTC time.

    Raises:
        InvalidRequest: naming `name` and the value.
    """
    return None if value is None else _in_range(_parse_time(value, name), name)


def _parse_time(value: object, name: str) -> datetime:
    if isinstance(value, datetime):
        return _aware(value)
    try:
        return _aware(datetime.fromisoformat(str(value)))
    except ValueError:
        raise InvalidRequest(
            f"{name} {value!r} is not an ISO 8601 time such as 2026-01-31T12:00:00+00:00"
        ) from None


def _in_range(moment: datetime, name: str) -> datetime:
    """`moment`, when it has a UTC time: records are stored in UTC, and a time at the edge of
    the calendar (0001-01-01T00:00:00+14:00) has none."""
    try:
        moment.astimezone(UTC)
    except OverflowError:
        raise InvalidRequest(
            f"{name} {moment.isoformat()!r} has no UTC time (out of range); pass a time "
            "between years 1 and 9999 in UTC"
        ) from None
    return moment


def _entity_from_json(data: object, where: str) -> Entity:
    if isinstance(data, Entity):
        return data
    if (
        not isinstance(data, Mapping)
        or not isinstance(data.get("name"), str)
        or not data["name"].strip()
        or not isinstance(data.get("type", "unknown"), str)
        or set(data) - {"name", "type"}
    ):
        raise InvalidRequest(f"{where}: entity {data!r} must be {{'name': str, 'type': str}}")
    return Entity(data["name"], data.get("type", "unknown"))


# -- the store mapping ---------------------------------------------------------------------


def bucket_metadata(memory_id: str) -> dict[str, JSON]:
    """The `_bucket` metadata of an id: its first two characters, lowercase, when both are hex
    digits (every UUID's are). The layer lists a large scope by the 256 hex buckets plus the
    items without one, so an id such as `desk-limits` (an imported key) gets no bucket: a bucket
    like "sk" would be in no slice, and the memory missing from the listing."""
    bucket = memory_id[:2].lower()
    if len(bucket) == 2 and all(char in "0123456789abcdef" for char in bucket):
        return {BUCKET_KEY: bucket}
    return {}


def check_user_metadata(
    metadata: Mapping[str, JSON] | None, *, redaction: bool = False
) -> dict[str, JSON]:
    """The caller's metadata, refusing keys the layer owns (they have their own parameters)
    and values that are not JSON data.

    `redaction`: the redaction record (`_redaction_count`, `_redaction_types`) may be present,
    in its own shape: the layer's own writes and imports, never a caller's metadata.
    """
    if metadata is None:
        return {}
    if not isinstance(metadata, Mapping) or not all(isinstance(k, str) for k in metadata):
        raise InvalidRequest(f"metadata {metadata!r} must be an object with string keys")
    allowed = set(REDACTION_KEYS) if redaction else set()
    owned = sorted((set(metadata) & (RESERVED_METADATA_KEYS | LAYER_KEYS)) - allowed)
    if owned:
        fix = (
            "the layer writes them itself, recording what redaction replaced; rename the key"
            if set(owned) <= set(REDACTION_KEYS)
            else "pass memory_type=, sensitivity=, tier=, tags=, source=, confidence= or "
            "provenance= instead, or rename the key"
        )
        raise InvalidRequest(
            f"metadata key(s) {', '.join(owned)} are reserved by the memory layer; {fix}"
        )
    for key, value in metadata.items():
        check_json(f"metadata key {key!r}", value)
    well_formed = redaction_record(metadata)
    for key in REDACTION_KEYS:
        if key in metadata and key not in well_formed:
            raise InvalidRequest(
                f"metadata {key} {metadata[key]!r} is not a redaction record: _redaction_count "
                "is an integer >= 0, _redaction_types a list of strings"
            )
    return dict(metadata)


def redaction_record(metadata: Mapping[str, JSON]) -> dict[str, JSON]:
    """The redaction keys of `metadata` that have their proper shape; others' writes may not."""
    record: dict[str, JSON] = {}
    count = metadata.get("_redaction_count")
    if isinstance(count, int) and not isinstance(count, bool) and count >= 0:
        record["_redaction_count"] = count
    kinds = metadata.get("_redaction_types")
    if isinstance(kinds, list) and all(isinstance(kind, str) for kind in kinds):
        record["_redaction_types"] = kinds
    return record


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
            **bucket_metadata(memory.id),
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
        "created_at": _iso(memory.created_at),
        "updated_at": _iso(memory.updated_at),
        "access_count": memory.access_count,
        "last_accessed": _iso(memory.last_accessed),
        "superseded_by": memory.superseded_by,
    }
    if memory.entities:
        value["entities"] = [entity.to_json() for entity in memory.entities]
    return value, metadata


def is_tombstone(metadata: Mapping[str, JSON]) -> bool:
    """Whether an item is what `forget` leaves behind until it expires."""
    return metadata.get(DELETED_KEY) is True


def successor_unknown(value: JSON, metadata: Mapping[str, JSON]) -> bool:
    """Whether a stored memory may have newer versions its record does not point to.

    The layer writes `superseded_by` into every record it stores, None when no newer version
    exists. Records the layer wrote before it did so (they carry `_bucket` but no
    `superseded_by`) may have newer versions; other tools' items get one only through the layer,
    which then rewrites them.
    """
    return BUCKET_KEY in metadata and not (isinstance(value, dict) and "superseded_by" in value)


def stored_time(value: JSON, name: str) -> datetime | None:
    """A timestamp the layer wrote into a stored value, or None when it has none."""
    if isinstance(value, dict) and isinstance(value.get(name), str):
        try:
            return _aware(datetime.fromisoformat(value[name]))
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
    if body is not None:
        owned = RESERVED_METADATA_KEYS | LAYER_KEYS
        extra = {k: v for k, v in body.items() if k not in _VALUE_FIELDS and k not in owned}
    content = content_of(value)
    user = {
        k: v
        for k, v in metadata.items()
        if k not in RESERVED_METADATA_KEYS and k not in LAYER_KEYS and not k.startswith("_animus")
    }
    user.update(redaction_record(metadata))
    fields: dict[str, Any] = body or {}
    created = stored_time(value, "created_at") or created_at or utcnow()
    return Memory(
        id=key,
        content=content,
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
            entities.append(_entity_from_json(item, "entities"))
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
