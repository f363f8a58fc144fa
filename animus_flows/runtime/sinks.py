"""Prefect audit sinks: events on the event bus, artifacts written off the critical path.

Handing a log line or an event to Prefect costs about a millisecond of CPU (models are built
and validated), so `Deferred` runs those hand-offs from the event loop's idle moments (while a
phase waits on a store or the API) instead of inline. Artifact calls each take a round trip to
the API, so `ArtifactWriter` writes them from one background task, in order, while the next
phases run. The flow drains both before it ends.
"""

from __future__ import annotations

import asyncio
import logging
import random
import uuid
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Any

from animus_flows.audit import AuditSink, MemoryOpEvent

logger = logging.getLogger("animus_flows.runtime")

EVENT_NAME = "animus.memory.op"


class PrefectEventSink:
    """Each memory op as a Prefect event `animus.memory.op` about `animus.binding.<binding>`."""

    def __init__(self, flow_run_id: str | None, workflow: str) -> None:
        self.flow_run_id = flow_run_id
        self.workflow = workflow

    def record(self, event: MemoryOpEvent) -> None:
        from prefect.events import emit_event

        binding = event.binding or event.plugin_id
        related = [
            {
                "prefect.resource.id": f"animus.plugin.{event.plugin_id}",
                "prefect.resource.role": "memory-store",
            }
        ]
        if self.flow_run_id:
            related.append(
                {
                    "prefect.resource.id": f"prefect.flow-run.{self.flow_run_id}",
                    "prefect.resource.role": "flow-run",
                }
            )
        emit_event(
            # event ids only need to be unique; uuid4 reads os.urandom, slow on some VMs
            id=uuid.UUID(int=random.getrandbits(128), version=4),
            event=EVENT_NAME,
            resource={
                "prefect.resource.id": f"animus.binding.{binding}",
                "prefect.resource.name": binding,
                "animus.workflow": self.workflow,
                "animus.phase": event.phase_id or "",
                "animus.status": event.status,
            },
            related=related,
            payload=event.to_json(),
        )


class Deferred:
    """Runs another sink's `record` from the event loop's next idle moment, not inline."""

    def __init__(self, sink: AuditSink) -> None:
        self.sink = sink

    def record(self, event: MemoryOpEvent) -> None:
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # no loop (a sync caller): nothing to defer to
            self.sink.record(event)
            return
        loop.call_soon(self._record, event)

    def _record(self, event: MemoryOpEvent) -> None:
        try:
            self.sink.record(event)
        except Exception:  # auditing must never fail the run it describes
            logger.exception("audit sink %s failed", type(self.sink).__name__)


class ArtifactWriter:
    """Writes artifacts from one background task, one request at a time, in order.

    Phases queue their artifacts and go on. A single writer keeps the API calls off the
    phases' critical path: when phases are quick, the writes fall behind and catch up on
    `drain` instead of competing with every phase for the CPU; when phases wait on models
    or stores, the writes fit in those waits.
    """

    def __init__(self) -> None:
        self._queue: deque[tuple[str, Callable[[], Awaitable[Any]]]] = deque()
        self._writer: asyncio.Task[None] | None = None
        self.failures: list[str] = []

    def table(self, key: str, rows: list[dict[str, Any]], description: str) -> None:
        from prefect.artifacts import acreate_table_artifact

        self.submit(
            key, lambda: acreate_table_artifact(table=rows, key=key, description=description)
        )

    def markdown(self, key: str, text: str, description: str) -> None:
        from prefect.artifacts import acreate_markdown_artifact

        self.submit(
            key, lambda: acreate_markdown_artifact(markdown=text, key=key, description=description)
        )

    def submit(self, key: str, write: Callable[[], Awaitable[Any]]) -> None:
        """Queue `write()` (the call that creates artifact `key`) behind the ones queued."""
        self._queue.append((key, write))
        if self._writer is None or self._writer.done():
            self._writer = asyncio.get_running_loop().create_task(self._write_queued())

    async def _write_queued(self) -> None:
        while self._queue:
            key, write = self._queue.popleft()
            try:
                await write()
            except Exception as exc:  # an unreachable API must not fail the run it describes
                self.failures.append(f"{key}: {exc}")
                logger.warning("could not write artifact %s: %s", key, exc)

    async def drain(self) -> None:
        """Wait until every queued artifact is written (or has failed)."""
        while self._writer is not None and not self._writer.done():
            await self._writer
