"""End to end: a command runner reads its mcp.json and uses the servers the hooks offered."""

import json
import sys
import textwrap

import pytest
from helpers import write_workflow

from animus_flows import workflow_flow
from animus_flows.memory.scratchpad import Scratchpad
from animus_flows.protocol import Scope
from animus_flows.stores import SQLiteStore

pytestmark = pytest.mark.usefixtures("prefect_api")

# An agent CLI in miniature: it reads the standard `mcpServers` file it is handed, starts each
# server the way Claude Code or Claude Desktop would (the official client over stdio), notes
# something in its scratchpad and searches the wiki binding it was given instead of context.
AGENT = textwrap.dedent(
    """
    import json, sys
    import anyio
    from mcp.client.session import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    config = json.load(open(sys.argv[1]))
    contract = json.load(open(sys.argv[2]))
    servers = config["mcpServers"]

    async def call(name, tool, arguments):
        spec = servers[name]
        params = StdioServerParameters(
            command=spec["command"], args=spec["args"], env=spec["env"], cwd="/"
        )
        async with stdio_client(params) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                result = await session.call_tool(tool, arguments)
                assert not result.is_error, result.content
                return result.structured_content

    async def main():
        phase, answers = contract["phase_id"], {}

        async def ask(name, tool, arguments):
            answers[name] = await call(name, tool, arguments)

        async with anyio.create_task_group() as both:  # start the two servers side by side
            both.start_soon(ask, "animus-scratchpad", "animus.memory.append", {"content": f"{phase}: noted"})
            both.start_soon(ask, "animus-binding-desk-wiki", "animus.binding.query", {"text": "EUR/USD"})
        noted, found = answers["animus-scratchpad"], answers["animus-binding-desk-wiki"]
        print(json.dumps({
            "servers": sorted(servers),
            "scratchpad_at_start": contract["scratchpad"]["text"],
            "noted": noted,
            "hits": [hit["key"] for hit in found["hits"]],
        }))

    anyio.run(main)
    """
)

WORKFLOW = """
version: 1
project: desk
stores:
  local: {{type: sqlite, path: memory.db}}
audit: {{path: audit.jsonl}}
agents:
  analyst:
    runner:
      command: [{python!r}, agent.py, "{{mcp_config_path}}", "{{contract_path}}"]
      timeout_s: 120
    memory: {{enabled: true, max_context_chars: 500}}
    memory_bindings:
      - {{plugin: local, binding: desk-wiki, query_strategy: none}}
workflows:
  research:
    phases:
      - {{id: research, agent: analyst, prompt: "EUR/USD research for {{task_id}}"}}
      - {{id: plan, agent: analyst, prompt: "EUR/USD plan for {{task_id}}"}}
"""


async def test_a_command_runner_reaches_its_scratchpad_and_binding_over_mcp(tmp_path):
    (tmp_path / "agent.py").write_text(AGENT)
    wf = write_workflow(tmp_path, WORKFLOW.format(python=sys.executable))
    store = SQLiteStore(tmp_path / "memory.db")
    await store.put(Scope("desk"), "hedge", "EUR/USD hedge procedure")
    await store.put(Scope("desk"), "acme", "EUR/USD ACME book", metadata={"sensitivity": "secret"})
    await store.aclose()

    summary = await workflow_flow(wf, "research")(task_id="RES-7")

    research, plan = (json.loads(phase["output"]) for phase in summary["phases"])
    assert (
        research["servers"] == plan["servers"] == ["animus-binding-desk-wiki", "animus-scratchpad"]
    )
    assert research["scratchpad_at_start"] == ""
    assert research["noted"] == {
        "scope": "analyst",
        "chars_current": 15,
        "chars_limit": 500,
        "redacted": 0,
    }
    # the scratchpad hook read what the agent wrote over MCP in the phase before
    assert plan["scratchpad_at_start"] == "research: noted"
    assert plan["noted"]["chars_current"] == len("research: noted\nplan: noted")
    assert research["hits"] == plan["hits"] == ["hedge"]  # PUBLIC only
    assert all(phase["memory_context"]["items"] == [] for phase in summary["phases"])
    pad = Scratchpad(tmp_path / ".animus", "desk", "analyst")
    assert pad.read().text == "research: noted\nplan: noted"

    events = [json.loads(line) for line in (tmp_path / "audit.jsonl").read_text().splitlines()]
    over_mcp = [e for e in events if e["detail"].startswith("mcp")]
    assert [(e["phase_id"], e["op"], e["binding"], e["status"]) for e in over_mcp] == [
        ("research", "query", "desk-wiki", "ok"),
        ("plan", "query", "desk-wiki", "ok"),
    ]
    assert {(e["agent_id"], e["task_id"]) for e in over_mcp} == {("analyst", "RES-7")}
