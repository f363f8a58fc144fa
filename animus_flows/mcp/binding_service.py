"""One memory binding's store pinned to one scope, as the `animus mcp binding` tools use it.

`find_binding` finds the binding in the workflow file; `BindingService` answers the tools: reads
through the one read path (egress-safe: PUBLIC items only, within the binding's tiers and memory
types), puts only when the binding has `write: true` and through the redaction wrapper, and
every call audited like the hook's.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Awaitable, Mapping
from dataclasses import dataclass, replace
from typing import Any, TypeVar

from pydantic import BaseModel, Field

from animus_flows.config.models import MemoryBinding, WorkflowFile
from animus_flows.errors import (
    AnimusError,
    ConfigError,
    InvalidRequest,
    StoreError,
    StoreTimeout,
    WriteDenied,
)
from animus_flows.hooks.mcp_servers import AUDIT_ENV
from animus_flows.protocol import MemoryStore, Scope, canonical_json
from animus_flows.redaction import redact
from animus_flows.retrieval.audit import AuditTrail, MemoryOpEvent
from animus_flows.retrieval.disclosure import ReadRules, is_egress_safe
from animus_flows.retrieval.service import Fetched, Source, fetch
from animus_flows.stores.redacting import redacting

#: Hits one search returns when the binding sets no `top_k` (it then injects as many as fit).
MCP_TOP_K = 8
#: An agent waiting on a tool call can afford more than a phase start's injection deadline.
MIN_TIMEOUT_MS = 2000
#: Metadata keys only the redaction step may write.
REDACTION_KEYS = ("_redaction_count", "_redaction_types")

T = TypeVar("T")


# -- finding the binding ---------------------------------------------------------------------


def find_binding(
    workflow: WorkflowFile,
    plugin: str,
    kind: str,
    label: str | None = None,
    agent_id: str | None = None,
) -> MemoryBinding:
    """The one binding of `plugin` with scope `kind` (and `label`) in the workflow file.

    Agent bindings count for their own agent only when `agent_id` is given. Raises ConfigError
    when none matches, or when several do and `--binding` does not tell them apart.
    """
    owned: list[tuple[str, MemoryBinding]] = []
    for name, agent in workflow.agents.items():
        if agent_id is None or name == agent_id:
            owned += [(f"agents.{name}", b) for b in agent.memory_bindings]
    for name, flow in workflow.workflows.items():
        owned += [(f"workflows.{name}", b) for b in flow.memory_bindings]
    of_plugin = [(owner, b) for owner, b in owned if b.plugin == plugin]
    found = [
        (owner, b)
        for owner, b in of_plugin
        if b.scope.kind == kind and (label is None or b.binding == label)
    ]
    where = workflow.source or "the workflow"
    if not found:
        declared = ", ".join(f"{b.binding} (scope {b.scope.kind}, {o})" for o, b in of_plugin)
        wanted = f"binding {label!r} of plugin {plugin!r}" if label else f"plugin {plugin!r}"
        raise ConfigError(
            f"no {wanted} with scope {kind} in {where}"
            + (f"; its bindings: {declared}" if declared else "; no binding uses it")
            + "; pass --plugin, --scope and --binding of a declared binding"
        )
    labels = list(dict.fromkeys(b.binding for _, b in found))
    if len(labels) > 1:
        raise ConfigError(
            f"plugin {plugin!r} has {len(labels)} bindings with scope {kind} in {where} "
            f"({', '.join(labels)}); choose one with --binding LABEL"
        )
    first_owner, first = found[0]
    for owner, other in found[1:]:
        if _gates(other) != _gates(first):
            raise ConfigError(
                f"binding {first.binding!r} of plugin {plugin!r} is declared differently in "
                f"{first_owner} and {owner}; give them different labels, or pass --agent-id"
            )
    if not (first.read or first.write):
        raise ConfigError(
            f"binding {first.binding!r} in {first_owner} has read: false and write: false; "
            "there is nothing to serve"
        )
    return first


def _gates(binding: MemoryBinding) -> tuple[Any, ...]:
    return (binding.read, binding.write, binding.tiers, binding.memory_types, binding.top_k)


# -- what the tools answer -------------------------------------------------------------------


class Hit(BaseModel):
    key: str = Field(description="The item's key, for the get tool.")
    value: Any = Field(description="The stored value: a string, or a JSON object.")
    score: float = Field(description="Relevance in [0, 1], higher is better.")
    metadata: dict[str, Any] = Field(description="memory_type, tier, tags, ...")


class QueryAnswer(BaseModel):
    binding: str = Field(description="The binding searched.")
    hits: list[Hit] = Field(description="The best matches, best first.")


class GetAnswer(BaseModel):
    key: str
    found: bool = Field(description="False when there is no such item you may see.")
    value: Any = Field(None, description="The stored value, when found.")
    metadata: dict[str, Any] = Field(default_factory=dict)
    updated_at: str | None = None


class PutAnswer(BaseModel):
    key: str
    stored: bool
    redacted: int = Field(description="Secrets found in what you stored and replaced by markers.")
    expires_at: str | None = None


# -- the logic behind the tools ---------------------------------------------------------------


@dataclass(frozen=True)
class AuditContext:
    """Who is calling: the phase's agent, phase, task and flow run, for the audit trail."""

    agent_id: str | None = None
    phase_id: str | None = None
    task_id: str | None = None
    flow_run_id: str | None = None

    @classmethod
    def from_env(cls, environ: Mapping[str, str] = os.environ) -> AuditContext:
        """Read ANIMUS_AGENT_ID, ANIMUS_PHASE_ID, ANIMUS_TASK_ID and ANIMUS_FLOW_RUN_ID (set by
        the hook)."""
        return cls(**{name: environ.get(var) or None for name, var in AUDIT_ENV.items()})


