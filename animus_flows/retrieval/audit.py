"""Audit events for every memory operation, and the fan-out to wherever they are recorded.

A `MemoryOpEvent` carries seed 000's fields plus `status`, `detail` and the Prefect
`flow_run_id`. `AuditTrail` hands each event to its sinks (logs, Prefect events, artifacts, a
JSONL file). Events hold ids, sizes and counts, never values, and `detail` passes through secret
redaction before any sink sees it.
"""

from __future__ import annotations

import json
import logging
import os
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field, fields, replace
from datetime import UTC, datetime
from functools import cached_property
from pathlib import Path
from typing import Any, Literal, Protocol

from animus_flows.errors import ConfigError
from animus_flows.protocol import Scope
from animus_flows.redaction import get_logger, redact

Op = Literal["query", "get", "put", "delete_scope", "list_scopes"]
Status = Literal["ok", "timeout", "error", "unmatched", "denied"]

logger = get_logger("animus_flows.audit")


@dataclass(frozen=True)
class MemoryOpEvent:
    """One memory operation, as a person debugging a run wants to see it.

    `flow_run_id` tells apart two runs of the same task; it is None outside a Prefect flow run
    (the CLI's `animus memory` commands, the Python API).
    """

    op: Op
    plugin_id: str
    binding: str | None
    scope: dict[str, str | None] | None
    phase_id: str | None = None
    agent_id: str | None = None
    task_id: str | None = None
    flow_run_id: str | None = None
    bytes_in: int = 0
    bytes_out: int = 0
    tokens_deducted: int = 0
    result_count: int = 0
    latency_ms: float = 0.0
    status: Status = "ok"
    detail: str = ""
    occurred: str = field(default_factory=lambda: datetime.now(UTC).isoformat())
    event: str = "memory_op"

    @staticmethod
    def scope_json(scope: Scope | None) -> dict[str, str | None] | None:
        return None if scope is None else scope.to_json()

    def to_json(self) -> dict[str, Any]:
        """The event as a JSON object (a fresh copy each call)."""
        return {name: getattr(self, name) for name in _FIELDS} | {
            "scope": None if self.scope is None else dict(self.scope)
        }

    @cached_property
    def log_line(self) -> str:
        """One line of JSON, keys sorted: what the JSONL file (and `LoggerSink`) hold."""
        return json.dumps(self.to_json(), ensure_ascii=False, sort_keys=True)

    @property
    def degraded(self) -> bool:
        """Whether the operation left its phase with less than it asked for (see
        `DEGRADED_STATUSES`)."""
        return self.status in DEGRADED_STATUSES

    @property
    def sentence(self) -> str:
        """The operation as a person reads it in a run's logs, e.g. `query market-context on
        memory-local: 7 hits, 165 tokens injected, 5.9 ms`."""
        return describe(self)


_FIELDS = tuple(f.name for f in fields(MemoryOpEvent))

#: The statuses that make a flow run `Degraded`: the phase went on without what it asked for.
#: (`denied` is a store refusing a write it should refuse, not a fault.)
DEGRADED_STATUSES = ("timeout", "error", "unmatched")


def _plural(count: int, noun: str) -> str:
    return f"{count} {noun}{'' if count == 1 else 's'}"


def describe(event: MemoryOpEvent) -> str:
    """One sentence per operation and status (see `MemoryOpEvent.sentence`)."""
    label = event.binding or event.plugin_id
    what = f"{event.op} {label} on {event.plugin_id}"
    took = f"{event.latency_ms:.1f} ms"
    detail = event.detail.removesuffix("; went on without it")
    if event.status == "timeout":
        return f"{what} timed out after {took} ({detail}); the phase went on without it"
    if event.status == "error":
        return f"{what} failed after {took} ({detail}); the phase went on without it"
    if event.status == "unmatched":
        return f"{what}: {detail or 'no store matches'}; the binding did nothing"
    if event.status == "denied":
        return f"{what} was refused by the store: {detail or 'no detail'}"
    if event.op == "put":
        return f"{what}: {detail or 'stored'}, {_plural(event.bytes_in, 'byte')}, {took}"
    if detail.startswith("not queried"):
        return f"{what}: {detail}"
    notes = "; ".join(n for n in detail.split("; ") if n and not n.startswith("injected "))
    return (
        f"{what}: {_plural(event.result_count, 'hit')}, {event.tokens_deducted} tokens "
        f"injected, {took}" + (f" ({notes})" if notes else "")
    )


