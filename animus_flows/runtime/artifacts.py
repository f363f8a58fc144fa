"""What a person reads in the Prefect UI: artifact keys and their tables and markdown.

Pure rendering; `runtime.sinks` sends the results to Prefect off the phase's critical path.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from animus_flows.budget import CATEGORIES, PackResult, TokenBudget
from animus_flows.config.models import MemoryBinding
from animus_flows.hooks.contract import MemoryContext
from animus_flows.retrieval.audit import MemoryOpEvent, degraded_message

MAX_KEY_LENGTH = 96


def artifact_key(prefix: str, ident: str) -> str:
    """`prefix-ident` with `ident` slugged to lowercase letters, digits and dashes.

    Different ids that slug alike get a short hash suffix so their artifacts never collide.
    """
    slug = re.sub(r"[^a-z0-9]+", "-", ident.lower()).strip("-")
    if slug != ident:
        slug = f"{slug}-{hashlib.sha1(ident.encode()).hexdigest()[:6]}".strip("-")
    return f"{prefix}-{slug}"[:MAX_KEY_LENGTH].rstrip("-")


# What a person reads first comes first: at 1600 px the long columns (scope, detail) would
# push the status and the latency off-screen.
OPS_COLUMNS = (
    "op",
    "status",
    "binding",
    "latency_ms",
    "result_count",
    "tokens_deducted",
    "plugin_id",
    "bytes_in",
    "bytes_out",
    "scope",
    "detail",
)


def ops_table(events: list[MemoryOpEvent]) -> list[dict[str, Any]]:
    """The rows of a phase's `memory-ops` table artifact. The UI renders each cell as markdown
    (HTML included), so text cells are escaped like the markdown artifacts' cells."""
    rows = []
    for event in events:
        row = event.to_json()
        scope = row["scope"] or {}
        row["scope"] = "/".join(f"{k.removesuffix('_id')}={v}" for k, v in scope.items() if v)
        rows.append(
            {
                column: _cell(row[column]) if isinstance(row[column], str) else row[column]
                for column in OPS_COLUMNS
            }
        )
    return rows


# Characters that start markup inside a line of markdown, escaped with a backslash; the UI
# also renders raw HTML, whose characters become entities (which GFM's autolinks stop at).
_MARKUP = re.compile(r"([\\`*_\[\]|~!])")
_HTML = str.maketrans({"&": "&amp;", "<": "&lt;", ">": "&gt;"})


def _cell(text: str) -> str:
    """`text` as literal text in a table cell: keys and notes come from stores and agents, and
    `<b>`, `*x*` or `[a](b)` in them must show as written, not as markup."""
    return _MARKUP.sub(r"\\\1", " ".join(text.splitlines()).translate(_HTML))


def _fenced(text: str) -> list[str]:
    """`text` in a code block whose fence no backtick run inside it can close."""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return [f"{fence}text", text, fence]


@dataclass(frozen=True)
class BudgetLine:
    """One budget as a phase left it: its cap (None: no cap) and the tokens used against it."""

    name: str
    cap: int | None
    used: int

    @property
    def left(self) -> int | None:
        return None if self.cap is None else max(0, self.cap - self.used)


def budget_left(
    budget: TokenBudget, phase_id: str, bindings: Sequence[MemoryBinding]
) -> list[BudgetLine]:
    """The budgets of a phase as it ends: each reading binding's, the phase cap, the flow's.

    Taken when the phase ends (later phases spend the flow budget); a binding's line counts
    what it injected in this phase.
    """
    ledger = budget.ledger
    lines = []
    for binding in bindings:
        if binding.read and binding.query_strategy != "none" and binding.applies_to(phase_id):
            used = sum(
                entry.tokens
                for entry in ledger
                if entry.phase_id == phase_id and entry.binding == binding.binding
            )
            lines.append(BudgetLine(f"binding {binding.binding}", binding.budget_tokens, used))
    lines.append(BudgetLine(f"phase cap ({phase_id})", budget.phase_tokens, budget.used(phase_id)))
    lines.append(BudgetLine("flow budget", budget.flow_tokens, budget.used()))
    return lines