class BindingService:
    """One binding's store pinned to one scope: egress rules, write gate, redaction, audit."""

    def __init__(
        self,
        binding: MemoryBinding,
        scope: Scope,
        store: MemoryStore,
        audit: AuditTrail,
        context: AuditContext | None = None,
        *,
        timeout_s: float | None = None,
    ) -> None:
        self.binding = binding
        self.scope = scope
        self.store = redacting(store)
        self.audit = audit
        self.context = context or AuditContext()
        if self.context.agent_id is None and scope.agent_id is not None:
            self.context = replace(self.context, agent_id=scope.agent_id)
        self.timeout_s = timeout_s or max(binding.timeout_ms, MIN_TIMEOUT_MS) / 1000

    def _source(self, *, text: str = "", key: str | None = None, top_k: int | None = None):
        return Source(
            self.binding.binding,
            self.store,
            self.scope,
            text=text,
            key=key,
            rules=ReadRules.of(self.binding),
            top_k=top_k,
            timeout_ms=self.timeout_s * 1000,
        )

    async def query(self, text: str, top_k: int | None = None) -> QueryAnswer:
        """Search the scope; only hits this binding may disclose come back."""
        most = self.binding.top_k or MCP_TOP_K
        wanted = top_k or most
        limit = min(wanted, most)
        fetched = await fetch(self._source(text=text, top_k=limit))
        notes = [f"returned {len(fetched.hits)}"]
        notes += [] if limit == wanted else [f"top_k {wanted} clamped to {limit}"]
        hits = [
            Hit(key=h.key, value=h.value, score=h.score, metadata=dict(h.metadata))
            for h in fetched.hits
        ]
        self._answered(fetched, [h.model_dump() for h in hits], notes)
        return QueryAnswer(binding=self.binding.binding, hits=hits)

    async def get(self, key: str) -> GetAnswer:
        """The item under `key`, unless it does not exist or may not be disclosed."""
        fetched = await fetch(self._source(key=key))
        if fetched.returned == 0:
            self._answered(fetched, None, ["no such item"])
            return GetAnswer(key=key, found=False)
        if not fetched.hits:  # answered exactly like a missing key: nothing leaks
            (reason,) = fetched.refused
            fetched.notes.clear()
            self._answered(fetched, None, [f"withheld: {reason}"], status="denied")
            return GetAnswer(key=key, found=False)
        item = fetched.item
        answer = GetAnswer(
            key=key,
            found=True,
            value=item.value,
            metadata=dict(item.metadata),
            updated_at=item.to_json()["updated_at"],
        )
        self._answered(fetched, answer.model_dump(), ["returned 1"])
        return answer

    def _answered(
        self, fetched: Fetched, answer: Any, notes: list[str], status: str | None = None
    ) -> None:
        """Audit one read, and raise what a failed one means for the agent."""
        op = AuditedOp(self, fetched.op, fetched.bytes_in)
        op.started -= fetched.latency_ms / 1000
        status = status or fetched.status
        plugin = self.binding.plugin
        if status == "timeout":
            op.done(0, None, fetched.notes, status)
            raise StoreTimeout(
                f"{plugin!r} did not answer within {self.timeout_s * 1000:.0f} ms; try again later"
            )
        if status == "error":
            op.done(0, None, fetched.notes, status)
            raise StoreError(f"{plugin!r} failed: {'; '.join(fetched.notes)}")
        op.done(fetched.returned, answer, notes + fetched.notes, status)

    async def put(
        self,
        key: str,
        value: Any,
        metadata: Mapping[str, Any] | None = None,
        ttl_seconds: int | None = None,
    ) -> PutAnswer:
        """Store `value` under `key`, secrets redacted; refused unless the binding writes."""
        # the agent cannot vouch for its own redaction: the counts it sends are dropped
        meta = {k: v for k, v in (metadata or {}).items() if k not in REDACTION_KEYS}
        op = AuditedOp(self, "put", bytes_in=len(canonical_json(value).encode()))
        if not self.binding.write:
            op.done(0, None, ["binding has write: false"], status="denied")
            raise WriteDenied(
                f"binding {self.binding.binding!r} is read-only (write: false); nothing was stored"
            )
        existing = await op.run(self.store.get(self.scope, key))
        if existing is not None and not is_egress_safe(existing.metadata):
            # Overwriting would destroy an item the agent may not even read, or republish it
            # under the agent's own sensitivity: writes obey the egress rule as reads do.
            op.done(0, None, [f"{key} holds an item this binding may not disclose"], "denied")
            raise WriteDenied(
                f"key {key!r} cannot be written through binding {self.binding.binding!r}; "
                "choose another key"
            )
        meta |= {"source": "mcp", "provenance": "agent"}
        if self.context.agent_id:
            meta["agent"] = self.context.agent_id
        if self.binding.memory_types and "memory_type" not in meta:
            meta["memory_type"] = self.binding.memory_types[0]  # findable through this binding
        item = await op.run(  # the store redacts the value and metadata (RedactingStore)
            self.store.put(self.scope, key, value, metadata=meta, ttl_seconds=ttl_seconds)
        )
        count = item.metadata.get("_redaction_count", 0)
        op.done(1, None, [f"stored {key}"] + ([f"{count} secret(s) redacted"] if count else []))
        return PutAnswer(
            key=key, stored=True, redacted=count, expires_at=item.to_json()["expires_at"]
        )


