"""The `mcpServers` entries that start animus's own MCP servers for an agent.

Hooks put these on `RuntimeContract.mcp_servers`; the command runner writes them as
`{"mcpServers": {...}}`, the file agent CLIs (Claude Code's `--mcp-config`, Claude Desktop's
config) read. Each entry is `{"command", "args", "env"}` with absolute paths, so it starts the
same way from any working folder and with the minimal environment MCP clients pass on.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

from animus_flows.config.models import BlockRef, MemoryBinding, WorkflowFile
from animus_flows.protocol import Scope

SCRATCHPAD_SERVER = "animus-scratchpad"
BINDING_SERVER_PREFIX = "animus-binding-"

#: Audit context the `binding` server reads from its environment (all optional).
AUDIT_ENV = {
    "agent_id": "ANIMUS_AGENT_ID",
    "phase_id": "ANIMUS_PHASE_ID",
    "task_id": "ANIMUS_TASK_ID",
    "flow_run_id": "ANIMUS_FLOW_RUN_ID",
}


def workflow_path(workflow: WorkflowFile) -> Path | None:
    """The workflow's file as an absolute path; None for a workflow built in code."""
    return None if workflow.source is None else Path(workflow.source).resolve()


def animus_command() -> list[str]:
    """`python -m animus_flows` with this interpreter: works wherever the package is installed."""
    return [sys.executable, "-m", "animus_flows"]


def server_entry(args: list[str], env: dict[str, str] | None = None) -> dict[str, Any]:
    command, *prefix = animus_command()
    return {"command": command, "args": [*prefix, *args], "env": dict(env or {})}


def scratchpad_server(agent_id: str, workflow_file: Path) -> dict[str, Any]:
    """The entry that runs `animus mcp scratchpad` for one agent."""
    return server_entry(
        ["mcp", "scratchpad", "--agent", agent_id, "--workflow-file", str(workflow_file)]
    )


def binding_server_name(label: str) -> str:
    """`animus-binding-<label>`, dots made dashes: some clients refuse dots in server names."""
    return f"{BINDING_SERVER_PREFIX}{label.replace('.', '-')}"


def binding_server(
    workflow: WorkflowFile,
    binding: MemoryBinding,
    scope: Scope,
    workflow_file: Path,
    *,
    agent_id: str | None = None,
    phase_id: str | None = None,
    task_id: str | None = None,
    flow_run_id: str | None = None,
) -> dict[str, Any]:
    """The entry that runs `animus mcp binding` pinned to `binding` and `scope`.

    `agent_id`, `phase_id`, `task_id` and `flow_run_id` go into the environment as audit
    context. A plugin that is not a store of the file is a saved Prefect block: the server then
    needs the Prefect API, so PREFECT_API_URL is passed on when it is set (never an API key).
    """
    args = ["mcp", "binding", "--plugin", binding.plugin, "--scope", binding.scope.kind]
    args += ["--project-id", scope.project_id]
    if binding.scope.kind == "agent" and scope.agent_id is not None:
        args += ["--agent-id", scope.agent_id]
    if binding.scope.kind == "task" and scope.task_id is not None:
        args += ["--task-id", scope.task_id]
    args += ["--binding", binding.binding, "--workflow-file", str(workflow_file)]
    context = {
        "agent_id": agent_id,
        "phase_id": phase_id,
        "task_id": task_id,
        "flow_run_id": flow_run_id,
    }
    env = {AUDIT_ENV[name]: value for name, value in context.items() if value}
    spec = workflow.stores.get(binding.plugin)
    if (spec is None or isinstance(spec, BlockRef)) and os.environ.get("PREFECT_API_URL"):
        env["PREFECT_API_URL"] = os.environ["PREFECT_API_URL"]
    return server_entry(args, env)


def add_server(servers: dict[str, Any], name: str, entry: dict[str, Any]) -> str:
    """Add `entry` under `name`, or `name-2`, `name-3`, ... when another entry holds it."""
    candidate, n = name, 1
    while candidate in servers and servers[candidate] != entry:
        n += 1
        candidate = f"{name}-{n}"
    servers[candidate] = entry
    return candidate
