"""The hooks hand agents MCP servers: the scratchpad, and `query_strategy: none` bindings."""

import sys

import pytest
from helpers import phase_context, write_workflow
from mcp_session import mcp_session

from animus_flows.config.loader import parse_workflow
from animus_flows.hooks import memory_bindings, scratchpad
from animus_flows.protocol import Scope
from animus_flows.stores import SQLiteStore

WORKFLOW = """
version: 1
project: desk
stores:
  local: {type: sqlite, path: memory.db}
agents:
  analyst:
    memory: {enabled: true, max_context_chars: 300}
    memory_bindings:
      - {plugin: local, binding: notes, scope: {kind: agent}, query_strategy: none, write: true}
      - {plugin: local, binding: market, scope: {kind: agent}}
      - {plugin: local, binding: later, query_strategy: none, inject_when: {phases: [q]}}
  quiet: {}
workflows:
  w:
    memory_bindings:
      - {plugin: local, binding: wiki, query_strategy: none}
      - {plugin: local, binding: journal, scope: {kind: task}, query_strategy: none}
      - {plugin: nowhere, binding: lost, query_strategy: none}
    phases:
      - {id: p, agent: analyst, prompt: "EUR/USD"}
      - {id: q, agent: quiet, prompt: "nothing"}
"""


@pytest.fixture
async def workflow(tmp_path):
    wf = write_workflow(tmp_path, WORKFLOW)
    store = SQLiteStore(tmp_path / "memory.db")
    await store.put(Scope("desk"), "hedge", "EUR/USD hedge procedure")
    await store.put(Scope("desk", agent_id="analyst"), "fx", "EUR/USD range note")
    await store.aclose()
    return wf


async def test_a_memory_capable_agent_gets_the_scratchpad_server(workflow, tmp_path):
    ctx = phase_context(workflow, "w", "p")
    await scratchpad(ctx)
    entry = ctx.contract.mcp_servers["animus-scratchpad"]
    assert entry["command"] == sys.executable
    assert entry["args"] == [
        *["-m", "animus_flows", "mcp", "scratchpad", "--agent", "analyst"],
        *["--workflow-file", str((tmp_path / "animus.yaml").resolve())],
    ]
    assert entry["env"] == {}

    quiet = phase_context(workflow, "w", "q")
    await scratchpad(quiet)
    assert quiet.contract.mcp_servers == {}


async def test_the_scratchpad_entry_works_from_any_folder_and_the_next_phase_sees_the_note(
    workflow, tmp_path
):
    ctx = phase_context(workflow, "w", "p")
    await scratchpad(ctx)
    entry = ctx.contract.mcp_servers["animus-scratchpad"]
    async with mcp_session(entry["command"], entry["args"], env=entry["env"], cwd="/") as session:
        result = await session.call_tool("animus.memory.append", {"content": "hedge at 1.10"})
    assert result.structured_content == {
        "scope": "analyst",
        "chars_current": 13,
        "chars_limit": 300,
        "redacted": 0,
    }
    later = phase_context(workflow, "w", "p")
    await scratchpad(later)
    assert later.contract.scratchpad.text == "hedge at 1.10"
    assert later.contract.scratchpad.chars_limit == 300


async def test_query_strategy_none_bindings_become_servers_instead_of_context(workflow):
    ctx = phase_context(workflow, "w", "p", task_id="T-3")
    await memory_bindings(ctx)
    servers = ctx.contract.mcp_servers
    assert set(servers) == {"animus-binding-notes", "animus-binding-wiki", "animus-binding-journal"}
    assert {item.binding for item in ctx.contract.memory_context.items} == {"market"}
    notes = servers["animus-binding-notes"]
    assert notes["command"] == sys.executable
    args = notes["args"]
    assert args[:4] == ["-m", "animus_flows", "mcp", "binding"]
    flags = dict(zip(args[4::2], args[5::2], strict=True))
    assert flags == {
        "--plugin": "local",
        "--scope": "agent",
        "--project-id": "desk",
        "--agent-id": "analyst",
        "--binding": "notes",
        "--workflow-file": str(workflow.source.resolve()),
    }
    assert notes["env"] == {
        "ANIMUS_AGENT_ID": "analyst",
        "ANIMUS_PHASE_ID": "p",
        "ANIMUS_TASK_ID": "T-3",
        "ANIMUS_FLOW_RUN_ID": "run-1",
    }
    journal = servers["animus-binding-journal"]["args"]
    assert journal[journal.index("--task-id") + 1] == "T-3"
    lost = [e for e in ctx.audit.events() if e.binding == "lost"]
    assert [(e.status, e.detail) for e in lost] == [
        (
            "unmatched",
            "query_strategy none: no MCP server offered; "
            "no store or saved memory-store block named 'nowhere'",
        )
    ]


async def test_a_task_binding_without_a_task_is_audited_not_offered(workflow):
    ctx = phase_context(workflow, "w", "p", task_id=None)
    await memory_bindings(ctx)
    assert "animus-binding-journal" not in ctx.contract.mcp_servers
    (event,) = [e for e in ctx.audit.events() if e.binding == "journal"]
    assert event.status == "error" and "has scope kind task but the run has no task_id" in (
        event.detail
    )


async def test_the_binding_entry_starts_a_server_pinned_to_the_phase_scope(workflow):
    ctx = phase_context(workflow, "w", "p")
    await memory_bindings(ctx)
    entry = ctx.contract.mcp_servers["animus-binding-notes"]
    async with mcp_session(entry["command"], entry["args"], env=entry["env"], cwd="/") as session:
        found = await session.call_tool("animus.binding.query", {"text": "EUR/USD"})
        stored = await session.call_tool("animus.binding.put", {"key": "k", "value": "v"})
    assert [hit["key"] for hit in found.structured_content["hits"]] == ["fx"]
    assert not stored.is_error
    store = SQLiteStore(workflow.resolve_path("memory.db"))
    item = await store.get(Scope("desk", agent_id="analyst"), "k")
    await store.aclose()
    assert item.value == "v" and item.metadata["agent"] == "analyst"


async def test_a_workflow_built_in_code_offers_no_servers(tmp_path):
    wf = parse_workflow(WORKFLOW.replace("path: memory.db", f"path: {tmp_path / 'm.db'}"))
    ctx = phase_context(wf, "w", "p")
    await scratchpad(ctx)
    await memory_bindings(ctx)
    assert ctx.contract.mcp_servers == {}
    assert ctx.contract.scratchpad is not None  # the text is still injected
    assert {e.detail for e in ctx.audit.events() if e.binding == "wiki"} == {
        "query_strategy none: no MCP server offered; workflow built in code has no file"
    }
