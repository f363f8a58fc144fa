"""Memory records: the enums, the `Memory` model and the checks of what callers pass.

`Memory` is a pydantic model; a field that fails its check raises our `InvalidRequest`, one
line naming the field, its value and what it must be. How a record is kept in a store item is
`store_form.py`.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum
from typing import Annotated, Any

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StrictBool,
    StrictInt,
    StrictStr,
    ValidationError,
)

from animus_flows.errors import InvalidRequest
from animus_flows.protocol import JSON, RESERVED_METADATA_KEYS, utcnow
from animus_flows.stores.checks import check_json


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

#: Reserved keys only the layer writes: its record of what redaction replaced. An import may
#: carry them (a restore is faithful); every other write refuses them.
REDACTION_KEYS = ("_redaction_count", "_redaction_types")

#: The `source` values the layer's write methods accept (how the memory was acquired).
SOURCES = ("stated", "inferred", "learned")
#: The `provenance` values the layer's write methods accept (which path wrote the memory).
PROVENANCES = ("direct", "sync", "consolidation", "import", "mcp")

#: Layer bookkeeping in store metadata: the linked entity keys, so stores can filter on them.
ENTITIES_KEY = "_entities"
#: Keys that layers before protocol 0.2.0 wrote and that files may still hold: `_bucket` (the
#: id's first two hex digits, for listing a scope in slices) and `_deleted` (a forgotten
#: memory's tombstone). They are read, never written: a tombstone is no memory, and a record
#: with `_bucket` but no `superseded_by` may have newer versions it does not name.
LEGACY_BUCKET_KEY = "_bucket"
LEGACY_TOMBSTONE_KEY = "_deleted"
LAYER_KEYS = frozenset({ENTITIES_KEY, LEGACY_BUCKET_KEY, LEGACY_TOMBSTONE_KEY})


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


def choice(kind: type[StrEnum], value: object, name: str) -> Any:
    """`value` as a member of the enum `kind`, in any case (`"HOT"`, `"hot"`); else refused,
    naming `name` and the members."""
    try:
        return kind(value.lower() if isinstance(value, str) else value)
    except ValueError:
        choices = ", ".join(member.value for member in kind)
        raise InvalidRequest(f"{name} {value!r} is not one of {choices}") from None


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


def aware(moment: datetime) -> datetime:
    """`moment` with UTC as its zone when it names none."""
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def iso(moment: datetime | None) -> str | None:
    """`moment` in ISO 8601, in UTC (None stays None)."""
    return None if moment is None else moment.astimezone(UTC).isoformat()


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


def entity_from_json(data: object, where: str) -> Entity:
    """An `Entity` from `{"name", "type"}` (an `Entity` passes); else refused, naming `where`."""
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


def _entities(value: object) -> object:
    if not isinstance(value, list):
        return value  # the model names the field and the fix
    return [entity_from_json(entity, "entities") for entity in value]


def _time(name: str) -> AfterValidator:
    return AfterValidator(lambda moment: _in_range(aware(moment), name))


def _enum(kind: type[StrEnum], name: str) -> BeforeValidator:
    return BeforeValidator(lambda value: choice(kind, value, name))


# What each field must be, for the one-line error of a value pydantic refuses; `{type}` is
# the value's type name.
_FIXES = {
    "id": "must be a non-empty string",
    "content": "is a {type}; pass text",
    "source": "must be a non-empty string",
    "provenance": "must be a non-empty string",
    "confidence": "must be a number from 0.0 to 1.0",
    "version": "must be an integer >= 1",
    "access_count": "must be an integer >= 0",
    "metadata": "must be an object with string keys",
    "entities": "must be a list of {{'name': str, 'type': str}}",
}
_LABELS = {"id": "memory id"}


def _refusal(exc: ValidationError, data: Mapping[str, Any]) -> InvalidRequest:
    """Our one-line error for the first field `exc` refuses."""
    error = exc.errors()[0]
    original = (error.get("ctx") or {}).get("error")
    if isinstance(original, InvalidRequest):  # a check of ours, with its own words
        return original
    name = str(error["loc"][0]) if error["loc"] else "memory"
    if error["type"] == "extra_forbidden":
        return InvalidRequest(
            f"{name} is not a field of a memory; a record has {', '.join(RECORD_FIELDS)}"
        )
    if error["type"] == "missing":
        return InvalidRequest(f"{name} is missing; every memory needs one")
    value = data.get(name)
    if name in ("subtype", "parent_id", "change_summary", "superseded_by"):
        fix = "must be a string or None"
    elif name in ("created_at", "updated_at", "last_accessed"):
        fix = "must be a datetime"
    else:
        fix = _FIXES.get(name, "is not valid").format(type=type(value).__name__)
    shown = repr(value)
    shown = shown if len(shown) <= 100 else shown[:100] + "..."
    return InvalidRequest(f"{_LABELS.get(name, name)} {shown} {fix}")


class Memory(BaseModel):
    """One memory: seed 003's record fields plus free-form `metadata`, linked `entities` and
    `superseded_by`.

    Enum fields accept their lowercase values (`memory_type="episodic"`); tags are normalized
    to lowercase. `metadata` carries the caller's keys and, after redaction, `_redaction_count`
    and `_redaction_types`. `superseded_by` is the id of the newer version that
    `update_with_version` made of this memory (the reverse of the newer one's `parent_id`), None
    while it is current; the layer keeps it, so recall need not search for newer versions.
    `successor_unknown` is True for a memory read from a record stored before the layer kept
    `superseded_by`, until the layer has looked its newer versions up; it is no part of the
    record's JSON. Nor is `ledger_version`: on a store that keeps a ledger (the durable
    backend), the ledger's version of this memory's record when the layer read or wrote it
    (`get_memory`, `remember`, `update_memory`), which `update_memory(memory,
    expected_version=...)` takes; None elsewhere. It counts every stored change of this one
    record, where `version` counts the versions `update_with_version` made (docs/memory.md).

    Raises:
        InvalidRequest: a field is invalid, naming the field, its value and what it must be.

    Example:
        ```python
        from animus_flows.memory import Memory, MemoryType

        memory = Memory(content="User prefers dark mode", memory_type=MemoryType.SEMANTIC,
                        tags=["preference", "UI"])
        memory.tags  # ['preference', 'ui']
        ```
    """

    model_config = ConfigDict(extra="forbid", strict=True)

    id: Annotated[StrictStr, Field(min_length=1, pattern="^[^\x00]*$")] = Field(
        default_factory=lambda: str(uuid.uuid4())
    )
    content: StrictStr
    memory_type: Annotated[MemoryType, _enum(MemoryType, "memory_type")] = MemoryType.SEMANTIC
    created_at: Annotated[datetime, _time("created_at")] = Field(default_factory=utcnow)
    updated_at: Annotated[datetime, _time("updated_at")] = Field(default_factory=utcnow)
    tags: Annotated[list[str], BeforeValidator(normalize_tags)] = Field(default_factory=list)
    source: Annotated[StrictStr, Field(min_length=1)] = "stated"
    confidence: Annotated[float, Field(ge=0.0, le=1.0, allow_inf_nan=False)] = 1.0
    subtype: StrictStr | None = None
    version: Annotated[StrictInt, Field(ge=1)] = 1
    parent_id: StrictStr | None = None
    change_summary: StrictStr | None = None
    provenance: Annotated[StrictStr, Field(min_length=1)] = "direct"
    sensitivity: Annotated[Sensitivity, _enum(Sensitivity, "sensitivity")] = Sensitivity.PUBLIC
    tier: Annotated[MemoryTier, _enum(MemoryTier, "tier")] = MemoryTier.WARM
    access_count: Annotated[StrictInt, Field(ge=0)] = 0
    last_accessed: Annotated[datetime, _time("last_accessed")] | None = None
    metadata: dict[StrictStr, Any] = Field(default_factory=dict)
    entities: Annotated[list[Entity], BeforeValidator(_entities)] = Field(default_factory=list)
    superseded_by: StrictStr | None = None
    successor_unknown: StrictBool = Field(default=False, exclude=True)
    ledger_version: Annotated[StrictInt, Field(ge=1)] | None = Field(default=None, exclude=True)

    def __init__(self, **fields: Any) -> None:
        try:
            super().__init__(**fields)
        except ValidationError as exc:
            raise _refusal(exc, fields) from None

    def validate(self) -> None:  # type: ignore[override]  # pydantic's is a deprecated classmethod
        """Check every field again and normalize it in place (enum values, tags, aware times).

        `update_memory` runs it on a memory whose fields a caller may have changed since.

        Raises:
            InvalidRequest: naming the field, its value and what it must be.
        """
        fields = dict(self.__dict__)
        try:
            checked = type(self).model_validate(fields)
        except ValidationError as exc:
            raise _refusal(exc, fields) from None
        self.__dict__.update(checked.__dict__)

    def link(self, successor: str | None) -> None:
        """Record the newest version of this memory (None: it is current); then it is known."""
        self.superseded_by = successor
        self.successor_unknown = False

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
            "created_at": iso(self.created_at),
            "updated_at": iso(self.updated_at),
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
            "last_accessed": iso(self.last_accessed),
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
        # null means "the default" for the fields whose default is not None
        fields = {k: v for k, v in data.items() if v is not None or k not in _NULL_DEFAULTS}
        try:
            for name in ("created_at", "updated_at", "last_accessed"):
                if fields.get(name) is not None:
                    fields[name] = _parse_time(fields[name], name)
            return cls(**fields)
        except InvalidRequest as exc:
            raise InvalidRequest(f"{where}: {exc}") from None


#: The fields of a record, as its JSON has them.
RECORD_FIELDS = tuple(
    name for name in Memory.model_fields if name not in ("successor_unknown", "ledger_version")
)
_NULL_DEFAULTS = frozenset({"tags", "metadata", "entities", "created_at", "updated_at"})


def parse_record_time(value: object, name: str) -> datetime | None:
    """A record's time field `name` as an aware datetime (None stays None), checked as the
    record's own times are: ISO 8601, read as UTC without a zone, with a UTC time.

    Raises:
        InvalidRequest: naming `name` and the value.
    """
    return None if value is None else _in_range(_parse_time(value, name), name)


def _parse_time(value: object, name: str) -> datetime:
    if isinstance(value, datetime):
        return aware(value)
    try:
        return aware(datetime.fromisoformat(str(value)))
    except ValueError:
        raise InvalidRequest(
            f"{name} {value!r} is not an ISO 8601 time such as 2026-01-31T12:00:00+00:00"
        ) from None


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
