"""The documentation site builds with `mkdocs build --strict`, offline, and links nothing remote.

The build runs with every network connection refused, so a plugin or theme that fetches
anything (fonts, inventories, social cards) fails it; the pages it writes load no script,
stylesheet or font from another host.
"""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# Runs mkdocs with sockets disabled: a build that tries the network says where, and fails.
OFFLINE_MKDOCS = """
import socket, sys

def refuse(*args, **kwargs):
    print(f"NETWORK: the docs build tried to connect: {args!r}", file=sys.stderr)
    raise OSError("network access is disabled for the docs build")

socket.socket.connect = socket.socket.connect_ex = refuse
socket.getaddrinfo = socket.create_connection = refuse
from mkdocs.__main__ import cli
sys.exit(cli())
"""

REMOTE_ASSET = re.compile(r"<(?:script|link|img)\b[^>]*\b(?:src|href)=\"(?:https?:)?//[^\"]+\"")


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> tuple[Path, str]:
    out = tmp_path_factory.mktemp("site")
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    done = subprocess.run(
        [sys.executable, "-c", OFFLINE_MKDOCS, "build", "--strict", "--site-dir", str(out)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    log = done.stdout + done.stderr
    assert done.returncode == 0, log
    return out, log


def test_the_site_builds_strict_without_a_warning_or_the_network(site):
    _, log = site
    assert not re.findall(r"^(?:WARNING|ERROR)\b.*", log, re.M), log
    assert "NETWORK:" not in log, log


def test_the_pages_load_nothing_from_other_hosts(site):
    out, _ = site
    pages = sorted(out.rglob("*.html"))
    assert pages
    remote = {
        str(page.relative_to(out)): REMOTE_ASSET.findall(page.read_text(encoding="utf-8"))
        for page in pages
    }
    assert {page: found for page, found in remote.items() if found} == {}
    assert not any("fonts.googleapis" in p.read_text(encoding="utf-8") for p in pages)


def test_every_page_of_the_navigation_is_built(site):
    out, _ = site
    config = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    pages = re.findall(r"^\s*- [^:\n]+: (\S+\.md)$", config, re.M)
    assert len(pages) >= 20
    for page in pages:
        built = out / (page.removesuffix(".md").removesuffix("index") + "/index.html")
        built = out / "index.html" if page == "index.md" else built
        assert built.is_file(), f"{page} was not built as {built.relative_to(out)}"
    docs = {str(p.relative_to(ROOT / "docs")) for p in (ROOT / "docs").rglob("*.md")}
    assert docs == set(pages), "every page under docs/ is in the navigation"


def test_the_api_reference_is_generated_from_the_docstrings(site):
    out, _ = site
    reference = {  # page -> objects with a heading (an anchor) of their own
        "index": [
            "config.loader.load_workflow",
            "runtime.flows.workflow_flow",
            "flows.run_workflow",
        ],
        "protocol": [
            "protocol.MemoryStore.query",
            "protocol.Scope",
            "protocol.QueryHit",
            "ledger.LedgerStore",
            "ledger.LedgerEvent",
        ],
        "budget": ["budget.TokenBudget", "budget.TokenCounter", "budget.pack"],
        "memory": [
            "memory.MemoryLayer",
            "memory.MemoryLoader",
            "memory.MemoryType",
            "memory.LedgerRecord",
        ],
        "blocks": [
            "blocks.SQLiteMemoryStore",
            "blocks.ZepMemoryStore",
            "blocks.JsonRpcMemoryStore",
        ],
        "stores": [
            "stores.BaseStore",
            "stores.SQLiteStore",
            "stores.SQLiteLedgerStore",
            "stores.zep.ZepStore",
        ],
    }
    for page, names in reference.items():
        built = out / "reference" / ("" if page == "index" else page) / "index.html"
        html = built.read_text(encoding="utf-8")
        missing = [name for name in names if f'id="animus_flows.{name}"' not in html]
        assert not missing, f"reference/{page}.md lacks {missing}"
    blocks = (out / "reference" / "blocks" / "index.html").read_text(encoding="utf-8")
    assert "Load a saved block and query it" in blocks  # the docstrings' Example: sections


def test_links_to_repository_files_point_at_the_repository(site):
    out, _ = site
    html = (out / "protocol" / "index.html").read_text(encoding="utf-8")
    assert (
        'href="https://github.com/animus-flows/animus-flows/blob/main/examples/plugins/dict_plugin.py"'
        in html
    )
