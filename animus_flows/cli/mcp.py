"""`animus mcp ...`: serve an agent's scratchpad or one binding's store over MCP."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from animus_flows.cli.app import (
    DEFAULT_WORKFLOW_FILE,
    AgentOpt,
    ProjectOpt,
    ScopeOpt,
    TaskOpt,
    ToolNamesOpt,
    _scope,
    _state,
    handles_errors,
    mcp_app,
)


@mcp_app.command("scratchpad")
@handles_errors
def mcp_scratchpad(
    agent: Annotated[str, typer.Option("--agent", help="Agent id from the file's agents:.")],
    workflow_file: Annotated[
        Path, typer.Option("--workflow-file", help="Workflow file declaring the agent.")
    ] = DEFAULT_WORKFLOW_FILE,
    tool_names: ToolNamesOpt = "dotted",
) -> None:
    """Serve an agent's scratchpad as the animus.memory.* tools (MCP over stdio)."""
    from animus_flows.cli.support import load_cli_workflow
    from animus_flows.mcp.scratchpad_server import serve_scratchpad

    workflow = load_cli_workflow(workflow_file)
    serve_scratchpad(workflow, agent, tool_names=tool_names, debug=_state["debug"])


@mcp_app.command("binding")
@handles_errors
def mcp_binding(
    plugin: Annotated[str, typer.Option("--plugin", help="Store id the binding names.")],
    scope: ScopeOpt,
    project_id: ProjectOpt = None,
    agent_id: AgentOpt = None,
    task_id: TaskOpt = None,
    binding: Annotated[
        str | None,
        typer.Option("--binding", help="Binding label; required when several match."),
    ] = None,
    workflow_file: Annotated[
        Path, typer.Option("--workflow-file", help="Workflow file declaring the binding.")
    ] = DEFAULT_WORKFLOW_FILE,
    tool_names: ToolNamesOpt = "dotted",
) -> None:
    """Serve one memory binding's store to an agent (MCP over stdio), egress-safe and audited."""
    from animus_flows.cli.support import load_cli_workflow
    from animus_flows.mcp.binding_server import serve_binding

    workflow = load_cli_workflow(workflow_file)
    target = _scope(scope, project_id, agent_id, task_id, workflow.project_id)
    serve_binding(
        workflow, plugin, target, label=binding, tool_names=tool_names, debug=_state["debug"]
    )
