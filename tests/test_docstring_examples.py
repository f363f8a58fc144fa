"""Every ```python example in a public docstring of the package runs as written, in an empty
folder: imports included, top-level `await` allowed (run with asyncio.run)."""

import ast
import asyncio
import re
import textwrap
from pathlib import Path

import pytest

import animus_flows
import animus_flows.blocks
import animus_flows.hooks

BLOCK = re.compile(r"```python\n(.*?)```", re.S)

# Examples that cannot run in an empty folder offline, with what they need; each example names
# it. They are not run here (the docs tests and CLI tests cover those paths with real files).
NEEDS = {
    "animus_flows.<module>": ("animus.yaml", "a workflow file"),
    "animus_flows.config.loader.load_workflow": ("animus.yaml", "a workflow file"),
    "animus_flows.flows.run_workflow": ("animus.yaml", "a workflow file"),
    "animus_flows.runtime.flows.workflow_flow": ("animus.yaml", "a workflow file"),
    "animus_flows.stores.jsonrpc.JsonRpcStore": ("my_plugin.py", "a store plugin program"),
    "animus_flows.stores.zep.ZepStore": ("ZEP_API_KEY", "a Zep server (network)"),
    "animus_flows.stores.postgres.store.PostgresStore": (
        "ANIMUS_DATABASE_URL",
        "a PostgreSQL server",
    ),
    "animus_flows.blocks.postgres.PostgresMemoryStore": ("BLOCK_NAME", "a saved Prefect block"),
    "animus_flows.blocks.jsonrpc.JsonRpcMemoryStore": ("BLOCK_NAME", "a saved Prefect block"),
    "animus_flows.blocks.sqlite.SQLiteMemoryStore": ("BLOCK_NAME", "a saved Prefect block"),
    "animus_flows.blocks.zep.ZepMemoryStore": ("BLOCK_NAME", "a saved Prefect block"),
}


def _public(parts: tuple[str, ...]) -> bool:
    return not any(part.startswith("_") and part != "__init__" for part in parts)


def docstring_examples() -> list[tuple[str, str]]:
    """(where, code) of every example in the docstrings of the package's public modules,
    classes, functions and methods."""
    examples = []
    for package in (animus_flows, animus_flows.blocks, animus_flows.hooks):
        root = Path(package.__file__).parent
        for path in sorted(root.rglob("*.py")):
            relative = path.relative_to(root).with_suffix("").parts
            if not _public(relative):
                continue
            module = ".".join([package.__name__, *(p for p in relative if p != "__init__")])
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if not isinstance(
                    node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)
                ):
                    continue
                name = getattr(node, "name", "<module>")
                if name.startswith("_") and name != "__init__":
                    continue
                for code in BLOCK.findall(ast.get_docstring(node) or ""):
                    examples.append((f"{module}.{name}", textwrap.dedent(code)))
    return examples


EXAMPLES = docstring_examples()


def run_example(where: str, code: str) -> None:
    compiled = compile(code, where, "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
    result = eval(compiled, {"__name__": "__example__"})  # a coroutine when it awaits
    if asyncio.iscoroutine(result):
        asyncio.run(result)


RUNNABLE = [(where, code) for where, code in EXAMPLES if where not in NEEDS]


@pytest.mark.parametrize(("where", "code"), RUNNABLE, ids=[where for where, _ in RUNNABLE])
def test_docstring_example_runs_as_written(where, code, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    run_example(where, code)


def test_the_examples_not_run_name_what_they_need():
    found = {where: code for where, code in EXAMPLES if where in NEEDS}
    assert set(found) == set(NEEDS), "an example in NEEDS is gone: update NEEDS"
    for where, (needle, what) in NEEDS.items():
        assert needle in found[where], f"{where} needs {what} but no longer names {needle!r}"
    assert len(RUNNABLE) >= 15  # the collector still finds the examples
