"""Shared test helpers: workflow files in tmp folders, phase contexts without Prefect,
processes racing to write one version, and a memory's life in a durable layer's ledger."""

from __future__ import annotations

import itertools
import subprocess
import textwrap
from pathlib import Path

from animus_flows.budget import TokenBudget, TokenCounter
from animus_flows.config.loader import load_workflow
from animus_flows.config.models import WorkflowFile
from animus_flows.hooks.context import PhaseContext
from animus_flows.hooks.contract import RuntimeContract
from animus_flows.memory import LedgerRecord, Memory, MemoryLayer
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


def race_to_one_version(racer: list[str], go: Path, *, racers: int = 4) -> tuple[int, list[str]]:
    """Start `racers` processes of `racer` (argv, each given its writer name `writer-N` last),
    each printing `ready` and then waiting for the file `go`; let them go at once and return
    the one winner's number (it printed `won 2`) and every output. Asserts each exited 0 and
    exactly one won."""
    processes = [
        subprocess.Popen([*racer, f"writer-{n}"], stdout=subprocess.PIPE, text=True)
        for n in range(racers)
    ]
    for process in processes:
        assert process.stdout.readline() == "ready\n"
    go.touch()
    outputs = [process.communicate(timeout=120)[0] for process in processes]
    assert [process.returncode for process in processes] == [0] * racers
    winners = [n for n, out in enumerate(outputs) if out == "won 2\n"]
    assert len(winners) == 1, outputs
    return winners[0], outputs


def record_a_memorys_whole_life(layer: MemoryLayer) -> tuple[Memory, list[LedgerRecord]]:
    """Remember a memory, update it, tag it and forget it through a durable `layer`, checking
    its ledger versions on the way; returns it and its ledger records, checked: each change
    with its op, version and content, each state's valid time closed by the next."""
    note = layer.remember("Releases go out on Fridays", tags=["process"])
    assert note.ledger_version == 1
    note.content = "Releases go out on Thursdays"
    assert layer.update_memory(note, expected_version=1) is True
    assert note.ledger_version == 2
    assert layer.add_tag(note.id, "calendar") is True
    assert layer.get_memory(note.id[:8]).ledger_version == 3  # a prefix reads it too
    assert layer.forget(note.id) is True
    records = layer.get_ledger_events(note.id)  # a forgotten memory's, by its full id
    assert all(isinstance(record, LedgerRecord) for record in records)
    assert [(r.op, r.version) for r in records] == [
        ("create", 1), ("update", 2), ("update", 3), ("delete", 4)
    ]  # fmt: skip
    assert [r.memory and r.memory.content for r in records] == [
        "Releases go out on Fridays",
        "Releases go out on Thursdays",
        "Releases go out on Thursdays",
        None,
    ]
    assert records[2].memory.tags == ["process", "calendar"]
    for before, after in itertools.pairwise(records):
        assert before.valid_to == after.valid_from  # each state closed by the next
        assert before.recorded_at <= after.recorded_at
    assert records[-1].valid_to is None
    return note, records
