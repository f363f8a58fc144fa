"""What a person sees in the Prefect UI after a run of the trade-desk example.

The example runs as `animus run ... --json` against a real Prefect server; the test then opens
the pages a person would open and checks what they must show: the flow and its run, a task run
per phase, the phases' artifacts with what was injected, the token budget, and the memory-op
events. The screenshots go into docs/assets/screenshots/ with ANIMUS_UPDATE_SCREENSHOTS=1.
"""

from __future__ import annotations

import pytest

from animus_flows import load_workflow

try:
    from playwright.sync_api import expect
except ImportError:  # the `browser` fixture skips, or fails under CI=true, and says why
    expect = None

pytestmark = [pytest.mark.slow, pytest.mark.browser]

EVENT = "animus.memory.op"


def bindings_per_phase(workflow_file, workflow: str) -> set[tuple[str, str]]:
    """(phase, binding) of every binding the workflow's phases use: each has at least one
    memory op, so one `animus.memory.op` event, per phase."""
    config = load_workflow(workflow_file)
    flow = config.workflows[workflow]
    return {
        (phase.id, binding.binding)
        for phase in flow.phases
        for binding in [*config.agents[phase.agent].memory_bindings, *flow.memory_bindings]
        if binding.applies_to(phase.id)
    }


def test_a_trade_desk_run_reads_in_the_prefect_ui(
    browser, prefect_ui_server, run_example, ui_page, screenshot
):
    run = run_example("trade-desk", task_id="RES-001")
    summary = run.summary
    flow_run = prefect_ui_server.api("GET", f"/flow_runs/{run.flow_run_id}")
    flow = prefect_ui_server.api("GET", f"/flows/{flow_run['flow_id']}")
    assert flow["name"] == summary["workflow"] == "research"
    phases = [phase["id"] for phase in summary["phases"]]
    assert phases == ["research", "plan"]
    research = summary["phases"][0]["memory_context"]
    assert research["items"], "the example's research phase injects memories"
    page = ui_page

    # The flow run: its name, its state, the flow it belongs to; then a task run per phase.
    page.goto(f"/runs/flow-run/{run.flow_run_id}")
    heading = page.locator("header", has_text=flow_run["name"]).first
    expect(heading).to_be_visible()
    expect(heading.get_by_text("Completed", exact=True)).to_be_visible()
    expect(heading.get_by_role("link", name=flow["name"], exact=True)).to_be_visible()
    expect(page.get_by_text("memory_op", exact=False).first).to_be_visible()  # the logs tab
    screenshot(page, "flow-run")

    tabs = page.get_by_role("tablist")
    tabs.get_by_text("Task Runs", exact=True).click()
    for phase in phases:
        expect(page.get_by_role("link", name=phase, exact=True).first).to_be_visible()

    # The artifacts tab: the flow run's budget, each phase's context and operations.
    tabs.get_by_text("Artifacts", exact=True).click()
    keys = [f"token-budget-{summary['workflow']}"]
    keys += [f"{kind}-{phase}" for phase in phases for kind in ("memory-context", "memory-ops")]
    for key in keys:
        expect(page.get_by_text(key, exact=True)).to_be_visible()

    # memory-context-research: what the phase was given, item by item, with its tokens.
    page.get_by_text("memory-context-research", exact=True).click()
    expect(page.get_by_role("heading", name="Memory context for phase research")).to_be_visible()
    expect(page.get_by_text(f"{research['tokens']} tokens", exact=False).first).to_be_visible()
    for item in research["items"]:
        row = page.get_by_role("row").filter(has_text=item["key"]).first
        expect(row).to_contain_text(item["binding"])
        expect(row).to_contain_text(f"{item['score']:.3f}")
        expect(row.get_by_role("cell", name=str(item["tokens"]), exact=True)).to_be_visible()
    expect(page.get_by_text("Exact text handed to the runner")).to_be_visible()
    expect(page.get_by_text(research["text"].splitlines()[0], exact=False).first).to_be_visible()
    screenshot(page, "artifact-memory-context")

    # token-budget-research: the ledger, with what was used and what remains.
    page.go_back()
    page.get_by_role("tablist").get_by_text("Artifacts", exact=True).click()
    page.get_by_text(f"token-budget-{summary['workflow']}", exact=True).click()
    expect(page.get_by_role("heading", name="Token budget for workflow research")).to_be_visible()
    budget = summary["budget"]
    line = f"used: {budget['used']}; remaining: {budget['remaining']}"
    expect(page.get_by_text(line, exact=False)).to_be_visible()
    for phase in phases:
        expect(page.get_by_role("row").filter(has_text=phase).first).to_be_visible()

    # The event feed, filtered to this run's memory operations: one per binding and phase.
    expected = bindings_per_phase(run.workflow_file, summary["workflow"])
    events = prefect_ui_server.wait_for_events(
        run.flow_run_id,
        EVENT,
        until=lambda found: expected <= {
            (e["resource"]["animus.phase"], e["resource"]["prefect.resource.name"]) for e in found
        },
    )  # fmt: skip
    seen = {(e["resource"]["animus.phase"], e["resource"]["prefect.resource.name"]) for e in events}
    assert expected <= seen, f"events missing for {sorted(expected - seen)}"
    page.goto(f"/events?resource=prefect.flow-run.{run.flow_run_id}&events={EVENT}")
    for binding in sorted({binding for _, binding in expected}):
        resource = page.get_by_text(f"animus.binding.{binding}", exact=True)
        uses = sum(1 for e in events if e["resource"]["prefect.resource.name"] == binding)
        expect(resource).to_have_count(uses)
    expect(page.get_by_text("Animus memory op", exact=True)).to_have_count(len(events))
    screenshot(page, "events")
