"""What the CLI needs beyond parsing: opening the chosen store or memory layer, building scopes
from flags, reading input files."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from animus_flows.config.loader import load_workflow
from animus_flows.config.models import WorkflowFile
from animus_flows.errors import ConfigError
from animus_flows.memory.layer import MemoryLayer
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


def _open_workflow(workflow_file: Path) -> WorkflowFile:
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
    workflow = _open_workflow(workflow_file)
    registry = PluginRegistry(workflow)
    _, store = registry.choose(plugin)
    sync = SyncStore(store)
    try:
        yield workflow, sync
    finally:
        sync.close()


@contextmanager
def open_cli_layer(
    workflow_file: Path,
    plugin: str | None,
    kind: str,
    project_id: str | None,
    agent_id: str | None,
    task_id: str | None,
) -> Iterator[MemoryLayer]:
    """The memory layer over `--plugin` in the scope the flags name; the store is closed after.

    The layer runs the store on its own event loop, so the store is opened, used and closed on
    that one loop (plugin processes and HTTP pools are loop-bound).
    """
    workflow = _open_workflow(workflow_file)
    scope = scope_from_flags(kind, project_id or workflow.project_id, agent_id, task_id)
    _, store = PluginRegistry(workflow).choose(plugin)
    layer = MemoryLayer(store, scope)
    try:
        yield layer
    finally:
        layer.close(close_store=True)


def read_input(path: Path) -> str:
    """The text of an input file named on the command line; `-` reads standard input."""
    if str(path) == "-":
        return sys.stdin.read()
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such file; pass the path of a memory export") from None
    except IsADirectoryError:
        raise ConfigError(f"{path}: is a folder; pass the path of a memory export") from None
    except UnicodeDecodeError:
        raise ConfigError(f"{path}: not UTF-8 text; pass a JSON memory export") from None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read ({exc.strerror})") from None
