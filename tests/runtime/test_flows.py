"""Real flows under one session-wide Prefect test server: tasks, artifacts, events, failures."""

import asyncio
import json
import logging
import re
import sys
import textwrap
from datetime import datetime

import pytest
from helpers import write_workflow
from prefect.client.orchestration import get_client
from prefect.client.schemas.filters import (
    FlowRunFilter,
    FlowRunFilterId,
    LogFilter,
    LogFilterFlowRunId,
)
from prefect.events.filters import EventFilter, EventNameFilter, EventRelatedFilter
from prefect.logging.handlers import APILogHandler

from animus_flows import run_workflow, workflow_flow
from animus_flows.budget import shared_counter
from animus_flows.errors import ConfigError
from animus_flows.protocol import Scope
from animus_flows.retrieval.audit import MemoryOpEvent
from animus_flows.runtime.invoke import PhaseFailed
from animus_flows.runtime.sinks import RunLogSink
from animus_flows.stores import SQLiteStore

pytestmark = pytest.mark.usefixtures("prefect_api")

WORKFLOW = """
version: 1
project: desk
stores:
  local: {type: sqlite, path: memory.db}
budget: {flow_tokens: 3000, phase_tokens: 1500}
audit: {path: audit.jsonl}
agents:
  analyst:
    memory_bindings:
      - {plugin: local, binding: market, scope: {kind: agent}, budget_tokens: 300}
      - {plugin: local, binding: journal, scope: {kind: task}, read: false, write: true}
workflows:
  research:
    memory_bindings:
      - {plugin: local, binding: playbook, budget_tokens: 200}
      - {plugin: nowhere, binding: wiki}
    phases:
      - {id: research, agent: analyst, prompt: "EUR/USD research for {task_id}"}
      - {id: plan, agent: analyst, prompt: "EUR/USD plan for {task_id}"}
"""


@pytest.fixture
async def workflow(tmp_path):
    wf = write_workflow(tmp_path, WORKFLOW)
    store = SQLiteStore(tmp_path / "memory.db")
    await store.put(
        Scope("desk", agent_id="analyst"),
        "fx",
        "EUR/USD ranges 1.07-1.10",
        metadata={"tier": "hot"},
    )
    await store.put(
        Scope("desk", agent_id="analyst"),
        "client",
        "EUR/USD client ACME book",
        metadata={"tier": "hot", "sensitivity": "secret"},
    )
    await store.put(Scope("desk"), "hedge", "EUR/USD hedge procedure", metadata={})
    await store.aclose()
    return wf


async def read_artifacts(flow_run_id):
    async with get_client() as client:
        artifacts = await client.read_artifacts(
            flow_run_filter=FlowRunFilter(id=FlowRunFilterId(any_=[flow_run_id]))
        )
    return {artifact.key: artifact for artifact in artifacts}


