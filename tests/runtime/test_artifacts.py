"""The markdown a person reads in the Prefect UI: the token-budget ledger and the context."""

from helpers import write_workflow

from animus_flows.budget import TokenBudget
from animus_flows.hooks.contract import InjectedItem, MemoryContext
from animus_flows.retrieval.audit import MemoryOpEvent
from animus_flows.runtime.artifacts import (
    OPS_COLUMNS,
    budget_left,
    budget_markdown,
    context_markdown,
    ops_table,
)


def test_the_budget_ledger_totals_each_phase_before_listing_every_deduction():
    budget = TokenBudget(flow_tokens=6000, phase_tokens=2500)
    budget.deduct("research", "prompt", 16)
    budget.deduct("research", "memory", 80, binding="playbook")
    budget.deduct("research", "memory", 149, binding="market")
    budget.deduct("plan", "prompt", 21)
    budget.deduct("plan", "scratchpad", 12)
    text = budget_markdown("research", budget)
    assert "Flow budget: 6000; per phase: 2500; used: 278; remaining: 5722." in text
    totals = text[text.index("| phase | prompt") : text.index("Every deduction")]
    assert totals.splitlines()[2:4] == [
        "| research | 16 | 229 | 0 | 245 |",
        "| plan | 21 | 0 | 12 | 33 |",
    ]
    rows = text[text.index("Every deduction") :].splitlines()[4:]
    assert rows[2] == "| 3 | research | memory | market | 149 |  |"
    assert len(rows) == 5


def test_a_run_without_deductions_has_an_empty_summary_and_no_caps_say_so():
    text = budget_markdown("w", TokenBudget())
    assert "Flow budget: no cap; per phase: no cap; used: 0; remaining: no cap." in text
    assert (
        "| phase | prompt | memory | scratchpad | total |\n| --- | ---: | ---: | ---: | ---: |\n\n"
        in text
    )


def test_keys_and_texts_from_stores_show_as_written_not_as_markup():
    # keys and memories come from stores an agent may write: no HTML, emphasis or links from
    # them, and no text that closes the code block early
    key = "<img src=x onerror=alert(1)>*em*`code`|[a](http://example.com)\nnext"
    text = f"[market/{key}] note\n```\n# not a heading ````\n"
    context = MemoryContext(
        items=[InjectedItem(binding="market", key=key, score=0.5, tokens=9, tier="hot")],
        tokens=9,
        text=text,
    )
    markdown = context_markdown("research", context, None)
    (row,) = [line for line in markdown.splitlines() if line.startswith("| market |")]
    assert row == (
        r"| market | hot | 0.500 | 9 | &lt;img src=x onerror=alert(1)&gt;\*em\*\`code\`\|"
        r"\[a\](http://example.com) next |"
    )
    assert "`````text\n" + text + "`````\n" in markdown


def test_the_ops_table_escapes_its_text_cells_which_the_ui_renders_as_markdown():
    # a store's error (or a task id in the scope) must not load an image from a URL when a
    # person opens the artifact
    event = MemoryOpEvent(
        op="query",
        plugin_id="wiki",
        binding="docs",
        scope={"project_id": "desk", "agent_id": None, "task_id": "<b>T</b>"},
        result_count=2,
        status="error",
        detail="HTTP 500: <img src=http://127.0.0.1:9/x.png> *down*",
    )
    (row,) = ops_table([event])
    assert row["scope"] == "project=desk/task=&lt;b&gt;T&lt;/b&gt;"
    assert row["detail"] == r"HTTP 500: &lt;img src=http://127.0.0.1:9/x.png&gt; \*down\*"
    assert (row["op"], row["status"], row["result_count"], row["latency_ms"]) == (
        "query",
        "error",
        2,
        0.0,
    )


def test_the_ops_table_puts_what_a_person_reads_first_before_the_long_columns():
    # at 1600 px the scope and the detail would push the status and latency off-screen
    assert OPS_COLUMNS[:4] == ("op", "status", "binding", "latency_ms")
    assert OPS_COLUMNS[-2:] == ("scope", "detail")
    (row,) = ops_table([MemoryOpEvent("query", "local", "market", None, latency_ms=5.9)])
    assert list(row) == list(OPS_COLUMNS)


BUDGETED = """
version: 1
project: desk
stores: {local: {type: sqlite, path: memory.db}}
budget: {flow_tokens: 1000, phase_tokens: 400}
agents:
  analyst:
    memory_bindings:
      - {plugin: local, binding: market, budget_tokens: 200}
      - {plugin: local, binding: journal, read: false, write: true}
      - {plugin: local, binding: later, inject_when: {phases: [plan]}}
workflows:
  w:
    phases: [{id: research, agent: analyst, prompt: "p"}, {id: plan, agent: analyst, prompt: "p"}]
"""


def test_memory_context_shows_the_budgets_left_as_the_phase_ended(tmp_path):
    workflow = write_workflow(tmp_path, BUDGETED)
    budget = TokenBudget(1000, 400)
    budget.deduct("research", "prompt", 30)
    budget.deduct("research", "memory", 150, binding="market")
    left = budget_left(budget, "research", workflow.agents["analyst"].memory_bindings)
    # the reading bindings of this phase only: not the write-only journal, not `later`
    assert [(b.name, b.cap, b.used, b.left) for b in left] == [
        ("binding market", 200, 150, 50),
        ("phase cap (research)", 400, 180, 220),
        ("flow budget", 1000, 180, 820),
    ]
    budget.deduct("plan", "prompt", 500)  # later phases do not change what was taken
    context = MemoryContext(items=[], tokens=0, text="")
    markdown = context_markdown("research", context, None, left)
    section = markdown[markdown.index("## Budget left after this phase") :]
    assert section.splitlines()[2:7] == [
        "| budget | cap | used | left |",
        "| --- | ---: | ---: | ---: |",
        "| binding market | 200 | 150 | 50 |",
        "| phase cap (research) | 400 | 180 | 220 |",
        "| flow budget | 1000 | 180 | 820 |",
    ]
    uncapped = budget_left(TokenBudget(), "research", [])
    assert "| flow budget | no cap | 0 | no cap |" in context_markdown(
        "research", context, None, uncapped
    )


def test_memory_context_of_a_failed_degraded_phase_says_so_first_and_lists_its_ops():
    events = [
        MemoryOpEvent("query", "slow", "market", None, phase_id="research", latency_ms=501.2,
                      status="timeout", detail="no answer within 500 ms; went on without it"),
        MemoryOpEvent("query", "nowhere", "wiki", None, phase_id="research", status="unmatched",
                      detail="no store or saved memory-store block named 'nowhere'"),
    ]  # fmt: skip
    context = MemoryContext(items=[], tokens=0, text="")
    failure = "runner 'agent.py:run' failed in phase 'research': RuntimeError: model *down*"
    lines = context_markdown("research", context, None, (), events, failure).splitlines()
    assert lines[2] == (
        r"**The phase failed:** runner 'agent.py:run' failed in phase 'research': "
        r"RuntimeError: model \*down\*"
    )
    assert lines[4] == (
        "**Degraded:** 2 memory operations degraded: 1 timeout (market), 1 unmatched (wiki)."
    )
    ops = lines[lines.index("## Memory operations") + 2 :]
    assert ops[:3] == [
        "| op | status | binding | latency ms | hits | tokens | detail |",
        "| --- | --- | --- | ---: | ---: | ---: | --- |",
        "| query | timeout | market | 501.2 | 0 | 0 | no answer within 500 ms; went on without it |",
    ]
