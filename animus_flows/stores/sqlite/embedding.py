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

#: Items embedded per background batch, each batch committed: a run that ends keeps what it
#: embedded, and leaves at most one item's work undone (a phase's output takes up to a second
#: of the model; with larger batches a run of a few seconds committed none, and the queue grew
#: run after run).
EMBED_BATCH = 1


#: The longest a store's `aclose` waits for the items it queued itself to be embedded.
CLOSE_GRACE_S = 30.0


class Embedding:
    """One store's queue of items waiting for vectors, and the task that works it."""

    def __init__(self, semantic: SemanticLeg, file: StoreFile, indexer: Indexer) -> None:
        self.semantic = semantic
        self.file = file
        self.indexer = indexer
        self.started = False
        self._task: asyncio.Task[None] | None = None
        self._closing = False
        #: Items this store queued and no one has embedded yet: `close` waits for them.
        self._mine: set[int] = set()

    def soon(self) -> None:
        """Start working the queue, unless a task is at it already."""
        self.started = True
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._work())

    async def drain(self) -> None:
        """Embed until the queue is empty."""
        while await self.batch():
            pass

    async def close(self) -> None:
        """Stop working the queue once the items this store queued have their vectors (at
        most `CLOSE_GRACE_S`): every flow run is a process of its own, and one that left its
        writes to the next would leave a queue that grows run after run. What is left stays
        queued in the file, for the next process that opens it with the model."""
        self._closing = True  # the task stops after the batch it is embedding
        task, self._task = self._task, None
        try:
            async with asyncio.timeout(CLOSE_GRACE_S):
                if task is not None:
                    await task
                while self._mine and await self.batch():
                    pass
        except TimeoutError:
            log.info(
                "SQLite store %s: %d item(s) left to embed by the next process (or `animus "
                "memory reindex`)",
                self.file.path,
                len(self._mine),
            )
        finally:
            if task is not None and not task.done():
                task.cancel()
                with suppress(asyncio.CancelledError):
                    await task

    async def _work(self) -> None:
        try:
            while not self._closing and await self.batch():
                pass
        except Exception as exc:  # the queue stays in the file: the next write tries again
            log.warning("SQLite store %s: embedding queued items failed: %s", self.file.path, exc)

    async def batch(self) -> bool:
        """Embed up to `EMBED_BATCH` queued items; False once the queue is empty."""

        def queued(conn: sqlite3.Connection) -> list[tuple[int, str]]:
            return conn.execute(
                "SELECT i.id, i.value FROM vector_pending p JOIN items i ON i.id = p.item_id"
                # newest first: a phase's output is findable by meaning in the next phase,
                # whatever an earlier run left queued
                " ORDER BY p.item_id DESC LIMIT ?",
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
        self._mine.difference_update(item_id for item_id, _ in rows)
        return True

    def apply(self, changes: VectorChanges) -> None:
        """Tell the kept vectors what a committed write changed."""
        self._mine.update(changes.queued)
        for scope_id, (before, after) in changes.versions.items():
            self.semantic.changed(
                scope_id,
                before,
                after,
                changes.written.get(scope_id, []),
                changes.removed.get(scope_id, []),
            )
