"""The SQLite store's background embedding: items written one at a time wait in the file's
queue (`vector_pending`) and are embedded a batch at a time by a task of the store, so a write
never waits for the model; the process's copy of the vectors follows every committed change."""

from __future__ import annotations

import asyncio
import json
import sqlite3
from contextlib import suppress

from animus_flows.protocol import indexed_text
from animus_flows.redaction import get_logger
from animus_flows.stores.semantic import SemanticLeg
from animus_flows.stores.sqlite.connection import StoreFile
from animus_flows.stores.sqlite.index import Indexer, VectorChanges

log = get_logger("animus_flows.stores.sqlite")

#: Items embedded per background batch.
EMBED_BATCH = 64


class Embedding:
    """One store's queue of items waiting for vectors, and the task that works it."""

    def __init__(self, semantic: SemanticLeg, file: StoreFile, indexer: Indexer) -> None:
        self.semantic = semantic
        self.file = file
        self.indexer = indexer
        self.started = False
        self._task: asyncio.Task[None] | None = None

    def soon(self) -> None:
        """Start working the queue, unless a task is at it already."""
        self.started = True
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._work())

    async def drain(self) -> None:
        """Embed until the queue is empty."""
        while await self.batch():
            pass

    async def stop(self) -> None:
        """Stop the task; what is left stays queued in the file for the next run."""
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with suppress(asyncio.CancelledError):
                await task

    async def _work(self) -> None:
        try:
            await self.drain()
        except Exception as exc:  # the queue stays in the file: the next write tries again
            log.warning("SQLite store %s: embedding queued items failed: %s", self.file.path, exc)

    async def batch(self) -> bool:
        """Embed up to `EMBED_BATCH` queued items; False once the queue is empty."""

        def queued(conn: sqlite3.Connection) -> list[tuple[int, str]]:
            return conn.execute(
                "SELECT i.id, i.value FROM vector_pending p JOIN items i ON i.id = p.item_id"
                " ORDER BY p.item_id LIMIT ?",
                (EMBED_BATCH,),
            ).fetchall()

        rows = await self.file.run(queued)
        if not rows:
            return False
        blobs = await self.semantic.embed_documents(
            [indexed_text(json.loads(value)) for _, value in rows]
        )
        changes = VectorChanges()

        def store(conn: sqlite3.Connection) -> None:
            with self.file.writing(conn):
                ready = dict(zip([item_id for item_id, _ in rows], blobs, strict=True))
                self.indexer.store_vectors(conn, ready, changes)

        await self.file.run(store)
        self.apply(changes)
        return True

    def apply(self, changes: VectorChanges) -> None:
        """Tell the kept vectors what a committed write changed."""
        for scope_id, (before, after) in changes.versions.items():
            self.semantic.changed(
                scope_id,
                before,
                after,
                changes.written.get(scope_id, []),
                changes.removed.get(scope_id, []),
            )
