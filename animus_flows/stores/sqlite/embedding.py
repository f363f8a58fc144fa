"""The SQLite store's background embedding: items written one at a time wait in the file's
queue (`vector_pending`), worked by `stores.background.BackgroundEmbedding`, so a write never
waits for the model; the process's copy of the vectors follows every committed change."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Collection

from animus_flows.stores.background import BackgroundEmbedding, Queued
from animus_flows.stores.semantic import SemanticLeg
from animus_flows.stores.sqlite.connection import StoreFile
from animus_flows.stores.sqlite.index import Indexer, VectorChanges

# newest first: a phase's output is findable by meaning in the next phase, whatever an earlier
# run left queued
_QUEUED = "SELECT i.id, i.value FROM vector_pending p JOIN items i ON i.id = p.item_id"
_NEWEST = " ORDER BY p.item_id DESC LIMIT ?"


class SQLiteQueue:
    """`vector_pending` as a `stores.background.EmbeddingQueue`. A file has no claims: two
    processes on one file may embed an item both, and it is stored once."""

    def __init__(self, semantic: SemanticLeg, file: StoreFile, indexer: Indexer) -> None:
        self.semantic = semantic
        self.file = file
        self.indexer = indexer
        self.where = f"SQLite store {file.path}"

    async def claim(self, limit: int, among: Collection[int] | None) -> list[Queued]:
        def queued(conn: sqlite3.Connection) -> list[tuple[int, str]]:
            if among is None:
                return conn.execute(_QUEUED + _NEWEST, (limit,)).fetchall()
            return conn.execute(
                f"{_QUEUED} WHERE p.item_id IN (SELECT value FROM json_each(?)){_NEWEST}",
                (json.dumps(sorted(among)), limit),
            ).fetchall()

        return [Queued(item_id, value) for item_id, value in await self.file.run(queued)]

    async def store(self, vectors: list[tuple[Queued, bytes]]) -> list[int]:
        changes = VectorChanges()

        def store(conn: sqlite3.Connection) -> list[int]:
            with self.file.writing(conn):
                claimed = {item.item_id: (item.value, blob) for item, blob in vectors}
                return self.indexer.store_vectors(conn, claimed, changes)

        stored = await self.file.run(store)
        self.semantic.changed_scopes(changes.versions, changes.written, changes.removed)
        return stored

    async def waiting(self) -> bool:
        def waiting(conn: sqlite3.Connection) -> bool:
            return bool(conn.execute("SELECT EXISTS (SELECT 1 FROM vector_pending)").fetchone()[0])

        return await self.file.run(waiting)


class Embedding(BackgroundEmbedding):
    """The SQLite store's background embedding, over its file's queue."""

    def __init__(self, semantic: SemanticLeg, file: StoreFile, indexer: Indexer) -> None:
        super().__init__(semantic, SQLiteQueue(semantic, file, indexer))

    def apply(self, changes: VectorChanges) -> None:
        """Tell the kept vectors what a committed write changed."""
        self.queued(changes.queued)
        self.semantic.changed_scopes(changes.versions, changes.written, changes.removed)