async def test_a_workflow_runs_as_a_flow_with_a_task_per_phase_and_an_audit_trail(workflow):
    research = workflow_flow(workflow, "research")
    assert research.name == "research"
    summary = await research(task_id="RES-001")
    assert set(summary) == {"flow_run_id", "workflow", "phases", "budget", "degraded"}
    assert [(d["phase"], d["op"], d["binding"], d["status"]) for d in summary["degraded"]] == [
        ("research", "query", "wiki", "unmatched"),
        ("plan", "query", "wiki", "unmatched"),
    ]
    assert summary["workflow"] == "research"
    assert [p["id"] for p in summary["phases"]] == ["research", "plan"]
    first = summary["phases"][0]
    assert set(first) == {"id", "agent", "output", "memory_context"}
    context = first["memory_context"]
    assert set(context) == {"items", "tokens", "text"}
    assert [set(i) for i in context["items"]] == [{"binding", "key", "score", "tokens"}] * 2
    assert {i["key"] for i in context["items"]} == {"fx", "hedge"}
    assert context["text"] in first["output"]  # exactly what the runner received
    assert "ACME" not in json.dumps(summary)
    assert summary["budget"]["flow_tokens"] == 3000
    assert summary["budget"]["used"] + summary["budget"]["remaining"] == 3000

    flow_run_id = summary["flow_run_id"]
    async with get_client() as client:
        run = await client.read_flow_run(flow_run_id)
        tasks = await client.read_task_runs(
            flow_run_filter=FlowRunFilter(id=FlowRunFilterId(any_=[flow_run_id]))
        )
    assert run.parameters == {"task_id": "RES-001"}
    assert (run.state.type.value, run.state.name) == ("COMPLETED", "Degraded")
    assert run.state.message == "2 memory operations degraded: 2 unmatched (wiki)"
    assert sorted(t.name for t in tasks) == ["plan", "research"]
    assert all(t.state.is_completed() for t in tasks)

    artifacts = await read_artifacts(flow_run_id)
    assert {
        "memory-ops-research",
        "memory-ops-plan",
        "memory-context-research",
        "memory-context-plan",
        "token-budget-research",
    } <= set(artifacts)
    ops = artifacts["memory-ops-research"].data
    rows = json.loads(ops) if isinstance(ops, str) else ops
    assert {row["binding"]: row["status"] for row in rows} == {
        "market": "ok",
        "playbook": "ok",
        "wiki": "unmatched",
        "journal": "ok",
    }
    assert "[market/fx]" in artifacts["memory-context-research"].data
    ledger = artifacts["token-budget-research"].data
    assert "| research | prompt |" in ledger and "| research | memory | market |" in ledger
    assert "ACME" not in "".join(str(a.data) for a in artifacts.values())
    # each phase's artifacts belong to its task run; the ledger to the flow run alone
    task_of = {t.id: t.name for t in tasks}
    assert {key: task_of.get(a.task_run_id) for key, a in artifacts.items()} == {
        "memory-ops-research": "research",
        "memory-context-research": "research",
        "memory-ops-plan": "plan",
        "memory-context-plan": "plan",
        "token-budget-research": None,
    }

    jsonl = [
        json.loads(line) for line in (workflow.base_dir / "audit.jsonl").read_text().splitlines()
    ]
    assert {e["event"] for e in jsonl} == {"memory_op"}
    assert {(e["phase_id"], e["binding"], e["op"]) for e in jsonl} >= {
        ("research", "market", "query"),
        ("plan", "journal", "put"),
    }


async def test_memory_op_log_lines_are_sentences_in_their_phases_task_run(workflow):
    # the audit is sent after the phases (the outbox), but each line belongs to its phase's
    # task run and carries the time of its op: the UI orders logs by their time
    summary = await workflow_flow(workflow, "research")(task_id="RES-LOG")
    await APILogHandler.aflush()
    async with get_client() as client:
        logs = await client.read_logs(
            LogFilter(flow_run_id=LogFilterFlowRunId(any_=[summary["flow_run_id"]]))
        )
        task_runs = {
            run.id: run
            for run in await client.read_task_runs(
                flow_run_filter=FlowRunFilter(id=FlowRunFilterId(any_=[summary["flow_run_id"]]))
            )
        }
    occurred = {
        (event["phase_id"], event["binding"]): datetime.fromisoformat(event["occurred"])
        for line in (workflow.base_dir / "audit.jsonl").read_text().splitlines()
        if (event := json.loads(line))["flow_run_id"] == summary["flow_run_id"]
    }
    ops = [log for log in logs if log.task_run_id is not None and " on " in log.message]
    assert len(ops) == 8
    for log in ops:
        task_run = task_runs[log.task_run_id]
        binding = log.message.split()[1]
        assert log.timestamp == occurred[(task_run.name, binding)]
        assert log.timestamp <= task_run.end_time
        assert str(log.flow_run_id) == summary["flow_run_id"]
    research = sorted(log.message for log in ops if task_runs[log.task_run_id].name == "research")
    assert research[0].startswith("put journal on local: stored phase-output/research/research/")
    assert re.fullmatch(
        r"query market on local: 1 hit, \d+ tokens injected, \d+\.\d ms", research[1]
    )
    assert research[3] == (
        "query wiki on nowhere: no store or saved memory-store block named 'nowhere'; "
        "the binding did nothing"
    )
    (warning,) = [log for log in ops if log.message.startswith("query wiki") and
                  task_runs[log.task_run_id].name == "research"]  # fmt: skip
    assert warning.level == logging.WARNING
    flow_lines = [log.message for log in logs if log.task_run_id is None]
    assert "2 memory operations degraded: 2 unmatched (wiki)" in flow_lines
    assert not any(message.startswith("memory_op") for message in flow_lines)


