"""Prefect audit sinks, and the outbox that keeps their hand-offs off the phases' CPU.

Handing an operation to Prefect costs this process CPU: about 0.4 ms per log line or event
(models built and validated, and as much again in Prefect's worker threads) and about 5 ms per
artifact (the client's request and response handling), besides the API's round trip. A
phase's hooks are CPU-bound, so whatever runs beside them slows them. `Outbox` holds these
hand-offs and sends them while a runner works (an agent waiting on its model leaves the event
loop idle) and when the flow drains it at the end.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import inspect
import logging
from collections import deque
from collections.abc import AsyncIterator, Callable
from datetime import datetime
from typing import Any

from animus_flows.redaction import get_logger
from animus_flows.retrieval.audit import AuditSink, MemoryOpEvent

logger = get_logger("animus_flows.runtime")

EVENT_NAME = "animus.memory.op"


def _run_ids() -> tuple[str | None, str | None]:
    """The flow run and task run of the current Prefect context (None outside one)."""
    from prefect.context import FlowRunContext, TaskRunContext

    task_run = getattr(TaskRunContext.get(), "task_run", None)
    flow_run = getattr(FlowRunContext.get(), "flow_run", None)
    flow_run_id = flow_run.id if flow_run else getattr(task_run, "flow_run_id", None)
    return (
        str(flow_run_id) if flow_run_id else None,
        str(task_run.id) if task_run else None,
    )


class PrefectEventSink:
    """Each memory op as a Prefect event `animus.memory.op` about `animus.binding.<binding>`.

    The resource is named `<op> <binding>` and labelled with the op, its status, phase and
    latency, so the event feed reads without opening each event; the event is related to the
    flow run, the phase's task run, the store, and the store's block document when the store
    is a saved block (`block_documents` maps a plugin id to its document's id and name).
    """

    def __init__(
        self,
        flow_run_id: str | None,
        workflow: str,
        block_documents: Callable[[str], tuple[str, str] | None] = lambda plugin_id: None,
    ) -> None:
        self.flow_run_id = flow_run_id
        self.workflow = workflow
        self.block_documents = block_documents

    def record(self, event: MemoryOpEvent) -> None:
        from prefect.events import emit_event

        binding = event.binding or event.plugin_id
        flow_run_id, task_run_id = _run_ids()
        flow_run_id = flow_run_id or self.flow_run_id
        related = [
            {
                "prefect.resource.id": f"animus.plugin.{event.plugin_id}",
                "prefect.resource.role": "memory-store",
                "prefect.resource.name": event.plugin_id,
            }
        ]
        if flow_run_id:
            related.append(
                {"prefect.resource.id": f"prefect.flow-run.{flow_run_id}",
                 "prefect.resource.role": "flow-run"}
            )  # fmt: skip
        if task_run_id:
            related.append(
                {"prefect.resource.id": f"prefect.task-run.{task_run_id}",
                 "prefect.resource.role": "task-run"}
            )  # fmt: skip
        if document := self.block_documents(event.plugin_id):
            document_id, name = document
            related.append(
                {"prefect.resource.id": f"prefect.block-document.{document_id}",
                 "prefect.resource.role": "block", "prefect.resource.name": name}
            )  # fmt: skip
        emit_event(
            occurred=datetime.fromisoformat(event.occurred),  # the op's time, not the send's
            event=EVENT_NAME,
            resource={
                "prefect.resource.id": f"animus.binding.{binding}",
                "prefect.resource.name": f"{event.op} {binding}",
                "animus.op": event.op,
                "animus.status": event.status,
                "animus.phase": event.phase_id or "",
                "animus.latency-ms": f"{event.latency_ms:.1f}",
                "animus.workflow": self.workflow,
            },
            related=related,
            payload=event.to_json(),
        )


class RunLogSink:
    """Each memory op as one sentence in its phase's task-run log (`MemoryOpEvent.sentence`),
    the event's fields attached to the record as `memory_op`; outside a task run, in `log`.

    Recorded through an `Outbox`, which sends it in the context the op happened in, so the
    line belongs to that phase's task run. It is stamped with the op's time, not the send's:
    the UI orders a run's logs by their time.
    """

    def __init__(self, log: logging.Logger | logging.LoggerAdapter[Any]) -> None:
        self.log = log

    def record(self, event: MemoryOpEvent) -> None:
        from prefect.exceptions import MissingContextError
        from prefect.logging import get_run_logger

        level = logging.WARNING if event.status != "ok" else logging.INFO
        try:
            log: logging.Logger | logging.LoggerAdapter[Any] = get_run_logger()
        except MissingContextError:
            log = self.log
        extra: dict[str, Any] = {}
        if isinstance(log, logging.LoggerAdapter):  # its context (Prefect's run ids) as extra
            extra = dict(log.process("", {})[1].get("extra") or {})
            log = log.logger
        if not log.isEnabledFor(level):
            return
        extra["memory_op"] = event.to_json()
        record = log.makeRecord(
            log.name, level, __file__, 0, "%s", (event.sentence,), None, extra=extra
        )
        record.created = datetime.fromisoformat(event.occurred).timestamp()
        record.msecs = record.created % 1 * 1000
        log.handle(record)


class Outbox:
    """Hand-offs to Prefect, sent in order, each in the context it was made in.

    Nothing is sent inline: `put` queues. The queue is sent while `sending()` is open (the
    engine opens it around each runner) and by `drain()`, which the flow awaits before it ends.
    A hand-off runs in a copy of the context that queued it, so an artifact belongs to the task
    run of its phase and an event relates to it. One is in flight at a time; a failure is
    recorded in `failures` and logged, and the rest are still sent.
    """

    def __init__(self) -> None:
        self._queue: deque[tuple[str, Callable[[], Any], contextvars.Context]] = deque()
        self._open = False
        self._sender: asyncio.Task[None] | None = None
        self._waiter: asyncio.Task[Any] | None = None  # the task inside `sending()`
        self._interrupt: BaseException | None = None  # see `_send`
        self.failures: list[str] = []

    def put(self, label: str, send: Callable[[], Any]) -> None:
        """Queue `send()` (sync, or async and awaited), named `label` in failures."""
        self._queue.append((label, send, contextvars.copy_context()))
        if self._open:
            self._start()

    @contextlib.asynccontextmanager
    async def sending(self) -> AsyncIterator[None]:
        """Send queued hand-offs while the block runs; the one in flight at exit finishes.

        A signal that lands in a send as an exception (Prefect turns SIGTERM into its
        `TerminationSignal`) cancels the block and is raised from it, as if it had landed there.
        """
        self._raise_interrupt()  # one that landed in a send after the last block ended
        self._open = True
        self._waiter = asyncio.current_task()
        self._start()
        try:
            yield
        except asyncio.CancelledError:
            if self._interrupt is None:
                raise
            if self._waiter is not None:
                self._waiter.uncancel()  # the cancel was ours, not a caller's
        finally:
            self._open = False
            self._waiter = None
        self._raise_interrupt()

    async def drain(self) -> None:
        """Send everything queued, including what sends queue, and wait for it."""
        self._open = True
        try:
            while self._queue or (self._sender is not None and not self._sender.done()):
                self._start()
                if self._sender is not None:
                    await self._sender
                self._raise_interrupt()
        finally:
            self._open = False

    def _raise_interrupt(self) -> None:
        interrupt, self._interrupt = self._interrupt, None
        if interrupt is not None:
            raise interrupt

    def _start(self) -> None:
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # queued from another thread: the next send or drain takes it
            return
        if self._queue and (self._sender is None or self._sender.done()):
            self._sender = loop.create_task(self._send())

    async def _send(self) -> None:
        loop = asyncio.get_running_loop()
        while self._open and self._queue:
            label, send, context = self._queue.popleft()
            try:
                if inspect.iscoroutinefunction(send):
                    await loop.create_task(send(), context=context)
                else:
                    context.run(send)
                    await asyncio.sleep(0)  # let the phase run between hand-offs
            except Exception as exc:  # the audit must never fail the run it describes
                self.failures.append(f"{label}: {exc}")
                logger.warning("could not send %s to Prefect: %s", label, exc)
            except (asyncio.CancelledError, KeyboardInterrupt, SystemExit):
                raise  # asyncio already carries these where they belong
            except BaseException as exc:
                # A signal raised as an exception here (a TerminationSignal) would only end
                # this task, which nobody awaits while a runner works, and the run would go on:
                # hand it to the task waiting on the outbox instead, and stop sending.
                self._interrupt = exc
                if self._waiter is not None and not self._waiter.done():
                    self._waiter.cancel()
                return


class Queued:
    """Another sink's `record`, queued in an outbox instead of run inline."""

    def __init__(self, sink: AuditSink, outbox: Outbox) -> None:
        self.sink = sink
        self.outbox = outbox

    def record(self, event: MemoryOpEvent) -> None:
        self.outbox.put(type(self.sink).__name__, lambda: self.sink.record(event))


def queue_table_artifact(
    outbox: Outbox, key: str, rows: Callable[[], list[dict[str, Any]]], description: str
) -> None:
    """Queue Prefect table artifact `key`, its rows rendered by `rows()` when it is sent (off
    the phase's path, like the send itself); see `Outbox` for when that is."""
    from prefect.artifacts import acreate_table_artifact

    async def write() -> None:
        await acreate_table_artifact(table=rows(), key=key, description=description)

    outbox.put(key, write)


def queue_markdown_artifact(
    outbox: Outbox, key: str, text: Callable[[], str], description: str
) -> None:
    """Queue Prefect markdown artifact `key`, its text rendered by `text()` when it is sent."""
    from prefect.artifacts import acreate_markdown_artifact

    async def write() -> None:
        await acreate_markdown_artifact(markdown=text(), key=key, description=description)

    outbox.put(key, write)
