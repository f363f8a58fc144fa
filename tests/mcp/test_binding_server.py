"""`animus mcp binding`: a binding's store served to an agent, driven by the official client."""

import asyncio
import json
import re

import pytest
from helpers import write_workflow
from mcp.server.mcpserver.exceptions import ToolError
from mcp_session import animus_mcp, text_of
from typer.testing import CliRunner

from animus_flows.cli import app
from animus_flows.errors import ConfigError, StoreError, StoreTimeout, WriteDenied
from animus_flows.mcp.binding_server import TOOL_GET, TOOL_PUT, TOOL_QUERY, audit_path
from animus_flows.mcp.binding_server import _answer as answer_tool
from animus_flows.mcp.binding_service import AuditContext, BindingService, find_binding
from animus_flows.protocol import Capabilities, Scope
from animus_flows.retrieval.audit import AuditTrail
from animus_flows.stores import BaseStore, SQLiteStore

WORKFLOW = """
version: 1
project: desk
stores:
  local: {type: sqlite, path: memory.db}
agents:
  analyst:
    memory_bindings:
      - plugin: local
        binding: notes
        scope: {kind: agent}
        query_strategy: none
        write: true
        memory_types: [semantic]
  trader:
    memory_bindings:
      - {plugin: local, binding: notes, scope: {kind: agent}, query_strategy: none}
workflows:
  research:
    memory_bindings:
      - {plugin: local, binding: wiki, query_strategy: none, top_k: 3}
      - {plugin: local, binding: archive, query_strategy: none, tiers: [hot, warm, cold]}
    phases: [{id: research, agent: analyst}]
"""

ENV = {
    "ANIMUS_AGENT_ID": "analyst",
    "ANIMUS_PHASE_ID": "research",
    "ANIMUS_TASK_ID": "T-9",
    "ANIMUS_FLOW_RUN_ID": "run-7",
}


@pytest.fixture
async def workflow(tmp_path):
    wf = write_workflow(tmp_path, WORKFLOW)
    store = SQLiteStore(tmp_path / "memory.db")
    project = Scope("desk")
    await store.put(project, "hedge", {"content": "EUR/USD hedge procedure"}, metadata={})
    await store.put(project, "hot-fx", "EUR/USD hot range 1.07-1.10", metadata={"tier": "hot"})
    await store.put(project, "old", "EUR/USD cold archive of 2019", metadata={"tier": "cold"})
    await store.put(
        project, "client", "EUR/USD ACME position", metadata={"sensitivity": "confidential"}
    )
    await store.put(Scope("desk", agent_id="trader"), "mine", "EUR/USD trader's own note")
    await store.aclose()
    return wf


def binding_server(workflow, *args, **kwargs):
    return animus_mcp(
        "binding", "--plugin", "local", *args, "--workflow-file", str(workflow.source), **kwargs
    )


