"""Run a workflow's phases: build each contract, run the hook chain and the runner, audit.

This is the body of the Prefect flow and of each phase task; `runtime.flows` wraps it. All
enforcement happens here, in the task body, never in Prefect state hooks (Prefect swallows
their exceptions).
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from animus_flows.budget import TokenBudget, TokenCounter, shared_counter
from animus_flows.config.embedder import LocalEmbedderSpec
from animus_flows.config.loader import located
from animus_flows.config.models import (
    CommandRunner,
    PhaseConfig,
    PythonRunner,
    WorkflowFile,
    template_fields,
)
from animus_flows.embedders.local import load_in_background
from animus_flows.errors import AnimusError, ConfigError
from animus_flows.hooks import BUILTIN_HOOKS
from animus_flows.hooks.context import PhaseContext
from animus_flows.hooks.contract import MemoryContext, RuntimeContract
from animus_flows.hooks.memory_bindings import PACK_STATE_KEY
from animus_flows.redaction import get_logger, redact
from animus_flows.retrieval.audit import (
    AuditSink,
    AuditTrail,
    JsonlSink,
    degraded_message,
    degraded_ops,
    unwritable_audit_path,
    unwritable_reason,
)
from animus_flows.runtime.artifacts import (
    artifact_key,
    budget_left,
    budget_markdown,
    context_markdown,
    ops_table,
)
from animus_flows.runtime.invoke import (
    PhaseFailed,
    call_python_runner,
    run_command_runner,
    user_code_failed,
)
from animus_flows.runtime.loading import import_callable
from animus_flows.runtime.sinks import Outbox, queue_markdown_artifact, queue_table_artifact
from animus_flows.stores.registry import PluginRegistry

logger = get_logger("animus_flows.runtime")
Hook = Callable[[PhaseContext], Awaitable[None] | None]


@dataclass(frozen=True)
class LoadedRunner:
    """An imported Python runner, its import path (for messages) and its deadline, if any."""

    target: Callable[..., Any]
    path: str
    timeout_s: float | None = None


@dataclass(frozen=True)
class CompiledWorkflow:
    """A workflow with every hook and runner imported: import errors surface before phase 1."""

    workflow: WorkflowFile
    name: str
    pre_hooks: list[tuple[str, Hook]]
    post_hooks: list[tuple[str, Hook]]
    runners: dict[str, LoadedRunner | CommandRunner]

    @property
    def phases(self) -> list[PhaseConfig]:
        return self.workflow.workflows[self.name].phases


def check_takes_one_argument(target: Callable[..., Any], what: str, argument: str) -> None:
    """Refuse, at load, a hook or runner that cannot be called with its one argument."""
    try:
        signature = inspect.signature(target)
    except (TypeError, ValueError):  # some builtins have none: let the call decide
        return
    try:
        signature.bind(argument)
    except TypeError as exc:
        raise ConfigError(
            f"{what} cannot be called with one argument ({exc}); define it as "
            f"`def {getattr(target, '__name__', 'function')}({argument}): ...`"
        ) from None


def pick_workflow(workflow: WorkflowFile, name: str | None) -> str:
    names = list(workflow.workflows)
    if name is None:
        if len(names) == 1:
            return names[0]
        raise ConfigError(
            f"{workflow.source or 'the file'} defines {len(names)} workflows "
            f"({', '.join(names) or 'none'}); choose one with --workflow NAME"
        )
    if name not in workflow.workflows:
        raise ConfigError(
            f"no workflow {name!r} in {workflow.source or 'the file'}; "
            f"it defines {', '.join(names) or 'none'}"
        )
    return name


def compile_workflow(workflow: WorkflowFile, name: str | None = None) -> CompiledWorkflow:
    """Check and import everything a run needs.

    Raises:
        ConfigError: one line per hook or runner that cannot be imported or called, each
            located in the file (`FILE:LINE:COL: key.path: ...`) with a did-you-mean.
    """
    name = pick_workflow(workflow, name)
    hooks = workflow.workflows[name].hooks
    if workflow.audit.path:
        audit_path = workflow.resolve_path(workflow.audit.path)
        if reason := unwritable_reason(audit_path):
            raise unwritable_audit_path(audit_path, reason)
    problems: list[str] = []

    def imported(loc: tuple[str | int, ...], path: str, argument: str) -> Any:
        try:
            target = import_callable(path, workflow.base_dir, what="")
            check_takes_one_argument(target, repr(path), argument)
        except ConfigError as exc:  # located only now: that reads the file again
            problems.append(f"{located(workflow, loc)}: {str(exc).lstrip()}")
            return None
        return target

    def load(stage: str, names: list[str]) -> list[tuple[str, Hook]]:
        loaded = []
        for index, hook in enumerate(names):
            if hook in BUILTIN_HOOKS:
                loaded.append((hook, BUILTIN_HOOKS[hook]))
            elif target := imported(("workflows", name, "hooks", stage, index), hook, "ctx"):
                loaded.append((hook, target))
        return loaded

    runners: dict[str, LoadedRunner | CommandRunner] = {}
    for agent in dict.fromkeys(phase.agent for phase in workflow.workflows[name].phases):
        spec = workflow.agents[agent].runner
        if isinstance(spec, CommandRunner):
            runners[agent] = spec
            continue
        loc: tuple[str | int, ...] = ("agents", agent, "runner")
        path, timeout_s = spec, None
        if isinstance(spec, PythonRunner):
            path, timeout_s, loc = spec.python, spec.timeout_s, (*loc, "python")
        if target := imported(loc, path, "contract"):
            runners[agent] = LoadedRunner(target, path, timeout_s)
    pre_hooks, post_hooks = load("pre_phase", hooks.pre_phase), load("post_phase", hooks.post_phase)
    if problems:
        raise ConfigError("\n".join(dict.fromkeys(problems)))
    load_local_models(workflow)
    return CompiledWorkflow(workflow, name, pre_hooks, post_hooks, runners)


def load_local_models(workflow: WorkflowFile) -> None:
    """Start loading the local embedding models the workflow's stores use, in the background:
    the flow run's start-up hides the load, instead of the first phase's query deadline."""
    for spec in workflow.stores.values():
        embedder = getattr(spec, "embedder", None)
        if isinstance(embedder, LocalEmbedderSpec):
            load_in_background(embedder.model)


def import_problems(workflow: WorkflowFile) -> list[str]:
    """Every hook and runner of every workflow that cannot be imported or called, one located
    line each (what `animus preflight` reports); empty when all import."""
    problems: list[str] = []
    for name in workflow.workflows:
        try:
            compile_workflow(workflow, name)
        except ConfigError as exc:
            problems += str(exc).splitlines()
    return list(dict.fromkeys(problems))


@dataclass
class PhaseResult:
    id: str
    agent: str
    output: Any
    memory_context: MemoryContext
    duration_ms: float = 0.0

    def to_json(self) -> dict[str, Any]:
        context = self.memory_context
        return {
            "id": self.id,
            "agent": self.agent,
            "output": self.output,
            "memory_context": {
                "items": [
                    {"binding": i.binding, "key": i.key, "score": i.score, "tokens": i.tokens}
                    for i in context.items
                ],
                "tokens": context.tokens,
                "text": context.text,
            },
        }


@dataclass
class RunState:
    """One flow run's shared services: budget ledger, counter, audit trail, stores, and the
    outbox of the audit's hand-offs to Prefect (None outside Prefect)."""

    compiled: CompiledWorkflow
    task_id: str | None
    flow_run_id: str | None
    budget: TokenBudget
    counter: TokenCounter
    audit: AuditTrail
    plugins: PluginRegistry
    outbox: Outbox | None = None
    results: list[PhaseResult] = field(default_factory=list)
    log: logging.Logger | logging.LoggerAdapter[Any] = logger  # the flow run's, in Prefect

    @classmethod
    def start(
        cls,
        compiled: CompiledWorkflow,
        task_id: str | None,
        flow_run_id: str | None,
        sinks: list[AuditSink],
        outbox: Outbox | None,
        log: logging.Logger | logging.LoggerAdapter[Any] = logger,
        plugins: PluginRegistry | None = None,
    ) -> RunState:
        workflow = compiled.workflow
        if workflow.audit.path:
            sinks = [*sinks, JsonlSink(workflow.resolve_path(workflow.audit.path))]
        return cls(
            compiled=compiled,
            task_id=task_id,
            flow_run_id=flow_run_id,
            budget=TokenBudget(workflow.budget.flow_tokens, workflow.budget.phase_tokens),
            counter=shared_counter(workflow.budget.encoding),
            audit=AuditTrail(sinks),
            plugins=plugins or PluginRegistry(workflow),
            outbox=outbox,
            log=log,
        )

    def sending(self) -> contextlib.AbstractAsyncContextManager[None]:
        """While the runner works, the outbox sends the audit to Prefect (see `Outbox`)."""
        return contextlib.nullcontext() if self.outbox is None else self.outbox.sending()

    def summary(self) -> dict[str, Any]:
        """The `animus run --json` document."""
        return {
            "flow_run_id": self.flow_run_id,
            "workflow": self.compiled.name,
            "phases": [result.to_json() for result in self.results],
            "budget": {
                "flow_tokens": self.budget.flow_tokens,
                "used": self.budget.used(),
                "remaining": self.budget.flow_remaining(),
            },
            "degraded": degraded_ops(self.audit.events()),
        }

    def degraded_message(self) -> str | None:
        """`2 memory operations degraded: ...`, or None when nothing degraded."""
        return degraded_message(self.audit.events())


