"""What a person sees in the Prefect UI: a normal run, a degraded run and a failed phase.

Each run is `animus run ... --json` of a copy of the trade-desk example against a real Prefect
server; the tests then open the pages a person would open and check what they must show: the
run's state (`Degraded`, `Failed`) and why, a task run per phase, the phases' artifacts with
what was injected and the budget left, the memory-op log lines and events. The screenshots go
into docs/assets/screenshots/ with ANIMUS_UPDATE_SCREENSHOTS=1.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from animus_flows import load_workflow

try:
    from playwright.sync_api import expect
except ImportError:  # the `browser` fixture skips, or fails under CI=true, and says why
    expect = None

pytestmark = [pytest.mark.slow, pytest.mark.browser]

EVENT = "animus.memory.op"
FAULTY = Path(__file__).resolve().parents[1] / "stores" / "faulty_plugin.py"
#: The unmatched binding the example ships with: its runs end `Degraded`.
UNMATCHED = "2 unmatched (company-wiki)"


def patient(copy: Path) -> None:
    """Give the example's own bindings a long deadline: on a loaded machine the first query
    (which loads the embedding model) can pass the default 500 ms, and these tests check what
    the UI shows, not the deadline."""
    path = copy / "animus.yaml"
    text = path.read_text().replace(
        "- plugin: memory-local\n", "- plugin: memory-local\n        timeout_ms: 20000\n"
    )
    path.write_text(text)


def with_a_hanging_store(copy: Path) -> None:
    """The example, plus a news feed whose plugin never answers a query (timeout_ms 300)."""
    patient(copy)
    path = copy / "animus.yaml"
    command = f"[{sys.executable!r}, {str(FAULTY)!r}, hang-query]"
    text = path.read_text().replace(
        "stores:\n", f"stores:\n  news-feed:\n    type: jsonrpc\n    command: {command}\n", 1
    )
    text = text.replace(
        "workflows:\n  research:\n    memory_bindings:\n",
        "workflows:\n  research:\n    memory_bindings:\n"
        "      - {plugin: news-feed, binding: market-news, timeout_ms: 300}\n",
    )
    path.write_text(text)


def failing_plan(copy: Path) -> None:
    """The example with a runner that fails in the plan phase."""
    patient(copy)
    (copy / "agent.py").write_text(
        "from animus_flows.runners import echo\n\n\n"
        "def run(contract):\n"
        "    if contract.phase_id == 'plan':\n"
        "        raise RuntimeError('model down')\n"
        "    return echo(contract)\n"
    )
    path = copy / "animus.yaml"
    path.write_text(
        path.read_text().replace("runner: animus_flows.runners:echo", "runner: agent.py:run")
    )


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


def binding_of(event: dict) -> str:
    return event["resource"]["prefect.resource.id"].removeprefix("animus.binding.")


def open_artifact(page, key: str) -> None:
    """From a flow run's page, open artifact `key` from its Artifacts tab."""
    page.get_by_role("tablist").get_by_text("Artifacts", exact=True).click()
    page.get_by_text(key, exact=True).click()


