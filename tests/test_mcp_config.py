"""The `mcpServers` entries: absolute, self-contained, and named after what they serve."""

import sys

from helpers import write_workflow

from animus_flows.hooks.mcp_servers import (
    add_server,
    binding_server,
    binding_server_name,
    scratchpad_server,
)
from animus_flows.protocol import Scope

WORKFLOW = """
version: 1
project: desk
stores:
  local: {type: sqlite, path: memory.db}
  zep: {type: block, block: animus-zep-memory-store/memory-zep}
agents:
  analyst:
    memory_bindings:
      - {plugin: local, binding: notes, scope: {kind: agent}, query_strategy: none}
      - {plugin: zep, binding: graph, scope: {kind: task}, query_strategy: none}
      - {plugin: saved, binding: wiki, query_strategy: none}
workflows:
  w: {phases: [{id: p, agent: analyst}]}
"""


def test_a_scratchpad_entry_runs_this_python_on_an_absolute_file(tmp_path):
    entry = scratchpad_server("analyst", tmp_path / "animus.yaml")
    assert entry == {
        "command": sys.executable,
        "args": [
            "-m",
            "animus_flows",
            "mcp",
            "scratchpad",
            "--agent",
            "analyst",
            "--workflow-file",
            str(tmp_path / "animus.yaml"),
        ],
        "env": {},
    }


def test_a_binding_entry_pins_the_scope_and_carries_the_audit_context(tmp_path, monkeypatch):
    monkeypatch.setenv("PREFECT_API_URL", "http://127.0.0.1:4200/api")
    monkeypatch.setenv("PREFECT_API_KEY", "pnu_not_for_the_file")
    wf = write_workflow(tmp_path, WORKFLOW)
    notes, graph, wiki = wf.agents["analyst"].memory_bindings
    source = tmp_path / "animus.yaml"
    local = binding_server(
        wf, notes, Scope("desk", agent_id="analyst"), source, agent_id="analyst", phase_id="p"
    )
    assert local["command"] == sys.executable
    assert local["args"] == [
        *["-m", "animus_flows", "mcp", "binding", "--plugin", "local", "--scope", "agent"],
        *["--project-id", "desk", "--agent-id", "analyst", "--binding", "notes"],
        *["--workflow-file", str(source)],
    ]
    assert local["env"] == {"ANIMUS_AGENT_ID": "analyst", "ANIMUS_PHASE_ID": "p"}
    task = binding_server(wf, graph, Scope("desk", task_id="T-1"), source, task_id="T-1")
    assert task["args"][task["args"].index("--task-id") + 1] == "T-1"
    assert "--agent-id" not in task["args"]
    # saved blocks need the Prefect API; the key never goes into the file
    assert task["env"] == {"ANIMUS_TASK_ID": "T-1", "PREFECT_API_URL": "http://127.0.0.1:4200/api"}
    saved = binding_server(wf, wiki, Scope("desk"), source)
    assert saved["env"] == {"PREFECT_API_URL": "http://127.0.0.1:4200/api"}


def test_two_servers_never_share_a_name():
    servers = {}
    assert add_server(servers, "animus-binding-wiki", {"args": ["a"]}) == "animus-binding-wiki"
    assert add_server(servers, "animus-binding-wiki", {"args": ["a"]}) == "animus-binding-wiki"
    assert add_server(servers, "animus-binding-wiki", {"args": ["b"]}) == "animus-binding-wiki-2"
    assert list(servers) == ["animus-binding-wiki", "animus-binding-wiki-2"]


def test_server_names_carry_no_dots():
    assert binding_server_name("market-context") == "animus-binding-market-context"
    assert binding_server_name("desk.wiki_v2") == "animus-binding-desk-wiki_v2"