def test_a_memory_op_log_record_carries_the_structured_fields_as_extras(caplog):
    event = MemoryOpEvent("query", "local", "market", None, latency_ms=2.5, status="timeout")
    caplog.set_level(logging.INFO, "animus.test")
    RunLogSink(logging.getLogger("animus.test")).record(event)  # outside a run: this logger
    (record,) = caplog.records
    assert record.getMessage() == event.sentence and record.levelno == logging.WARNING
    assert record.memory_op == event.to_json()


async def memory_op_events(flow_run_id: str, count: int) -> list:
    """The flow run's `animus.memory.op` events, once `count` are in (the server persists
    events asynchronously)."""
    found = []
    for _ in range(60):
        async with get_client() as client:
            page = await client.read_events(
                filter=EventFilter(
                    event=EventNameFilter(name=["animus.memory.op"]),
                    related=EventRelatedFilter(id=[f"prefect.flow-run.{flow_run_id}"]),
                ),
                limit=50,
            )
        found = page.events
        if len(found) >= count:
            break
        await asyncio.sleep(0.5)
    return found


async def test_an_event_about_a_saved_block_store_is_related_to_its_block_document(tmp_path):
    from animus_flows.blocks import SQLiteMemoryStore

    document_id = await SQLiteMemoryStore(path=str(tmp_path / "saved.db")).save(
        "desk-events", overwrite=True
    )
    workflow = write_workflow(
        tmp_path,
        """
        version: 1
        project: desk
        agents: {analyst: {memory_bindings: [{plugin: desk-events, binding: market}]}}
        workflows:
          w:
            hooks: {post_phase: []}
            phases: [{id: research, agent: analyst, prompt: "EUR/USD"}]
        """,
    )
    summary = await workflow_flow(workflow, "w")(task_id="T")
    assert summary["degraded"] == []
    (event,) = await memory_op_events(summary["flow_run_id"], 1)
    (block,) = [r for r in event.related if r.role == "block"]
    assert block.id == f"prefect.block-document.{document_id}"
    assert block.name == "animus-sqlite-memory-store/desk-events"


async def test_memory_ops_are_prefect_events_related_to_the_flow_run(workflow):
    summary = await workflow_flow(workflow, "research")(task_id="RES-EVT")
    flow_run_id = summary["flow_run_id"]
    found = await memory_op_events(flow_run_id, 8)
    assert {e.resource.id for e in found} >= {"animus.binding.market", "animus.binding.wiki"}
    event = next(
        e
        for e in found
        if e.resource.id == "animus.binding.market" and e.resource["animus.phase"] == "research"
    )
    assert event.payload["op"] == "query" and event.payload["status"] == "ok"
    assert {"plugin_id", "scope", "tokens_deducted", "latency_ms"} <= set(event.payload)
    # the feed reads without opening the event: a name, the op, status, phase and latency
    assert event.resource.name == "query market"
    assert {k: event.resource[k] for k in ("animus.op", "animus.status", "animus.phase")} == {
        "animus.op": "query",
        "animus.status": "ok",
        "animus.phase": "research",
    }
    assert float(event.resource["animus.latency-ms"]) == round(event.payload["latency_ms"], 1)
    async with get_client() as client:
        task_runs = {
            str(run.id): run.name
            for run in await client.read_task_runs(
                flow_run_filter=FlowRunFilter(id=FlowRunFilterId(any_=[flow_run_id]))
            )
        }
    roles = {r.role: r.id for r in event.related}
    assert roles["flow-run"] == f"prefect.flow-run.{flow_run_id}"
    assert task_runs[roles["task-run"].removeprefix("prefect.task-run.")] == "research"
    assert roles["memory-store"] == "animus.plugin.local"
    assert "block" not in roles  # a file's store has no block document
    wiki = next(e for e in found if e.resource.id == "animus.binding.wiki")
    assert (wiki.resource.name, wiki.resource["animus.status"]) == ("query wiki", "unmatched")


