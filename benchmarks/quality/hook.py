"""Recall through the `memory_bindings` hook itself, as a workflow run would inject memories.

Each corpus scope is an agent's scope in one SQLite store; each question is a phase prompt of
that agent, with one binding (`plugin: quality`, `binding: corpus`, `scope: {kind: agent}`)
whose `budget_tokens` is the budget measured and whose `top_k` is left out (as many as fit).
Recall is the share of a question's relevant keys among the items the hook injected: what the
held-out benchmark of issue 26 measures. The binding's defaults (no `budget_tokens` either)
are measured as their own column. The hook's latency is timed per call.
"""

from __future__ import annotations

import statistics
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from quality.evaluate import KINDS, Corpus

from animus_flows.budget import TokenBudget, shared_counter
from animus_flows.config.loader import load_workflow
from animus_flows.hooks import memory_bindings
from animus_flows.hooks.context import PhaseContext
from animus_flows.hooks.contract import RuntimeContract
from animus_flows.protocol import Scope
from animus_flows.retrieval.audit import AuditTrail
from animus_flows.stores.registry import PluginRegistry

PROJECT = "quality"
DEFAULTS = "defaults"  # the column of a binding with no budget_tokens and no top_k


def workflow_text(scopes: Sequence[str], budgets: Sequence[int], store: str) -> str:
    """A workflow file: the store, and per corpus scope an agent with one binding per budget
    (and one with the defaults), each in a workflow of its own."""
    lines = ["version: 1", f"project: {PROJECT}", "stores:", f"  quality: {store}", "agents:"]
    for scope in scopes:
        lines.append(f"  {scope}: {{}}")
    lines.append("workflows:")
    for column in [*budgets, DEFAULTS]:
        budget = "" if column == DEFAULTS else f", budget_tokens: {column}"
        lines += [
            f"  ask-{column}:",
            "    memory_bindings:",
            f"      - {{plugin: quality, binding: corpus, scope: {{kind: agent}}{budget}}}",
            "    phases:",
            *(f"      - {{id: {s}, agent: {s}, prompt: q}}" for s in scopes),
        ]
    return "\n".join(lines) + "\n"


@dataclass
class HookEvaluation:
    """Recall per question kind and column (a budget, or `defaults`), and the hook's times."""

    columns: list[str]
    recall: dict[str, dict[str, list[float]]] = field(default_factory=dict)  # kind -> column
    latency_ms: list[float] = field(default_factory=list)

    def table(self) -> str:
        head = ["kind", "questions", *(f"hook, {c} tokens" if c != DEFAULTS else "hook, binding"
                                       " defaults" for c in self.columns)]  # fmt: skip
        lines = ["| " + " | ".join(head) + " |", "|" + "|".join(" --- " for _ in head) + "|"]
        kinds = [k for k in KINDS if k in self.recall] + ["overall"]
        for kind in kinds:
            rows = (
                self.recall[kind]
                if kind != "overall"
                else {c: [v for k in self.recall for v in self.recall[k][c]] for c in self.columns}
            )
            n = len(rows[self.columns[0]])
            cells = [kind, str(n), *(f"{sum(rows[c]) / n:.3f}" for c in self.columns)]
            lines.append("| " + " | ".join(cells) + " |")
        times = sorted(self.latency_ms)
        p95 = times[int(0.95 * (len(times) - 1))]
        lines.append(
            f"\nhook latency: p50 {statistics.median(times):.2f} ms, p95 {p95:.2f} ms "
            f"({len(times)} calls)"
        )
        return "\n".join(lines)


async def evaluate_hook(
    corpus: Corpus, budgets: Sequence[int], *, store: str = "{type: sqlite, path: quality.db}"
) -> HookEvaluation:
    """Load `corpus` into the store `store` (a `stores:` entry) and run every question through
    the hook once per column."""
    folder = tempfile.TemporaryDirectory(prefix="animus-quality-hook-")
    scopes = [scope.id for scope in corpus.scopes]
    path = Path(folder.name) / "animus.yaml"
    path.write_text(workflow_text(scopes, budgets, store))
    workflow = load_workflow(path)
    plugins = PluginRegistry(workflow, use_blocks=False)
    columns = [str(b) for b in budgets] + [DEFAULTS]
    result = HookEvaluation(columns)
    try:
        quality = await plugins.resolve("quality")
        assert quality is not None
        for scope in corpus.scopes:
            entries: list[Any] = [
                (
                    Scope(PROJECT, agent_id=scope.id),
                    m.key,
                    {"content": m.text},
                    {"session_date": m.session_date} if m.session_date else None,
                )
                for m in scope.memories
            ]
            await quality.put_many(entries)
        if hasattr(quality, "optimize"):
            await quality.optimize()
        counter = shared_counter(workflow.budget.encoding)
        for question in corpus.questions:
            per_kind = result.recall.setdefault(question.kind, {c: [] for c in columns})
            for column in columns:
                name = f"ask-{column}"
                phase = next(p for p in workflow.workflows[name].phases if p.id == question.scope)
                ctx = PhaseContext(
                    workflow,
                    name,
                    phase,
                    workflow.agents[phase.agent],
                    RuntimeContract(
                        project_id=PROJECT,
                        workflow=name,
                        phase_id=phase.id,
                        agent_id=phase.agent,
                        prompt=question.question,
                    ),
                    TokenBudget(),
                    counter,
                    AuditTrail(),
                    plugins,
                )
                started = time.perf_counter()
                await memory_bindings(ctx)
                result.latency_ms.append((time.perf_counter() - started) * 1000)
                injected = {item.key for item in ctx.contract.memory_context.items}
                wanted = set(question.relevant)
                per_kind[column].append(len(wanted & injected) / len(wanted))
    finally:
        await plugins.aclose()
        folder.cleanup()
    return result
