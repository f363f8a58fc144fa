"""Workflows as Prefect flows: a flow per workflow, a task per phase, named so the UI reads
like the workflow file."""

from __future__ import annotations

import inspect
from contextvars import ContextVar
from pathlib import Path
from typing import Any

from prefect import Flow, Task, flow, get_run_logger, task
from prefect.cache_policies import NONE
from prefect.context import FlowRunContext

from animus_flows.config.loader import load_workflow, workflow_warnings
from animus_flows.config.models import PhaseConfig, WorkflowFile
from animus_flows.protocol import Scope
from animus_flows.redaction import get_logger, redacted_errors
from animus_flows.retrieval.audit import LoggerSink
from animus_flows.runtime.engine import (
    CompiledWorkflow,
    RunState,
    compile_workflow,
    finish_run,
    resolve_source,
    run_phase,
)
from animus_flows.runtime.sinks import Outbox, PrefectEventSink, Queued

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


def prefect_sinks(log: Any, flow_run_id: str | None, workflow: str, outbox: Outbox) -> list[Queued]:
    """The flow run's log and its event stream, each fed through the outbox."""
    return [
        Queued(LoggerSink(log), outbox),
        Queued(PrefectEventSink(flow_run_id, workflow), outbox),
    ]


async def execute(compiled: CompiledWorkflow, task_id: str | None) -> dict[str, Any]:
    """Run every phase of `compiled` inside the current flow run; returns the run summary."""
    with redacted_errors():  # what fails here leaves through Prefect's state and logs
        if task_id:  # an id is shown in every artifact and log line: no control chars, no secret
            Scope(compiled.workflow.project_id, task_id=task_id)
        return await _execute(compiled, task_id)


async def _execute(compiled: CompiledWorkflow, task_id: str | None) -> dict[str, Any]:
    context = FlowRunContext.get()
    flow_run_id = str(context.flow_run.id) if context and context.flow_run else None
    log = get_run_logger()
    for warning in workflow_warnings(compiled.workflow):
        log.warning("%s", warning)
    outbox = Outbox()
    state = RunState.start(
        compiled,
        task_id or None,
        flow_run_id,
        prefect_sinks(log, flow_run_id, compiled.name, outbox),
        outbox,
        log,
    )
    try:
        for phase in compiled.phases:
            await run_phase_task(state, phase)
        finish_run(state)
    finally:
        await outbox.drain()
        await state.plugins.aclose()
    return state.summary()


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
