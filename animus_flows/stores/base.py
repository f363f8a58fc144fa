"""The validating base class every store builds on, and helpers shared by the stores.

`BaseStore` checks arguments once, emulates TTL for backends without it, clamps `top_k` to the
store's capability and normalizes scores; backends fill in `_put`, `_get`, `_query`,
`_list_scopes`, `_delete_scope`, `_delete` and `_list_items` and may trust what they receive.
"""

from __future__ import annotations

import base64
import binascii
import json
import math
from abc import ABC, abstractmethod
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from typing import ClassVar

from animus_flows.errors import InvalidRequest, InvalidScope
from animus_flows.protocol import (
    HOST_METADATA_PREFIX,
    JSON,
    MAX_KEY_LENGTH,
    MAX_TTL_SECONDS,
    Capabilities,
    ItemPage,
    MemoryItem,
    QueryHit,
    Scope,
    ScopePage,
    canonical_json,
    check_count,
    check_filters,
    check_no_control,
    check_unicode,
    shown_head,
    utcnow,
)
from animus_flows.redaction import get_logger

log = get_logger("animus_flows.stores")

#: Where TTL is emulated, the expiry travels in this metadata key and is stripped on the way out.
EXPIRES_KEY = HOST_METADATA_PREFIX + "expires_at"
MAX_LIST_LIMIT = 1000
#: The largest position a numeric cursor names: SQLite's largest integer.
MAX_CURSOR = 2**63 - 1

#: One write for `put_many`: scope, key, value, metadata (or None), and optionally
#: `ttl_seconds` (None, or left out: the item does not expire).
PutEntry = (
    tuple[Scope, str, JSON, "dict[str, JSON] | None"]
    | tuple[Scope, str, JSON, "dict[str, JSON] | None", "int | None"]
)


def entry_fields(entry: object) -> tuple[Scope, str, JSON, dict[str, JSON] | None, int | None]:
    """The five fields of a `put_many` entry, `ttl_seconds` None when it has four; the fields
    themselves are not checked here."""
    if not isinstance(entry, tuple | list) or len(entry) not in (4, 5):
        size = f" of {len(entry)} fields" if isinstance(entry, tuple | list) else ""
        raise InvalidRequest(
            f"a put_many entry is a {type(entry).__name__}{size}; pass tuples "
            "(scope, key, value, metadata) or (scope, key, value, metadata, ttl_seconds)"
        )
    scope, key, value, metadata, *ttl = entry
    return scope, key, value, metadata, ttl[0] if ttl else None


def check_scope(scope: object) -> Scope:
    if not isinstance(scope, Scope):
        raise InvalidScope(f"scope {scope!r} is not a Scope; build one with Scope(project_id=...)")
    return scope


def check_key(key: object) -> str:
    if not isinstance(key, str) or not key:
        raise InvalidRequest(f"key {key!r} must be a non-empty string")
    if len(key) > MAX_KEY_LENGTH:
        raise InvalidRequest(
            f"key {shown_head(key)} is {len(key)} characters; use at most {MAX_KEY_LENGTH}"
        )
    check_no_control("key", key)
    check_unicode(lambda: f"key {shown_head(key)}", key)
    return key


def encode_json(name: str, value: object) -> str:
    """`value`'s canonical JSON; InvalidRequest naming `name` when it is not JSON data (or
    holds a string that is not valid Unicode, anywhere inside it)."""
    try:
        text = canonical_json(value)  # type: ignore[arg-type]
    except (TypeError, ValueError, RecursionError) as exc:
        key = _mixed_key(value) if isinstance(exc, TypeError) else None
        if key is not None:  # sorting keys failed: "'<' not supported" would say nothing
            raise InvalidRequest(
                f"{name} has an object with the {type(key).__name__} key {key!r} beside string "
                f"keys; JSON object keys are strings: pass {str(key)!r}"
            ) from None
        raise InvalidRequest(f"{name} is not JSON-serializable ({exc}); pass JSON data") from None
    check_unicode(name, text)  # one pass over the text checks every string and object key
    return text


