"""`SQLiteLedgerStore`: the SQLite store with a ledger of every change (`LedgerStore`)."""

from __future__ import annotations

import sqlite3

from animus_flows.ledger import LedgerEvent, VersionedItem, check_expected_version
from animus_flows.protocol import JSON, Scope, utcnow
from animus_flows.redaction import get_logger
from animus_flows.stores.checks import check_key, check_scope
from animus_flows.stores.sqlite import ledger
from animus_flows.stores.sqlite.reads import item_of
from animus_flows.stores.sqlite.store import SQLiteStore

log = get_logger("animus_flows.stores.sqlite")


class SQLiteLedgerStore(SQLiteStore):
    """A `SQLiteStore` whose file keeps a ledger: every change of every item, with versions
    and valid and transaction times (`animus_flows.ledger.LedgerStore`).

    Opening a file turns its ledger on (each live item starts its history at version 1), and
    from then on every store that writes to the file records its changes, whatever it was
    opened as: a plain `SQLiteStore`, `animus memory put`, the write-back hook. Arguments are
    `SQLiteStore`'s. This is the store of `MemoryLayer(backend="durable")` on SQLite.

    Example:
        ```python
        from animus_flows.protocol import Scope
        from animus_flows.stores import SQLiteLedgerStore

        store, scope = SQLiteLedgerStore(".animus/memory.db"), Scope("demo")
        first = await store.put_versioned(scope, "fx", "EUR/USD 1.08", expected_version=0)
        await store.put_versioned(scope, "fx", "EUR/USD 1.09", expected_version=first.version)
        [event.op for event in await store.ledger_events(scope, "fx")]  # ['create', 'update']
        ```
    """

    def describe(self) -> str:
        return f"SQLiteLedgerStore({str(self.path)!r})"

    def _is_current(self, reader: sqlite3.Connection) -> bool:
        return super()._is_current(reader) and ledger.keeps_ledger(reader)

    def _prepare(self, conn: sqlite3.Connection) -> None:
        super()._prepare(conn)
        started = ledger.turn_on(conn, utcnow().timestamp())
        if started is not None:
            log.info(
                "SQLite store %s keeps a ledger now (%d items at version 1)", self.path, started
            )

    async def get_versioned(self, scope: Scope, key: str) -> VersionedItem | None:
        """The live item under `key` with its version, or None."""
        await self._ready()
        check_scope(scope)
        check_key(key)
        row = await self._file.read(ledger.versioned_row, scope, key, utcnow().timestamp())
        return None if row is None else VersionedItem(item_of(scope, *row[:6]), row[6])

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
        """`put`, returning the key's new version; with `expected_version`, only when the key's
        live version is that (0: no live item), else `ConflictError` and nothing written."""
        expected = check_expected_version(expected_version)
        value, checked, expires_at = await self._checked_put(
            scope, key, value, metadata, ttl_seconds
        )
        item, version = await self._put_one(scope, key, value, checked, expires_at, expected)
        return VersionedItem(item, version)  # type: ignore[arg-type]  # the file keeps a ledger

    async def ledger_events(self, scope: Scope, key: str) -> list[LedgerEvent]:
        """Every change of `key` in `scope`, oldest first (deleted keys too; `[]` for a key
        never written since the file keeps a ledger)."""
        await self._ready()
        check_scope(scope)
        check_key(key)
        return await self._file.read(ledger.events, scope, key)
