"""The `memory_bindings` pre-phase hook: query the bound stores, pack, inject, audit.

DESIGN.md section 5: resolve the agent's and the workflow's bindings for this phase, query them
concurrently each under its deadline, keep only egress-safe (PUBLIC) items, disclose HOT before
WARM before COLD within each binding's budget, the phase cap and the flow budget, put the
survivors on `contract.memory_context`, and audit every query. When the phase cap or the flow
budget is already spent, nothing could be injected: no store is resolved or queried, and each
binding is audited with the reason. Bindings with `query_strategy: none` inject nothing: they are
offered to the agent as MCP servers instead.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

from animus_flows.budget import BindingCaps, Candidate, PackResult, pack
from animus_flows.config.models import MemoryBinding
from animus_flows.contract import InjectedItem, MemoryContext
from animus_flows.degrade import run_degraded
from animus_flows.disclosure import EGRESS_FILTER, is_egress_safe, is_superseded, tier_of
from animus_flows.errors import AnimusError
from animus_flows.hooks.binding_servers import offer_binding_servers
from animus_flows.memory.records import memory_type_of, metadata_filter
from animus_flows.phase import PhaseContext
from animus_flows.protocol import MemoryStore, QueryHit, Scope, canonical_json, indexed_text

PACK_STATE_KEY = "memory_bindings.pack"


@dataclass
class Fetch:
    """What one binding's store returned, or why it returned nothing."""

    binding: MemoryBinding
    scope: Scope | None
    op: str
    hits: list[QueryHit] = field(default_factory=list)
    status: str = "ok"
    queried: bool = True
    notes: list[str] = field(default_factory=list)
    latency_ms: float = 0.0
    bytes_in: int = 0
    bytes_out: int = 0


def store_filters(binding: MemoryBinding) -> dict[str, Any]:
    """Filters that keep a store's top_k for what this binding may inject."""
    filters: dict[str, Any] = dict(EGRESS_FILTER)
    filters["tier"] = metadata_filter("tier", binding.tiers)
    if binding.memory_types:  # no memory_type means SEMANTIC, as the memory layer reads it
        filters["memory_type"] = metadata_filter("memory_type", binding.memory_types)
    return filters


def admissible(binding: MemoryBinding, hit: QueryHit) -> str | None:
    """Why a returned hit may not be injected (a plugin may ignore filters), or None."""
    if not is_egress_safe(hit.metadata):
        return "not PUBLIC"
    if tier_of(hit.metadata) not in binding.tiers:
        return "tier not listed"
    if binding.memory_types and memory_type_of(hit.metadata) not in binding.memory_types:
        return "memory type not listed"
    if is_superseded(hit.value):
        return "superseded by a newer version"
    return None


def spent_budget(ctx: PhaseContext) -> str | None:
    """Which budget leaves this phase no tokens to inject (`the flow budget`, `the phase
    cap`), or None when some room is left."""
    if ctx.budget.flow_remaining() == 0:
        return "the flow budget"
    if ctx.budget.phase_remaining(ctx.phase.id) == 0:
        return "the phase cap"
    return None


async def _fetch(
    ctx: PhaseContext,
    binding: MemoryBinding,
    store: MemoryStore | str | None,
    spent: str | None = None,
) -> Fetch:
    """Query one binding's store under its deadline; `store` is a resolution error when a str.
    With `spent` (see `spent_budget`) the store is not queried."""
    op = "get" if binding.query_strategy == "key" else "query"
    try:
        scope = ctx.scope_for(binding)
    except ValueError as exc:
        return Fetch(binding, None, op, status="error", notes=[str(exc)])
    fetch = Fetch(binding, scope, op)
    if spent is not None:
        fetch.queried = False
        fetch.notes.append(f"not queried: {spent} is spent")
        return fetch
    if isinstance(store, str):
        fetch.status = "error"
        fetch.notes.append(store)
        return fetch
    if store is None:
        fetch.status = "unmatched"
        fetch.notes.append(f"no store or saved memory-store block named {binding.plugin!r}")
        return fetch

    async def call() -> list[QueryHit]:
        connect = getattr(store, "connect", None)
        if connect is not None:  # out-of-process plugins report capabilities at handshake
            await connect()
        if binding.query_strategy == "key":
            key = (binding.key or "").format(**ctx.template_fields())
            fetch.bytes_in = len(key.encode())
            item = await store.get(scope, key)
            return [] if item is None else [QueryHit(item.key, item.value, 1.0, item.metadata)]
        top_k = min(binding.top_k, store.capabilities.max_query_top_k)
        if top_k < binding.top_k:
            fetch.notes.append(f"top_k {binding.top_k} clamped to {top_k} (store maximum)")
        fetch.bytes_in = len(ctx.contract.prompt.encode())
        return await store.query(
            scope, ctx.contract.prompt, top_k=top_k, filters=store_filters(binding)
        )

    outcome = await run_degraded(call, timeout_ms=binding.timeout_ms, fallback=[])
    fetch.hits, fetch.status = outcome.value, outcome.status
    fetch.latency_ms = round(outcome.duration_ms, 3)
    if outcome.status == "timeout":
        fetch.notes.append(f"{outcome.detail}; the phase went on without it")
    elif outcome.status == "error":
        fetch.notes.append(outcome.detail)
    fetch.bytes_out = len(canonical_json([hit.to_json() for hit in fetch.hits]).encode())
    return fetch


