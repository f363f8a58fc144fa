"""`RedactingStore`: a store wrapper that redacts every write before the store sees it.

Every path that opens a store for writing (the plugin registry behind the hook, the CLI, the
MCP servers and `animus memory serve`, and the memory layer) gets its store through this
wrapper, so no write path can forget redaction: values and metadata have their secrets replaced
by `[REDACTED:<type>]` markers (`animus_flows.redaction.redact_item`), and a key or scope id
that holds a secret is refused, since identities are stored and shown as written. Around a
store that keeps a ledger (`animus_flows.ledger.LedgerStore`) the wrapper is a
`RedactingLedgerStore`, whose versioned writes are redacted too: the ledger never holds a
secret the store would not.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from animus_flows.ledger import LedgerEvent, LedgerStore, VersionedItem
from animus_flows.protocol import (
    JSON,
    RESERVED_METADATA_KEYS,
    Capabilities,
    MemoryItem,
    MemoryStore,
    Scope,
)
from animus_flows.redaction import redact_item, refuse_secret_in_id, refuse_secret_in_key
from animus_flows.stores.checks import PutEntry, entry_fields


def redacting(store: MemoryStore) -> RedactingStore:
    """`store` behind the redaction wrapper (itself when it already is)."""
    return store if isinstance(store, RedactingStore) else RedactingStore(store)


class RedactingStore:
    """A `MemoryStore` that redacts what it writes into `inner` and reads through unchanged.

    Every other attribute (`capabilities`, `aclose`, `optimize`, a plugin's `connect`, ...) is
    the inner store's. Around a store that keeps a ledger, `RedactingStore(inner)` is a
    `RedactingLedgerStore`, so no versioned write gets past it unredacted.

    Example:
        ```python
        from animus_flows.protocol import Scope
        from animus_flows.stores import SQLiteStore
        from animus_flows.stores.redacting import RedactingStore

        store = RedactingStore(SQLiteStore(".animus/memory.db"))
        item = await store.put(Scope("demo"), "deploy", "key AKIAIOSFODNN7EXAMPLE")
        item.value  # 'key [REDACTED:aws_access_key]'
        ```
    """

    def __new__(cls, inner: MemoryStore) -> RedactingStore:
        unwrapped = inner.inner if isinstance(inner, RedactingStore) else inner
        if cls is RedactingStore and isinstance(unwrapped, LedgerStore):
            cls = RedactingLedgerStore
        return super().__new__(cls)

    def __init__(self, inner: MemoryStore) -> None:
        self.inner = inner.inner if isinstance(inner, RedactingStore) else inner

    @property
    def capabilities(self) -> Capabilities:
        return self.inner.capabilities

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def __repr__(self) -> str:
        return repr(self.inner)

    async def put(
        self,
        scope: Scope,
        key: str,
        value: JSON,
        *,
        metadata: dict[str, JSON] | None = None,
        ttl_seconds: int | None = None,
    ) -> MemoryItem:
        value, metadata = _redacted(scope, key, value, metadata)
        return await self.inner.put(scope, key, value, metadata=metadata, ttl_seconds=ttl_seconds)

    async def put_many(self, entries: Iterable[PutEntry]) -> int:
        """Redact every entry first (one refused: nothing is written), then write them all
        through the inner store's `put_many`."""
        redacted = []
        for entry in entries:
            scope, key, value, metadata, ttl_seconds = entry_fields(entry)
            redacted.append((scope, key, *_redacted(scope, key, value, metadata), ttl_seconds))
        put_many = getattr(self.inner, "put_many", None)
        if put_many is not None:
            return await put_many(redacted)
        for scope, key, value, metadata, ttl_seconds in redacted:  # a store with no batch
            await self.inner.put(scope, key, value, metadata=metadata, ttl_seconds=ttl_seconds)
        return len(redacted)


class RedactingLedgerStore(RedactingStore):
    """`RedactingStore` around a store that keeps a ledger: `put_versioned` is redacted like
    `put`, and the ledger's reads pass through."""

    async def put_versioned(
        self,
        scope: Scope,
        key: str,
        value: JSON,
        *,
        expected_version: int | None = None,
        metadata: dict[str, JSON] | None = None,
        ttl_seconds: int | None = None,
    ) -> VersionedItem:
        value, metadata = _redacted(scope, key, value, metadata)
        return await self.inner.put_versioned(  # type: ignore[attr-defined, no-any-return]
            scope,
            key,
            value,
            expected_version=expected_version,
            metadata=metadata,
            ttl_seconds=ttl_seconds,
        )

    async def get_versioned(self, scope: Scope, key: str) -> VersionedItem | None:
        return await self.inner.get_versioned(scope, key)  # type: ignore[attr-defined, no-any-return]

    async def ledger_events(self, scope: Scope, key: str) -> list[LedgerEvent]:
        return await self.inner.ledger_events(scope, key)  # type: ignore[attr-defined, no-any-return]


#: Metadata whose values are the memory layer's own fields, never free text.
BOOKKEEPING = RESERVED_METADATA_KEYS - {"tags"}


def _redacted(
    scope: Scope, key: str, value: JSON, metadata: dict[str, JSON] | None
) -> tuple[JSON, dict[str, JSON] | None]:
    # what is not a scope or a key is the inner store's to refuse, with its own message
    if isinstance(scope, Scope):
        for label, ident in (
            ("project_id", scope.project_id),
            ("agent_id", scope.agent_id),
            ("task_id", scope.task_id),
        ):
            if ident is not None:
                refuse_secret_in_id(f"scope {label}", ident)
    if isinstance(key, str):
        refuse_secret_in_key(key)
    return redact_item(value, metadata, bookkeeping=BOOKKEEPING)