async def test_the_generic_deployable_flow_runs_any_workflow(workflow):
    summary = await run_workflow(
        workflow_file=str(workflow.source), workflow="research", task_id="RES-9"
    )
    assert summary["workflow"] == "research" and len(summary["phases"]) == 2


def _with(tmp_path, old, new):
    text = WORKFLOW.replace(old, new)
    return write_workflow(tmp_path, text, "variant.yaml")


async def test_a_failing_hook_fails_its_phase_naming_the_hook(workflow, tmp_path):
    (tmp_path / "guards.py").write_text("def refuse(ctx):\n    raise ValueError('no EUR today')\n")
    wf = _with(
        tmp_path,
        "    phases:\n",
        "    hooks: {pre_phase: [memory_bindings, 'guards.py:refuse']}\n    phases:\n",
    )
    with pytest.raises(
        PhaseFailed,
        match="pre_phase hook 'guards.py:refuse' failed in phase 'research': ValueError: no EUR today",
    ):
        await workflow_flow(wf, "research")(task_id="T")


async def test_a_failing_runner_fails_the_phase(tmp_path, workflow):
    (tmp_path / "agent.py").write_text("def run(contract):\n    raise RuntimeError('model down')\n")
    wf = _with(tmp_path, "  analyst:\n", "  analyst:\n    runner: agent.py:run\n")
    with pytest.raises(
        PhaseFailed,
        match="runner 'agent.py:run' failed in phase 'research': RuntimeError: model down",
    ):
        await workflow_flow(wf, "research")(task_id="T")


@pytest.mark.parametrize(
    "body,message",
    [
        (
            "    raise SystemExit(3)",
            "runner 'agent.py:run' failed in phase 'research': SystemExit: 3",
        ),
        (
            "    raise ValueError('line one\\nline two')",
            "runner 'agent.py:run' failed in phase 'research': ValueError: line one; line two$",
        ),
        (
            "    return {'seen': {1, 2}}",
            "runner 'agent.py:run' returned dict output in phase 'research' that is not text or "
            "JSON data",
        ),
        ("    return {'ratio': float('nan')}", "returned dict output .* not text or JSON data"),
    ],
)
async def test_a_runner_that_exits_or_returns_what_no_one_can_read_fails_its_phase(
    tmp_path, workflow, body, message
):
    (tmp_path / "agent.py").write_text(f"def run(contract):\n{body}\n")
    wf = _with(tmp_path, "  analyst:\n", "  analyst:\n    runner: agent.py:run\n")
    with pytest.raises(PhaseFailed, match=message):
        await workflow_flow(wf, "research")(task_id="T")


async def test_a_hook_that_lengthens_the_prompt_is_charged_for_it(tmp_path, workflow):
    (tmp_path / "guards.py").write_text(
        "def pad(ctx):\n    ctx.contract.prompt += ' and more' * 100\n"
    )
    wf = _with(
        tmp_path,
        "    phases:\n",
        "    hooks: {pre_phase: [memory_bindings, 'guards.py:pad'], post_phase: []}\n    phases:\n",
    )
    summary = await workflow_flow(wf, "research")(task_id="T")
    counter = shared_counter()
    prompt = summary["phases"][0]["output"].split("\n\n")[1]
    assert prompt.endswith(" and more" * 100)
    memory = sum(p["memory_context"]["tokens"] for p in summary["phases"])
    prompts = counter.count("EUR/USD research for T" + " and more" * 100) + counter.count(
        "EUR/USD plan for T" + " and more" * 100
    )
    assert summary["budget"]["used"] == memory + prompts