def _candidates(fetches: list[Fetch]) -> list[Candidate]:
    candidates = []
    for fetch in fetches:
        refused: dict[str, int] = {}
        source = {"plugin": fetch.binding.plugin}
        for hit in fetch.hits:
            reason = admissible(fetch.binding, hit)
            if reason is not None:
                refused[reason] = refused.get(reason, 0) + 1
                continue
            candidates.append(
                Candidate(
                    fetch.binding.binding,
                    hit.key,
                    indexed_text(hit.value),
                    hit.score,
                    tier_of(hit.metadata),
                    source,
                )
            )
        fetch.notes += [f"{count} refused: {reason}" for reason, count in refused.items()]
    return candidates


async def memory_bindings(ctx: PhaseContext) -> None:
    """Inject the phase's memory context from its bindings (the built-in pre-phase hook)."""
    phase_id = ctx.phase.id
    bindings = [
        b for b in ctx.bindings if b.read and b.query_strategy != "none" and b.applies_to(phase_id)
    ]
    # Nothing fits once a budget is spent: resolving (a saved block is an API call) and
    # querying the stores would only cost the phase latency.
    spent = spent_budget(ctx)
    stores: dict[str, MemoryStore | str | None] = {}
    for plugin in dict.fromkeys(b.plugin for b in bindings if spent is None):
        try:
            stores[plugin] = await ctx.plugins.resolve(plugin)
        except AnimusError as exc:  # e.g. a saved block that no longer loads: degrade
            stores[plugin] = str(exc)
    fetches = await asyncio.gather(*(_fetch(ctx, b, stores.get(b.plugin), spent) for b in bindings))
    candidates = _candidates(fetches)
    result = pack(
        candidates,
        {b.binding: BindingCaps(b.budget_tokens, tuple(b.tiers)) for b in bindings},
        ctx.counter,
        phase_remaining=ctx.budget.phase_remaining(phase_id),
        flow_remaining=ctx.budget.flow_remaining(),
    )
    spent = result.tokens_by_binding()
    for label, tokens in spent.items():
        ctx.budget.deduct(phase_id, "memory", tokens, binding=label)
    ctx.contract.memory_context = MemoryContext(
        items=[
            InjectedItem(
                binding=p.candidate.binding,
                key=p.candidate.key,
                score=round(p.candidate.score, 4),
                tokens=p.tokens,
                plugin=p.candidate.metadata.get("plugin"),
                tier=p.candidate.tier,
            )
            for p in result.selected
        ],
        tokens=result.tokens,
        text=result.text,
    )
    ctx.contract.budget = ctx.budget.snapshot(phase_id)
    ctx.state[PACK_STATE_KEY] = result
    for fetch in fetches:
        _audit(ctx, fetch, spent.get(fetch.binding.binding, 0), result)
    await offer_binding_servers(ctx)


def _audit(ctx: PhaseContext, fetch: Fetch, tokens: int, result: PackResult) -> None:
    label = fetch.binding.binding
    dropped: dict[str, int] = {}
    for drop in result.dropped:
        if drop.candidate.binding == label:
            dropped[drop.reason] = dropped.get(drop.reason, 0) + 1
    notes = list(fetch.notes)
    if fetch.status == "ok" and fetch.queried:
        injected = sum(1 for p in result.selected if p.candidate.binding == label)
        notes.insert(0, f"injected {injected}")
        notes += [f"{count} dropped: {reason}" for reason, count in dropped.items()]
    ctx.record_op(
        fetch.op,  # type: ignore[arg-type]
        fetch.binding,
        fetch.scope,
        bytes_in=fetch.bytes_in,
        bytes_out=fetch.bytes_out,
        tokens_deducted=tokens,
        result_count=len(fetch.hits),
        latency_ms=fetch.latency_ms,
        status=fetch.status,
        detail="; ".join(notes),
    )
