"""Offer `query_strategy: none` bindings to the agent as MCP servers instead of injecting them.

Called by the `memory_bindings` hook. Each such binding that applies to the phase and resolves
to a store gets an `animus-binding-<label>` entry in `contract.mcp_servers` that runs
`animus mcp binding` pinned to the binding and the phase's scope. A binding that cannot be
offered (unknown plugin, no task id for a task scope) is audited and skipped, never an error.
"""

from __future__ import annotations

from animus_flows.config.models import MemoryBinding
from animus_flows.errors import AnimusError
from animus_flows.hooks.context import PhaseContext
from animus_flows.hooks.mcp_servers import (
    add_server,
    binding_server,
    binding_server_name,
    workflow_path,
)
from animus_flows.protocol import Scope


def mcp_bindings(ctx: PhaseContext) -> list[MemoryBinding]:
    """The phase's bindings that the agent reaches over MCP rather than by injection."""
    return [
        b
        for b in ctx.bindings
        if b.query_strategy == "none" and (b.read or b.write) and b.applies_to(ctx.phase.id)
    ]


async def offer_binding_servers(ctx: PhaseContext) -> None:
    """Add an MCP server entry for every `query_strategy: none` binding of the phase."""
    bindings = mcp_bindings(ctx)
    if not bindings:
        return
    source = workflow_path(ctx.workflow)  # resolving a path reads the disk: only when needed
    for binding in bindings:
        scope: Scope | None = None
        try:
            scope = ctx.scope_for(binding)
            store = await ctx.plugins.resolve(binding.plugin)
        except (AnimusError, ValueError) as exc:
            _audit_skip(ctx, binding, scope, "error", str(exc))
            continue
        if store is None:
            _audit_skip(
                ctx,
                binding,
                scope,
                "unmatched",
                f"no store or saved memory-store block named {binding.plugin!r}",
            )
            continue
        if source is None:
            _audit_skip(ctx, binding, scope, "error", "workflow built in code has no file")
            continue
        entry = binding_server(
            ctx.workflow,
            binding,
            scope,
            source,
            agent_id=ctx.contract.agent_id,
            phase_id=ctx.phase.id,
            task_id=ctx.contract.task_id,
            flow_run_id=ctx.contract.flow_run_id,
        )
        add_server(ctx.contract.mcp_servers, binding_server_name(binding.binding), entry)


def _audit_skip(
    ctx: PhaseContext, binding: MemoryBinding, scope: Scope | None, status: str, why: str
) -> None:
    ctx.record_op(
        "query",
        binding,
        scope,
        status=status,
        detail=f"query_strategy none: no MCP server offered; {why}",
    )
