"""Indexing a PostgreSQL store again: after a change of text search configuration or model.

The schema records the new language and model first (vectors of another model are dropped, so
none is ever read with the wrong one). Then each scope is read in batches: a batch's texts are
analyzed, and embedded, outside any transaction, then written under the scope's lock, skipping
an item changed meanwhile (its writer indexed it already). Last, the scope's statistics are
counted again from its items, which also repairs any drift.
"""

from __future__ import annotations

import json
from typing import Any

from animus_flows.protocol import indexed_text
from animus_flows.stores.postgres.connection import Database
from animus_flows.stores.postgres.prepare import Preparation, read_state, set_meta
from animus_flows.stores.postgres.schema import MIGRATION_LOCK
from animus_flows.stores.postgres.writes import (
    BUMP_VERSION,
    POSTINGS,
    PUT_VECTORS,
    SKIP_STATISTICS,
    indexed_body,
)
from animus_flows.stores.semantic import SemanticLeg

#: Items read, analyzed (and embedded) and written per transaction.
REINDEX_BATCH = 1000

_BATCH = """
SELECT id, value FROM {s}.items WHERE scope_id = %s AND id > %s ORDER BY id LIMIT %s
"""
_LOCK = "SELECT id FROM {s}.scopes WHERE id = %s FOR UPDATE"
_INDEX = f"""
UPDATE {{s}}.items i SET
    tsv = t.tsv,
    postings = {POSTINGS.format(scope="i.scope_id", tsv="t.tsv")},
    length = length(t.tsv)
FROM unnest(%(ids)s::bigint[], %(values)s::text[], %(texts)s::text[]) AS x (id, value, body)
CROSS JOIN LATERAL (SELECT to_tsvector(%(language)s::regconfig, x.body) AS tsv) t
WHERE i.id = x.id AND i.value = x.value
RETURNING i.id
"""
_RECOUNT = [
    SKIP_STATISTICS,
    "DELETE FROM {s}.term_df WHERE scope_id = %(id)s",
    """INSERT INTO {s}.term_df (scope_id, lexeme, df)
       SELECT %(id)s, lexeme, count(*) FROM {s}.items, unnest(tsvector_to_array(tsv)) lexeme
       WHERE scope_id = %(id)s GROUP BY lexeme""",
    """UPDATE {s}.scopes s SET items = c.items, terms = c.terms
       FROM (SELECT count(*) AS items, coalesce(sum(length), 0) AS terms
             FROM {s}.items WHERE scope_id = %(id)s) c
       WHERE s.id = %(id)s""",
]


class Reindexer:
    """One run of `PostgresStore.reindex` (see the module)."""

    def __init__(
        self,
        db: Database,
        sql: Any,
        schema: str,
        language: str,
        semantic: SemanticLeg | None,
        preparation: Preparation,
    ) -> None:
        self.db = db
        self.sql = sql
        self.schema = schema
        self.language = language
        self.semantic = semantic
        self.model = preparation.model

    async def run(self) -> int:
        async with self.db.connection() as conn:
            async with conn.transaction():
                await conn.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATION_LOCK,))
                await set_meta(conn, self.schema, "language", self.language)
                if self.model is not None:
                    state = await read_state(conn, self.schema)
                    if state.embedder != self.model:
                        await conn.execute(self.sql("DELETE FROM {s}.item_vectors"))
                        await set_meta(conn, self.schema, "embedder", self.model)
            cursor = await conn.execute(self.sql("SELECT id FROM {s}.scopes ORDER BY id"))
            scopes = [scope_id for (scope_id,) in await cursor.fetchall()]
        done = 0
        for scope_id in scopes:
            done += await self._scope(scope_id)
        if self.semantic is not None:
            self.semantic.forget()
        return done

    async def _scope(self, scope_id: int) -> int:
        done, after = 0, 0
        while True:
            async with self.db.connection() as conn:
                cursor = await conn.execute(self.sql(_BATCH), (scope_id, after, REINDEX_BATCH))
                rows = await cursor.fetchall()
            if not rows:
                break
            texts = [indexed_text(json.loads(value)) for _, value in rows]
            vectors = None
            if self.semantic is not None:
                blobs = await self.semantic.embed_documents(texts)
                vectors = dict(zip([item_id for item_id, _ in rows], blobs, strict=True))
            params = {
                "ids": [item_id for item_id, _ in rows],
                "values": [value for _, value in rows],
                "texts": [indexed_body(text) for text in texts],
                "language": self.language,
            }
            async with self.db.connection() as conn, conn.transaction():
                cursor = await conn.execute(self.sql(_LOCK), (scope_id,))
                if await cursor.fetchone() is None:
                    return done  # the scope was deleted meanwhile
                await conn.execute(SKIP_STATISTICS)
                cursor = await conn.execute(self.sql(_INDEX), params)
                indexed = [item_id for (item_id,) in await cursor.fetchall()]
                if vectors and indexed:
                    await conn.execute(
                        self.sql(PUT_VECTORS),
                        {
                            "ids": indexed,
                            "scope_ids": [scope_id] * len(indexed),
                            "vectors": [vectors[i] for i in indexed],
                        },
                    )
                await conn.execute(self.sql(BUMP_VERSION), (scope_id,))
            done += len(indexed)
            after = rows[-1][0]
        async with self.db.connection() as conn, conn.transaction():
            cursor = await conn.execute(self.sql(_LOCK), (scope_id,))
            if await cursor.fetchone() is not None:
                for statement in _RECOUNT:
                    await conn.execute(self.sql(statement), {"id": scope_id})
        return done
