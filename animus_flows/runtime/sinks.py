"""Prefect audit sinks: events on the event bus, artifacts written off the critical path.

`emit_event` only queues (Prefect's events worker sends in the background). Artifact calls
each take a round trip to the API, so `ArtifactWriter` starts them as background tasks,
batched per phase and concurrent with the next phase, and the flow awaits them before it ends.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine
from typing import Any

from animus_flows.audit import MemoryOpEvent

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


class ArtifactWriter:
    """Creates artifacts in the background and waits for all of them on `drain`."""

    def __init__(self) -> None:
        self._pending: set[asyncio.Task[Any]] = set()
        self.failures: list[str] = []

    def table(self, key: str, rows: list[dict[str, Any]], description: str) -> None:
        from prefect.artifacts import acreate_table_artifact

        self._start(key, acreate_table_artifact(table=rows, key=key, description=description))

    def markdown(self, key: str, text: str, description: str) -> None:
        from prefect.artifacts import acreate_markdown_artifact

        self._start(key, acreate_markdown_artifact(markdown=text, key=key, description=description))

    def _start(self, key: str, call: Coroutine[Any, Any, Any]) -> None:
        task = asyncio.get_running_loop().create_task(self._guarded(key, call))
        self._pending.add(task)
        task.add_done_callback(self._pending.discard)

    async def _guarded(self, key: str, call: Coroutine[Any, Any, Any]) -> None:
        try:
            await call
        except Exception as exc:  # an unreachable API must not fail the run it describes
            self.failures.append(f"{key}: {exc}")
            logger.warning("could not write artifact %s: %s", key, exc)

    async def drain(self) -> None:
        while self._pending:
            await asyncio.gather(*list(self._pending))