async def test_a_failed_run_still_sends_the_audit_of_what_ran(tmp_path, workflow):
    (tmp_path / "agent.py").write_text(
        "def run(contract):\n"
        "    if contract.phase_id == 'plan':\n"
        "        raise RuntimeError('model down')\n"
        "    return 'researched'\n"
    )
    wf = _with(tmp_path, "  analyst:\n", "  analyst:\n    runner: agent.py:run\n")
    state = await workflow_flow(wf, "research")(task_id="T", return_state=True)
    assert state.is_failed()
    artifacts = await read_artifacts(state.state_details.flow_run_id)
    # the failed phase's audit is the one a person needs most: it is there, and says why
    assert {
        "memory-ops-research",
        "memory-context-research",
        "memory-ops-plan",
        "memory-context-plan",
        "token-budget-research",
    } <= set(artifacts)
    context = artifacts["memory-context-plan"].data
    assert context.splitlines()[2] == (
        "**The phase failed:** runner 'agent.py:run' failed in phase 'plan': "
        "RuntimeError: model down"
    )
    assert "[market/fx]" in context  # what the runner was given before it failed
    assert artifacts["memory-context-plan"].description.endswith("(failed)")
    rows = artifacts["memory-ops-plan"].data
    rows = json.loads(rows) if isinstance(rows, str) else rows
    assert {row["binding"] for row in rows} == {"market", "playbook", "wiki"}  # no write-back


async def test_a_phase_whose_hook_fails_still_writes_its_artifacts(workflow, tmp_path):
    (tmp_path / "guards.py").write_text("def refuse(ctx):\n    raise ValueError('no EUR today')\n")
    wf = _with(
        tmp_path,
        "    phases:\n",
        "    hooks: {pre_phase: ['guards.py:refuse', memory_bindings]}\n    phases:\n",
    )
    state = await workflow_flow(wf, "research")(task_id="T", return_state=True)
    assert state.is_failed()
    artifacts = await read_artifacts(state.state_details.flow_run_id)
    assert {"memory-ops-research", "memory-context-research", "token-budget-research"} <= set(
        artifacts
    )
    context = artifacts["memory-context-research"].data
    assert r"**The phase failed:** pre\_phase hook 'guards.py:refuse' failed in phase" in context
    assert "Nothing was injected." in context
    assert "| research | prompt |" in artifacts["token-budget-research"].data


async def test_a_command_runner_gets_the_contract_and_returns_stdout(tmp_path, workflow):
    script = tmp_path / "agent_cli.py"
    script.write_text(
        textwrap.dedent("""
        import json, sys
        contract = json.load(open(sys.argv[1]))
        print(f"{contract['phase_id']}:{len(contract['memory_context']['items'])}:{contract['task_id']}")
    """)
    )
    wf = _with(
        tmp_path,
        "  analyst:\n",
        f"  analyst:\n    runner: {{command: [{sys.executable!r}, {str(script)!r}, '{{contract_path}}']}}\n",
    )
    summary = await workflow_flow(wf, "research")(task_id="T-5")
    assert [p["output"] for p in summary["phases"]] == ["research:2:T-5", "plan:2:T-5"]


@pytest.mark.parametrize(
    "body,timeout,message",
    [
        (
            "import sys; sys.stderr.write('bad credentials for model'); sys.exit(3)",
            30,
            "exited with code 3 in phase 'research': bad credentials for model",
        ),
        ("import time; time.sleep(30)", 0.5, "did not finish within timeout_s 0.5"),
    ],
)
async def test_command_runner_failures_fail_the_phase(tmp_path, workflow, body, timeout, message):
    script = tmp_path / "bad_agent.py"
    script.write_text(body)
    wf = _with(
        tmp_path,
        "  analyst:\n",
        f"  analyst:\n    runner: {{command: [{sys.executable!r}, {str(script)!r}], timeout_s: {timeout}}}\n",
    )
    with pytest.raises(PhaseFailed, match=message):
        await workflow_flow(wf, "research")(task_id="T")


