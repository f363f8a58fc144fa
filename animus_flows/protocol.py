"""The animus-memory-store-protocol 0.2.0: data types, the `MemoryStore` protocol, wire names.

Pure definitions and helpers with no I/O, shared by every store, the hook, the CLI and the
JSON-RPC plugin surface.
"""

from __future__ import annotations

import json
import unicodedata
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal, Protocol, runtime_checkable

from animus_flows.errors import InvalidRequest, InvalidScope
from animus_flows.redaction import redact_head, refuse_secret_in_id

PROTOCOL_VERSION = "0.2.0"

#: JSON-RPC method names, in the order a plugin author meets them.
METHOD_INITIALIZE = "initialize"
METHOD_PUT = "memory/put"
METHOD_GET = "memory/get"
METHOD_QUERY = "memory/query"
METHOD_LIST_SCOPES = "memory/list_scopes"
METHOD_DELETE_SCOPE = "memory/delete_scope"
METHOD_DELETE = "memory/delete"  # 0.2.0
METHOD_LIST_ITEMS = "memory/list_items"  # 0.2.0
MEMORY_METHODS = (
    METHOD_PUT,
    METHOD_GET,
    METHOD_QUERY,
    METHOD_LIST_SCOPES,
    METHOD_DELETE_SCOPE,
    METHOD_DELETE,
    METHOD_LIST_ITEMS,
)

#: Metadata keys written by the memory layer and read by the hook; stores keep them verbatim.
RESERVED_METADATA_KEYS = frozenset(
    {
        "memory_type",
        "sensitivity",
        "tier",
        "tags",
        "agent",
        "version",
        "parent_id",
        "source",
        "confidence",
        "provenance",
        "_redaction_count",
        "_redaction_types",
    }
)

#: Metadata keys starting with this belong to the store machinery (the expiry of an item whose
#: store has no native TTL travels in `_animus_expires_at`): a caller's write of one is refused.
HOST_METADATA_PREFIX = "_animus_"

MAX_ID_LENGTH = 256
MAX_KEY_LENGTH = 1024
#: The longest TTL a store accepts: 100 years (of 365.25 days). Longer ones overflow dates;
#: an item meant to stay has no TTL.
MAX_TTL_SECONDS = 36525 * 24 * 3600

JSON = Any  # a value json.dumps accepts: None, bool, int, float, str, list, dict with str keys
ScopeKind = Literal["project", "agent", "task"]


def check_id(label: str, value: object, *, required: bool) -> None:
    """Refuse `value` unless it is an id: a string of 1 to `MAX_ID_LENGTH` characters, no
    control character or line break, valid Unicode (`is_valid_unicode`), and no secret (ids are
    shown everywhere as written); `None` passes when the id is not `required`.

    Raises `InvalidScope` naming `label` (such as `"scope agent_id"`), with the value quoted
    and its secrets redacted before any cut.
    """
    if value is None:
        if required:
            raise InvalidScope(f"{label} is missing; pass a non-empty string")
        return
    if not isinstance(value, str):
        raise InvalidScope(f"{label} {value!r} is a {type(value).__name__}; pass a string")
    if not value:
        fix = "pass a non-empty string" if required else "pass a non-empty string or omit it"
        raise InvalidScope(f"{label} is empty; {fix}")
    if len(value) > MAX_ID_LENGTH:
        raise InvalidScope(
            f"{label} {shown_head(value)} is {len(value)} characters; use at most {MAX_ID_LENGTH}"
        )
    check_no_control(label, value, InvalidScope)
    check_unicode(lambda: f"{label} {value!r}", value, InvalidScope)
    refuse_secret_in_id(label, value)


def check_no_control(label: str, value: str, error: type[InvalidRequest] = InvalidRequest) -> None:
    """Refuse an identity (a key, a scope id) holding a control character or a line break:
    ids are printed one per line and in tables, where a newline would forge another line."""
    if value.isprintable():  # the common case, in C
        return
    bad = next((ch for ch in value if unicodedata.category(ch) in ("Cc", "Zl", "Zp")), None)
    if bad is None:  # other unprintables (a zero-width joiner in an emoji) break no line
        return
    raise error(
        f"{label} {shown_head(value)} contains the control character {bad!r}; "
        "use printable characters"
    )