def render_prompt(template: str, fields: dict[str, str]) -> str:
    return template.format(**fields)


def _uses_task_id(template: str) -> bool:
    return "task_id" in template_fields(template)  # templates were checked at load


def missing_task_id_warning(compiled: CompiledWorkflow, task_id: str | None) -> str | None:
    """The one warning for a run without a task id whose templates use `{task_id}`: it names
    every prompt and binding key that renders it empty."""
    if task_id:
        return None
    workflow, uses = compiled.workflow, []
    for phase in compiled.phases:
        if _uses_task_id(phase.prompt):
            uses.append(f"the prompt of phase {phase.id!r}")
        bindings = [
            *workflow.agents[phase.agent].memory_bindings,
            *workflow.workflows[compiled.name].memory_bindings,
        ]
        for binding in bindings:
            if (
                binding.query_strategy == "key"
                and binding.applies_to(phase.id)
                and _uses_task_id(binding.key or "")
            ):
                uses.append(f"the key of binding {binding.binding!r} in phase {phase.id!r}")
    if not uses:
        return None
    return (
        f"no task id: {{task_id}} renders empty in {', '.join(dict.fromkeys(uses))}; "
        "pass --task-id ID (or the flow's task_id parameter)"
    )


def charge_prompt(state: RunState, phase_id: str, tokens: int, note: str = "") -> None:
    """Deduct a phase's prompt tokens. The runner gets the whole prompt, so a prompt over the
    phase cap or the flow's remainder is charged in full, but never silently: the run's log
    warns and the ledger line says which cap it broke."""
    overruns = state.budget.overruns(phase_id, tokens)
    if overruns:
        state.log.warning(
            "phase %r: %d prompt tokens%s are %s; charged in full, the runner gets all of them",
            phase_id,
            tokens,
            f" ({note})" if note else "",
            " and ".join(overruns),
        )
    state.budget.deduct(phase_id, "prompt", tokens, note="; ".join(filter(None, [note, *overruns])))