RUNNER_AT = r"variant\.yaml:10:13: agents\.analyst\.runner: "


@pytest.mark.parametrize(
    "old,new,message",
    [
        (
            "  analyst:\n",
            "  analyst:\n    runner: no_such_module:run\n",
            RUNNER_AT + "'no_such_module:run': cannot import 'no_such_module'",
        ),
        (
            "  analyst:\n",
            "  analyst:\n    runner: animus_flows.runners:ecko\n",
            RUNNER_AT + "'animus_flows.runners:ecko': 'animus_flows.runners' has no callable "
            "'ecko'; did you mean 'echo'\\?",
        ),
        (
            "  analyst:\n",
            "  analyst:\n    runner: animus_flows.runnres:echo\n",
            RUNNER_AT + "'animus_flows.runnres:echo': cannot import 'animus_flows.runnres' .*; "
            "did you mean 'animus_flows.runners'\\?",
        ),
        (
            "  analyst:\n",
            "  analyst:\n    runner: missing.py:run\n",
            RUNNER_AT + "'missing.py:run': no file",
        ),
        (
            "    phases:\n",
            "    hooks: {pre_phase: ['os:rename']}\n    phases:\n",
            r"variant\.yaml:18:25: workflows\.research\.hooks\.pre_phase\[0\]: 'os:rename' "
            "cannot be called with one argument",
        ),
        (
            "  analyst:\n",
            "  analyst:\n    runner: os:getcwd\n",
            RUNNER_AT + "'os:getcwd' cannot be called with one argument .*"
            "define it as `def getcwd\\(contract\\): ...`",
        ),
        (
            "    phases:\n",
            "    hooks: {post_phase: ['json:nope']}\n    phases:\n",
            r"workflows\.research\.hooks\.post_phase\[0\]: 'json:nope': 'json' has no callable "
            "'nope'; define it there or fix the name after ':'",
        ),
    ],
)
def test_unimportable_runners_and_hooks_fail_at_load(tmp_path, workflow, old, new, message):
    wf = _with(tmp_path, old, new)
    with pytest.raises(ConfigError, match=message):
        workflow_flow(wf, "research")


def test_every_unimportable_runner_and_hook_is_reported_at_once(tmp_path, workflow):
    (tmp_path / "guards.py").write_text("def guard(ctx):\n    pass\n")
    text = WORKFLOW.replace(
        "  analyst:\n", "  analyst:\n    runner: animus_flows.runners:ecko\n"
    ).replace("    phases:\n", "    hooks: {pre_phase: ['gaurds.py:guard']}\n    phases:\n")
    wf = write_workflow(tmp_path, text, "both.yaml")
    with pytest.raises(ConfigError) as raised:
        workflow_flow(wf, "research")
    lines = str(raised.value).splitlines()
    assert len(lines) == 2
    assert lines[0].endswith("did you mean 'echo'?")
    assert "workflows.research.hooks.pre_phase[0]: 'gaurds.py:guard': no file" in lines[1]
    assert lines[1].endswith("did you mean 'guards.py'?")


@pytest.mark.parametrize(
    "runner", ["agent.py:run", "{python: agent.py:run}", "{python: agent.py:run, timeout_s: 30}"]
)
async def test_a_python_runner_may_have_a_deadline_or_none(tmp_path, workflow, runner):
    (tmp_path / "agent.py").write_text("def run(contract):\n    return contract.phase_id\n")
    wf = _with(tmp_path, "  analyst:\n", f"  analyst:\n    runner: {runner}\n")
    summary = await workflow_flow(wf, "research")(task_id="T")
    assert [p["output"] for p in summary["phases"]] == ["research", "plan"]


