"""`SQLiteStore`: the embedded default memory store, one SQLite file (see the package)."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Sequence
from contextlib import suppress
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from animus_flows.embedders import Embedder

from animus_flows.protocol import (
    JSON,
    Capabilities,
    ItemPage,
    MemoryItem,
    QueryHit,
    Scope,
    ScopePage,
    indexed_text,
    utcnow,
)
from animus_flows.redaction import get_logger
from animus_flows.stores.analysis import DEFAULT_LANGUAGE, analyzer
from animus_flows.stores.base import BaseStore
from animus_flows.stores.checks import (
    PutEntry,
    check_key,
    check_scope,
    checked_keys,
    encode_json,
    entry_fields,
    metadata_object,
    prefix_end,
)
from animus_flows.stores.cursors import cursor_key, item_page, numeric_cursor
from animus_flows.stores.semantic import SemanticLeg
from animus_flows.stores.sqlite import ledger, search
from animus_flows.stores.sqlite.connection import StoreFile, transaction
from animus_flows.stores.sqlite.embedding import Embedding
from animus_flows.stores.sqlite.index import Indexer, Row, VectorChanges
from animus_flows.stores.sqlite.prepare import Indexing
from animus_flows.stores.sqlite.reads import (
    LIVE,
    SCOPE_ITEMS,
    item_of,
    moment,
    scope_ids,
)
from animus_flows.stores.sqlite.schema import (
    id_range,
    set_meta,
)

log = get_logger("animus_flows.stores.sqlite")

MAX_QUERY_TOP_K = 1000
# FTS5 merges index segments as it commits (each time AUTOMERGE segments share a level). A
# put_many of BULK_ITEMS or more commits with merging deferred to BULK_AUTOMERGE segments,
# which makes bulk ingest about 7% faster; later writes and optimize() catch up.
AUTOMERGE = 4
BULK_AUTOMERGE = 16
BULK_ITEMS = 1000
_SET_AUTOMERGE = "INSERT INTO items_fts (items_fts, rank) VALUES ('automerge', ?)"
# Keys per statement of `get_many` and friends: short reads, far below SQLite's limits.
KEY_BATCH = 100


class SQLiteStore(BaseStore):
    """The embedded default memory store: a single SQLite file.

    Args:
        path: the database file; created with its parent folders when missing.
        busy_timeout_ms: how long a write waits for another process's lock.
        language: how text is analyzed (stop words and stemming, `stores.analysis`); the
            file records it, and opening it with another is an error until it is reindexed.
        embedder: with one, the store ranks by a fusion of words and meaning
            (`capabilities.semantic`); the file records its model and dimension.

    With an embedder, `put_many` embeds its items before it writes them; a single `put` does
    not wait for the model: its item is found by words at once, and by meaning a moment later,
    once a background task has embedded it (`await store.wait_embedded()` waits for that).

    Example:
        ```python
        from animus_flows.protocol import Scope
        from animus_flows.stores import SQLiteStore

        store = SQLiteStore(".animus/memory.db")
        await store.put(Scope("demo"), "fx", "EUR/USD is exploring the 1.10 range")
        hits = await store.query(Scope("demo"), "what did the euro explore?")
        ```
    """

    capabilities = Capabilities(
        native_ttl=True,
        native_key_get=True,
        strong_consistency=True,
        max_query_top_k=MAX_QUERY_TOP_K,
    )
    atomic_put_many = True  # one transaction

    def __init__(
        self,
        path: str | Path,
        *,
        busy_timeout_ms: int = 5000,
        language: str = DEFAULT_LANGUAGE,
        embedder: Embedder | None = None,
    ) -> None:
        self.path = Path(path)
        self.busy_timeout_ms = busy_timeout_ms
        self.language = language
        self._semantic = None if embedder is None else SemanticLeg(embedder)
        self._indexer = Indexer(analyzer(language), semantic=embedder is not None)
        self._indexing = Indexing(self.path, language, self._indexer)
        self._reindex = False  # set by `reindex` before the file is opened
        self._file = StoreFile(self.path, busy_timeout_ms, self._prepare, self._is_current)
        self._embedding = (
            None if self._semantic is None else Embedding(self._semantic, self._file, self._indexer)
        )
        if embedder is not None:
            self.capabilities = Capabilities(
                native_ttl=True,
                native_key_get=True,
                strong_consistency=True,
                max_query_top_k=MAX_QUERY_TOP_K,
                semantic=True,
            )

    def describe(self) -> str:
        return f"SQLiteStore({str(self.path)!r})"

    # -- the file's schema and analysis ----------------------------------------------------------

    async def _ready(self) -> None:
        if self._semantic is not None and self._indexing.model is None:
            # a remote model is asked its size once
            self._indexing.model = await self._semantic.label()

    def _is_current(self, reader: sqlite3.Connection) -> bool:
        return self._indexing.is_current(reader)

    def _prepare(self, conn: sqlite3.Connection) -> None:
        self._indexing.prepare(conn, reindex=self._reindex)

    async def reindex(self) -> int:
        """Index every item again (terms, full-text index, statistics, and with an embedder
        its vectors, embedded before this returns) with this store's language and model: after
        a new animus-flows version, a language or a model change. Returns the items."""
        self._reindex = True
        await self._ready()

        def again(conn: sqlite3.Connection) -> int:
            with self._file.writing(conn):
                done = self._indexer.reindex(conn)
                set_meta(conn, "language", self.language)
                if self._indexing.model is not None:
                    set_meta(conn, "embedder", self._indexing.model)
            return done

        try:
            done = await self._file.run(again)  # opening an older file reindexes it already
        finally:
            self._reindex = False
        if self._semantic is not None:
            self._semantic.forget()
            await self._embedding.drain()  # type: ignore[union-attr]
        return done

    async def wait_embedded(self) -> None:
        """Wait until every item written so far has its vector (no-op without an embedder)."""
        if self._embedding is not None:
            await self._ready()
            await self._embedding.drain()

    async def aclose(self) -> None:
        if self._embedding is not None:
            await self._embedding.close()
        await self._file.aclose()

    def _embed_soon(self) -> None:
        if self._embedding is not None:
            self._embedding.soon()

    def _apply(self, changes: VectorChanges) -> None:
        if self._embedding is not None:
            self._embedding.apply(changes)

    # -- writes ---------------------------------------------------------------------------

    @staticmethod
    def _scope_id(conn: sqlite3.Connection, scope: Scope, *, create: bool) -> int | None:
        ids = scope_ids(scope)
        if create:
            conn.execute(
                "INSERT OR IGNORE INTO scopes (project_id, agent_id, task_id) VALUES (?, ?, ?)", ids
            )
        row = conn.execute(
            "SELECT id FROM scopes WHERE project_id = ? AND agent_id = ? AND task_id = ?", ids
        ).fetchone()
        return None if row is None else row[0]

    def _row(
        self,
        value: JSON,
        metadata: object,
        expires_at: datetime | None,
        vector: bytes | None = None,
    ) -> Row:
        """An item as it is written; encoding is the JSON check, so nothing encodes twice."""
        return Row(
            encode_json("value", value),
            encode_json("metadata", metadata_object(metadata)),
            self._indexer.terms(value),
            None if expires_at is None else expires_at.timestamp(),
            vector,
        )

    async def _put(
        self,
        scope: Scope,
        key: str,
        value: JSON,
        metadata: dict[str, JSON],
        expires_at: datetime | None,
    ) -> MemoryItem:
        return (await self._put_one(scope, key, value, metadata, expires_at))[0]

    async def _put_one(
        self,
        scope: Scope,
        key: str,
        value: JSON,
        metadata: dict[str, JSON],
        expires_at: datetime | None,
        expected_version: int | None = None,
    ) -> tuple[MemoryItem, int | None]:
        """`_put`, and the key's new version when the file keeps a ledger (`ledger.py`,
        which checks `expected_version` in the write's transaction)."""
        now = utcnow()
        rows = {key: self._row(value, metadata, expires_at)}  # its vector: in the background
        changes = VectorChanges()

        def put(conn: sqlite3.Connection) -> tuple[float, int | None]:
            with self._file.writing(conn):
                versions = ledger.record_puts(conn, scope, rows, now.timestamp(), expected_version)
                scope_id = self._scope_id(conn, scope, create=True)
                created = self._indexer.write(conn, scope_id, rows, now.timestamp(), changes)  # type: ignore[arg-type]
            return created[key], versions.get(key)

        created_at, version = await self._file.run(put)
        self._apply(changes)
        self._embed_soon()
        item = MemoryItem(scope, key, value, metadata, moment(created_at), now, expires_at)  # type: ignore[arg-type]
        return item, version

    async def put_many(self, entries: Iterable[PutEntry]) -> int:
        """Store many `(scope, key, value, metadata[, ttl_seconds])` entries in one
        transaction. Every entry is checked before anything is written: one bad entry writes
        nothing."""
        await self._ready()
        checked = []
        for entry in entries:
            scope, key, value, metadata, ttl_seconds = entry_fields(entry)
            check_scope(scope)
            check_key(key)
            checked.append((scope, key, value, metadata, self._expiry(ttl_seconds)))
        # a batch is embedded before it is written, at once: batches are what models are for
        blobs: list[bytes | None] = [None] * len(checked)
        if self._semantic is not None:
            blobs = await self._semantic.embed_documents(  # type: ignore[assignment]
                [indexed_text(value) for _, _, value, _, _ in checked]
            )
        by_scope: dict[Scope, dict[str, Row]] = {}
        for (scope, key, value, metadata, expires_at), blob in zip(checked, blobs, strict=True):
            # a later entry for the same key wins, as with successive puts
            by_scope.setdefault(scope, {})[key] = self._row(value, metadata, expires_at, blob)
        now = utcnow().timestamp()
        changes = VectorChanges()

        def put_all(conn: sqlite3.Connection) -> int:
            written = sum(len(rows) for rows in by_scope.values())
            bulk = written >= BULK_ITEMS
            with self._file.writing(conn):
                if bulk:
                    conn.execute(_SET_AUTOMERGE, (BULK_AUTOMERGE,))
                for scope, rows in by_scope.items():
                    ledger.record_puts(conn, scope, rows, now)
                    scope_id = self._scope_id(conn, scope, create=True)
                    self._indexer.write(conn, scope_id, rows, now, changes)  # type: ignore[arg-type]
            if bulk:  # the items are committed: a busy store only leaves merging deferred
                with suppress(sqlite3.OperationalError), transaction(conn):
                    conn.execute(_SET_AUTOMERGE, (AUTOMERGE,))
            return written

        written = await self._file.run(put_all)
        self._apply(changes)
        return written

    async def _delete(self, scope: Scope, key: str) -> bool:
        def find(conn: sqlite3.Connection) -> tuple[Any, ...] | None:
            return conn.execute(f"{SCOPE_ITEMS} AND i.key = ?", (*scope_ids(scope), key)).fetchone()

        def delete(conn: sqlite3.Connection) -> bool:
            with self._file.writing(conn):
                scope_id = self._scope_id(conn, scope, create=False)
                if scope_id is None:
                    return False
                now = utcnow().timestamp()
                live = conn.execute(
                    "SELECT 1 FROM items WHERE scope_id = ? AND key = ?"
                    " AND (expires_at IS NULL OR expires_at > ?)",
                    (scope_id, key, now),
                ).fetchone()
                ledger.record_deletes(conn, scope, [key], now)
                self._indexer.remove(conn, "scope_id = ? AND key = ?", (scope_id, key), changes)
                return live is not None

        # a key that is not there takes no write lock, which other processes would wait for
        if await self._file.read(find) is None:
            return False
        changes = VectorChanges()
        deleted = await self._file.run(delete)
        self._apply(changes)
        return deleted

    async def _delete_scope(self, scope: Scope) -> int:
        def delete(conn: sqlite3.Connection) -> int:
            with self._file.writing(conn):
                scope_id = self._scope_id(conn, scope, create=False)
                if scope_id is None:
                    return 0
                live = self._count(conn, scope_id)
                ledger.record_scope_delete(conn, scope, scope_id, utcnow().timestamp())
                self._indexer.remove(conn, "id BETWEEN ? AND ?", id_range(scope_id))
                conn.execute("DELETE FROM term_df WHERE scope_id = ?", (scope_id,))
                conn.execute("DELETE FROM scopes WHERE id = ?", (scope_id,))
                deleted.append(scope_id)
                return live

        deleted: list[int] = []
        live = await self._file.run(delete)
        if self._semantic is not None:
            for scope_id in deleted:
                self._semantic.forget(scope_id)
        return live

    async def optimize(self) -> None:
        """Merge the full-text index into one segment and refresh the planner's statistics.

        Worth running after a bulk load (a few seconds per million items): queries then read one
        segment instead of several. Safe at any time; other processes keep reading meanwhile.
        """

        def optimize(conn: sqlite3.Connection) -> None:
            with self._file.writing(conn):
                conn.execute("INSERT INTO items_fts (items_fts) VALUES ('optimize')")
            conn.execute("PRAGMA optimize")

        await self._file.run(optimize)

    async def purge_expired(self) -> int:
        """Delete expired items for good (queries skip them either way; until then the scope's
        statistics count them)."""

        def purge(conn: sqlite3.Connection) -> int:
            with self._file.writing(conn):
                return self._indexer.remove(
                    conn,
                    "expires_at IS NOT NULL AND expires_at <= ?",
                    (utcnow().timestamp(),),
                    changes,
                )

        changes = VectorChanges()
        purged = await self._file.run(purge)
        self._apply(changes)
        return purged

    # -- reads ----------------------------------------------------------------------------

    async def _get(self, scope: Scope, key: str) -> MemoryItem | None:
        def get(conn: sqlite3.Connection) -> tuple[Any, ...] | None:
            return conn.execute(
                f"{SCOPE_ITEMS} AND i.key = ? AND {LIVE}",
                (*scope_ids(scope), key, utcnow().timestamp()),
            ).fetchone()

        row = await self._file.read(get)
        return None if row is None else item_of(scope, *row)

    async def get_many(self, scope: Scope, keys: Sequence[str]) -> dict[str, MemoryItem]:
        """The live items of `scope` among `keys`, by key (a key without one is absent): what
        `get` returns key by key, in one read of the key index per `KEY_BATCH` keys."""
        check_scope(scope)
        wanted = checked_keys(keys)
        found: dict[str, MemoryItem] = {}
        for start in range(0, len(wanted), KEY_BATCH):
            batch = wanted[start : start + KEY_BATCH]

            def read(conn: sqlite3.Connection, batch: list[str]) -> list[tuple[Any, ...]]:
                return conn.execute(
                    f"{SCOPE_ITEMS} AND i.key IN ({', '.join('?' * len(batch))}) AND {LIVE}",
                    (*scope_ids(scope), *batch, utcnow().timestamp()),
                ).fetchall()

            # a read per batch, so the event loop runs between them
            found.update(
                (row[0], item_of(scope, *row)) for row in await self._file.read(read, batch)
            )
        return found

    async def _list_items(
        self, scope: Scope, prefix: str | None, cursor: str | None, limit: int
    ) -> ItemPage:
        after = cursor_key(cursor)
        end = None if prefix is None else prefix_end(prefix)
        # key ranges of the (scope, key) index: no character of a prefix is a wildcard
        bounds = [(" AND i.key >= ?", prefix or None), (" AND i.key < ?", end)]
        bounds.append((" AND i.key > ?", after))
        kept = [(clause, value) for clause, value in bounds if value is not None]

        def read(conn: sqlite3.Connection) -> list[tuple[Any, ...]]:
            return conn.execute(
                f"{SCOPE_ITEMS}{''.join(c for c, _ in kept)} AND {LIVE} ORDER BY i.key LIMIT ?",
                (*scope_ids(scope), *(v for _, v in kept), utcnow().timestamp(), limit + 1),
            ).fetchall()

        return item_page([item_of(scope, *row) for row in await self._file.read(read)], limit)

    async def _query(
        self, scope: Scope, text: str, top_k: int, filters: dict[str, JSON] | None
    ) -> list[QueryHit]:
        listing = not text.strip()
        terms = [] if listing else self._indexer.analyzer.terms(text)
        semantic = None if listing else self._semantic
        if not listing and not terms and semantic is None:
            return []  # nothing but stop words: no item is about any of it
        if semantic is not None and self._embedding is not None and not self._embedding.started:
            self._embed_soon()  # items an earlier process queued: embed them now
        query = search.Query(scope, text, terms, top_k, filters, listing)
        return await search.run(self._file, query, semantic)

    async def _list_scopes(
        self, project_id: str | None, cursor: str | None, limit: int
    ) -> ScopePage:
        after = numeric_cursor(cursor)

        def list_scopes(conn: sqlite3.Connection) -> list[tuple[Any, ...]]:
            project_clause = "" if project_id is None else " AND s.project_id = ?"
            return conn.execute(
                "SELECT s.id, s.project_id, s.agent_id, s.task_id FROM scopes s"
                f" WHERE s.id > ?{project_clause} AND EXISTS (SELECT 1 FROM items i"
                f" WHERE i.scope_id = s.id AND {LIVE}) ORDER BY s.id LIMIT ?",
                (
                    after,
                    *([project_id] if project_id is not None else []),
                    utcnow().timestamp(),
                    limit + 1,
                ),
            ).fetchall()

        rows = await self._file.run(list_scopes)
        page = rows[:limit]
        scopes = [Scope(p, a or None, t or None) for _, p, a, t in page]
        next_cursor = str(page[-1][0]) if len(rows) > limit else None
        return ScopePage(scopes, next_cursor)

    @staticmethod
    def _count(conn: sqlite3.Connection, scope_id: int) -> int:
        return conn.execute(
            f"SELECT count(*) FROM items i WHERE i.id BETWEEN ? AND ? AND {LIVE}",
            (*id_range(scope_id), utcnow().timestamp()),
        ).fetchone()[0]

    async def count(self, scope: Scope) -> int:
        """Live items in `scope`: what `delete_scope` would remove."""

        def count(conn: sqlite3.Connection) -> int:
            scope_id = self._scope_id(conn, scope, create=False)
            return 0 if scope_id is None else self._count(conn, scope_id)

        return await self._file.run(count)