class AuditedOp:
    """Times one store call, turns its failures into StoreErrors, and audits it once."""

    def __init__(self, service: BindingService, op: str, bytes_in: int) -> None:
        self.service = service
        self.op = op
        self.bytes_in = bytes_in
        self.started = time.perf_counter()

    async def run(self, call: Awaitable[T]) -> T:
        try:
            async with asyncio.timeout(self.service.timeout_s):
                return await call
        except TimeoutError:
            self.done(
                0, None, [f"no answer within {self.service.timeout_s * 1000:.0f} ms"], "timeout"
            )
            raise StoreTimeout(
                f"{self.service.binding.plugin!r} did not answer within "
                f"{self.service.timeout_s * 1000:.0f} ms; try again later"
            ) from None
        except InvalidRequest as exc:  # the agent's arguments (a key holding a secret, ...)
            self.done(0, None, [str(exc)], "error")
            raise
        except AnimusError as exc:
            self.done(0, None, [str(exc)], "error")
            raise StoreError(redact(str(exc)).text) from None
        except Exception as exc:  # a broken plugin: tell the agent, keep serving
            self.done(0, None, [f"{type(exc).__name__}: {exc}"], "error")
            raise StoreError(
                redact(f"{self.service.binding.plugin!r} failed: {type(exc).__name__}: {exc}").text
            ) from None

    def done(self, result_count: int, answer: Any, notes: list[str], status: str = "ok") -> None:
        service, context = self.service, self.service.context
        self.service.audit.record(
            MemoryOpEvent(
                op=self.op,  # type: ignore[arg-type]
                plugin_id=service.binding.plugin,
                binding=service.binding.binding,
                scope=MemoryOpEvent.scope_json(service.scope),
                phase_id=context.phase_id,
                agent_id=context.agent_id,
                task_id=context.task_id,
                flow_run_id=context.flow_run_id,
                bytes_in=self.bytes_in,
                bytes_out=0 if answer is None else len(canonical_json(answer).encode()),
                result_count=result_count,
                latency_ms=round((time.perf_counter() - self.started) * 1000, 3),
                status=status,  # type: ignore[arg-type]
                detail="; ".join(["mcp", *notes]),
            )
        )