async def test_an_async_runner_past_its_deadline_is_cancelled_and_fails_its_phase(
    tmp_path, workflow
):
    (tmp_path / "agent.py").write_text(
        "import asyncio, pathlib\n"
        "async def run(contract):\n"
        "    try:\n"
        "        await asyncio.Event().wait()\n"
        "    except asyncio.CancelledError:\n"
        "        pathlib.Path(__file__).with_name('cancelled').touch()\n"
        "        raise\n"
    )
    wf = _with(
        tmp_path, "  analyst:\n", "  analyst:\n    runner: {python: agent.py:run, timeout_s: 0.2}\n"
    )
    with pytest.raises(
        PhaseFailed,
        match="^runner 'agent.py:run' did not finish within timeout_s 0.2 in phase 'research'; "
        "it was cancelled$",
    ):
        await workflow_flow(wf, "research")(task_id="T")
    assert (tmp_path / "cancelled").exists()


async def test_a_sync_runner_past_its_deadline_fails_its_phase_and_is_left_to_finish(
    tmp_path, workflow
):
    (tmp_path / "agent.py").write_text(
        "import pathlib, time\n"
        "def run(contract):\n"
        "    time.sleep(2)\n"
        "    pathlib.Path(__file__).with_name('finished').touch()\n"
    )
    wf = _with(
        tmp_path, "  analyst:\n", "  analyst:\n    runner: {python: agent.py:run, timeout_s: 0.2}\n"
    )
    with pytest.raises(
        PhaseFailed,
        match="^runner 'agent.py:run' did not finish within timeout_s 0.2 in phase 'research'; "
        r"its thread was abandoned \(a thread cannot be stopped\)$",
    ):
        await workflow_flow(wf, "research")(task_id="T")
    assert not (tmp_path / "finished").exists()  # the phase failed before the runner ended
    for _ in range(100):  # the abandoned thread runs on to its end
        if (tmp_path / "finished").exists():
            break
        await asyncio.sleep(0.05)
    assert (tmp_path / "finished").exists()


def test_an_unknown_workflow_name_is_a_config_error(workflow):
    with pytest.raises(ConfigError, match="no workflow 'nope'.*defines research"):
        workflow_flow(workflow, "nope")


async def test_command_arguments_with_braces_are_passed_as_written(tmp_path, workflow):
    script = tmp_path / "echo_args.py"
    script.write_text("import sys\nprint(sys.argv[1])\n")
    wf = _with(
        tmp_path,
        "  analyst:\n",
        f"  analyst:\n    runner: {{command: [{sys.executable!r}, {str(script)!r}, "
        '\'{"mode": "json", "path": "{contract_path}"}\']}\n',
    )
    summary = await workflow_flow(wf, "research")(task_id="T")
    output = json.loads(summary["phases"][0]["output"])
    assert output["mode"] == "json" and output["path"].endswith("contract.json")


async def test_concurrent_runs_in_one_process_each_run_their_own_phases(workflow):
    # Phase tasks are built once per process and shared; each run's state travels with it.
    research = workflow_flow(workflow, "research")
    first, second = await asyncio.gather(research(task_id="RUN-A"), research(task_id="RUN-B"))
    for summary, task_id in ((first, "RUN-A"), (second, "RUN-B")):
        assert [phase["id"] for phase in summary["phases"]] == ["research", "plan"]
        for phase in summary["phases"]:
            assert f"{phase['id']} for {task_id}" in str(phase["output"])


async def test_audit_lines_of_two_runs_of_one_task_carry_their_own_flow_run_id(workflow):
    research = workflow_flow(workflow, "research")
    runs = await asyncio.gather(research(task_id="SAME"), research(task_id="SAME"))
    run_ids = [summary["flow_run_id"] for summary in runs]
    assert None not in run_ids and run_ids[0] != run_ids[1]
    lines = [
        json.loads(line) for line in (workflow.base_dir / "audit.jsonl").read_text().splitlines()
    ]
    by_run = {run_id: [e for e in lines if e["flow_run_id"] == run_id] for run_id in run_ids}
    assert sum(len(events) for events in by_run.values()) == len(lines)
    for events in by_run.values():
        # each run audits the same operations: 4 bindings in research, 4 in plan
        assert len(events) == 8 and {e["task_id"] for e in events} == {"SAME"}
    async with get_client() as client:
        assert {str((await client.read_flow_run(i)).id) for i in run_ids} == set(run_ids)


