"""What a phase hook receives: the phase's configuration, its contract and the run's services.

Hooks are `def hook(ctx: PhaseContext) -> None` (or `async def`). Pre-phase hooks enrich
`ctx.contract` before the runner starts; post-phase hooks see `ctx.output` afterwards.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from animus_flows.budget import TokenBudget, TokenCounter
from animus_flows.config.models import AgentConfig, MemoryBinding, PhaseConfig, WorkflowFile
from animus_flows.hooks.contract import RuntimeContract
from animus_flows.protocol import Scope
from animus_flows.retrieval.audit import AuditTrail, MemoryOpEvent, Op
from animus_flows.stores.registry import PluginRegistry


@dataclass
class PhaseContext:
    """One phase of one flow run, as hooks see it."""

    workflow: WorkflowFile
    workflow_name: str
    phase: PhaseConfig
    agent: AgentConfig
    contract: RuntimeContract
    budget: TokenBudget
    counter: TokenCounter
    audit: AuditTrail
    plugins: PluginRegistry
    output: Any = None
    state: dict[str, Any] = field(default_factory=dict)  # shared between a phase's hooks

    @property
    def bindings(self) -> list[MemoryBinding]:
        """The agent's bindings, then the workflow's."""
        return [
            *self.agent.memory_bindings,
            *self.workflow.workflows[self.workflow_name].memory_bindings,
        ]

    def template_fields(self) -> dict[str, str]:
        return {
            "project_id": self.contract.project_id,
            "agent_id": self.contract.agent_id,
            "task_id": self.contract.task_id or "",
            "phase_id": self.contract.phase_id,
        }

    def record_op(
        self, op: Op, binding: MemoryBinding, scope: Scope | None, **fields: Any
    ) -> MemoryOpEvent:
        """Audit one memory operation of this phase through `binding`; `fields` are the
        event's measurements (status, detail, latency_ms, ...)."""
        return self.audit.record(
            MemoryOpEvent(
                op=op,
                plugin_id=binding.plugin,
                binding=binding.binding,
                scope=MemoryOpEvent.scope_json(scope),
                phase_id=self.phase.id,
                agent_id=self.contract.agent_id,
                task_id=self.contract.task_id,
                flow_run_id=self.contract.flow_run_id,
                **fields,
            )
        )

    def scope_for(self, binding: MemoryBinding) -> Scope:
        """The binding's scope, filled from the run: a binding never names another agent."""
        project = self.contract.project_id
        if binding.scope.kind == "agent":
            return Scope(project, agent_id=self.contract.agent_id)
        if binding.scope.kind == "task":
            if not self.contract.task_id:
                raise ValueError(
                    f"binding {binding.binding!r} has scope kind task but the run has no task_id; "
                    "pass --task-id (or the flow's task_id parameter)"
                )
            return Scope(project, task_id=self.contract.task_id)
        return Scope(project)
