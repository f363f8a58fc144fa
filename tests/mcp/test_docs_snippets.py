"""The `mcpServers` snippets of docs/mcp.md start working servers once their paths are filled."""

import json
import re
import shutil
import sys
from pathlib import Path

import pytest
from mcp_session import mcp_session

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "mcp.md"


def pasteable_snippets():
    blocks = re.findall(r"```json\n(.*?)```", DOC.read_text(), flags=re.S)
    return [json.loads(b) for b in blocks if "/path/to/venv/bin/animus" in b]


def test_the_doc_has_the_claude_code_and_claude_desktop_snippets():
    snippets = pasteable_snippets()
    assert len(snippets) == 2
    assert {name for s in snippets for name in s["mcpServers"]} == {
        "animus-scratchpad",
        "animus-binding-desk-playbook",
    }


@pytest.mark.parametrize("index", [0, 1])
async def test_each_pasted_server_starts_and_lists_its_tools(index, tmp_path):
    desk = tmp_path / "trade-desk"
    desk.mkdir()
    shutil.copy(ROOT / "examples" / "trade-desk" / "animus.yaml", desk / "animus.yaml")
    animus = str(Path(sys.executable).parent / "animus")
    text = json.dumps(pasteable_snippets()[index])
    text = text.replace("/path/to/venv/bin/animus", animus).replace("/path/to/", f"{tmp_path}/")
    for name, entry in json.loads(text)["mcpServers"].items():
        async with mcp_session(entry["command"], entry["args"], env=entry.get("env")) as session:
            tools = {tool.name for tool in (await session.list_tools()).tools}
            assert session.initialize_result.server_info.name == name
        underscored = "--tool-names" in entry["args"]
        if name == "animus-scratchpad":
            expected = {"animus.memory.read", "animus.memory.write"}
            expected |= {"animus.memory.append", "animus.memory.clear"}
        else:
            expected = {"animus.binding.query", "animus.binding.get"}  # desk-playbook reads only
        if underscored:
            expected = {t.replace(".", "_") for t in expected}
        assert tools == expected
