"""What the CLI needs beyond parsing: opening the chosen store and building scopes from flags."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from animus_flows.config.loader import load_workflow
from animus_flows.config.models import WorkflowFile
from animus_flows.errors import ConfigError
from animus_flows.plugins import PluginRegistry
from animus_flows.protocol import Scope
from animus_flows.stores.base import SyncStore

SCOPE_KINDS = ("project", "agent", "task")


def scope_from_flags(
    kind: str, project_id: str, agent_id: str | None, task_id: str | None
) -> Scope:
    """The scope named by `--scope KIND` and the id flags; extra or missing ids are errors."""
    if kind not in SCOPE_KINDS:
        raise ConfigError(f"--scope {kind!r} is not a scope kind; use project, agent or task")
    if kind == "agent" and agent_id is None:
        raise ConfigError("--scope agent needs --agent-id ID")
    if kind == "task" and task_id is None:
        raise ConfigError("--scope task needs --task-id ID")
    if kind != "agent" and agent_id is not None:
        raise ConfigError(f"--agent-id is only used with --scope agent (got --scope {kind})")
    if kind != "task" and task_id is not None:
        raise ConfigError(f"--task-id is only used with --scope task (got --scope {kind})")
    return Scope(project_id, agent_id if kind == "agent" else None, task_id)


def load_cli_workflow(workflow_file: Path) -> WorkflowFile:
    """The workflow file named by `--workflow-file`, with a hint when it is missing."""
    if not workflow_file.exists():
        raise ConfigError(
            f"no workflow file {workflow_file}; pass --workflow-file PATH to the file "
            "that declares your stores"
        )
    return load_workflow(workflow_file)


@contextmanager
def open_cli_store(
    workflow_file: Path, plugin: str | None
) -> Iterator[tuple[WorkflowFile, SyncStore]]:
    """The workflow and a blocking store for `--plugin`, closed afterwards."""
    workflow = load_cli_workflow(workflow_file)
    registry = PluginRegistry(workflow)
    _, store = registry.choose(plugin)
    sync = SyncStore(store)
    try:
        yield workflow, sync
    finally:
        sync.close()
