"""The PostgreSQL store's background embedding: items written one at a time wait in the schema's
`embedding_queue`, worked by `stores.background.BackgroundEmbedding`.

Many processes on many machines work one queue. Each claims the newest unclaimed item in a
short transaction (`FOR UPDATE SKIP LOCKED`, so claimers never wait for each other), marking it
with its connection's server process (`claimed_by`) and a lease `CLAIM_LEASE_S` ahead
(`claimed_until`); it embeds the item with no transaction open, then stores the vector. No two
processes embed the same item. A claim lapses with its lease, or as soon as the connection that
made it is gone (its process died: the server ends the session), so what a killed process was
embedding is claimed again by the next one that opens the schema with the model. The vector is
stored under the item's scope lock, as every write is, and only while the item holds the value
it was computed from: a rewrite queues the item again (free to be claimed at once) and its old
text's vector is never stored.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from typing import Any

from animus_flows.stores.background import Queued
from animus_flows.stores.postgres.connection import Database
from animus_flows.stores.postgres.writes import BUMP_VERSION, Written, put_vectors

#: How long a claim keeps other processes off an item: far longer than embedding one item
#: takes; an item claimed through a pooler (whose server sessions outlive their clients) by a
#: process that died waits that long for another one.
CLAIM_LEASE_S = 60

CLAIM = """
WITH claimed AS (
    UPDATE {s}.embedding_queue q
    SET claimed_until = now() + make_interval(secs => %(lease)s), claimed_by = pg_backend_pid()
    WHERE q.item_id IN (
        SELECT item_id FROM {s}.embedding_queue w
        WHERE (claimed_until IS NULL OR claimed_until < now()
               OR NOT EXISTS (SELECT 1 FROM pg_stat_activity a WHERE a.pid = w.claimed_by))
          AND (%(among)s::bigint[] IS NULL OR item_id = ANY(%(among)s::bigint[]))
        ORDER BY queued_at DESC, item_id DESC LIMIT %(limit)s
        FOR UPDATE SKIP LOCKED
    )
    RETURNING q.item_id
)
SELECT i.id, i.value FROM claimed c JOIN {s}.items i ON i.id = c.item_id
"""

#: The scopes of the items, locked in the writers' order.
LOCK_ITEM_SCOPES = """
SELECT id FROM {s}.scopes WHERE id IN (SELECT scope_id FROM {s}.items WHERE id = ANY(%s))
ORDER BY project_id, agent_id, task_id FOR UPDATE
"""

#: The claimed items that still hold the value claimed: (id, scope id).
UNCHANGED = """
SELECT i.id, i.scope_id FROM unnest(%s::bigint[], %s::text[]) AS x (id, value)
JOIN {s}.items i ON i.id = x.id AND i.value = x.value
"""


class PostgresQueue:
    """`embedding_queue` as a `stores.background.EmbeddingQueue` (see the module); `apply`
    tells the store's kept vectors what a committed write changed."""

    def __init__(self, db: Database, sql: Any, apply: Callable[[Written], None]) -> None:
        self.db = db
        self.sql = sql
        self.apply = apply
        self.where = db.where

    async def claim(self, limit: int, among: Collection[int] | None) -> list[Queued]:
        params = {
            "lease": CLAIM_LEASE_S,
            "limit": limit,
            "among": None if among is None else sorted(among),
        }
        async with self.db.connection() as conn:
            cursor = await conn.execute(self.sql(CLAIM), params)
            return [Queued(item_id, value) for item_id, value in await cursor.fetchall()]

    async def store(self, vectors: list[tuple[Queued, bytes]]) -> list[int]:
        ids = [item.item_id for item, _ in vectors]
        blobs = {item.item_id: blob for item, blob in vectors}
        written = Written()
        async with self.db.connection() as conn, conn.transaction():
            await conn.execute(self.sql(LOCK_ITEM_SCOPES), (ids,))
            values = [item.value for item, _ in vectors]
            cursor = await conn.execute(self.sql(UNCHANGED), (ids, values))
            unchanged = await cursor.fetchall()
            for scope_id in sorted({scope_id for _, scope_id in unchanged}):
                cursor = await conn.execute(self.sql(BUMP_VERSION), (scope_id,))
                written.versions[scope_id] = tuple(await cursor.fetchone())  # type: ignore[assignment]
            if unchanged:
                triples = [(item_id, scope_id, blobs[item_id]) for item_id, scope_id in unchanged]
                await put_vectors(conn, self.sql, triples, written)
        self.apply(written)
        return [item_id for item_id, _ in unchanged]

    async def waiting(self) -> bool:
        async with self.db.connection() as conn:
            cursor = await conn.execute(
                self.sql("SELECT EXISTS (SELECT 1 FROM {s}.embedding_queue)")
            )
            (waiting,) = await cursor.fetchone()
            return bool(waiting)
