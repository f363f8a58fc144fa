"""Embedding in the background: items written one at a time wait in their store's queue, and a
task of the store embeds them, newest first, one at a time, each committed, so a write never
waits for the model. One implementation for every store that queues; what is store-specific
(its SQL) sits behind `EmbeddingQueue`.

A vector is stored only over the text it was computed from: `Queued.value` is the item's value
as it was claimed, and a store keeps the vector only when the item still holds that value (an
item rewritten meanwhile was queued again for its new text).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Collection
from contextlib import suppress
from dataclasses import dataclass
from typing import Protocol

from animus_flows.protocol import indexed_text
from animus_flows.redaction import get_logger
from animus_flows.stores.semantic import SemanticLeg

log = get_logger("animus_flows.stores")

#: Items embedded per background batch, each batch committed: a run that ends keeps what it
#: embedded, and leaves at most one item's work undone (a phase's output takes up to a second
#: of the model; with larger batches a run of a few seconds committed none, and the queue grew
#: run after run).
EMBED_BATCH = 1
#: The longest a store's `aclose` waits for the items it queued itself to be embedded.
CLOSE_GRACE_S = 30.0
#: How often `drain` looks again while another process embeds the last queued items.
POLL_S = 0.05


@dataclass(frozen=True, slots=True)
class Queued:
    """A queued item claimed for embedding: its id, and its value JSON as claimed."""

    item_id: int
    value: str


class EmbeddingQueue(Protocol):
    """A store's queue of items waiting for vectors (see the module).

    - `where` names the store in log lines.
    - `claim` returns up to `limit` queued items, newest first (only among the ids of `among`
      when given), that no other process is embedding, and marks them as being embedded.
    - `store` keeps the vectors of items that still hold the value claimed, takes them off the
      queue, and returns their ids; an item rewritten meanwhile stays queued, deleted ones go.
    - `waiting` tells whether any item is queued at all (being embedded or not).
    """

    where: str

    async def claim(self, limit: int, among: Collection[int] | None) -> list[Queued]: ...

    async def store(self, vectors: list[tuple[Queued, bytes]]) -> list[int]: ...

    async def waiting(self) -> bool: ...


class BackgroundEmbedding:
    """One store's background embedding: the task working its queue, and the items the store
    queued itself (which `close` waits for)."""

    def __init__(self, semantic: SemanticLeg, queue: EmbeddingQueue) -> None:
        self.semantic = semantic
        self.queue = queue
        #: Whether this store started on the queue (a query starts it on what others left).
        self.started = False
        self._loop: asyncio.AbstractEventLoop | None = None
        self._task: asyncio.Task[None] | None = None
        self._turn: asyncio.Lock | None = None
        self._closing = False
        #: Items this store queued and has not seen embedded: `close` waits for them.
        self._mine: set[int] = set()

    def queued(self, item_ids: Collection[int]) -> None:
        """Items this store's writes queued."""
        self._mine.update(item_ids)

    def soon(self) -> None:
        """Start working the queue, unless a task is at it already."""
        self.started = True
        self._on_this_loop()
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._work())

    async def drain(self) -> None:
        """Embed until no item is queued (waiting for those other processes are embedding)."""
        while True:
            if await self.batch():
                continue
            if not await self.queue.waiting():
                return
            await asyncio.sleep(POLL_S)

    async def close(self) -> None:
        """Stop working the queue once the items this store queued have their vectors (at most
        `CLOSE_GRACE_S`): every flow run is a process of its own, and one that left its writes
        to the next would leave a queue that grows run after run. What is left stays queued,
        for the next process that opens the store with the model."""
        self._on_this_loop()
        self._closing = True  # the task stops after the batch it is embedding
        task, self._task = self._task, None
        try:
            async with asyncio.timeout(CLOSE_GRACE_S):
                if task is not None:
                    await task
                while self._mine and await self.batch(among=self._mine):
                    pass
        except TimeoutError:
            log.info(
                "%s: up to %d item(s) left to embed by the next process (or `animus memory "
                "reindex`)",
                self.queue.where,
                len(self._mine),
            )
        finally:
            self._closing = False
            if task is not None and not task.done():
                task.cancel()
                with suppress(asyncio.CancelledError):
                    await task

    async def batch(self, among: Collection[int] | None = None) -> bool:
        """Embed up to `EMBED_BATCH` queued items (of `among`, when given); False when there
        was none to claim. Batches of one store take turns: `drain` waits for the batch the
        task is embedding rather than return before it is stored."""
        self._on_this_loop()
        async with self._turn:  # type: ignore[union-attr]
            claimed = await self.queue.claim(EMBED_BATCH, None if among is None else set(among))
            if not claimed:
                return False
            blobs = await self.semantic.embed_documents(
                [indexed_text(json.loads(item.value)) for item in claimed]
            )
            self._mine.difference_update(
                await self.queue.store(list(zip(claimed, blobs, strict=True)))
            )
            return True

    async def _work(self) -> None:
        try:
            while not self._closing and await self.batch():
                pass
        except Exception as exc:  # the queue stays: the next write tries again
            log.warning("%s: embedding queued items failed: %s", self.queue.where, exc)

    def _on_this_loop(self) -> None:
        """A store may serve several event loops one after another (a CLI call, a flow run):
        its task and lock belong to the loop running now."""
        loop = asyncio.get_running_loop()
        if loop is not self._loop:
            self._loop, self._task, self._turn = loop, None, asyncio.Lock()