async def _call_hook(stage: str, name: str, hook: Hook, ctx: PhaseContext) -> None:
    try:
        result = hook(ctx)
        if inspect.isawaitable(result):
            await result
    except PhaseFailed:
        raise
    except (Exception, SystemExit) as exc:  # SystemExit: user code calling sys.exit()
        raise user_code_failed(f"{stage} hook {name!r}", ctx.phase.id, exc) from exc


async def run_phase(state: RunState, phase: PhaseConfig) -> PhaseResult:
    """One phase: contract, pre-phase hooks, runner, post-phase hooks, audit artifacts.

    The phase's artifacts are queued whatever happens, a failure included: a failed phase's
    audit is the one a person needs most.
    """
    started = time.perf_counter()
    compiled, workflow = state.compiled, state.compiled.workflow
    contract = RuntimeContract(
        project_id=workflow.project_id,
        workflow=compiled.name,
        phase_id=phase.id,
        agent_id=phase.agent,
        task_id=state.task_id,
        flow_run_id=state.flow_run_id,
        prompt="",
    )
    ctx = PhaseContext(
        workflow,
        compiled.name,
        phase,
        workflow.agents[phase.agent],
        contract,
        state.budget,
        state.counter,
        state.audit,
        state.plugins,
    )
    contract.prompt = render_prompt(phase.prompt, ctx.template_fields())
    failure: str | None = None
    try:
        await _run_phase(state, ctx)
    except BaseException as exc:
        failure = failure_text(exc)
        raise
    finally:
        queue_phase_artifacts(state, ctx, failure)
    result = PhaseResult(
        phase.id,
        phase.agent,
        ctx.output,
        contract.memory_context,
        round((time.perf_counter() - started) * 1000, 3),
    )
    state.results.append(result)
    return result


