"""`PostgresStore`: the memory store many workers share, in a PostgreSQL database (see the
package)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from pydantic import SecretStr

if TYPE_CHECKING:
    from animus_flows.embedders import Embedder

from animus_flows.errors import ConfigError
from animus_flows.ledger import LedgerEvent, VersionedItem, check_expected_version
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
from animus_flows.stores.background import BackgroundEmbedding
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
from animus_flows.stores.postgres import ledger, search, writes
from animus_flows.stores.postgres.connection import Database
from animus_flows.stores.postgres.embedding import PostgresQueue
from animus_flows.stores.postgres.prepare import Preparation
from animus_flows.stores.postgres.reads import (
    COUNT,
    LIST_SCOPES,
    LIVE,
    SCOPE_ITEMS,
    item_of,
    moment,
)
from animus_flows.stores.postgres.reindex import Reindexer
from animus_flows.stores.postgres.schema import (
    DEFAULT_SCHEMA,
    Statements,
    check_schema_name,
    language_problem,
)
from animus_flows.stores.postgres.writes import Row, Written, analysable_text, scope_ids
from animus_flows.stores.semantic import SemanticLeg

MAX_QUERY_TOP_K = 1000
DEFAULT_LANGUAGE = "english"


class PostgresStore(BaseStore):
    """A memory store in PostgreSQL, shared by every worker that reaches the database.

    Ranked by BM25 over `tsvector`s of the store's text search configuration, with each
    scope's own statistics; with an embedder, fused with vector similarity. Its tables live in
    one schema, created and migrated on first connect.

    Args:
        dsn: a libpq connection string or URI (`postgresql://USER:PASSWORD@HOST:5432/DB`),
            plain or as a `SecretStr`; never shown in errors, logs or `repr`.
        schema: the PostgreSQL schema holding the store's tables.
        language: the text search configuration (`english`: its stop words and stemmer;
            `simple`: neither); the schema records it, and opening it with another is an
            error until it is reindexed.
        embedder: with one, the store ranks by a fusion of words and meaning
            (`capabilities.semantic`); the schema records its model and dimension.
        pool_max_size: the most connections the store opens per event loop.
        connect_timeout_s: how long connecting, or waiting for a free connection, may take.

    With an embedder, `put_many` embeds its items before it writes them; a single `put` does
    not wait for the model: its item is found by words at once, and by meaning once a
    background task (of this process or of another worker's) has embedded it
    (`await store.wait_embedded()` waits for that).

    Every change is recorded in the schema's ledger, in the change's transaction
    (`animus_flows.ledger.LedgerStore`: `get_versioned`, `put_versioned(...,
    expected_version=N)`, `ledger_events`); it is the store of
    `MemoryLayer(backend="durable", database_url="postgresql://...")`.

    Example:
        ```python
        import os

        from animus_flows.protocol import Scope
        from animus_flows.stores.postgres import PostgresStore

        store = PostgresStore(os.environ["ANIMUS_DATABASE_URL"])
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
        dsn: str | SecretStr,
        *,
        schema: str = DEFAULT_SCHEMA,
        language: str = DEFAULT_LANGUAGE,
        embedder: Embedder | None = None,
        pool_max_size: int = 10,
        connect_timeout_s: float = 10.0,
    ) -> None:
        secret = dsn.get_secret_value() if isinstance(dsn, SecretStr) else dsn
        if not isinstance(secret, str) or not secret.strip():
            raise ConfigError(
                "the PostgreSQL store's DSN is empty; pass a connection string such as "
                "postgresql://USER:PASSWORD@HOST:5432/DATABASE"
            )
        if (
            isinstance(pool_max_size, bool)
            or not isinstance(pool_max_size, int)
            or pool_max_size < 1
        ):
            raise ConfigError(f"pool_max_size {pool_max_size!r} must be an integer >= 1")
        self.schema = check_schema_name(schema)
        problem = language_problem(language)
        if problem is not None:
            raise ConfigError(f"language {problem}")
        self.language = language
        self._where = f"PostgreSQL store (schema {self.schema})"
        self._db = Database(
            secret,
            where=self._where,
            pool_max_size=pool_max_size,
            connect_timeout_s=connect_timeout_s,
        )
        self._sql = Statements(self.schema)
        self._semantic = None if embedder is None else SemanticLeg(embedder)
        self._embedding = None
        if self._semantic is not None:
            queue = PostgresQueue(self._db, self._sql, self._apply)
            self._embedding = BackgroundEmbedding(self._semantic, queue)
        self._preparation = Preparation(self.schema, self.language, self._where)
        self._prepared = False
        if embedder is not None:
            self.capabilities = Capabilities(
                native_ttl=True,
                native_key_get=True,
                strong_consistency=True,
                max_query_top_k=MAX_QUERY_TOP_K,
                semantic=True,
            )

    def describe(self) -> str:
        return f"PostgresStore(schema={self.schema!r})"

    # -- the schema ---------------------------------------------------------------------------

    async def _ready(self) -> None:
        if self._semantic is not None and self._preparation.model is None:
            self._preparation.model = await self._semantic.label()  # a remote model is asked once
        if not self._prepared:
            await self._prepare(reindex=False)
            self._prepared = True

    async def _prepare(self, *, reindex: bool) -> None:
        import psycopg

        conn = await self._db.connect()
        try:
            await self._preparation.prepare(conn, reindex=reindex)
        except psycopg.Error as exc:
            raise self._db.error(exc) from None
        finally:
            await conn.close()

    async def reindex(self) -> int:
        """Index every item again with this store's text search configuration (and with an
        embedder, embed it with this model), scope by scope, writes to a scope waiting only
        for its current batch: after a language or a model change. Returns the items."""
        if self._semantic is not None and self._preparation.model is None:
            self._preparation.model = await self._semantic.label()
        await self._prepare(reindex=True)
        self._prepared = True
        reindexer = Reindexer(
            self._db, self._sql, self.schema, self.language, self._semantic, self._preparation
        )
        return await reindexer.run()

    async def wait_embedded(self) -> None:
        """Wait until every item written so far has its vector (no-op without an embedder),
        those other processes are embedding included."""
        if self._embedding is not None:
            await self._ready()
            await self._embedding.drain()

    async def aclose(self) -> None:
        """Close the store: with an embedder, once the items this store queued have their
        vectors (at most `background.CLOSE_GRACE_S`; the rest stay queued for the next
        process that opens the schema with the model)."""
        if self._embedding is not None:
            await self._embedding.close()
        await self._db.aclose()

    # -- writes -------------------------------------------------------------------------------

    async def _write(
        self, rows: list[Row], expected_version: int | None = None
    ) -> tuple[Written, datetime]:
        now = utcnow()
        async with self._db.connection() as conn, conn.transaction():
            written = await writes.upsert(
                conn,
                self._sql,
                rows,
                language=self.language,
                now=now,
                expected_version=expected_version,
                queue=self._embedding is not None,
            )
        self._apply(written)
        if written.queued:
            self._embedding.soon()  # type: ignore[union-attr]
        return written, now

    def _apply(self, written: Written) -> None:
        """Tell the process's copy of the vectors what a committed write changed, and the
        background embedding what it queued."""
        if self._embedding is not None:
            self._embedding.queued(written.queued)
        if self._semantic is not None:
            self._semantic.changed_scopes(written.versions, written.vectors, written.removed)

    async def _put(
        self,
        scope: Scope,
        key: str,
        value: JSON,
        metadata: dict[str, JSON],
        expires_at: datetime | None,
    ) -> MemoryItem:
        return (await self._put_one(scope, key, value, metadata, expires_at)).item

    async def _put_one(
        self,
        scope: Scope,
        key: str,
        value: JSON,
        metadata: dict[str, JSON],
        expires_at: datetime | None,
        expected_version: int | None = None,
    ) -> VersionedItem:
        # its vector in the background: a put never waits for the model
        row = Row(
            scope,
            key,
            encode_json("value", value),
            encode_json("metadata", metadata),
            expires_at,
            indexed_text(value),
        )
        written, now = await self._write([row], expected_version)
        written_key = (written.scope_ids[scope], key)
        created_at = moment(written.created[written_key])
        item = MemoryItem(scope, key, value, metadata, created_at, now, expires_at)
        return VersionedItem(item, written.ledger[written_key])

    async def put_many(self, entries: Iterable[PutEntry]) -> int:
        """Store many `(scope, key, value, metadata[, ttl_seconds])` entries in one
        transaction (a later entry for the same key wins). Every entry is checked before
        anything is written: one bad entry writes nothing. With an embedder, the batch is
        embedded first."""
        await self._ready()
        entries = list(entries)
        if len(entries) < writes.ANALYSE_APART_ROWS:
            indexed = self._checked_rows(entries)
        else:  # the server analyses the texts while this process checks and encodes them
            texts = [analysable_text(entry) for entry in entries]
            analysis = asyncio.ensure_future(writes.analyse(self._db, self.language, texts))
            try:
                indexed = await asyncio.to_thread(self._checked_rows, entries)
            except Exception:
                await asyncio.gather(analysis, return_exceptions=True)  # no query left behind
                raise
            except BaseException:
                analysis.cancel()
                raise
            tsvs = await analysis
            for index, row in indexed:
                row.tsv = tsvs[index]
        if not indexed:
            return 0
        batch = [row for _, row in indexed]
        if self._semantic is not None:  # a batch is embedded before it is written, at once
            vectors = await self._semantic.embed_documents([row.text for row in batch])
            for row, vector in zip(batch, vectors, strict=True):
                row.vector = vector
        await self._write(batch)
        return len(batch)

    def _checked_rows(self, entries: list[Any]) -> list[tuple[int, Row]]:
        """The rows of `put_many`'s entries, each checked, with its entry's position; a later
        entry for a key replaces an earlier one, and the batch keeps the order of the last."""
        rows: dict[tuple[Scope, str], tuple[int, Row]] = {}
        for index, entry in enumerate(entries):
            scope, key, value, metadata, ttl_seconds = entry_fields(entry)
            check_scope(scope)
            check_key(key)
            row = Row(
                scope,
                key,
                encode_json("value", value),  # the check is the encoding: once per entry
                encode_json("metadata", metadata_object(metadata)),
                self._expiry(ttl_seconds),
                indexed_text(value),
            )
            rows.pop((scope, key), None)
            rows[scope, key] = (index, row)
        return list(rows.values())

    async def _delete(self, scope: Scope, key: str) -> bool:
        async with self._db.connection() as conn, conn.transaction():
            deleted, written = await writes.delete_key(conn, self._sql, scope, key, utcnow())
        self._apply(written)
        return deleted

    async def _delete_scope(self, scope: Scope) -> int:
        async with self._db.connection() as conn, conn.transaction():
            live, scope_id = await writes.delete_scope(conn, self._sql, scope, utcnow())
        if self._semantic is not None and scope_id is not None:
            self._semantic.forget(scope_id)
        return live

    async def optimize(self) -> None:
        """Vacuum and analyze the store's tables: worth running after a bulk load (PostgreSQL's
        autovacuum gets there on its own, later), so that the first queries neither set the new
        rows' hint bits nor run on the planner's guesses. Safe at any time."""
        await self._ready()
        async with self._db.connection() as conn:
            for table in ("items", "term_df", "scopes", "item_vectors", "ledger"):
                await conn.execute(self._sql(f"VACUUM (ANALYZE) {{s}}.{table}"))

    async def purge_expired(self) -> int:
        """Delete expired items for good (queries skip them either way; until then the
        scopes' statistics count them). Returns the items deleted."""
        await self._ready()
        async with self._db.connection() as conn, conn.transaction():
            purged, written = await writes.purge_expired(conn, self._sql, utcnow())
        self._apply(written)
        return purged

    # -- the ledger (`animus_flows.ledger.LedgerStore`) ---------------------------------------

    async def get_versioned(self, scope: Scope, key: str) -> VersionedItem | None:
        """The live item under `key` with its version, or None."""
        await self._ready()
        check_scope(scope)
        check_key(key)
        rows = await self._rows(ledger.VERSIONED_ITEM, (*scope_ids(scope), key, utcnow()))
        return VersionedItem(item_of(scope, rows[0][:6]), int(rows[0][6])) if rows else None

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
        return await self._put_one(scope, key, value, checked, expires_at, expected)

    async def ledger_events(self, scope: Scope, key: str) -> list[LedgerEvent]:
        """Every change of `key` in `scope`, oldest first (deleted keys too; `[]` for a key
        never written)."""
        await self._ready()
        check_scope(scope)
        check_key(key)
        rows = await self._rows(ledger.EVENTS, (*scope_ids(scope), key))
        return [ledger.event_of(scope, key, row) for row in rows]

    # -- reads --------------------------------------------------------------------------------

    async def _rows(self, statement: str, params: Sequence[Any]) -> list[tuple[Any, ...]]:
        async with self._db.connection() as conn:
            cursor = await conn.execute(self._sql(statement), params)
            return await cursor.fetchall()  # type: ignore[no-any-return]

    async def _get(self, scope: Scope, key: str) -> MemoryItem | None:
        rows = await self._rows(
            f"{SCOPE_ITEMS} AND i.key = %s AND {LIVE}", (*scope_ids(scope), key, utcnow())
        )
        return item_of(scope, rows[0]) if rows else None

    async def get_many(self, scope: Scope, keys: Sequence[str]) -> dict[str, MemoryItem]:
        """The live items of `scope` among `keys`, by key (a key without one is absent): what
        `get` returns key by key, in one read."""
        await self._ready()
        check_scope(scope)
        wanted = checked_keys(keys)
        if not wanted:
            return {}
        rows = await self._rows(
            f"{SCOPE_ITEMS} AND i.key = ANY(%s) AND {LIVE}", (*scope_ids(scope), wanted, utcnow())
        )
        return {row[0]: item_of(scope, row) for row in rows}

    async def _list_items(
        self, scope: Scope, prefix: str | None, cursor: str | None, limit: int
    ) -> ItemPage:
        after = cursor_key(cursor)
        end = None if prefix is None else prefix_end(prefix)
        # key ranges of the (scope_id, key) index, by code point: no character is a wildcard
        bounds = [(" AND i.key >= %s", prefix or None), (" AND i.key < %s", end)]
        bounds.append((" AND i.key > %s", after))
        kept = [(clause, value) for clause, value in bounds if value is not None]
        rows = await self._rows(
            f"{SCOPE_ITEMS}{''.join(c for c, _ in kept)} AND {LIVE} ORDER BY i.key LIMIT %s",
            (*scope_ids(scope), *(v for _, v in kept), utcnow(), limit + 1),
        )
        return item_page([item_of(scope, row) for row in rows], limit)

    async def _list_scopes(
        self, project_id: str | None, cursor: str | None, limit: int
    ) -> ScopePage:
        after = numeric_cursor(cursor)
        params = {"after": after, "project_id": project_id, "now": utcnow(), "limit": limit + 1}
        async with self._db.connection() as conn:
            found = await conn.execute(self._sql(LIST_SCOPES), params)
            rows = await found.fetchall()
        page = rows[:limit]
        scopes = [Scope(p, a or None, t or None) for _, p, a, t in page]
        return ScopePage(scopes, str(page[-1][0]) if len(rows) > limit else None)

    async def count(self, scope: Scope) -> int:
        """Live items in `scope`: what `delete_scope` would remove."""
        await self._ready()
        check_scope(scope)
        ((count,),) = await self._rows(COUNT, (*scope_ids(scope), utcnow()))
        return int(count)

    async def _query(
        self, scope: Scope, text: str, top_k: int, filters: dict[str, JSON] | None
    ) -> list[QueryHit]:
        now = utcnow()
        listing = not text.strip()
        semantic = None if listing else self._semantic
        vector = None
        if semantic is not None:
            if not self._embedding.started:  # type: ignore[union-attr]
                self._embedding.soon()  # type: ignore[union-attr]  # what others left queued
            # the model embeds the query on its thread while the words are ranked
            vector = asyncio.ensure_future(semantic.query_vector(text))
        try:
            async with self._db.connection() as conn:
                return await search.run(
                    conn,
                    self._sql,
                    self.language,
                    scope,
                    text,
                    top_k,
                    filters,
                    now,
                    semantic,
                    vector,
                )
        finally:
            if vector is not None and not vector.done():
                # other stores may await the same embedding: let it finish, unobserved
                vector.add_done_callback(lambda done: done.cancelled() or done.exception())
