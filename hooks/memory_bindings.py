"""The `memory_bindings` pre-phase hook: read the bound stores, inject, audit.

DESIGN.md section 5: the agent's and the workflow's bindings for this phase become sources of
the one read path (`animus_flows.retrieval.service.read`: deadlines, egress, disclosure,
budgets), the survivors go on `contract.memory_context`, and every binding is audited. When
the phase cap or the flow budget is already spent, nothing could be injected: no store is
resolved or queried, and each binding is audited with the reason. Bindings with
`query_strategy: none` inject nothing: they are offered to the agent as MCP servers instead.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from animus_flows.config.models import MemoryBinding
from animus_flows.errors import AnimusError
from animus_flows.hooks.binding_servers import offer_binding_servers
from animus_flows.hooks.contract import InjectedItem, MemoryContext
from animus_flows.protocol import MemoryStore
from animus_flows.retrieval.disclosure import ReadRules
from animus_flows.retrieval.service import Reading, Source, read

if TYPE_CHECKING:
    from animus_flows.hooks.context import PhaseContext

PACK_STATE_KEY = "memory_bindings.pack"


def spent_budget(ctx: PhaseContext) -> str | None:
    """Which budget leaves this phase no tokens to inject (`the flow budget`, `the phase
    cap`), or None when some room is left."""
    if ctx.budget.flow_remaining() == 0:
        return "the flow budget"
    if ctx.budget.phase_remaining(ctx.phase.id) == 0:
        return "the phase cap"
    return None


def source_of(
    ctx: PhaseContext, binding: MemoryBinding, store: MemoryStore | str | None, spent: str | None
) -> Source:
    """`binding` as a source of the read path; `store` is a resolution error when a str."""
    source = Source(
        binding.binding,
        store if not isinstance(store, str) else None,
        None,
        text=ctx.contract.prompt,
        rules=ReadRules.of(binding),
        top_k=binding.top_k,
        budget_tokens=binding.budget_tokens,
        timeout_ms=binding.timeout_ms,
    )
    try:
        source.scope = ctx.scope_for(binding)
    except ValueError as exc:
        source.problem = ("error", str(exc))
        return source
    if binding.query_strategy == "key":
        source.key = (binding.key or "").format(**ctx.template_fields())
    if spent is not None:
        source.problem = ("ok", f"not queried: {spent} is spent")
    elif isinstance(store, str):
        source.problem = ("error", store)
    elif store is None:
        source.problem = (
            "unmatched",
            f"no store or saved memory-store block named {binding.plugin!r}",
        )
    return source


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
    reading = await read(
        [source_of(ctx, b, stores.get(b.plugin), spent) for b in bindings],
        ctx.counter,
        phase_remaining=ctx.budget.phase_remaining(phase_id),
        flow_remaining=ctx.budget.flow_remaining(),
    )
    packed = reading.packed
    for label, tokens in packed.tokens_by_binding().items():
        ctx.budget.deduct(phase_id, "memory", tokens, binding=label)
    plugins = {b.binding: b.plugin for b in bindings}
    ctx.contract.memory_context = MemoryContext(
        items=[
            InjectedItem(
                binding=p.candidate.binding,
                key=p.candidate.key,
                score=round(p.candidate.score, 4),
                tokens=p.tokens,
                plugin=plugins.get(p.candidate.binding),
                tier=p.candidate.tier,
            )
            for p in packed.selected
        ],
        tokens=packed.tokens,
        text=packed.text,
    )
    ctx.contract.budget = ctx.budget.snapshot(phase_id)
    ctx.state[PACK_STATE_KEY] = packed
    for binding, fetched in zip(bindings, reading.fetches, strict=True):
        _audit(ctx, binding, fetched, reading)
    await offer_binding_servers(ctx)


def _audit(ctx: PhaseContext, binding: MemoryBinding, fetched, reading: Reading) -> None:
    ctx.record_op(
        fetched.op,
        binding,
        fetched.source.scope,
        bytes_in=fetched.bytes_in,
        bytes_out=fetched.bytes_out,
        tokens_deducted=reading.tokens_of(binding.binding),
        result_count=fetched.returned,
        latency_ms=fetched.latency_ms,
        status=fetched.status,
        detail=reading.detail(fetched),
    )