def _mixed_key(value: object) -> object | None:
    """A non-string key of an object in `value` that also has string keys, if any."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            odd = [key for key in item if not isinstance(key, str)]
            if odd and len(odd) < len(item):
                return odd[0]
            stack.extend(item.values())
        elif isinstance(item, (list, tuple)):
            stack.extend(item)
    return None


def check_json(name: str, value: object) -> None:
    encode_json(name, value)


def stored_json(name: str, value: object) -> JSON:
    """`value` as a store keeps it, decoded from its canonical JSON: a tuple is a list and a
    non-string object key its JSON string (`{1: "a"}` is `{"1": "a"}`), as `get` returns it."""
    return json.loads(encode_json(name, value))


def metadata_object(metadata: object) -> dict[str, JSON]:
    """A caller's `metadata` itself when it is an object with string keys (None is `{}`), none
    of them reserved for the store machinery; else refused."""
    if metadata is None:
        return {}
    if not isinstance(metadata, dict) or not all(isinstance(k, str) for k in metadata):
        raise InvalidRequest(f"metadata {metadata!r} must be an object with string keys")
    for name in metadata:
        if name != "sensitivity" and _near("sensitivity", name):
            # a typo here would silently make the item PUBLIC: never guess, never drop it
            raise InvalidRequest(
                f"metadata key {shown_head(name)} looks like a misspelt 'sensitivity' (did you "
                "mean 'sensitivity'?); spell it exactly, or the item would be read as public"
            )
        if name.startswith(HOST_METADATA_PREFIX):
            # An expiry the caller wrote would be read as the store's own (or fail to parse).
            fix = "pass ttl_seconds= instead" if name == EXPIRES_KEY else "rename it"
            raise InvalidRequest(
                f"metadata key {shown_head(name)} is reserved: keys starting with "
                f"{HOST_METADATA_PREFIX!r} belong to the store machinery; {fix}"
            )
    return metadata


def _near(word: str, name: str) -> bool:
    """Whether `name` is `word` but for case, surrounding whitespace, or one or two letters
    (inserted, dropped or changed)."""
    name = name.strip().casefold()
    if name == word:
        return True
    if abs(len(name) - len(word)) > 2:
        return False
    previous = list(range(len(word) + 1))  # Levenshtein distance, row by row
    for i, char in enumerate(name, 1):
        current = [i]
        for j, wanted in enumerate(word, 1):
            current.append(
                min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (char != wanted))
            )
        previous = current
    return previous[-1] <= 2


def stored_expiry(raw: object, scope: Scope, key: str) -> datetime | None:
    """The moment an item kept in `EXPIRES_KEY` expires (UTC when it names no offset).

    A value that is no ISO 8601 date (written by another tool into a plugin's store, say) is
    logged and read as no expiry: one bad item must not make its whole scope unreadable.
    """
    moment = parse_expiry(raw)
    if moment is None:
        log.warning(
            "item %s in %s has %s %s, not an ISO 8601 date; reading it as not expiring",
            shown_head(key),
            scope,
            EXPIRES_KEY,
            shown_head(str(raw)),
        )
        return None
    return moment


def parse_expiry(raw: object) -> datetime | None:
    """`raw` read as the moment an item expires: an ISO 8601 string (UTC when it names no
    offset); None when it is not one."""
    try:
        moment = datetime.fromisoformat(raw) if isinstance(raw, str) else None
    except ValueError:
        return None
    if moment is None or moment.tzinfo:
        return moment
    return moment.replace(tzinfo=UTC)


def numeric_cursor(cursor: str | None) -> int:
    """The position a store's cursor of digits names (0 for the first page); InvalidRequest
    for any other string, which the store cannot have returned."""
    if cursor is None:
        return 0
    # ASCII digits only ("²" passes isdigit but not int()); the length bounds int()'s work
    if cursor.isascii() and cursor.isdecimal() and len(cursor) <= len(str(MAX_CURSOR)):
        position = int(cursor)
        if position <= MAX_CURSOR:
            return position
    raise InvalidRequest(
        f"cursor {shown_head(cursor)} was not returned by this store; pass next_cursor unchanged"
    )


#: How a key cursor starts: `k.` and the key's UTF-8 in unpadded base64url.
_KEY_CURSOR = "k."


def key_cursor(key: str) -> str:
    """The `list_items` cursor of a page that ended at `key` (opaque to callers: base64url, so
    no character of a key can make it ambiguous)."""
    return _KEY_CURSOR + base64.urlsafe_b64encode(key.encode()).decode().rstrip("=")


def cursor_key(cursor: str | None) -> str | None:
    """The key a `key_cursor` names (None for the first page); InvalidRequest for any other
    string, which the store cannot have returned."""
    if cursor is None:
        return None
    body = cursor[len(_KEY_CURSOR) :]
    # the length bounds the decoding's work: a key is at most MAX_KEY_LENGTH characters
    if cursor.startswith(_KEY_CURSOR) and cursor.isascii() and len(body) <= 6 * MAX_KEY_LENGTH:
        try:
            key = base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)).decode()
        except (binascii.Error, ValueError):
            key = None
        # decoding skips stray characters: only the canonical spelling is a cursor we wrote
        if key and key_cursor(key) == cursor:
            return key
    raise InvalidRequest(
        f"cursor {shown_head(cursor)} was not returned by this store; pass next_cursor unchanged"
    )


def item_page(items: list[MemoryItem], limit: int) -> ItemPage:
    """The page of `items` (the live items after the cursor, in key order, at least `limit` + 1
    when there are more) that holds `limit`, with the cursor of the next one."""
    if len(items) <= limit:
        return ItemPage(items)
    return ItemPage(items[:limit], key_cursor(items[limit - 1].key))


def check_prefix(prefix: object) -> str:
    """A `list_items` key prefix: a string that could start a key (the empty one starts all)."""
    if not isinstance(prefix, str):
        raise InvalidRequest(f"prefix {prefix!r} must be a string, or None for every key")
    if len(prefix) > MAX_KEY_LENGTH:
        raise InvalidRequest(
            f"prefix {shown_head(prefix)} is {len(prefix)} characters; no key is longer than "
            f"{MAX_KEY_LENGTH}"
        )
    check_no_control("prefix", prefix)
    check_unicode(lambda: f"prefix {shown_head(prefix)}", prefix)
    return prefix


def check_page_request(cursor: object, limit: object) -> None:
    """Refuse a `cursor` that is no string (None passes) and a `limit` outside 1..1000, for
    `list_scopes` and `list_items` alike."""
    if cursor is not None and not isinstance(cursor, str):
        raise InvalidRequest(f"cursor {cursor!r} must be a string from a previous page")
    if cursor is not None:
        check_unicode(lambda: f"cursor {shown_head(cursor)}", cursor)
    if not isinstance(limit, int) or isinstance(limit, bool) or not 1 <= limit <= MAX_LIST_LIMIT:
        raise InvalidRequest(f"limit {limit!r} must be an integer from 1 to {MAX_LIST_LIMIT}")


def clamp_score(score: float) -> float:
    if math.isnan(score):
        return 0.0
    return min(1.0, max(0.0, float(score)))


class BaseStore(ABC):
    """A `MemoryStore` that validates its inputs and leaves storage to subclasses."""

    capabilities: ClassVar[Capabilities] | Capabilities
    #: Whether `put_many` writes every entry or none (one transaction). The fallback below
    #: writes one at a time, so a failure part-way leaves the entries before it written; the
    #: memory layer undoes those itself (import, a new version, ...) where this is False.
    atomic_put_many: ClassVar[bool] = False

    # -- public protocol --------------------------------------------------------------------

    async def put(
        self,
        scope: Scope,
        key: str,
        value: JSON,
        *,
        metadata: dict[str, JSON] | None = None,
        ttl_seconds: int | None = None,
    ) -> MemoryItem:
        await self._ready()
        check_scope(scope)
        check_key(key)
        # the item returned holds what `get` will: the value and metadata as JSON keeps them
        value = stored_json("value", value)
        metadata = self._check_metadata(metadata)
        expires_at = self._expiry(ttl_seconds)
        if expires_at is not None and not self.capabilities.native_ttl:
            metadata = {**metadata, EXPIRES_KEY: expires_at.isoformat()}
        item = await self._put(scope, key, value, metadata, expires_at)
        return self._strip_expiry(item)

    async def get(self, scope: Scope, key: str) -> MemoryItem | None:
        await self._ready()
        check_scope(scope)
        check_key(key)
        item = await self._get(scope, key)
        if item is None:
            return None
        item = self._strip_expiry(item)
        return None if item.is_expired() else item

    async def query(
        self,
        scope: Scope,
        text: str,
        *,
        top_k: int = 8,
        filters: dict[str, JSON] | None = None,
    ) -> list[QueryHit]:
        await self._ready()
        check_scope(scope)
        if not isinstance(text, str):
            raise InvalidRequest(f"query text {text!r} must be a string")
        check_unicode("query text", text)
        top_k = self.clamp_top_k(top_k)
        filters = check_filters(filters)
        fetch = top_k
        if not self.capabilities.native_ttl:
            # Expired items are dropped after the backend ranks them; ask for a few extra.
            fetch = min(self.capabilities.max_query_top_k, top_k + 8)
        hits = await self._query(scope, text, fetch, filters)
        now = utcnow()
        kept: list[QueryHit] = []
        for hit in hits:
            metadata = hit.metadata
            if EXPIRES_KEY in metadata:
                metadata = dict(metadata)
                expires_at = stored_expiry(metadata.pop(EXPIRES_KEY), scope, hit.key)
                if expires_at is not None and expires_at <= now:
                    continue
            score = clamp_score(hit.score)
            if score != hit.score or metadata is not hit.metadata:
                hit = QueryHit(hit.key, hit.value, score, metadata)
            kept.append(hit)
        kept.sort(key=lambda hit: hit.score, reverse=True)
        return kept[:top_k]

    async def list_scopes(
        self, *, project_id: str | None = None, cursor: str | None = None, limit: int = 100
    ) -> ScopePage:
        await self._ready()
        if project_id is not None:
            Scope(project_id)  # validates the id
        check_page_request(cursor, limit)
        return await self._list_scopes(project_id, cursor, limit)

    async def delete_scope(self, scope: Scope) -> int:
        await self._ready()
        check_scope(scope)
        return await self._delete_scope(scope)

    async def delete(self, scope: Scope, key: str) -> bool:
        """Remove the item under `key` in `scope`; True when a live item was removed, False
        when there was none (or it had expired): deleting twice is deleting once."""
        await self._ready()
        check_scope(scope)
        check_key(key)
        return await self._delete(scope, key)

    async def list_items(
        self,
        scope: Scope,
        *,
        prefix: str | None = None,
        cursor: str | None = None,
        limit: int = 100,
    ) -> ItemPage:
        """One page of the live items of `scope`, in key order by code point; with `prefix`,
        only the keys starting with it (matched exactly: no character is a wildcard). Pass
        the page's `next_cursor` back for the next one; it is None on the last page."""
        await self._ready()
        check_scope(scope)
        if prefix is not None:
            check_prefix(prefix)
        check_page_request(cursor, limit)
        page = await self._list_items(scope, prefix, cursor, limit)
        now = utcnow()
        items = [item for item in map(self._strip_expiry, page.items) if not item.is_expired(now)]
        return ItemPage(items, page.next_cursor)

    # -- conveniences built on the protocol -------------------------------------------------

    def clamp_top_k(self, top_k: int) -> int:
        """`top_k` limited to 1..`capabilities.max_query_top_k`."""
        return min(check_count("top_k", top_k), self.capabilities.max_query_top_k)

    async def count(self, scope: Scope) -> int:
        """Items in `scope` (what `delete_scope` would remove), capped at `max_query_top_k`
        where the backend cannot count."""
        return len(await self.query(scope, "", top_k=self.capabilities.max_query_top_k))

    async def put_many(self, entries: Iterable[PutEntry]) -> int:
        """Store many `(scope, key, value, metadata[, ttl_seconds])` entries; backends override
        this to batch.

        Every entry is validated before anything is written; then they are written one at a
        time, so a failing write leaves the ones before it (see `atomic_put_many`).
        """
        await self._ready()
        checked = [self._check_entry(entry) for entry in entries]
        for scope, key, value, metadata, ttl_seconds in checked:
            await self.put(scope, key, value, metadata=metadata, ttl_seconds=ttl_seconds)
        return len(checked)

    def _check_entry(self, entry: object) -> tuple[Scope, str, JSON, dict[str, JSON], int | None]:
        scope, key, value, metadata, ttl_seconds = entry_fields(entry)
        check_scope(scope)
        check_key(key)
        check_json("value", value)
        self._expiry(ttl_seconds)
        return scope, key, value, self._check_metadata(metadata), ttl_seconds

    async def aclose(self) -> None:  # noqa: B027 - most stores have nothing to release
        """Release connections, processes and threads; the store must not be used after."""

    def describe(self) -> str:
        """A short, secret-free description for logs, preflight and errors."""
        return type(self).__name__

    def __repr__(self) -> str:
        return f"<{self.describe()}>"

    # -- helpers ----------------------------------------------------------------------------

    @staticmethod
    def _check_metadata(metadata: object) -> dict[str, JSON]:
        return stored_json("metadata", metadata_object(metadata))

    @staticmethod
    def _expiry(ttl_seconds: object) -> datetime | None:
        if ttl_seconds is None:
            return None
        seconds = check_count("ttl_seconds", ttl_seconds)
        if seconds > MAX_TTL_SECONDS:
            raise InvalidRequest(
                f"ttl_seconds {seconds} is over the maximum, {MAX_TTL_SECONDS} (100 years); "
                "pass no TTL for an item that should not expire"
            )
        return utcnow() + timedelta(seconds=seconds)

    @staticmethod
    def _strip_expiry(item: MemoryItem) -> MemoryItem:
        if EXPIRES_KEY not in item.metadata:
            return item
        metadata = dict(item.metadata)
        expires_at = stored_expiry(metadata.pop(EXPIRES_KEY), item.scope, item.key)
        expires_at = expires_at or item.expires_at
        return MemoryItem(
            item.scope, item.key, item.value, metadata, item.created_at, item.updated_at, expires_at
        )

    # -- what a backend fills in ------------------------------------------------------------

    async def _ready(self) -> None:  # noqa: B027 - most stores are ready from the start
        """Runs first in each protocol method above: a store whose `capabilities` are only known
        once it is connected (a plugin process) connects here."""

    @abstractmethod
    async def _put(
        self,
        scope: Scope,
        key: str,
        value: JSON,
        metadata: dict[str, JSON],
        expires_at: datetime | None,
    ) -> MemoryItem: ...

    @abstractmethod
    async def _get(self, scope: Scope, key: str) -> MemoryItem | None: ...

    @abstractmethod
    async def _query(
        self, scope: Scope, text: str, top_k: int, filters: dict[str, JSON] | None
    ) -> list[QueryHit]: ...

    @abstractmethod
    async def _list_scopes(
        self, project_id: str | None, cursor: str | None, limit: int
    ) -> ScopePage: ...

    @abstractmethod
    async def _delete_scope(self, scope: Scope) -> int: ...

    @abstractmethod
    async def _delete(self, scope: Scope, key: str) -> bool:
        """Remove `key`'s item; True when it was there and had not expired."""

    @abstractmethod
    async def _list_items(
        self, scope: Scope, prefix: str | None, cursor: str | None, limit: int
    ) -> ItemPage:
        """At most `limit` items of `scope` in key order (by code point), after the key the
        cursor names, keys starting with `prefix` only; expired items may be among them (the
        base class drops them) but a store with native TTL leaves them out."""
