"""What the CLI needs beyond parsing: opening the chosen store or memory layer, building scopes
from flags, reading input files."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from animus_flows.config.loader import load_workflow
from animus_flows.config.models import WorkflowFile
from animus_flows.errors import AnimusError, ConfigError
from animus_flows.memory.layer import MemoryLayer
from animus_flows.protocol import MemoryStore, Scope
from animus_flows.stores.registry import PluginRegistry, blocks_wanted, prefect_server_configured
from animus_flows.stores.sync import LoopRunner, SyncStore

SCOPE_KINDS = ("project", "agent", "task")


def scope_from_flags(
    kind: str,
    project_id: str | None,
    agent_id: str | None,
    task_id: str | None,
    *,
    default_project: str,
) -> Scope:
    """The scope named by `--scope KIND` and the id flags; extra or missing ids are errors.

    Without `--project-id` the scope is in `default_project` (the workflow file's); an empty
    id flag, `--project-id ""` included, is refused naming the flag.
    """
    for flag, value in (
        ("--project-id", project_id),
        ("--agent-id", agent_id),
        ("--task-id", task_id),
    ):
        if value == "":
            raise ConfigError(f"{flag} is empty; pass an id or leave the flag out")
    if project_id is None:
        project_id = default_project
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
            f"no workflow file {workflow_file}; pass --workflow-file PATH to your workflow "
            "YAML file (default: animus.yaml in the current folder)"
        )
    return load_workflow(workflow_file)


def choose_store(workflow: WorkflowFile, plugin: str | None) -> MemoryStore:
    """The store `--plugin` names (or the only one there is), per `PluginRegistry.choose`.

    Stores open lazily, so the caller may use the store on its own event loop.
    """
    loop = LoopRunner()
    try:
        _, store = loop.run(
            PluginRegistry(workflow, use_blocks=blocks_wanted(workflow, plugin)).choose(plugin),
            await_form="await registry.choose(...)",
        )
    finally:
        loop.close()
    return store


@contextmanager
def open_cli_store(
    workflow_file: Path, plugin: str | None
) -> Iterator[tuple[WorkflowFile, SyncStore]]:
    """The workflow and a blocking store for `--plugin`, closed afterwards."""
    workflow = load_cli_workflow(workflow_file)
    sync = SyncStore(choose_store(workflow, plugin))
    try:
        yield workflow, sync
    finally:
        sync.close()


def run_workflow_file(path: Path, workflow: str | None, task_id: str | None) -> dict[str, Any]:
    """Load, compile and run a workflow as a Prefect flow; returns the run summary.

    Warnings go to stderr, and so does the `Degraded` line of a run in which a memory
    operation degraded. A run that fails raises an error naming its flow run and where to
    read it.
    """
    import asyncio

    from animus_flows.config.loader import workflow_warnings
    from animus_flows.runtime.engine import compile_workflow, missing_task_id_warning
    from animus_flows.runtime.flows import DEGRADED_STATE, build_flow

    loaded = load_workflow(path)
    compiled = compile_workflow(loaded, workflow)
    warnings = workflow_warnings(loaded)
    warnings += filter(None, [missing_task_id_warning(compiled, task_id)])
    for warning in warnings:
        print(f"warning: {warning}", file=sys.stderr)
    state = asyncio.run(build_flow(compiled)(task_id=task_id, return_state=True))
    if not state.is_completed():
        raise run_failure(state)
    summary = state.result()
    if state.name == DEGRADED_STATE and state.message:
        print(state.message, file=sys.stderr)
    return summary


class RunFailed(AnimusError):
    """A flow run that did not complete; the message says which, and where to read it."""


def run_failure(state: Any) -> AnimusError:
    """The error for a flow run that ended in `state` (failed, crashed or cancelled): what
    failed, then the flow run's id and where to read its logs and artifacts. A configuration
    error found inside the run stays one (exit code 2)."""
    from animus_flows.redaction import redact

    cause = state.result(raise_on_failure=False)
    if isinstance(cause, ConfigError):
        return cause
    if isinstance(cause, AnimusError):
        what = str(cause)
    elif isinstance(cause, BaseException):
        what = f"{type(cause).__name__}: {cause}"
    else:
        what = state.message or f"the run ended {state.name}"
    flow_run_id = state.state_details.flow_run_id
    text = " ".join(what.split())
    return RunFailed(redact(f"{text}\n{where_to_look(flow_run_id, state.name)}").text)


def where_to_look(flow_run_id: Any, state_name: str) -> str:
    """Where a person reads a flow run that did not complete: its page in the Prefect UI when
    a server is configured, else the commands that show it from Prefect's local database."""
    from prefect.utilities.urls import url_for

    url = (
        url_for("flow-run", obj_id=flow_run_id)
        if prefect_server_configured(read_settings=True)
        else None
    )
    said = f"flow run {flow_run_id} ended {state_name}"
    if url:
        return f"{said}: see its logs, task runs and artifacts at {url}"
    return (
        f"{said}: `prefect flow-run logs {flow_run_id}` prints its logs; for its task runs "
        "and artifacts, start `prefect server start` and open "
        f"http://127.0.0.1:4200/runs/flow-run/{flow_run_id}"
    )


def summary_text(summary: dict[str, Any]) -> str:
    """`animus run` for people: what each phase received, then the budget."""
    lines = [f"workflow {summary['workflow']} (flow run {summary['flow_run_id']})"]
    for phase in summary["phases"]:
        context = phase["memory_context"]
        lines += [
            "",
            f"== phase {phase['id']} (agent {phase['agent']}): "
            f"{len(context['items'])} memories, {context['tokens']} tokens ==",
        ]
        for item in context["items"]:
            lines.append(
                f"  {item['score']:.3f}  {item['tokens']:>4} tok  {item['binding']}/{item['key']}"
            )
        output = (
            phase["output"] if isinstance(phase["output"], str) else json.dumps(phase["output"])
        )
        lines += ["-- output --", output.rstrip("\n")]
    budget = summary["budget"]
    cap = "no cap" if budget["flow_tokens"] is None else budget["flow_tokens"]
    remaining = "" if budget["remaining"] is None else f", {budget['remaining']} remaining"
    lines += ["", f"budget: {budget['used']} of {cap} tokens used{remaining}"]
    return "\n".join(lines)


def preflight_text(report: dict[str, Any]) -> str:
    lines = [f"preflight {report['workflow_file']} (project {report['project_id']})", "", "stores:"]
    for store in report["stores"]:
        caps = store.get("capabilities") or {}
        flags = ", ".join(f"{k}={v}" for k, v in caps.items())
        state = "reachable" if store["reachable"] else f"UNREACHABLE: {store.get('error')}"
        lines.append(
            f"  {store['plugin_id']} ({store['type']}): {state}" + (f"; {flags}" if flags else "")
        )
    bindings = report["memory_bindings"]
    lines += ["", "memory_bindings:"]
    for entry in bindings["matched"]:
        block = f" (saved block {entry['block']})" if entry.get("block") else ""
        lines.append(
            f"  matched   {entry['owner']}: {entry['binding']} -> {entry['plugin']}{block}"
        )
    for entry in bindings["unmatched"]:
        why = "; saved blocks not looked up" if entry.get("blocks_checked") is False else ""
        lines.append(
            f"  unmatched {entry['owner']}: {entry['binding']} -> {entry['plugin']} (no-op{why})"
        )
    lines += [f"warning: {warning}" for warning in report["warnings"]]
    lines += [f"not checked: {skipped}" for skipped in report.get("skipped", [])]
    return "\n".join(lines)


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
    workflow = load_cli_workflow(workflow_file)
    scope = scope_from_flags(
        kind, project_id, agent_id, task_id, default_project=workflow.project_id
    )
    layer = MemoryLayer(choose_store(workflow, plugin), scope)
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
