"""The docs' snippets run as written: Python, workflow files, shell commands and the examples."""

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from mcp_session import mcp_session

from animus_flows.config.loader import parse_workflow
from animus_flows.errors import ConfigError

ROOT = Path(__file__).resolve().parents[1]
BLOCK = re.compile(r"```python\n(.*?)```", re.S)
YAML = re.compile(r"```yaml\n(.*?)```", re.S)
SHELL = re.compile(r"```sh\n(.*?)```", re.S)
DOCUMENTS = ["README.md", *(str(p.relative_to(ROOT)) for p in sorted(ROOT.glob("docs/**/*.md")))]
ANIMUS = Path(sys.executable).with_name("animus")
DICT_PLUGIN = ROOT / "examples" / "plugins" / "dict_plugin.py"


def read(document: str) -> str:
    return (ROOT / document).read_text(encoding="utf-8")


def python_blocks(text: str) -> list[str]:
    return BLOCK.findall(text)


def section(text: str, heading: str) -> str:
    start = text.index(f"\n## {heading}\n")
    end = text.find("\n## ", start + 1)
    return text[start : end if end != -1 else None]


def run_in_order(blocks: list[str], where: str) -> None:
    namespace: dict[str, object] = {"__name__": "__docs__"}
    for number, block in enumerate(blocks):
        exec(compile(block, f"{where} (python block {number + 1})", "exec"), namespace)


def commands(block: str) -> list[str]:
    """The shell commands of a block, continuation lines joined."""
    return [line for line in block.replace("\\\n", " ").splitlines() if line.strip()]


