"""`animus mcp scratchpad`: the animus.memory.* tools, driven by the official MCP client."""

import asyncio
import json
import os
import re
import subprocess
import textwrap

import pytest
from mcp_session import ANIMUS, animus_mcp, text_of
from typer.testing import CliRunner

from animus_flows.cli import app
from animus_flows.mcp.scratchpad_server import TOOLS
from animus_flows.memory.scratchpad import Scratchpad

WORKFLOW = """
version: 1
project: desk
agents:
  analyst:
    memory: {enabled: true, scope: analyst-notes, max_context_chars: 40}
  quiet: {}
workflows:
  w:
    phases: [{id: p, agent: analyst}]
"""


@pytest.fixture
def workflow_file(tmp_path):
    path = tmp_path / "animus.yaml"
    path.write_text(textwrap.dedent(WORKFLOW))
    return path


def pad_of(workflow_file):
    return Scratchpad(workflow_file.parent / ".animus", "desk", "analyst-notes", 40)


def scratchpad_server(workflow_file, *extra, agent="analyst", **kwargs):
    return animus_mcp(
        "scratchpad", "--agent", agent, "--workflow-file", str(workflow_file), *extra, **kwargs
    )


async def test_the_four_tools_are_listed_and_described_with_the_budget(workflow_file):
    async with scratchpad_server(workflow_file) as session:
        tools = {tool.name: tool for tool in (await session.list_tools()).tools}
        info = session.initialize_result
    assert (
        set(tools)
        == set(TOOLS)
        == {
            "animus.memory.read",
            "animus.memory.write",
            "animus.memory.append",
            "animus.memory.clear",
        }
    )
    for name in ("animus.memory.write", "animus.memory.append"):
        assert tools[name].input_schema["required"] == ["content"]
        assert "40 characters" in tools[name].description
    for name in ("animus.memory.read", "animus.memory.clear"):
        assert tools[name].input_schema.get("properties") == {}
    assert "chars_limit" in tools["animus.memory.read"].description
    assert tools["animus.memory.read"].annotations.read_only_hint is True
    assert set(tools["animus.memory.read"].output_schema["properties"]) == {
        "scope",
        "text",
        "chars_current",
        "chars_limit",
    }
    assert info.server_info.name == "animus-scratchpad"
    assert "at most 40 characters" in info.instructions


async def test_read_write_append_clear_report_chars_current_and_chars_limit(workflow_file):
    async with scratchpad_server(workflow_file) as session:

        async def call(name, **arguments):
            result = await session.call_tool(name, arguments)
            assert not result.is_error, text_of(result)
            assert json.loads(text_of(result)) == result.structured_content
            return result.structured_content

        assert await call("animus.memory.read") == {
            "scope": "analyst-notes",
            "text": "",
            "chars_current": 0,
            "chars_limit": 40,
        }
        assert await call("animus.memory.write", content="EUR/USD 1.10") == {
            "scope": "analyst-notes",
            "chars_current": 12,
            "chars_limit": 40,
            "redacted": 0,
        }
        assert (await call("animus.memory.append", content="hedge 50%"))["chars_current"] == 22
        assert pad_of(workflow_file).read().text == "EUR/USD 1.10\nhedge 50%"
        read = await call("animus.memory.read")
        assert (read["text"], read["chars_current"]) == ("EUR/USD 1.10\nhedge 50%", 22)
        assert (await call("animus.memory.clear"))["chars_current"] == 0
    assert pad_of(workflow_file).read().text == ""


async def test_a_write_past_the_limit_is_a_tool_error_that_changes_nothing(workflow_file):
    pad_of(workflow_file).write("x" * 30)
    before = pad_of(workflow_file).path.read_bytes()
    async with scratchpad_server(workflow_file) as session:
        appended = await session.call_tool("animus.memory.append", {"content": "y" * 10})
        written = await session.call_tool("animus.memory.write", {"content": "z" * 41})
        still = await session.call_tool("animus.memory.read", {})
    assert appended.is_error and written.is_error
    assert "would hold 41 characters, over chars_limit 40 (chars_current 30)" in text_of(appended)
    assert "nothing was changed" in text_of(appended)
    assert "would hold 41 characters, over chars_limit 40 (chars_current 30)" in text_of(written)
    assert pad_of(workflow_file).path.read_bytes() == before
    assert still.structured_content["chars_current"] == 30


async def test_two_servers_on_one_scratchpad_lose_no_note(workflow_file):
    big = workflow_file.read_text().replace("max_context_chars: 40", "max_context_chars: 4000")
    workflow_file.write_text(big)
    async with scratchpad_server(workflow_file) as one, scratchpad_server(workflow_file) as two:

        async def notes(session, name):
            for n in range(15):
                result = await session.call_tool("animus.memory.append", {"content": f"{name}{n}"})
                assert not result.is_error, text_of(result)

        await asyncio.gather(notes(one, "a"), notes(two, "b"))
    lines = Scratchpad(workflow_file.parent / ".animus", "desk", "analyst-notes").read().text
    assert sorted(lines.splitlines()) == sorted(
        [f"a{n}" for n in range(15)] + [f"b{n}" for n in range(15)]
    )


