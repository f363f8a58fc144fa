"""The markdown a person reads in the Prefect UI: the token-budget ledger and the context."""

from animus_flows.budget import TokenBudget
from animus_flows.hooks.contract import InjectedItem, MemoryContext
from animus_flows.retrieval.audit import MemoryOpEvent
from animus_flows.runtime.artifacts import budget_markdown, context_markdown, ops_table


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
        r"| market | &lt;img src=x onerror=alert(1)&gt;\*em\*\`code\`\|\[a\](http://example.com)"
        " next | hot | 0.500 | 9 |"
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