def test_a_trade_desk_run_reads_in_the_prefect_ui(
    browser, prefect_ui_server, run_example, ui_page, screenshot
):
    run = run_example("trade-desk", task_id="RES-001", edit=patient)
    summary = run.summary
    message = f"2 memory operations degraded: {UNMATCHED}"
    assert run.stderr.splitlines()[-1] == message
    flow_run = prefect_ui_server.api("GET", f"/flow_runs/{run.flow_run_id}")
    flow = prefect_ui_server.api("GET", f"/flows/{flow_run['flow_id']}")
    assert flow["name"] == summary["workflow"] == "research"
    assert (flow_run["state"]["type"], flow_run["state"]["name"]) == ("COMPLETED", "Degraded")
    phases = [phase["id"] for phase in summary["phases"]]
    assert phases == ["research", "plan"]
    research = summary["phases"][0]["memory_context"]
    assert research["items"], "the example's research phase injects memories"
    page = ui_page

    # The flow run: its name, its state, the flow; the memory ops as sentences in the logs.
    page.goto(f"/runs/flow-run/{run.flow_run_id}")
    heading = page.locator("header", has_text=flow_run["name"]).first
    expect(heading).to_be_visible()
    expect(heading.get_by_text("Degraded", exact=True)).to_be_visible()
    expect(heading.get_by_role("link", name=flow["name"], exact=True)).to_be_visible()
    sentence = re.compile(r"query market-context on memory-local: \d+ hits, \d+ tokens injected")
    expect(page.get_by_text(sentence).first).to_be_visible()
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

    # memory-context-research: what the phase was given, item by item, and the budget left.
    page.get_by_text("memory-context-research", exact=True).click()
    expect(page.get_by_role("heading", name="Memory context for phase research")).to_be_visible()
    expect(page.get_by_text(f"{research['tokens']} tokens", exact=False).first).to_be_visible()
    for item in research["items"]:
        row = page.get_by_role("row").filter(has_text=item["key"]).first
        expect(row).to_contain_text(item["binding"])
        expect(row).to_contain_text(f"{item['score']:.3f}")
        expect(row.get_by_role("cell", name=str(item["tokens"]), exact=True)).to_be_visible()
    expect(page.get_by_role("heading", name="Budget left after this phase")).to_be_visible()
    market = sum(i["tokens"] for i in research["items"] if i["binding"] == "market-context")
    row = page.get_by_role("row").filter(has_text="binding market-context")
    expect(row).to_have_text(
        re.compile(rf"binding market-context\s*200\s*{market}\s*{200 - market}")
    )
    expect(page.get_by_role("row").filter(has_text="phase cap (research)")).to_contain_text("2500")
    expect(page.get_by_role("row").filter(has_text="flow budget")).to_contain_text("6000")
    expect(page.get_by_text("Exact text handed to the runner")).to_be_visible()
    expect(page.get_by_text(research["text"].splitlines()[0], exact=False).first).to_be_visible()
    screenshot(page, "artifact-memory-context")

    # token-budget-research: the ledger, with what was used and what remains.
    page.go_back()
    open_artifact(page, f"token-budget-{summary['workflow']}")
    expect(page.get_by_role("heading", name="Token budget for workflow research")).to_be_visible()
    budget = summary["budget"]
    line = f"used: {budget['used']}; remaining: {budget['remaining']}"
    expect(page.get_by_text(line, exact=False)).to_be_visible()
    for phase in phases:
        expect(page.get_by_role("row").filter(has_text=phase).first).to_be_visible()

    # The event feed, filtered to this run's memory operations: one per binding and phase,
    # each named `<op> <binding>`, labelled, and linked to its phase's task run.
    expected = bindings_per_phase(run.workflow_file, summary["workflow"])
    events = prefect_ui_server.wait_for_events(
        run.flow_run_id,
        EVENT,
        until=lambda found: expected <= {(e["resource"]["animus.phase"], binding_of(e)) for e in found},
    )  # fmt: skip
    seen = {(e["resource"]["animus.phase"], binding_of(e)) for e in events}
    assert expected <= seen, f"events missing for {sorted(expected - seen)}"
    for event in events:
        resource = event["resource"]
        assert resource["prefect.resource.name"] == f"{resource['animus.op']} {binding_of(event)}"
        assert {"animus.status", "animus.latency-ms"} <= set(resource)
        roles = {related["prefect.resource.role"] for related in event["related"]}
        assert {"flow-run", "task-run", "memory-store"} <= roles
    page.goto(f"/events?resource=prefect.flow-run.{run.flow_run_id}&events={EVENT}")
    for binding in sorted({binding for _, binding in expected}):
        resource = page.get_by_text(f"animus.binding.{binding}", exact=True)
        uses = sum(1 for e in events if binding_of(e) == binding)
        expect(resource).to_have_count(uses)
    expect(page.get_by_text("Animus memory op", exact=True)).to_have_count(len(events))
    for phase in phases:  # each card links to its phase's task run
        uses = sum(1 for e in events if e["resource"]["animus.phase"] == phase)
        task_run = page.locator("a[href*='/runs/task-run/']").filter(
            has_text=re.compile(f"^{phase}$")
        )
        expect(task_run).to_have_count(uses)
    screenshot(page, "events")