def degraded_ops(events: Sequence[MemoryOpEvent]) -> list[dict[str, Any]]:
    """The operations that degraded a run, in order, as `animus run --json` lists them under
    `degraded`: `{"phase", "op", "binding", "plugin", "status", "detail"}`."""
    return [
        {
            "phase": event.phase_id,
            "op": event.op,
            "binding": event.binding,
            "plugin": event.plugin_id,
            "status": event.status,
            "detail": event.detail,
        }
        for event in events
        if event.degraded
    ]


def degraded_message(events: Sequence[MemoryOpEvent]) -> str | None:
    """The one line that says how a run degraded, or None when it did not: e.g. `2 memory
    operations degraded: 1 timeout (market-context), 1 unmatched (company-wiki)`."""
    by_status: dict[str, list[str]] = {}
    count = 0
    for event in events:
        if event.degraded:
            count += 1
            by_status.setdefault(event.status, []).append(event.binding or event.plugin_id)
    if not count:
        return None
    parts = [
        f"{len(labels)} {status} ({', '.join(dict.fromkeys(labels))})"
        for status in DEGRADED_STATUSES
        if (labels := by_status.get(status))
    ]
    return f"{count} memory operation{'' if count == 1 else 's'} degraded: {', '.join(parts)}"


class AuditSink(Protocol):
    """Somewhere audit events go."""

    def record(self, event: MemoryOpEvent) -> None: ...


class AuditTrail:
    """Collects a run's memory events and fans each out to the sinks."""

    def __init__(self, sinks: Sequence[AuditSink] = ()) -> None:
        self.sinks = list(sinks)
        self._events: list[MemoryOpEvent] = []
        self._lock = threading.Lock()

    def record(self, event: MemoryOpEvent) -> MemoryOpEvent:
        if event.detail:  # details quote store errors: never let a credential through
            clean = redact(event.detail).text
            if clean != event.detail:
                event = replace(event, detail=clean)
        with self._lock:
            self._events.append(event)
        for sink in self.sinks:
            try:
                sink.record(event)
            except Exception:  # auditing must never fail the phase it describes
                logger.exception("audit sink %s failed", type(sink).__name__)
        return event

    def events(self, phase_id: str | None = None) -> list[MemoryOpEvent]:
        with self._lock:
            return [e for e in self._events if phase_id is None or e.phase_id == phase_id]


def unwritable_reason(path: Path) -> str | None:
    """Why a file could not be created or appended at `path`, or None; creates nothing."""
    if path.is_dir():
        return "is a folder"
    if path.exists():
        return None if os.access(path, os.W_OK) else "is not writable"
    folder = path.parent
    while not folder.exists():
        folder = folder.parent
    if not folder.is_dir():
        return f"sits under {str(folder)!r}, which is not a folder"
    return None if os.access(folder, os.W_OK | os.X_OK) else f"sits in read-only {str(folder)!r}"


def unwritable_audit_path(path: Path, reason: str) -> ConfigError:
    return ConfigError(
        f"audit.path {str(path)!r} cannot be written ({reason}); "
        "point audit.path at a file in a writable folder, or remove it"
    )


class JsonlSink:
    """Appends one JSON line per event to a file (the YAML's `audit: {path: ...}`).

    The file is opened (and created, with its folders) when the sink is made, so a path that
    cannot be written stops a run before its first phase instead of losing its trail: each
    `record` happens inside a phase, where a sink's failure is only logged. Loading a workflow
    (`compile_workflow`) already refuses the paths `unwritable_reason` can tell without writing.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            with path.open("a", encoding="utf-8"):
                pass
        except OSError as exc:
            raise unwritable_audit_path(path, exc.strerror or str(exc)) from None

    def record(self, event: MemoryOpEvent) -> None:
        line = event.log_line + "\n"
        with self._lock:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with self.path.open("a", encoding="utf-8") as handle:
                handle.write(line)


class LoggerSink:
    """One structured line per event on a logger (the flow run's logger inside Prefect).

    A line is stamped with the time the operation happened, not the time it is logged: inside
    Prefect the audit is sent after the phase (see `runtime.sinks.Outbox`), and the UI orders
    a run's logs by their time.
    """

    def __init__(self, log: logging.Logger | logging.LoggerAdapter[Any]) -> None:
        self.log = log

    def record(self, event: MemoryOpEvent) -> None:
        level = logging.INFO if event.status in ("ok", "unmatched") else logging.WARNING
        log, extra = self.log, None
        if isinstance(log, logging.LoggerAdapter):  # its context (Prefect's run ids) as extra
            extra = log.process("", {})[1].get("extra")
            log = log.logger
        if not log.isEnabledFor(level):
            return
        record = log.makeRecord(
            log.name, level, __file__, 0, "memory_op %s", (event.log_line,), None, extra=extra
        )
        record.created = datetime.fromisoformat(event.occurred).timestamp()
        record.msecs = record.created % 1 * 1000
        log.handle(record)