SPENDING = """
version: 1
project: desk
stores:
  # a plugin that cannot start: querying it would audit the binding as an error
  remote: {type: jsonrpc, command: [./no-such-plugin]}
budget: {flow_tokens: FLOW, phase_tokens: PHASE}
audit: {path: audit.jsonl}
agents:
  analyst:
    memory_bindings: [{plugin: remote, binding: market}]
workflows:
  research:
    phases:
      - {id: research, agent: analyst, prompt: "EUR/USD research for {task_id}"}
"""


@pytest.mark.parametrize(
    "flow,phase,over,spent",
    [
        (100, 5, "over the phase cap (5 of phase_tokens 5 left)", "the phase cap"),
        (5, "null", "over the flow budget (5 of flow_tokens 5 left)", "the flow budget"),
    ],
)
async def test_a_prompt_past_a_cap_is_charged_with_a_warning_and_no_store_is_queried(
    tmp_path, flow, phase, over, spent
):
    text = SPENDING.replace("FLOW", str(flow)).replace("PHASE", str(phase))
    wf = write_workflow(tmp_path, text)
    summary = await workflow_flow(wf, "research")(task_id="T-1")
    tokens = shared_counter().count("EUR/USD research for T-1")
    assert tokens > 5 and summary["budget"]["used"] == tokens
    flow_run_id = summary["flow_run_id"]
    await APILogHandler.aflush()
    async with get_client() as client:
        logs = await client.read_logs(LogFilter(flow_run_id=LogFilterFlowRunId(any_=[flow_run_id])))
    warnings = [log.message for log in logs if log.level == 30 and "prompt tokens" in log.message]
    assert warnings == [
        f"phase 'research': {tokens} prompt tokens are {over}; charged in full, "
        "the runner gets all of them"
    ]
    ledger = (await read_artifacts(flow_run_id))["token-budget-research"].data
    # the note shows as written: markdown's characters are escaped in cells
    assert f"| 1 | research | prompt |  | {tokens} | {over.replace('_', chr(92) + '_')} |" in ledger
    (event,) = [json.loads(line) for line in (tmp_path / "audit.jsonl").read_text().splitlines()]
    assert (event["binding"], event["op"], event["status"], event["result_count"]) == (
        "market",
        "query",
        "ok",
        0,
    )
    assert event["detail"] == f"not queried: {spent} is spent"


def test_a_run_without_a_task_id_warns_once_naming_every_template_that_renders_it_empty(
    tmp_path,
):
    from animus_flows.runtime.engine import compile_workflow, missing_task_id_warning

    text = WORKFLOW.replace(
        "      - {plugin: local, binding: playbook, budget_tokens: 200}\n",
        "      - {plugin: local, binding: playbook, budget_tokens: 200}\n"
        "      - {plugin: local, binding: brief, query_strategy: key, key: '{task_id}/brief',"
        " inject_when: {phases: [plan]}}\n",
    )
    compiled = compile_workflow(write_workflow(tmp_path, text), "research")
    assert missing_task_id_warning(compiled, None) == (
        "no task id: {task_id} renders empty in the prompt of phase 'research', the prompt of "
        "phase 'plan', the key of binding 'brief' in phase 'plan'; pass --task-id ID (or the "
        "flow's task_id parameter)"
    )
    assert missing_task_id_warning(compiled, "RES-1") is None
    plain = write_workflow(tmp_path, WORKFLOW.replace(" for {task_id}", ""), "plain.yaml")
    assert missing_task_id_warning(compile_workflow(plain, "research"), None) is None
