"""The Python snippets in the memory docs and the README's memory section run as written."""

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BLOCK = re.compile(r"```python\n(.*?)```", re.S)


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


@pytest.mark.parametrize(
    ("document", "heading"), [("docs/memory.md", None), ("README.md", "Memory layer")]
)
def test_memory_snippets_run(document, heading, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    text = (ROOT / document).read_text(encoding="utf-8")
    blocks = python_blocks(section(text, heading) if heading else text)
    assert blocks, f"no python blocks in {document}"
    run_in_order(blocks, document)
    assert "[memory/dev/" in capsys.readouterr().out  # the loader's rendered text was printed