async def test_it_starts_from_any_folder_with_the_minimal_environment_clients_pass(
    workflow_file, tmp_path
):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    async with scratchpad_server(workflow_file, cwd=elsewhere, env={}) as session:
        result = await session.call_tool("animus.memory.append", {"content": "from afar"})
    assert not result.is_error
    assert pad_of(workflow_file).read().text == "from afar"
    assert not (elsewhere / ".animus").exists()


def test_stdout_carries_the_protocol_only(workflow_file):
    requests = [
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "raw", "version": "0"},
            },
        },
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
        {
            "jsonrpc": "2.0",
            "id": 3,
            "method": "tools/call",
            "params": {"name": "animus.memory.append", "arguments": {"content": "raw note"}},
        },
    ]
    server = subprocess.Popen(
        [*ANIMUS, "mcp", "scratchpad", "--agent", "analyst", "--workflow-file", str(workflow_file)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    answers = []
    try:
        for request in requests:
            server.stdin.write(json.dumps(request) + "\n")
            server.stdin.flush()
            if "id" in request:
                answers.append(json.loads(server.stdout.readline()))
    finally:
        server.stdin.close()  # the client leaves: the server ends
        assert server.wait(timeout=30) == 0
        rest, stderr = server.stdout.read(), server.stderr.read()
    assert rest == ""  # nothing but the three answers ever reached stdout
    assert [a["id"] for a in answers] == [1, 2, 3]
    assert all(a["jsonrpc"] == "2.0" and "result" in a for a in answers)
    assert answers[2]["result"]["structuredContent"]["chars_current"] == 8
    assert "serving scratchpad analyst-notes of agent analyst" in stderr


def test_an_agent_without_memory_enabled_is_a_configuration_error(workflow_file):
    done = subprocess.run(
        [*ANIMUS, "mcp", "scratchpad", "--agent", "quiet", "--workflow-file", str(workflow_file)],
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 2
    assert done.stdout == ""
    assert done.stderr.splitlines() == [
        f"error: agent 'quiet' in {workflow_file} has no scratchpad; set "
        "agents.quiet.memory.enabled: true to give it one"
    ]


def test_a_project_id_that_is_not_valid_unicode_exits_2_with_one_line(tmp_path):
    # without `project:` the folder names the project; a folder name that is not UTF-8 comes
    # back with lone surrogates, which no scope or scratchpad file can be named by
    folder = tmp_path / os.fsdecode(b"desk\xff")
    folder.mkdir()
    (folder / "animus.yaml").write_text(textwrap.dedent(WORKFLOW).replace("project: desk\n", ""))
    done = subprocess.run(
        [*ANIMUS, "mcp", "scratchpad", "--agent", "analyst", "--workflow-file", "animus.yaml"],
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        cwd=folder,
    )
    assert done.returncode == 2
    assert done.stdout == ""
    assert done.stderr.splitlines() == [
        "error: animus.yaml: without `project:` the project id is the folder name "
        "'desk\\udcff', which is not valid UTF-8 or holds a control character; "
        "set `project:` in the file"
    ]
    assert not (folder / ".animus").exists()


@pytest.mark.parametrize(
    "args,message",
    [
        (
            ["--agent", "nobody"],
            "no agent 'nobody' in .* \\(agents: analyst, quiet\\); fix --agent",
        ),
        (
            ["--agent", "analyst", "--workflow-file", "missing.yaml"],
            "no workflow file missing.yaml",
        ),
    ],
)
def test_unknown_agents_and_files_exit_2_with_one_line(workflow_file, monkeypatch, args, message):
    monkeypatch.chdir(workflow_file.parent)
    result = CliRunner().invoke(app, ["mcp", "scratchpad", *args])
    assert result.exit_code == 2
    assert len(result.stderr.splitlines()) == 1
    assert re.search(message, result.stderr)


async def test_underscored_tool_names_serve_clients_that_refuse_dots(workflow_file):
    async with scratchpad_server(workflow_file, "--tool-names", "underscored") as session:
        names = {tool.name for tool in (await session.list_tools()).tools}
        result = await session.call_tool("animus_memory_append", {"content": "no dots"})
        info = session.initialize_result.instructions
    assert names == {name.replace(".", "_") for name in TOOLS}
    assert all(re.fullmatch(r"[a-zA-Z0-9_-]{1,64}", name) for name in names)
    assert result.structured_content["chars_current"] == 7
    assert "animus_memory_read" in info and "animus.memory" not in info
    args = ["--agent", "analyst", "--workflow-file", str(workflow_file), "--tool-names", "camel"]
    result = CliRunner().invoke(app, ["mcp", "scratchpad", *args])
    assert result.exit_code == 2
    assert "--tool-names 'camel' is not a style; use dotted or underscored" in result.stderr


async def test_secrets_never_reach_the_scratchpad(workflow_file):
    key = "sk-ant-" + "x" * 30
    async with scratchpad_server(workflow_file) as session:
        result = await session.call_tool("animus.memory.write", {"content": f"key {key}"})
    assert result.structured_content["redacted"] == 1
    assert pad_of(workflow_file).read().text == "key [REDACTED:anthropic_api_key]"
