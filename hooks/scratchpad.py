"""The `scratchpad` pre-phase hook: hand a memory-capable agent its scratchpad.

Puts the current text on `contract.scratchpad` (counted against the phase budget under its own
category) and, for agents with `memory.enabled`, registers the `animus mcp scratchpad` server
in `contract.mcp_servers` so the agent can read and write it while it works.
"""

from __future__ import annotations

from animus_flows.config.paths import runtime_root
from animus_flows.hooks.context import PhaseContext
from animus_flows.hooks.contract import ScratchpadView
from animus_flows.hooks.mcp_servers import SCRATCHPAD_SERVER, scratchpad_server, workflow_path
from animus_flows.memory.scratchpad import Scratchpad
from animus_flows.redaction import get_logger

SERVER_NAME = SCRATCHPAD_SERVER
logger = get_logger("animus_flows.hooks")


async def scratchpad(ctx: PhaseContext) -> None:
    """Inject the agent's scratchpad (the built-in pre-phase hook)."""
    memory = ctx.agent.memory
    if not memory.enabled:
        return
    scope = memory.scope or ctx.contract.agent_id
    pad = Scratchpad(
        runtime_root(ctx.workflow), ctx.contract.project_id, scope, memory.max_context_chars
    )
    state = pad.read()
    tokens = ctx.counter.count(state.text) if state.text else 0
    remaining = ctx.budget.remaining(ctx.phase.id)
    text = state.text
    if remaining is not None and tokens > remaining:
        # Too big for what the phase has left: the agent still reaches it over MCP.
        text, tokens = "", 0
    if tokens:
        ctx.budget.deduct(ctx.phase.id, "scratchpad", tokens, note=scope)
    ctx.contract.scratchpad = ScratchpadView(
        scope=scope,
        text=text,
        chars_current=state.chars_current,
        chars_limit=state.chars_limit,
        tokens=tokens,
    )
    ctx.contract.budget = ctx.budget.snapshot(ctx.phase.id)
    source = workflow_path(ctx.workflow)
    if source is None:
        logger.warning(
            "workflow built in code has no file: agent %r gets no scratchpad MCP server; "
            "load the workflow from a YAML file to offer it",
            ctx.contract.agent_id,
        )
        return
    ctx.contract.mcp_servers[SERVER_NAME] = scratchpad_server(ctx.contract.agent_id, source)