async def _run_phase(state: RunState, ctx: PhaseContext) -> None:
    compiled, contract, phase = state.compiled, ctx.contract, ctx.phase
    charge_prompt(state, phase.id, state.counter.count(contract.prompt))
    contract.budget = state.budget.snapshot(phase.id)
    counted = contract.prompt
    for name, hook in compiled.pre_hooks:
        await _call_hook("pre_phase", name, hook, ctx)
    if contract.prompt != counted:  # a hook rewrote it: charge what the runner will get
        grown = state.counter.count(contract.prompt) - state.counter.count(counted)
        if grown > 0:
            charge_prompt(state, phase.id, grown, note="prompt grown by pre-phase hooks")
            contract.budget = state.budget.snapshot(phase.id)
    runner = compiled.runners[phase.agent]
    async with state.sending():
        if isinstance(runner, CommandRunner):
            ctx.output = await run_command_runner(runner, contract, ctx.workflow.base_dir)
        else:
            ctx.output = await call_python_runner(
                runner.target, runner.path, contract, timeout_s=runner.timeout_s
            )
    for name, hook in compiled.post_hooks:
        await _call_hook("post_phase", name, hook, ctx)


def failure_text(exc: BaseException) -> str:
    """What a failed phase's artifacts say about why it failed: one line, secrets redacted
    (a phase failure's message already names the hook or runner)."""
    if isinstance(exc, asyncio.CancelledError):
        return "the phase was cancelled"
    text = str(exc) if isinstance(exc, AnimusError) else f"{type(exc).__name__}: {exc}"
    return redact(" ".join(text.split())).text


def queue_phase_artifacts(state: RunState, ctx: PhaseContext, failure: str | None) -> None:
    """Queue a phase's `memory-ops` and `memory-context` artifacts (in the phase's task run).

    They are rendered when sent, off the phase's path: nothing they show changes once the
    phase is over, except the budget, whose figures are taken now.
    """
    if state.outbox is None:
        return
    phase_id = ctx.phase.id
    events = state.audit.events(phase_id)
    context, pack = ctx.contract.memory_context, ctx.state.get(PACK_STATE_KEY)
    left = budget_left(state.budget, phase_id, ctx.bindings)
    queue_table_artifact(
        state.outbox,
        artifact_key("memory-ops", phase_id),
        lambda: ops_table(events),
        f"Memory operations of phase {phase_id}" + (" (failed)" if failure else ""),
    )
    queue_markdown_artifact(
        state.outbox,
        artifact_key("memory-context", phase_id),
        lambda: context_markdown(phase_id, context, pack, left, events, failure),
        f"What phase {phase_id} received from memory" + (" (failed)" if failure else ""),
    )


def finish_run(state: RunState) -> None:
    """Log how the run degraded, if it did, and queue its budget ledger artifact."""
    if message := state.degraded_message():
        state.log.warning("%s", message)
    if state.outbox is not None:
        queue_markdown_artifact(
            state.outbox,
            artifact_key("token-budget", state.compiled.name),
            lambda: budget_markdown(state.compiled.name, state.budget),
            f"Token budget ledger of workflow {state.compiled.name}",
        )


def resolve_source(source: str | Path, caller_file: str | None) -> Path:
    """A workflow path; relative ones resolve against the calling module's folder when they
    exist there (so `flows.py` next to its YAML works from any working folder)."""
    path = Path(source)
    if not path.is_absolute() and caller_file:
        beside = Path(caller_file).resolve().parent / path
        if beside.exists():
            return beside
    return path
