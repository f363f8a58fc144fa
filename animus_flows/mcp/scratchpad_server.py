"""`animus mcp scratchpad`: an agent's scratchpad as the `animus.memory.*` MCP tools.

The agent id resolves through the workflow file's `agents:`; its `memory:` block gives the
scope and the character limit. Every tool answers with `chars_current` and `chars_limit`, the
way Letta shows an agent its own memory budget, and a write past the limit is a tool error
that states both counts and changes nothing. Secrets are redacted before anything is written.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import anyio
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations
from pydantic import BaseModel, Field

from animus_flows.config.models import WorkflowFile
from animus_flows.config.paths import runtime_root
from animus_flows.errors import ConfigError
from animus_flows.hooks.mcp_servers import SCRATCHPAD_SERVER
from animus_flows.mcp.serving import check_tool_names, log_to_stderr, tool_name
from animus_flows.memory.scratchpad import Scratchpad, ScratchpadFull, ScratchpadState
from animus_flows.redaction import get_logger, redact

SERVER_NAME = SCRATCHPAD_SERVER
TOOL_READ = "animus.memory.read"
TOOL_WRITE = "animus.memory.write"
TOOL_APPEND = "animus.memory.append"
TOOL_CLEAR = "animus.memory.clear"
TOOLS = (TOOL_READ, TOOL_WRITE, TOOL_APPEND, TOOL_CLEAR)

logger = get_logger("animus_flows.mcp.scratchpad")

Content = Annotated[str, Field(description="The text, in plain words or Markdown.")]


class ScratchpadText(BaseModel):
    """What `animus.memory.read` returns."""

    scope: str = Field(description="The scratchpad's scope (usually the agent id).")
    text: str = Field(description="The whole scratchpad text.")
    chars_current: int = Field(description="Characters the scratchpad holds now.")
    chars_limit: int = Field(description="The most characters it can hold.")


class ScratchpadChange(BaseModel):
    """What the writing tools return: the budget after the change, without the text."""

    scope: str = Field(description="The scratchpad's scope (usually the agent id).")
    chars_current: int = Field(description="Characters the scratchpad holds now.")
    chars_limit: int = Field(description="The most characters it can hold.")
    redacted: int = Field(0, description="Secrets replaced by [REDACTED:...] markers.")


@dataclass(frozen=True)
class ScratchpadTarget:
    """Which scratchpad an agent id names in a workflow file."""

    agent_id: str
    scope: str
    project_id: str
    max_chars: int
    root: Path

    def open(self) -> Scratchpad:
        return Scratchpad(self.root, self.project_id, self.scope, self.max_chars)


def resolve_agent(workflow: WorkflowFile, agent_id: str) -> ScratchpadTarget:
    """The scratchpad of `agent_id`; ConfigError when the agent is unknown or has none."""
    where = workflow.source or "the workflow"
    agent = workflow.agents.get(agent_id)
    if agent is None:
        known = ", ".join(workflow.agents) or "none"
        raise ConfigError(f"no agent {agent_id!r} in {where} (agents: {known}); fix --agent")
    if not agent.memory.enabled:
        raise ConfigError(
            f"agent {agent_id!r} in {where} has no scratchpad; set "
            f"agents.{agent_id}.memory.enabled: true to give it one"
        )
    return ScratchpadTarget(
        agent_id=agent_id,
        scope=agent.memory.scope or agent_id,
        project_id=workflow.project_id,
        max_chars=agent.memory.max_context_chars,
        root=runtime_root(workflow).resolve(),
    )


def _change(pad: Scratchpad, state: ScratchpadState, redacted: int = 0) -> ScratchpadChange:
    return ScratchpadChange(
        scope=pad.scope,
        chars_current=state.chars_current,
        chars_limit=state.chars_limit,
        redacted=redacted,
    )


def build_scratchpad_server(target: ScratchpadTarget, tool_names: str = "dotted") -> MCPServer:
    """The MCP server of one agent's scratchpad, with the four `animus.memory.*` tools.

    `tool_names="underscored"` serves them as `animus_memory_read`, ... instead.
    """
    pad = target.open()
    limit = target.max_chars
    read_name, write_name, append_name, clear_name = (tool_name(t, tool_names) for t in TOOLS)
    server = MCPServer(
        SERVER_NAME,
        title="Agent scratchpad",
        instructions=(
            f"Your private scratchpad (scope {target.scope!r}): notes that stay between phases "
            f"and runs. It holds at most {limit} characters. Read it with {read_name}; add a "
            f"note with {append_name}; condense it with {write_name}; empty it with "
            f"{clear_name}. Every answer reports chars_current and chars_limit."
        ),
    )

    async def change_notes(
        change: Callable[[str], ScratchpadState], content: str, done: str
    ) -> ScratchpadChange:
        """`change(content)` with secrets redacted (the notes reach later prompts), or a
        refusal that names the limit and leaves the notes as they were."""
        clean = redact(content)
        try:
            state = await anyio.to_thread.run_sync(change, clean.text)
        except ScratchpadFull as exc:
            logger.info(
                "refused a write to %s: %d characters, over the limit of %d",
                target.scope,
                exc.chars_requested,
                exc.chars_limit,
            )
            raise ToolError(
                f"refused: the scratchpad would hold {exc.chars_requested} characters, over "
                f"chars_limit {exc.chars_limit} (chars_current {exc.chars_current}); nothing "
                f"was changed. Shorten the text, condense the notes with {write_name}, or "
                f"{clear_name} first"
            ) from None
        logger.info("%s %s: %d of %d characters", done, pad.scope, state.chars_current, limit)
        return _change(pad, state, clean.count)

    @server.tool(
        name=read_name,
        title="Read the scratchpad",
        description=(
            "Read your whole scratchpad: the notes you left yourself in earlier phases and runs. "
            f"Returns the text, chars_current and chars_limit ({limit})."
        ),
        annotations=ToolAnnotations(read_only_hint=True, idempotent_hint=True),
    )
    async def read() -> ScratchpadText:
        state = await anyio.to_thread.run_sync(pad.read)
        return ScratchpadText(scope=pad.scope, **state.to_json())  # type: ignore[arg-type]

    @server.tool(
        name=write_name,
        title="Rewrite the scratchpad",
        description=(
            "Replace your whole scratchpad with `content`: use it to condense or reorganize "
            f"notes. At most {limit} characters; longer content is refused and nothing changes. "
            "Secrets are replaced by [REDACTED:...] markers. Returns chars_current and "
            "chars_limit."
        ),
        annotations=ToolAnnotations(destructive_hint=True, idempotent_hint=True),
    )
    async def write(content: Content) -> ScratchpadChange:
        return await change_notes(pad.write, content, "wrote")

    @server.tool(
        name=append_name,
        title="Add a note",
        description=(
            "Add `content` to the end of your scratchpad, on a new line. Refused, changing "
            f"nothing, when the scratchpad would then exceed {limit} characters. Returns "
            "chars_current and chars_limit, so you can see how much room is left."
        ),
        annotations=ToolAnnotations(destructive_hint=False, idempotent_hint=False),
    )
    async def append(content: Content) -> ScratchpadChange:
        return await change_notes(pad.append, content, "appended to")

    @server.tool(
        name=clear_name,
        title="Clear the scratchpad",
        description=(
            "Erase your whole scratchpad. Returns chars_current (0) and chars_limit. "
            f"To keep some notes, rewrite them with {write_name} instead."
        ),
        annotations=ToolAnnotations(destructive_hint=True, idempotent_hint=True),
    )
    async def clear() -> ScratchpadChange:
        state = await anyio.to_thread.run_sync(pad.clear)
        logger.info("cleared %s", pad.scope)
        return _change(pad, state)

    return server


def serve_scratchpad(
    workflow: WorkflowFile, agent_id: str, *, tool_names: str = "dotted", debug: bool = False
) -> None:
    """Serve `agent_id`'s scratchpad over stdio until the client closes the connection.

    Raises:
        ConfigError: the agent is unknown or has no `memory.enabled`, or `tool_names` is not
            a style; before serving.
    """
    target = resolve_agent(workflow, agent_id)
    check_tool_names(tool_names)
    log_to_stderr(debug)
    server = build_scratchpad_server(target, tool_names)
    logger.info(
        "serving scratchpad %s of agent %s (%s, limit %d characters)",
        target.scope,
        agent_id,
        target.open().path,
        target.max_chars,
    )
    anyio.run(server.run_stdio_async)
