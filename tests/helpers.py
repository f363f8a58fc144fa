"""Shared test helpers: workflow files in tmp folders, and phase contexts without Prefect."""

from __future__ import annotations

import textwrap
from pathlib import Path

from animus_flows.budget import TokenBudget, TokenCounter
from animus_flows.config.loader import load_workflow
from animus_flows.config.models import WorkflowFile
from animus_flows.hooks.context import PhaseContext
from animus_flows.hooks.contract import RuntimeContract
from animus_flows.retrieval.audit import AuditTrail
from animus_flows.stores.registry import PluginRegistry

COUNTER = TokenCounter("cl100k_base")


def write_workflow(folder: Path, text: str, name: str = "animus.yaml") -> WorkflowFile:
    path = folder / name
    path.write_text(textwrap.dedent(text))
    return load_workflow(path)


def phase_context(
    workflow: WorkflowFile,
    workflow_name: str,
    phase_id: str,
    *,
    task_id: str | None = "T-1",
    budget: TokenBudget | None = None,
    plugins: PluginRegistry | None = None,
    audit: AuditTrail | None = None,
) -> PhaseContext:
    phase = next(p for p in workflow.workflows[workflow_name].phases if p.id == phase_id)
    fields = {
        "project_id": workflow.project_id,
        "agent_id": phase.agent,
        "task_id": task_id or "",
        "phase_id": phase.id,
    }
    contract = RuntimeContract(
        project_id=workflow.project_id,
        workflow=workflow_name,
        phase_id=phase_id,
        agent_id=phase.agent,
        task_id=task_id,
        flow_run_id="run-1",
        prompt=phase.prompt.format(**fields),
    )
    return PhaseContext(
        workflow,
        workflow_name,
        phase,
        workflow.agents[phase.agent],
        contract,
        budget or TokenBudget(workflow.budget.flow_tokens, workflow.budget.phase_tokens),
        COUNTER,
        audit or AuditTrail(),
        plugins or PluginRegistry(workflow, use_blocks=False),
    )