def check_count(name: str, value: object) -> int:
    """`value` when it is an integer >= 1 (not a bool); otherwise `InvalidRequest` naming `name`
    (such as `"limit"` or `"top_k"`)."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise InvalidRequest(f"{name} {value!r} must be an integer >= 1")
    return value


def shown_head(text: str, limit: int = 40) -> str:
    """`text` quoted for a message: its first `limit` characters, secrets redacted before the
    cut (a cut secret no longer looks like one), and `...` when there is more."""
    shown = repr(redact_head(text, limit))
    return shown + "..." if len(text) > limit else shown


def is_valid_unicode(text: str) -> bool:
    """Whether `text` has a UTF-8 form: no lone surrogate (what Python makes of the JSON escape
    `"\\ud800"`), which no store can keep nor send over the wire. Cheap for ASCII text."""
    if text.isascii():
        return True
    try:
        text.encode()
    except UnicodeEncodeError:
        return False
    return True


def check_unicode(
    name: str | Callable[[], str], text: str, error: type[InvalidRequest] = InvalidRequest
) -> None:
    """Refuse `text` unless it is valid Unicode (`is_valid_unicode`), with `error` naming `name`.

    A `name` that quotes the text is best passed as a function: it is built only for the error
    (quoting redacts, which costs more than the check).
    """
    if is_valid_unicode(text):
        return
    label = name if isinstance(name, str) else name()
    surrogate = next(char for char in text if "\ud800" <= char <= "\udfff")
    raise error(
        f"{label} contains the lone surrogate {surrogate!r}, which is not valid Unicode; "
        "pass valid UTF-8 text"
    )


@dataclass(frozen=True, slots=True)
class Scope:
    """Where an item lives: a project, optionally narrowed to an agent and/or a task.

    Ids are opaque strings of 1 to 256 characters: any character but NUL, in valid Unicode
    (no lone surrogate, which has no UTF-8 form).
    """

    project_id: str
    agent_id: str | None = None
    task_id: str | None = None

    def __post_init__(self) -> None:
        check_id("scope project_id", self.project_id, required=True)
        check_id("scope agent_id", self.agent_id, required=False)
        check_id("scope task_id", self.task_id, required=False)

    @property
    def kind(self) -> ScopeKind:
        """The narrowest level this scope names."""
        if self.task_id is not None:
            return "task"
        return "agent" if self.agent_id is not None else "project"

    def to_json(self) -> dict[str, str | None]:
        return {"project_id": self.project_id, "agent_id": self.agent_id, "task_id": self.task_id}

    @classmethod
    def from_json(cls, data: object) -> Scope:
        if not isinstance(data, Mapping):
            raise InvalidScope(
                f"scope {data!r} is not an object; pass "
                '{"project_id": ..., "agent_id": ..., "task_id": ...}'
            )
        unknown = set(data) - {"project_id", "agent_id", "task_id"}
        if unknown:
            raise InvalidScope(
                f"scope has unknown field(s) {sorted(unknown)}; "
                "use only project_id, agent_id and task_id"
            )
        return cls(data.get("project_id"), data.get("agent_id"), data.get("task_id"))  # type: ignore[arg-type]

    def __str__(self) -> str:
        """`project=P/agent=A/task=T` for messages; an id that could blur that (a `/`, `=`,
        quote, backslash, control character or edge space) is shown quoted and escaped."""
        parts = [f"project={_shown_id(self.project_id)}"]
        if self.agent_id is not None:
            parts.append(f"agent={_shown_id(self.agent_id)}")
        if self.task_id is not None:
            parts.append(f"task={_shown_id(self.task_id)}")
        return "/".join(parts)


def _shown_id(ident: str) -> str:
    plain = ident.isprintable() and ident == ident.strip() and not set(ident) & set("/='\"\\")
    return ident if plain and ident else repr(ident)


@dataclass(frozen=True, slots=True)
class Capabilities:
    """What a store's backend can do natively; the runtime adapts to these.

    `semantic` (0.2.0): the store ranks by meaning, not only by words; a plugin of protocol
    0.1.0 does not report it, which reads as False.
    """

    native_ttl: bool
    native_key_get: bool
    strong_consistency: bool
    max_query_top_k: int
    semantic: bool = False

    def to_json(self) -> dict[str, bool | int]:
        return {
            "native_ttl": self.native_ttl,
            "native_key_get": self.native_key_get,
            "strong_consistency": self.strong_consistency,
            "max_query_top_k": self.max_query_top_k,
            "semantic": self.semantic,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Capabilities:
        try:
            caps = cls(
                native_ttl=bool(data["native_ttl"]),
                native_key_get=bool(data["native_key_get"]),
                strong_consistency=bool(data["strong_consistency"]),
                max_query_top_k=int(data["max_query_top_k"]),
                semantic=bool(data.get("semantic", False)),  # a 0.1.0 plugin has none
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise InvalidRequest(
                f"capabilities {dict(data)!r} are incomplete ({exc}); report native_ttl, "
                "native_key_get, strong_consistency and max_query_top_k"
            ) from None
        if caps.max_query_top_k < 1:
            raise InvalidRequest(
                f"capabilities.max_query_top_k is {caps.max_query_top_k}; it must be >= 1"
            )
        return caps


def _iso(moment: datetime | None) -> str | None:
    return None if moment is None else moment.astimezone(UTC).isoformat()


def _parse_time(value: object) -> datetime | None:
    if value is None:
        return None
    moment = datetime.fromisoformat(str(value))
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


@dataclass(frozen=True, slots=True)
class MemoryItem:
    """One stored value with its scope, metadata and timestamps (UTC)."""

    scope: Scope
    key: str
    value: JSON
    metadata: dict[str, JSON] = field(default_factory=dict)
    created_at: datetime = field(default_factory=lambda: datetime.now(UTC))
    updated_at: datetime = field(default_factory=lambda: datetime.now(UTC))
    expires_at: datetime | None = None

    def is_expired(self, now: datetime | None = None) -> bool:
        return self.expires_at is not None and self.expires_at <= (now or utcnow())

    def to_json(self) -> dict[str, JSON]:
        return {
            "scope": self.scope.to_json(),
            "key": self.key,
            "value": self.value,
            "metadata": self.metadata,
            "created_at": _iso(self.created_at),
            "updated_at": _iso(self.updated_at),
            "expires_at": _iso(self.expires_at),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> MemoryItem:
        try:
            return cls(
                scope=Scope.from_json(data["scope"]),
                key=data["key"],
                value=data.get("value"),
                metadata=dict(data.get("metadata") or {}),
                created_at=_parse_time(data["created_at"]),  # type: ignore[arg-type]
                updated_at=_parse_time(data["updated_at"]),  # type: ignore[arg-type]
                expires_at=_parse_time(data.get("expires_at")),
            )
        except (KeyError, TypeError, ValueError) as exc:
            if isinstance(exc, InvalidRequest):
                raise
            raise InvalidRequest(f"malformed item {dict(data)!r}: {exc}") from None


@dataclass(frozen=True, slots=True)
class QueryHit:
    """A query result: the item's key, value and metadata, and a relevance score in [0, 1]."""

    key: str
    value: JSON
    score: float
    metadata: dict[str, JSON] = field(default_factory=dict)

    def to_json(self) -> dict[str, JSON]:
        return {
            "key": self.key,
            "value": self.value,
            "score": self.score,
            "metadata": self.metadata,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> QueryHit:
        try:
            return cls(
                key=data["key"],
                value=data.get("value"),
                score=float(data["score"]),
                metadata=dict(data.get("metadata") or {}),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise InvalidRequest(f"malformed hit {dict(data)!r}: {exc}") from None


@dataclass(frozen=True, slots=True)
class ScopePage:
    """One page of `list_scopes`; pass `next_cursor` back to get the next, None at the end."""

    scopes: list[Scope]
    next_cursor: str | None = None

    def to_json(self) -> dict[str, JSON]:
        return {"scopes": [s.to_json() for s in self.scopes], "next_cursor": self.next_cursor}


@dataclass(frozen=True, slots=True)
class ItemPage:
    """One page of `list_items`: live items in key order; pass `next_cursor` back to get the
    next page, None at the end. A page may hold fewer than `limit` items, even none, before the
    last (items that expired meanwhile are left out)."""

    items: list[MemoryItem]
    next_cursor: str | None = None

    def to_json(self) -> dict[str, JSON]:
        return {"items": [i.to_json() for i in self.items], "next_cursor": self.next_cursor}


@runtime_checkable
class MemoryStore(Protocol):
    """The async operations every memory store offers, plus its capabilities.

    `put`, `get`, `query`, `delete_scope`, `delete` and `list_items` act on exactly one scope.
    Expired items are never returned. Query scores are in [0, 1], higher is better, best
    first. Values and metadata are JSON, as `put`'s item shows (a tuple comes back a list,
    `{1: "a"}` as `{"1": "a"}`); text anywhere must be valid Unicode, and metadata keys
    starting with `HOST_METADATA_PREFIX` are the store machinery's, refused from callers.

    0.2.0 adds `delete` (one item; idempotent, True when a live item was removed) and
    `list_items` (one scope's live items in key order by code point, optionally only the keys
    starting with `prefix`, a page at a time; the cursor is opaque, from the page before).
    """

    capabilities: Capabilities

    async def put(
        self,
        scope: Scope,
        key: str,
        value: JSON,
        *,
        metadata: dict[str, JSON] | None = None,
        ttl_seconds: int | None = None,
    ) -> MemoryItem: ...

    async def get(self, scope: Scope, key: str) -> MemoryItem | None: ...

    async def query(
        self, scope: Scope, text: str, *, top_k: int = 8, filters: dict[str, JSON] | None = None
    ) -> list[QueryHit]: ...

    async def list_scopes(
        self, *, project_id: str | None = None, cursor: str | None = None, limit: int = 100
    ) -> ScopePage: ...

    async def delete_scope(self, scope: Scope) -> int: ...

    async def delete(self, scope: Scope, key: str) -> bool: ...

    async def list_items(
        self,
        scope: Scope,
        *,
        prefix: str | None = None,
        cursor: str | None = None,
        limit: int = 100,
    ) -> ItemPage: ...


@runtime_checkable
class BatchedKeyReads(Protocol):
    """An optional, in-process extension of a store (no JSON-RPC method): reading many keys of
    one scope at once. The memory layer reads stored copies through it when its store offers
    it (an import into a scope that holds memories reads one per record), and with a `get`
    per key otherwise."""

    async def get_many(self, scope: Scope, keys: Sequence[str]) -> dict[str, MemoryItem]: ...


def utcnow() -> datetime:
    return datetime.now(UTC)


#: The encoder of `canonical_json`, made once: `json.dumps` with options makes one per call,
#: half the cost of encoding a short value (2 µs of a batched put's 8 per item).
_CANONICAL = json.JSONEncoder(
    sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
)


def canonical_json(value: JSON) -> str:
    """The one JSON spelling of a value: sorted keys, no spaces, UTF-8 kept.

    Raises TypeError or ValueError for what is not JSON data, ValueError (circular reference)
    for a structure that contains itself.
    """
    return _CANONICAL.encode(value)


def indexed_text(value: JSON) -> str:
    """The text a store indexes for `value`: a str itself, a dict's "content", else its JSON."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and isinstance(value.get("content"), str):
        return value["content"]
    return canonical_json(value)


def matches_filters(metadata: Mapping[str, JSON], filters: Mapping[str, JSON] | None) -> bool:
    """Whether `metadata` satisfies every filter.

    A scalar filter value matches by equality (or membership, when the metadata value is a
    list); a list filter value matches when the metadata value is one of its elements (or shares
    one, when the metadata value is a list). `None` inside a filter matches a missing key.
    """
    if not filters:
        return True
    for name, wanted in filters.items():
        options = wanted if isinstance(wanted, list) else [wanted]
        actual = metadata.get(name)
        if actual is None:
            if None not in options:
                return False
        elif isinstance(actual, list):
            if not any(option in actual for option in options if option is not None):
                return False
        elif actual not in options:
            return False
    return True


def check_filters(filters: object) -> dict[str, JSON] | None:
    """Validate a `filters` argument: an object of metadata key to scalar or list of scalars."""
    if filters is None:
        return None
    if not isinstance(filters, Mapping):
        raise InvalidRequest(
            f"filters {filters!r} is not an object; pass e.g. "
            '{"memory_type": ["semantic", "procedural"]}'
        )
    for name, wanted in filters.items():
        if not isinstance(name, str) or not name:
            raise InvalidRequest(f"filter key {name!r} must be a non-empty string")
        check_unicode(f"filter key {name!r}", name)
        for option in wanted if isinstance(wanted, list) else [wanted]:
            if not (option is None or isinstance(option, (str, int, float, bool))):
                raise InvalidRequest(
                    f"filter {name}={wanted!r} must be a scalar or a list of scalars"
                )
            if isinstance(option, str):
                check_unicode(f"filter {name}={option!r}", option)
    return dict(filters)