def test_a_degraded_run_says_so_in_the_runs_list_its_page_logs_and_artifacts(
    browser, prefect_ui_server, run_example, ui_page, screenshot
):
    run = run_example("trade-desk", task_id="RES-002", edit=with_a_hanging_store)
    message = f"4 memory operations degraded: 2 timeout (market-news), {UNMATCHED}"
    assert run.stderr.splitlines()[-1] == message  # `animus run` says it too
    timeouts = [d for d in run.summary["degraded"] if d["status"] == "timeout"]
    assert [(d["phase"], d["binding"]) for d in timeouts] == [
        ("research", "market-news"),
        ("plan", "market-news"),
    ]
    flow_run = prefect_ui_server.api("GET", f"/flow_runs/{run.flow_run_id}")
    assert (flow_run["state"]["type"], flow_run["state"]["name"]) == ("COMPLETED", "Degraded")
    assert flow_run["state"]["message"] == message
    page = ui_page

    # The runs list: a Degraded badge where a plain Completed would hide the timeout.
    page.goto("/runs")
    listed = page.get_by_text(flow_run["name"], exact=True).locator(
        "xpath=ancestor::*[.//text()[.='Degraded']][1]"
    )
    expect(listed.get_by_text("Degraded", exact=True)).to_be_visible()

    # The run's page: the badge, the state message, the timeout as a warning in the logs.
    page.goto(f"/runs/flow-run/{run.flow_run_id}")
    heading = page.locator("header", has_text=flow_run["name"]).first
    expect(heading.get_by_text("Degraded", exact=True)).to_be_visible()
    timeout = page.get_by_text(
        re.compile(r"query market-news on news-feed timed out after \d+\.\d ms \(no answer "
                   r"within 300 ms\); the phase went on without it")
    ).first  # fmt: skip
    expect(timeout).to_be_visible()
    expect(page.get_by_text(message, exact=True).first).to_be_visible()  # the flow run's log
    screenshot(page, "degraded-run")
    page.get_by_role("tablist").get_by_text("Details", exact=True).click()
    expect(page.get_by_text("State Message")).to_be_visible()
    expect(page.get_by_text(message[:40], exact=False).first).to_be_visible()

    # memory-context-research: says it degraded, and the timeout's row comes first to the eye.
    page.get_by_role("tablist").get_by_text("Logs", exact=True).click()
    open_artifact(page, "memory-context-research")
    expect(page.get_by_text("Degraded:", exact=False).first).to_be_visible()
    row = page.get_by_role("row").filter(has_text=re.compile(r"^query\s*timeout\s*market-news"))
    expect(row).to_contain_text("timeout")
    expect(row).to_contain_text("no answer within 300 ms")
    expect(page.get_by_role("heading", name="Budget left after this phase")).to_be_visible()
    screenshot(page, "degraded-memory-context")

    # The timeout's event: its page shows the status and latency labels.
    events = prefect_ui_server.wait_for_events(
        run.flow_run_id, EVENT, until=lambda found: any(
            e["resource"]["animus.status"] == "timeout" for e in found)
    )  # fmt: skip
    event = next(e for e in events if e["resource"]["animus.status"] == "timeout")
    assert event["resource"]["prefect.resource.name"] == "query market-news"
    assert float(event["resource"]["animus.latency-ms"]) >= 300
    page.goto(f"/events/event/{event['occurred'][:10]}/{event['id']}")
    expect(page.get_by_text("animus.binding.market-news", exact=True)).to_be_visible()
    page.get_by_text("Raw", exact=True).click()
    expect(page.get_by_text('"animus.status": "timeout"', exact=False)).to_be_visible()


def test_a_failed_phase_keeps_its_memory_audit(
    browser, prefect_ui_server, run_example, ui_page, screenshot
):
    run = run_example("trade-desk", task_id="RES-003", edit=failing_plan, check=False)
    assert run.returncode == 1 and run.summary is None
    failed, where = run.stderr.splitlines()[-2:]
    assert failed == "error: runner 'agent.py:run' failed in phase 'plan': RuntimeError: model down"
    flow_run_id = where.split()[3]
    assert where.endswith(f"at {prefect_ui_server.url}/runs/flow-run/{flow_run_id}")
    page = ui_page

    page.goto(f"/runs/flow-run/{flow_run_id}")
    expect(page.locator("header").get_by_text("Failed", exact=True).first).to_be_visible()
    page.get_by_role("tablist").get_by_text("Artifacts", exact=True).click()
    for key in ("memory-context-plan", "memory-ops-plan", "token-budget-research"):
        expect(page.get_by_text(key, exact=True)).to_be_visible()
    page.get_by_text("memory-context-plan", exact=True).click()
    expect(page.get_by_text("The phase failed:", exact=False)).to_be_visible()
    expect(page.get_by_text("RuntimeError: model down", exact=False).first).to_be_visible()
    expect(page.get_by_text("Exact text handed to the runner")).to_be_visible()
    screenshot(page, "failed-phase")
