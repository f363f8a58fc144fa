"""The runtime contract: what hooks enrich and runners receive for one phase.

A plain pydantic model so a command runner gets it as a JSON file and a Python runner as an
object; nothing in it is secret.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class InjectedItem(BaseModel):
    """One memory handed to the phase: where it came from and what it cost."""

    binding: str
    key: str
    score: float
    tokens: int
    plugin: str | None = None
    tier: str | None = None


class MemoryContext(BaseModel):
    """What the `memory_bindings` hook injected: the items and the exact text."""

    items: list[InjectedItem] = Field(default_factory=list)
    tokens: int = 0
    text: str = ""


class ScratchpadView(BaseModel):
    """The agent's scratchpad as the phase starts."""

    scope: str
    text: str = ""
    chars_current: int = 0
    chars_limit: int = 0
    tokens: int = 0


class RuntimeContract(BaseModel):
    """Everything a runner needs for one phase; hooks fill it in before the runner starts."""

    model_config = ConfigDict(extra="forbid")

    project_id: str
    workflow: str
    phase_id: str
    agent_id: str
    task_id: str | None = None
    flow_run_id: str | None = None
    prompt: str
    memory_context: MemoryContext = Field(default_factory=MemoryContext)
    scratchpad: ScratchpadView | None = None
    mcp_servers: dict[str, dict[str, Any]] = Field(
        default_factory=dict,
        description=(
            "MCP servers offered to the agent: name -> {command, args, env}, the standard "
            "`mcpServers` shape; command runners get them as {mcp_config_path}."
        ),
    )
    budget: dict[str, int | None] = Field(default_factory=dict)
    extra: dict[str, Any] = Field(
        default_factory=dict, description="Room for user hooks to hand data to runners."
    )
