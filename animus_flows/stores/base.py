"""The validating base class every store builds on (the checks themselves: `checks.py`).

`BaseStore` checks arguments once, emulates TTL for backends without it, clamps `top_k` to the
store's capability and normalizes scores; backends fill in `_put`, `_get`, `_query`,
`_list_scopes`, `_delete_scope`, `_delete` and `_list_items` and may trust what they receive.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable
from datetime import datetime, timedelta
from typing import ClassVar

from animus_flows.errors import InvalidRequest
from animus_flows.protocol import (
    JSON,
    MAX_TTL_SECONDS,
    Capabilities,
    ItemPage,
    MemoryItem,
    QueryHit,
    Scope,
    ScopePage,
    check_count,
    check_filters,
    check_unicode,
    utcnow,
)
from animus_flows.stores.checks import (
    EXPIRES_KEY,
    PutEntry,
    check_json,
    check_key,
    check_page_request,
    check_prefix,
    check_scope,
    clamp_score,
    entry_fields,
    metadata_object,
    stored_expiry,
    stored_json,
)


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
        value, metadata, expires_at = await self._checked_put(
            scope, key, value, metadata, ttl_seconds
        )
        if expires_at is not None and not self.capabilities.native_ttl:
            metadata = {**metadata, EXPIRES_KEY: expires_at.isoformat()}
        item = await self._put(scope, key, value, metadata, expires_at)
        return self._strip_expiry(item)

    async def _checked_put(
        self,
        scope: Scope,
        key: str,
        value: JSON,
        metadata: dict[str, JSON] | None,
        ttl_seconds: int | None,
    ) -> tuple[JSON, dict[str, JSON], datetime | None]:
        """A put's arguments checked, once the store is ready: the value and metadata as JSON
        keeps them (the item returned holds what `get` will) and the expiry."""
        await self._ready()
        check_scope(scope)
        check_key(key)
        value = stored_json("value", value)
        return value, self._check_metadata(metadata), self._expiry(ttl_seconds)

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
