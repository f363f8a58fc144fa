"""write_back stores phase output only through writable bindings, redacted; scratchpad injects."""

import pytest
from helpers import phase_context, write_workflow

from animus_flows.config.paths import runtime_root
from animus_flows.hooks import scratchpad, write_back
from animus_flows.memory.scratchpad import Scratchpad
from animus_flows.protocol import Scope
from animus_flows.stores import SQLiteStore

WORKFLOW = """
version: 1
project: desk
stores:
  local: {type: sqlite, path: memory.db}
agents:
  analyst:
    memory: {enabled: true, max_context_chars: 200}
    memory_bindings:
      - {plugin: local, binding: readonly, scope: {kind: agent}}
      - {plugin: local, binding: journal, scope: {kind: task}, read: false, write: true}
      - {plugin: nowhere, binding: lost, write: true}
  quiet: {}
workflows:
  w:
    phases:
      - {id: p, agent: analyst, prompt: "do it"}
      - {id: q, agent: quiet, prompt: "nothing"}
"""


async def test_output_is_written_only_through_write_bindings_and_redacted(tmp_path):
    wf = write_workflow(tmp_path, WORKFLOW)
    ctx = phase_context(wf, "w", "p", task_id="T-7")
    ctx.output = "done; used key sk-proj-abcdefghijklmnopqrstuvwxyz123456 to call the API"
    await write_back(ctx)
    store = SQLiteStore(tmp_path / "memory.db")
    journal = await store.query(Scope("desk", task_id="T-7"), "", top_k=10)
    readonly = await store.query(Scope("desk", agent_id="analyst"), "", top_k=10)
    await store.aclose()
    assert readonly == []
    assert [hit.key for hit in journal] == ["phase-output/w/p/run-1"]
    hit = journal[0]
    assert (
        "sk-proj" not in hit.value["content"]
        and "[REDACTED:openai_api_key]" in hit.value["content"]
    )
    assert hit.metadata["memory_type"] == "episodic" and hit.metadata["_redaction_count"] == 1
    assert hit.metadata["_redaction_types"] == ["openai_api_key"]
    statuses = {e.binding: (e.op, e.status) for e in ctx.audit.events()}
    assert statuses == {"journal": ("put", "ok"), "lost": ("put", "unmatched")}


async def test_no_output_writes_nothing(tmp_path):
    wf = write_workflow(tmp_path, WORKFLOW)
    ctx = phase_context(wf, "w", "p")
    await write_back(ctx)
    assert ctx.audit.events() == []


async def test_scratchpad_text_goes_on_the_contract_and_the_budget(tmp_path):
    wf = write_workflow(tmp_path, WORKFLOW)
    Scratchpad(runtime_root(wf), "desk", "analyst", 200).write("remember: EUR/USD 1.10")
    ctx = phase_context(wf, "w", "p")
    await scratchpad(ctx)
    view = ctx.contract.scratchpad
    assert view is not None and view.text == "remember: EUR/USD 1.10"
    assert (view.chars_current, view.chars_limit) == (22, 200)
    assert ctx.budget.used("p", "scratchpad") == view.tokens > 0


async def test_agents_without_memory_get_no_scratchpad(tmp_path):
    wf = write_workflow(tmp_path, WORKFLOW)
    ctx = phase_context(wf, "w", "q")
    await scratchpad(ctx)
    assert ctx.contract.scratchpad is None


def test_scratchpad_refuses_writes_past_its_limit_and_changes_nothing(tmp_path):
    from animus_flows.memory.scratchpad import ScratchpadFull

    pad = Scratchpad(tmp_path, "proj/with%odd id", "agent", max_chars=10)
    pad.write("12345")
    with pytest.raises(ScratchpadFull, match="over its limit of 10 \\(currently 5\\)"):
        pad.append("678901")
    assert pad.read().text == "12345"
    assert pad.append("6789").text == "12345\n6789"
    assert pad.clear().chars_current == 0
    assert pad.path.parent.name == "proj%2Fwith%25odd%20id"