def context_markdown(
    phase_id: str,
    context: MemoryContext,
    pack: PackResult | None,
    budgets: Sequence[BudgetLine] = (),
    events: Sequence[MemoryOpEvent] = (),
    failure: str | None = None,
) -> str:
    """What was injected into a phase, with scores and tokens; the budgets it left; its
    memory operations; the exact text; what was left out. A failed phase says why first."""
    lines = [f"# Memory context for phase `{phase_id}`", ""]
    if failure is not None:
        lines += [f"**The phase failed:** {_cell(failure)}", ""]
    degraded = [event for event in events if event.degraded]
    if degraded:
        lines += [f"**Degraded:** {_cell(degraded_message(degraded) or '')}.", ""]
    if not context.items:
        why = ""
        if pack is not None and pack.dropped:
            reasons = sorted({d.reason for d in pack.dropped})
            why = f" ({'; '.join(reasons)})"
        lines += [f"Nothing was injected{why}.", ""]
    else:
        lines += [
            f"{len(context.items)} item(s), {context.tokens} tokens.",
            "",
            "| binding | tier | score | tokens | key |",
            "| --- | --- | ---: | ---: | --- |",
        ]
        lines += [
            f"| {_cell(i.binding)} | {i.tier or 'untiered'} | {i.score:.3f} | {i.tokens} "
            f"| {_cell(i.key)} |"
            for i in context.items
        ]
        lines.append("")
    if budgets:
        lines += [
            "## Budget left after this phase",
            "",
            "| budget | cap | used | left |",
            "| --- | ---: | ---: | ---: |",
        ]
        lines += [
            f"| {_cell(b.name)} | {'no cap' if b.cap is None else b.cap} | {b.used} "
            f"| {'no cap' if b.left is None else b.left} |"
            for b in budgets
        ]
        lines.append("")
    if events:
        lines += [
            "## Memory operations",
            "",
            "| op | status | binding | latency ms | hits | tokens | detail |",
            "| --- | --- | --- | ---: | ---: | ---: | --- |",
        ]
        lines += [
            f"| {e.op} | {e.status} | {_cell(e.binding or e.plugin_id)} | {e.latency_ms:.1f} "
            f"| {e.result_count} | {e.tokens_deducted} | {_cell(e.detail)} |"
            for e in events
        ]
        lines.append("")
    if context.items:
        lines += [
            "## Exact text handed to the runner",
            "",
            *_fenced(context.text.rstrip("\n")),
            "",
        ]
    if pack is not None and pack.dropped:
        lines += ["## Left out", "", "| binding | key | reason |", "| --- | --- | --- |"]
        lines += [
            f"| {_cell(d.candidate.binding)} | {_cell(d.candidate.key)} | {d.reason} |"
            for d in pack.dropped
        ]
    return "\n".join(lines).rstrip("\n") + "\n"


def budget_markdown(workflow: str, budget: TokenBudget) -> str:
    """The ledger of every deduction in the flow run."""

    def cap(value: int | None) -> str:
        return "no cap" if value is None else str(value)

    lines = [
        f"# Token budget for workflow `{workflow}`",
        "",
        f"Flow budget: {cap(budget.flow_tokens)}; per phase: {cap(budget.phase_tokens)}; "
        f"used: {budget.used()}; remaining: {cap(budget.flow_remaining())}.",
        "",
        f"| phase | {' | '.join(CATEGORIES)} | total |",
        "| --- |" + " ---: |" * (len(CATEGORIES) + 1),
    ]
    for phase_id in dict.fromkeys(entry.phase_id for entry in budget.ledger):
        spent = [budget.used(phase_id, category) for category in CATEGORIES]
        lines.append(f"| {_cell(phase_id)} | {' | '.join(map(str, spent))} | {sum(spent)} |")
    lines += [
        "",
        "Every deduction, in order:",
        "",
        "| # | phase | category | binding | tokens | note |",
        "| ---: | --- | --- | --- | ---: | --- |",
    ]
    for index, entry in enumerate(budget.ledger, start=1):
        lines.append(
            f"| {index} | {_cell(entry.phase_id)} | {entry.category} | "
            f"{_cell(entry.binding or '')} | {entry.tokens} | {_cell(entry.note)} |"
        )
    return "\n".join(lines) + "\n"
