"""Workflows as Prefect flows: a flow per workflow, a task per phase, named so the UI reads
like the workflow file."""

from __future__ import annotations

import inspect
from contextvars import ContextVar
from pathlib import Path
from typing import Any

from prefect import Flow, State, Task, flow, get_run_logger, task
from prefect.cache_policies import NONE
from prefect.context import FlowRunContext
from prefect.states import Completed

from animus_flows.config.loader import load_workflow, workflow_warnings
from animus_flows.config.models import PhaseConfig, WorkflowFile
from animus_flows.protocol import Scope
from animus_flows.redaction import get_logger, redacted_errors
from animus_flows.runtime.engine import (
    CompiledWorkflow,
    RunState,
    compile_workflow,
    finish_run,
    missing_task_id_warning,
    resolve_source,
    run_phase,
)
from animus_flows.runtime.sinks import Outbox, PrefectEventSink, Queued, RunLogSink
from animus_flows.stores.registry import PluginRegistry

logger = get_logger("animus_flows.runtime")


# The run and phase a phase task is about to execute. Tasks are built once per phase and
# reused across runs, so they cannot close over a run's state; the flow sets this instead.
_current_phase: ContextVar[tuple[RunState, PhaseConfig]] = ContextVar("animus_current_phase")
_phase_tasks: dict[tuple[str, str], Task[[], None]] = {}


def phase_task(phase: PhaseConfig) -> Task[[], None]:
    """The Prefect task that runs phases with this id and agent; see `run_phase_task`.

    Built once per process: building a Prefect task reads its function's source (several
    milliseconds), a cost a decorated module-level task pays once at import.
    """
    key = (phase.id, phase.agent)
    if key not in _phase_tasks:

        async def run() -> None:
            # The result stays on the run state (the run summary): Prefect walks a task's
            # return value looking for futures, which costs milliseconds for a phase's context.
            state, current = _current_phase.get()
            await run_phase(state, current)

        run.__name__ = run.__qualname__ = f"phase_{phase.id}".replace("-", "_").replace(".", "_")
        _phase_tasks[key] = task(
            run,
            name=phase.id,
            task_run_name=phase.id,
            cache_policy=NONE,
            persist_result=False,
            description=f"Phase {phase.id} (agent {phase.agent})",
        )
    return _phase_tasks[key]


async def run_phase_task(state: RunState, phase: PhaseConfig) -> None:
    """Run one phase of `state`'s workflow as a Prefect task (named after the phase); its
    result joins `state.results`."""
    reset = _current_phase.set((state, phase))
    try:
        await phase_task(phase)()
    finally:
        _current_phase.reset(reset)


def prefect_sinks(
    log: Any, flow_run_id: str | None, workflow: str, outbox: Outbox, plugins: PluginRegistry
) -> list[Queued]:
    """The phases' task-run logs and the event stream, each fed through the outbox."""
    return [
        Queued(RunLogSink(log), outbox),
        Queued(PrefectEventSink(flow_run_id, workflow, plugins.block_document), outbox),
    ]


#: The name of the COMPLETED-type state of a run in which a memory operation degraded.
DEGRADED_STATE = "Degraded"


async def execute(
    compiled: CompiledWorkflow, task_id: str | None
) -> dict[str, Any] | State[dict[str, Any]]:
    """Run every phase of `compiled` inside the current flow run; returns the run summary,
    or, when a memory operation degraded, a `Degraded` state holding it (see `_execute`)."""
    with redacted_errors():  # what fails here leaves through Prefect's state and logs
        if task_id:  # an id is shown in every artifact and log line: no control chars, no secret
            Scope(compiled.workflow.project_id, task_id=task_id)
        return await _execute(compiled, task_id)


async def _execute(
    compiled: CompiledWorkflow, task_id: str | None
) -> dict[str, Any] | State[dict[str, Any]]:
    """The run's phases, then its budget ledger, whatever failed.

    A run in which any memory operation ended `timeout`, `error` or `unmatched` returns a
    COMPLETED-type state named `Degraded` whose message counts them; Prefect makes it the
    flow run's final state, and calling the flow still returns the summary.
    """
    context = FlowRunContext.get()
    flow_run_id = str(context.flow_run.id) if context and context.flow_run else None
    log = get_run_logger()
    for warning in workflow_warnings(compiled.workflow):
        log.warning("%s", warning)
    if warning := missing_task_id_warning(compiled, task_id):
        log.warning("%s", warning)
    outbox = Outbox()
    plugins = PluginRegistry(compiled.workflow)
    state = RunState.start(
        compiled,
        task_id or None,
        flow_run_id,
        prefect_sinks(log, flow_run_id, compiled.name, outbox, plugins),
        outbox,
        log,
        plugins,
    )
    try:
        for phase in compiled.phases:
            await run_phase_task(state, phase)
    finally:
        try:
            finish_run(state)
            await outbox.drain()
        finally:
            await state.plugins.aclose()
    summary = state.summary()
    message = state.degraded_message()
    if message is None:
        return summary
    return Completed(name=DEGRADED_STATE, message=message, data=summary)


def workflow_flow(source: str | Path | WorkflowFile, name: str | None = None) -> Flow[..., Any]:
    """A Prefect flow that runs workflow `name` of a workflow file, a task per phase.

    Relative paths resolve against the calling module's folder first, so a `flows.py` beside
    its YAML deploys from any working folder. Hooks and runners are imported now: a typo fails
    here, not at phase 3. The flow takes one parameter, `task_id`.

    Example:
        ```python
        import asyncio
        from animus_flows import workflow_flow

        research = workflow_flow("animus.yaml", "research")
        summary = asyncio.run(research(task_id="RES-001"))
        ```
    """
    if isinstance(source, WorkflowFile):
        workflow = source
    else:
        caller = inspect.stack()[1].filename
        workflow = load_workflow(resolve_source(source, caller))
    compiled = compile_workflow(workflow, name)
    for warning in workflow_warnings(workflow):
        logger.warning("%s", warning)
    return build_flow(compiled)


def build_flow(compiled: CompiledWorkflow) -> Flow[..., Any]:
    """The Prefect flow of a compiled workflow (`workflow_flow` without loading or warnings)."""

    async def run(task_id: str | None = None) -> dict[str, Any]:
        return await execute(compiled, task_id)

    run.__name__ = run.__qualname__ = compiled.name.replace("-", "_").replace(".", "_")
    return flow(
        run,
        name=compiled.name,
        description=f"Workflow {compiled.name} of project {compiled.workflow.project_id} "
        f"({len(compiled.phases)} phases).",
        persist_result=False,
        validate_parameters=True,
        log_prints=False,
    )