@pytest.mark.parametrize(
    ("document", "heading"), [("docs/memory.md", None), ("README.md", "Memory layer")]
)
def test_memory_snippets_run(document, heading, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    text = read(document)
    blocks = python_blocks(section(text, heading) if heading else text)
    assert blocks, f"no python blocks in {document}"
    run_in_order(blocks, document)
    out = capsys.readouterr().out
    assert "[memory/dev/" in out  # the loader's rendered text was printed
    # Comment lines showing rendered memories are the last lines printed, all of them.
    said = [text for block in blocks for text in re.findall(r"# (\[memory/.*)", block)]
    lines = out.rstrip("\n").splitlines()
    printed = [re.sub(r"^\[memory/dev/\w+\]", "[memory/dev/...]", line) for line in lines]
    assert printed[len(printed) - len(said) :] == said


def test_the_store_protocol_snippets_run_as_scripts(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    blocks = python_blocks(section(read("README.md"), "Memory stores and the protocol"))
    run_in_order(blocks, "README.md")
    assert "{'content': 'EUR/USD ranges 1.07-1.10'} 1 1 1" in capsys.readouterr().out


WORKFLOWS = [
    (document, block)
    for document in DOCUMENTS
    for block in YAML.findall(read(document))
    if re.search(r"^version: ", block, re.M)
]


def test_the_docs_show_complete_workflow_files():
    assert {document for document, _ in WORKFLOWS} >= {"README.md", "docs/memory.md"}


@pytest.mark.parametrize(("document", "block"), WORKFLOWS, ids=[d for d, _ in WORKFLOWS])
def test_each_complete_workflow_file_in_the_docs_is_valid(document, block):
    parse_workflow(block, document)


def test_the_validation_example_is_what_validate_reports():
    readme = read("README.md")
    workflow = YAML.findall(readme)[0]
    _, first, second = section(readme, "The workflow file").split("$ animus validate workflow.yaml")
    first_run = [line for line in first.splitlines() if line.startswith("error: ")]
    second_run = [line for line in second.split("```")[0].splitlines() if line.startswith("error")]
    mistakes = [  # the three the README names, the agent's in the first phase
        ("top_k: 8", "top_k: 0"),
        ("budget_tokens: 2000", "budget_token: 2000"),
        ("agent: trade-analyst\n        prompt", "agent: trade-analist\n        prompt"),
    ]
    mistaken = workflow
    for right, wrong in mistakes:
        assert right in mistaken
        mistaken = mistaken.replace(right, wrong, 1)

    def reported(text: str) -> list[str]:
        with pytest.raises(ConfigError) as caught:
            parse_workflow(text, "workflow.yaml")
        return [f"error: {line}" for line in str(caught.value).splitlines()]

    assert reported(mistaken) == first_run  # types and keys: the first pass
    for right, wrong in mistakes[:2]:
        mistaken = mistaken.replace(wrong, right, 1)
    assert reported(mistaken) == second_run  # references: once the first pass is clean


def test_the_export_import_commands_of_the_memory_docs_run_after_its_snippets(
    tmp_path, monkeypatch
):
    monkeypatch.chdir(tmp_path)
    text = read("docs/memory.md")
    run_in_order(python_blocks(text), "docs/memory.md")
    (workflow,) = [block for document, block in WORKFLOWS if document == "docs/memory.md"]
    (tmp_path / "animus.yaml").write_text(workflow)
    block = next(b for b in SHELL.findall(text) if "animus memory export" in b)
    env = {**os.environ, "PATH": f"{ANIMUS.parent}{os.pathsep}{os.environ['PATH']}"}
    for command in commands(block):
        done = subprocess.run(
            command, shell=True, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120
        )
        assert done.returncode == 0, f"{command}: {done.stderr}"
    assert '"imported": ' in done.stdout and '"imported": 0' not in done.stdout


async def test_the_mcp_commands_on_the_example_start_their_servers(tmp_path):
    desk = tmp_path / "examples" / "trade-desk"
    desk.mkdir(parents=True)
    shutil.copy(ROOT / "examples" / "trade-desk" / "animus.yaml", desk / "animus.yaml")
    runs = [
        shlex.split(command)
        for block in SHELL.findall(read("docs/mcp.md"))
        for command in commands(block)
        if command.startswith("animus mcp") and "examples/trade-desk" in command
    ]
    assert len(runs) >= 2  # the scratchpad and a binding
    for _, *args in runs:
        async with mcp_session(str(ANIMUS), args, cwd=tmp_path) as session:
            assert (await session.list_tools()).tools, args


@pytest.mark.parametrize("document", ["README.md", "docs/protocol.md"])
def test_the_conformance_snippets_run_in_pytest_asyncio_strict_mode(document, tmp_path):
    (snippet,) = [b for b in python_blocks(read(document)) if "StoreConformance" in b]
    # Their placeholders, made real: the SQLite store, the example plugin.
    plugin = f"[{sys.executable!r}, {str(DICT_PLUGIN)!r}]"
    snippet = snippet.replace('["./my-plugin", "--fresh-empty-store"]', plugin)
    header = "from animus_flows.stores import SQLiteStore as MyStore\n"
    (tmp_path / "test_snippet.py").write_text(header + snippet)
    (tmp_path / "pytest.ini").write_text("[pytest]\n")  # pytest-asyncio's defaults: strict mode
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-k", "round_trips"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0 and " passed" in done.stdout, done.stdout[-3000:]


def test_the_ledger_conformance_snippet_runs_in_pytest_asyncio_strict_mode(tmp_path):
    (snippet,) = [
        b for b in python_blocks(read("docs/stores/index.md")) if "LedgerConformance" in b
    ]
    header = "from animus_flows.stores import SQLiteLedgerStore as MyLedgerStore\n"
    (tmp_path / "test_snippet.py").write_text(header + snippet)
    (tmp_path / "pytest.ini").write_text("[pytest]\n")  # pytest-asyncio's defaults: strict mode
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-k", "conflict"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0 and "4 passed" in done.stdout, done.stdout[-3000:]


def test_the_conformance_suite_names_its_test_tools_when_they_are_missing():
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys; sys.modules['pytest_asyncio'] = None\n"
            "import animus_flows.testing.conformance",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 1
    assert done.stderr.splitlines()[-1] == (
        "ModuleNotFoundError: the conformance suite needs pytest and pytest-asyncio, and "
        "pytest_asyncio is not installed: pip install pytest pytest-asyncio"
    )
