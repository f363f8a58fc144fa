"""A flow whose bindings point at a hanging and at a crashing plugin process still finishes:
each faulty binding costs at most its timeout_ms per phase and is audited, the others inject."""

import json
import sys
import time
from pathlib import Path

import pytest
from helpers import write_workflow

from animus_flows import workflow_flow
from animus_flows.protocol import Scope
from animus_flows.stores import SQLiteStore

FAULTY = Path(__file__).resolve().parents[1] / "stores" / "faulty_plugin.py"

pytestmark = pytest.mark.usefixtures("prefect_api")


def faulty_command(mode: str) -> str:
    """The YAML flow sequence that starts the faulty plugin in `mode`."""
    return f"[{sys.executable!r}, {str(FAULTY)!r}, {mode}]"


def plugin_processes() -> list[str]:
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            text = cmdline.read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if str(FAULTY) in text:
            found.append(text)
    return found


async def test_hanging_and_crashing_plugins_degrade_their_bindings_only(tmp_path):
    workflow = write_workflow(
        tmp_path,
        f"""
        version: 1
        project: desk
        audit: {{path: audit.jsonl}}
        stores:
          local: {{type: sqlite, path: memory.db}}
          hung: {{type: jsonrpc, command: {faulty_command("hang-query")}}}
          broken: {{type: jsonrpc, command: {faulty_command("exit-early")}}}
        agents:
          analyst:
            memory_bindings:
              - {{plugin: local, binding: market, scope: {{kind: agent}}}}
              - {{plugin: hung, binding: slow-wiki, timeout_ms: 300}}
              - {{plugin: broken, binding: dead-wiki, timeout_ms: 300}}
        workflows:
          research:
            hooks: {{post_phase: []}}
            phases:
              - {{id: research, agent: analyst, prompt: "EUR/USD research"}}
              - {{id: plan, agent: analyst, prompt: "EUR/USD plan"}}
    """,
    )
    store = SQLiteStore(tmp_path / "memory.db")
    await store.put(Scope("desk", agent_id="analyst"), "fx", "EUR/USD ranges 1.07-1.10")
    await store.aclose()

    started = time.perf_counter()
    state = await workflow_flow(workflow, "research")(task_id="T-1", return_state=True)
    elapsed = time.perf_counter() - started
    # a COMPLETED-type state that says what degraded, and the summary lists each operation
    assert state.is_completed() and state.name == "Degraded"
    assert (
        state.message == "4 memory operations degraded: 2 timeout (slow-wiki), 2 error (dead-wiki)"
    )
    summary = await state.aresult()
    assert [(d["phase"], d["binding"], d["status"]) for d in summary["degraded"]] == [
        ("research", "slow-wiki", "timeout"),
        ("research", "dead-wiki", "error"),
        ("plan", "slow-wiki", "timeout"),
        ("plan", "dead-wiki", "error"),
    ]
    assert summary["degraded"][0]["detail"] == "no answer within 300 ms; went on without it"

    for phase in summary["phases"]:
        assert [item["key"] for item in phase["memory_context"]["items"]] == ["fx"]
    events = [json.loads(line) for line in (tmp_path / "audit.jsonl").read_text().splitlines()]
    by_binding: dict[str, list[dict]] = {}
    for event in events:
        by_binding.setdefault(event["binding"], []).append(event)
    assert [e["status"] for e in by_binding["market"]] == ["ok", "ok"]
    assert [e["status"] for e in by_binding["slow-wiki"]] == ["timeout", "timeout"]
    assert all(e["latency_ms"] < 300 + 150 for e in by_binding["slow-wiki"])
    assert [e["status"] for e in by_binding["dead-wiki"]] == ["error", "error"]
    assert all(e["latency_ms"] < 300 + 150 for e in by_binding["dead-wiki"])
    assert elapsed < 20  # two phases: the faulty bindings add at most 2 x 300 ms
    assert plugin_processes() == []  # the run reaped every plugin process it started


async def test_a_store_that_refuses_writes_is_audited_as_denied_and_the_run_goes_on(tmp_path):
    workflow = write_workflow(
        tmp_path,
        f"""
        version: 1
        project: desk
        audit: {{path: audit.jsonl}}
        stores:
          corpus: {{type: jsonrpc, command: {faulty_command("read-only")}}}
        agents:
          analyst:
            memory_bindings:
              - {{plugin: corpus, binding: journal, write: true}}
        workflows:
          research:
            phases:
              - {{id: research, agent: analyst, prompt: "EUR/USD research"}}
    """,
    )
    summary = await workflow_flow(workflow, "research")(task_id="T-1")
    assert summary["phases"][0]["id"] == "research"
    events = [json.loads(line) for line in (tmp_path / "audit.jsonl").read_text().splitlines()]
    (put,) = [event for event in events if event["op"] == "put"]
    assert put["status"] == "denied" and "this corpus is read-only" in put["detail"]