def audit_lines(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


async def test_a_read_only_binding_offers_query_and_get_and_returns_only_public_items(
    workflow, tmp_path
):
    errlog = (tmp_path / "server.err").open("w")
    async with binding_server(
        workflow, "--scope", "project", "--binding", "wiki", env=ENV, errlog=errlog
    ) as session:
        tools = {tool.name: tool for tool in (await session.list_tools()).tools}
        found = await session.call_tool(TOOL_QUERY, {"text": "EUR/USD"})
        hedge = await session.call_tool(TOOL_GET, {"key": "hedge"})
        secret = await session.call_tool(TOOL_GET, {"key": "client"})
        cold = await session.call_tool(TOOL_GET, {"key": "old"})
        missing = await session.call_tool(TOOL_GET, {"key": "nope"})
        put = await session.call_tool(TOOL_PUT, {"key": "k", "value": "v"})
        bad = await session.call_tool(TOOL_QUERY, {"text": 5, "top_k": 0})
        name = session.initialize_result.server_info.name
    errlog.close()
    assert name == "animus-binding-wiki"
    assert set(tools) == {TOOL_QUERY, TOOL_GET}  # write: false: no put at all
    assert "up to 3 hits" in tools[TOOL_QUERY].description
    assert "Only public items" in tools[TOOL_QUERY].description
    assert tools[TOOL_QUERY].annotations.read_only_hint is True
    assert put.is_error and "animus.binding.put" in text_of(put)

    assert not found.is_error, text_of(found)
    keys = [hit["key"] for hit in found.structured_content["hits"]]
    assert sorted(keys) == ["hedge", "hot-fx"]  # not the confidential one, not the cold one
    assert "ACME" not in text_of(found)
    assert hedge.structured_content["found"] is True
    assert hedge.structured_content["value"] == {"content": "EUR/USD hedge procedure"}
    for withheld in (secret, cold, missing):  # a withheld item looks exactly like no item
        assert withheld.structured_content == {
            "key": withheld.structured_content["key"],
            "found": False,
            "value": None,
            "metadata": {},
            "updated_at": None,
        }
    assert "ACME" not in text_of(secret)

    events = audit_lines(tmp_path / ".animus" / "audit.jsonl")
    assert [(e["op"], e["status"]) for e in events] == [
        ("query", "ok"),
        ("get", "ok"),
        ("get", "denied"),
        ("get", "denied"),
        ("get", "ok"),
        ("put", "denied"),  # refused by the SDK before any tool ran: audited all the same
        ("query", "error"),
    ]
    assert events[5]["detail"] == "mcp; binding has write: false"
    assert events[6]["detail"] == "mcp; arguments refused: text, top_k"
    assert bad.is_error
    first = events[0]
    assert first["event"] == "memory_op" and first["binding"] == "wiki"
    assert first["plugin_id"] == "local"
    assert first["scope"] == {"project_id": "desk", "agent_id": None, "task_id": None}
    assert (first["agent_id"], first["phase_id"], first["task_id"], first["flow_run_id"]) == (
        "analyst",
        "research",
        "T-9",
        "run-7",
    )
    assert first["result_count"] == 2 and first["bytes_in"] == len("EUR/USD")
    assert first["bytes_out"] > 0 and first["latency_ms"] >= 0
    assert events[2]["detail"] == "mcp; withheld: not PUBLIC"
    assert events[3]["detail"] == "mcp; withheld: tier not listed"
    assert events[4]["detail"] == "mcp; no such item"
    assert "ACME" not in (tmp_path / ".animus" / "audit.jsonl").read_text()
    stderr = (tmp_path / "server.err").read_text()
    assert stderr.count("memory_op {") == 7
    assert "serving binding wiki (plugin local, scope project=desk, read-only)" in stderr


async def test_a_writable_binding_stores_redacted_and_finds_it_again(workflow, tmp_path):
    args = ["--scope", "agent", "--agent-id", "analyst"]
    async with binding_server(workflow, *args, env={"ANIMUS_PHASE_ID": "research"}) as session:
        tools = {tool.name for tool in (await session.list_tools()).tools}
        stored = await session.call_tool(
            TOOL_PUT,
            {
                "key": "fx/api",
                "value": {"content": "EUR/USD feed uses api_key=abcd1234secret"},
                "metadata": {"tags": ["fx"], "note": "token ghp_" + "a" * 36},
            },
        )
        hidden = await session.call_tool(
            TOOL_PUT,
            {
                "key": "fx/private",
                "value": "EUR/USD private",
                "metadata": {"sensitivity": "secret"},
            },
        )
        found = await session.call_tool(TOOL_QUERY, {"text": "EUR/USD feed"})
        got = await session.call_tool(TOOL_GET, {"key": "fx/api"})
        private = await session.call_tool(TOOL_GET, {"key": "fx/private"})
        other = await session.call_tool(TOOL_GET, {"key": "mine"})  # the trader's scope
    assert tools == {TOOL_QUERY, TOOL_GET, TOOL_PUT}
    assert not stored.is_error, text_of(stored)
    assert stored.structured_content["redacted"] == 2
    assert not hidden.is_error
    assert [hit["key"] for hit in found.structured_content["hits"]] == ["fx/api"]
    item = got.structured_content
    assert item["value"] == {"content": "EUR/USD feed uses api_key=[REDACTED:api_key]"}
    assert item["metadata"]["note"] == "token [REDACTED:github_token]"
    assert item["metadata"]["_redaction_count"] == 2
    assert item["metadata"]["_redaction_types"] == ["api_key", "github_token"]
    assert item["metadata"]["source"] == "mcp" and item["metadata"]["agent"] == "analyst"
    assert item["metadata"]["memory_type"] == "semantic"  # findable through this binding
    assert private.structured_content["found"] is False
    assert other.structured_content["found"] is False

    store = SQLiteStore(tmp_path / "memory.db")
    raw = await store.get(Scope("desk", agent_id="analyst"), "fx/api")
    await store.aclose()
    assert "abcd1234secret" not in json.dumps(raw.to_json())
    events = audit_lines(tmp_path / ".animus" / "audit.jsonl")
    puts = [e for e in events if e["op"] == "put"]
    assert [e["status"] for e in puts] == ["ok", "ok"]
    assert puts[0]["detail"] == "mcp; stored fx/api; 2 secret(s) redacted"
    assert puts[0]["agent_id"] == "analyst" and puts[0]["phase_id"] == "research"
    assert "abcd1234secret" not in (tmp_path / ".animus" / "audit.jsonl").read_text()


async def test_a_key_that_holds_a_secret_is_refused_audited_and_not_stored(workflow, tmp_path):
    args = ["--scope", "agent", "--agent-id", "analyst"]
    async with binding_server(workflow, *args) as session:
        refused = await session.call_tool(
            TOOL_PUT, {"key": "fx/AKIAIOSFODNN7EXAMPLE", "value": "EUR/USD desk login"}
        )
        got = await session.call_tool(TOOL_GET, {"key": "fx/AKIAIOSFODNN7EXAMPLE"})
    assert refused.is_error
    assert (
        "key 'fx/[REDACTED:aws_access_key]' holds a secret (aws_access_key); name the memory"
    ) in text_of(refused)
    assert got.structured_content["found"] is False
    (put,) = [e for e in audit_lines(tmp_path / ".animus" / "audit.jsonl") if e["op"] == "put"]
    assert (put["status"], put["result_count"]) == ("error", 0)
    assert "AKIAIOSFODNN7EXAMPLE" not in (tmp_path / ".animus" / "audit.jsonl").read_text()


async def test_the_yaml_audit_path_receives_the_lines(tmp_path):
    text = WORKFLOW.replace("agents:\n", "audit: {path: logs/ops.jsonl}\nagents:\n", 1)
    wf = write_workflow(tmp_path, text)
    assert audit_path(wf) == tmp_path / "logs" / "ops.jsonl"
    async with binding_server(wf, "--scope", "project", "--binding", "archive") as session:
        result = await session.call_tool(TOOL_QUERY, {"text": "", "top_k": 50})
    assert not result.is_error
    (event,) = audit_lines(tmp_path / "logs" / "ops.jsonl")
    assert event["binding"] == "archive" and event["op"] == "query"
    assert "top_k 50 clamped to 8" in event["detail"]
    assert not (tmp_path / ".animus" / "audit.jsonl").exists()


@pytest.mark.parametrize(
    "args,message",
    [
        (
            ["--plugin", "local", "--scope", "project"],
            "plugin 'local' has 2 bindings with scope project in .*animus.yaml "
            "\\(wiki, archive\\); choose one with --binding LABEL",
        ),
        (
            ["--plugin", "local", "--scope", "task", "--task-id", "T"],
            "no plugin 'local' with scope task in .*; its bindings: notes \\(scope agent, "
            "agents.analyst\\), notes \\(scope agent, agents.trader\\), wiki \\(scope project",
        ),
        (
            ["--plugin", "zep", "--scope", "project"],
            "no plugin 'zep' with scope project in .*; no binding uses it",
        ),
        (
            ["--plugin", "local", "--scope", "project", "--binding", "nope"],
            "no binding 'nope' of plugin 'local' with scope project",
        ),
        (["--plugin", "local", "--scope", "agent"], "--scope agent needs --agent-id ID"),
    ],
)
def test_bindings_that_do_not_resolve_exit_2_with_one_line(workflow, args, message):
    result = CliRunner().invoke(
        app, ["mcp", "binding", *args, "--workflow-file", str(workflow.source)]
    )
    assert result.exit_code == 2, result.output
    assert len(result.stderr.splitlines()) == 1
    assert re.search(message, result.stderr), result.stderr


def test_an_agent_binding_is_found_for_its_own_agent_only(workflow):
    mine = find_binding(workflow, "local", "agent", agent_id="analyst")
    theirs = find_binding(workflow, "local", "agent", agent_id="trader")
    assert (mine.write, theirs.write) == (True, False)
    with pytest.raises(
        ConfigError, match="declared differently in agents.analyst and agents.trader"
    ):
        find_binding(workflow, "local", "agent")


def test_a_plugin_that_resolves_to_no_store_exits_2(tmp_path, monkeypatch):
    monkeypatch.delenv("PREFECT_API_URL", raising=False)
    text = WORKFLOW.replace(
        "{plugin: local, binding: wiki,", "{plugin: saved-block, binding: wiki,"
    )
    wf = write_workflow(tmp_path, text)
    args = ["--plugin", "saved-block", "--scope", "project", "--workflow-file", str(wf.source)]
    result = CliRunner().invoke(app, ["mcp", "binding", *args])
    assert result.exit_code == 2, result.output
    assert "plugin 'saved-block' is not a store of" in result.stderr
    assert len(result.stderr.splitlines()) == 1


# -- the service without the wire: degradation and the write gate ---------------------------


class FlakyStore(BaseStore):
    capabilities = Capabilities(False, False, True, 4)

    def __init__(self, delay: float = 0.0, fail: Exception | None = None) -> None:
        self.delay, self.fail = delay, fail

    async def _query(self, *args, **kwargs):
        if self.fail is not None:
            raise self.fail
        await asyncio.sleep(self.delay)
        return []

    _get = _put = _list_scopes = _delete_scope = _delete = _list_items = _query


def service(workflow, store, label="wiki", **kwargs):
    binding = find_binding(workflow, "local", "project", label)
    return BindingService(binding, Scope("desk"), store, AuditTrail(), AuditContext(), **kwargs)


async def test_a_slow_store_is_a_timeout_error_for_the_agent_and_the_audit(workflow):
    svc = service(workflow, FlakyStore(delay=30), timeout_s=0.1)
    with pytest.raises(StoreTimeout, match="did not answer within 100 ms"):
        await svc.query("EUR/USD")
    (event,) = svc.audit.events()
    assert (event.op, event.status) == ("query", "timeout")


async def test_a_failing_store_is_an_error_without_its_secrets(workflow):
    boom = RuntimeError("connect to postgres://bot:hunter2pass@db failed")
    svc = service(workflow, FlakyStore(fail=boom))
    with pytest.raises(StoreError):
        await svc.get("k")
    with pytest.raises(ToolError) as failed:  # what the agent gets: redacted on the way out
        await answer_tool(lambda: svc.get("k"))
    assert "RuntimeError" in str(failed.value) and "hunter2pass" not in str(failed.value)
    event = svc.audit.events()[0]
    assert event.status == "error" and "hunter2pass" not in event.detail


async def test_top_k_is_clamped_to_the_binding_and_the_store(workflow):
    svc = service(workflow, FlakyStore(), label="archive")  # binding top_k 8, store max 4
    await svc.query("x", top_k=20)
    (event,) = svc.audit.events()
    assert "top_k 20 clamped to 8" in event.detail  # the binding's top_k
    assert "top_k 8 clamped to 4 (store maximum)" in event.detail


async def test_put_through_a_read_only_binding_is_denied_and_audited(workflow):
    svc = service(workflow, FlakyStore())
    with pytest.raises(WriteDenied, match="binding 'wiki' is read-only"):
        await svc.put("k", "v")
    (event,) = svc.audit.events()
    assert (event.op, event.status) == ("put", "denied")


async def test_the_calling_agent_picks_its_own_binding_when_labels_repeat(tmp_path):
    text = WORKFLOW.replace(
        "      - {plugin: local, binding: notes, scope: {kind: agent}, query_strategy: none}",
        "      - {plugin: local, binding: notes, scope: {kind: project}, query_strategy: none}",
    ).replace("        scope: {kind: agent}\n", "        scope: {kind: project}\n")
    wf = write_workflow(tmp_path, text)
    args = ["--scope", "project", "--binding", "notes"]
    result = CliRunner().invoke(
        app, ["mcp", "binding", "--plugin", "local", *args, "--workflow-file", str(wf.source)]
    )
    assert result.exit_code == 2 and "declared differently" in result.stderr
    async with binding_server(wf, *args, env={"ANIMUS_AGENT_ID": "trader"}) as session:
        tools = {tool.name for tool in (await session.list_tools()).tools}
    assert tools == {TOOL_QUERY, TOOL_GET}  # the trader's read-only notes, not the analyst's


async def test_underscored_tool_names_and_dashed_server_names(workflow, tmp_path):
    text = WORKFLOW.replace("binding: wiki,", "binding: desk.wiki,")
    wf = write_workflow(tmp_path, text, "variant.yaml")  # on the seeded memory.db
    args = ["--scope", "project", "--binding", "desk.wiki", "--tool-names", "underscored"]
    async with binding_server(wf, *args) as session:
        names = {tool.name for tool in (await session.list_tools()).tools}
        found = await session.call_tool("animus_binding_query", {"text": "hedge"})
        server = session.initialize_result.server_info.name
    assert names == {"animus_binding_query", "animus_binding_get"}
    assert [hit["key"] for hit in found.structured_content["hits"]] == ["hedge"]
    assert server == "animus-binding-desk-wiki"


async def test_an_item_the_binding_may_not_disclose_cannot_be_overwritten_through_it(tmp_path):
    text = WORKFLOW.replace(
        "{plugin: local, binding: wiki, query_strategy: none, top_k: 3}",
        "{plugin: local, binding: wiki, query_strategy: none, top_k: 3, write: true}",
    )
    wf = write_workflow(tmp_path, text)
    store = SQLiteStore(tmp_path / "memory.db")
    await store.put(Scope("desk"), "creds", "broker password", metadata={"sensitivity": "secret"})
    svc = BindingService(
        find_binding(wf, "local", "project", "wiki"),
        Scope("desk"),
        store,
        AuditTrail(),
        AuditContext(),
    )
    with pytest.raises(WriteDenied, match="key 'creds' cannot be written through binding 'wiki'"):
        await svc.put("creds", "overwritten by agent", metadata={"sensitivity": "public"})
    assert (await store.get(Scope("desk"), "creds")).value == "broker password"
    await svc.put("fresh", "a new public note")  # other keys are writable as before
    await store.aclose()
    denied, stored = svc.audit.events()
    assert (denied.op, denied.status) == ("put", "denied") and "broker" not in denied.detail
    assert (stored.op, stored.status) == ("put", "ok")
