"""Browser tests: a real Prefect server with its UI, and Debian's chromium driven by playwright.

The server, the browser, `animus_run` (any workflow file) and `run_example` (a copy of one of
examples/) are session-scoped, so every test under tests/browser shares one server and one
browser and runs workflows of its own against them; `ui_page` is a fresh page per test.
These tests run last in the session (see `pytest_collection_modifyitems`): the server and the
browser start when the first of them needs one and stop when the suite ends.

The browser is /usr/bin/chromium from Debian (`apt-get install chromium`; ANIMUS_CHROMIUM
names another path), never one that `playwright install` downloads. Without it (or without playwright) the tests skip with the
reason; with CI=true they fail, so CI never passes without having looked at the UI.
"""

from __future__ import annotations

import atexit
import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from animus_flows.testing.prefect_server import PrefectServer, start_prefect_server

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
BIN = Path(sys.executable).parent
SCREENSHOTS = ROOT / "docs" / "assets" / "screenshots"

# Debian's chromium; ANIMUS_CHROMIUM names another path to it (and lets a test check what a
# machine without it does).
CHROMIUM = Path(os.environ.get("ANIMUS_CHROMIUM", "/usr/bin/chromium"))
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
]
VIEWPORT = {"width": 1600, "height": 1000}
IN_CI = os.environ.get("CI", "").strip().lower() in {"1", "true", "yes"}
UI_TIMEOUT_MS = 30_000  # the longest a page may take to show what a test waits for


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "browser: drives the Prefect UI in Debian's chromium")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    # Session fixtures stop when the session ends: running these tests last keeps the server
    # and the browser from idling beside the rest of the suite. (A stable sort: their order,
    # and everyone else's, is kept.)
    here = Path(__file__).parent
    items.sort(key=lambda item: Path(item.path).is_relative_to(here))


def unavailable(reason: str) -> None:
    """Skip, or under CI=true fail: CI must run the browser tests."""
    if IN_CI:
        pytest.fail(f"{reason} (CI=true: the browser tests must run)", pytrace=False)
    pytest.skip(reason)


# -- the Prefect server --------------------------------------------------------------------


@pytest.fixture(scope="session")
def prefect_ui_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PrefectServer]:
    """`prefect server start` on a free port with its own PREFECT_HOME, UI included."""
    root = tmp_path_factory.mktemp("prefect-ui-server")
    try:
        # Events reach the event feed once persisted; the default waits up to 5 s for a batch.
        server = start_prefect_server(
            root, ui=True, env={"PREFECT_SERVER_SERVICES_EVENT_PERSISTER_FLUSH_INTERVAL": "0.5"}
        )
    except RuntimeError as exc:
        pytest.fail(str(exc), pytrace=False)
    atexit.register(server.stop)  # should the session end without its teardown
    try:
        yield server
    finally:
        server.stop()


# -- the browser ---------------------------------------------------------------------------


@pytest.fixture(scope="session")
def browser() -> Iterator[Any]:
    """Debian's chromium, headless, through playwright."""
    try:
        from playwright.sync_api import Error, sync_playwright
    except ImportError:
        unavailable("playwright is not installed: pip install -e '.[dev]'")
    if not os.access(CHROMIUM, os.X_OK):
        unavailable(f"Debian's chromium is not installed at {CHROMIUM}: apt-get install chromium")
    with sync_playwright() as playwright:
        try:
            launched = playwright.chromium.launch(
                executable_path=str(CHROMIUM), args=CHROMIUM_ARGS, headless=True
            )
        except Error as exc:
            unavailable(f"{CHROMIUM} did not start: {str(exc).splitlines()[0]}")
        try:
            yield launched
        finally:
            launched.close()


@pytest.fixture
def ui_page(browser: Any, prefect_ui_server: PrefectServer) -> Iterator[Any]:
    """A fresh page at 1600x1000 whose relative URLs are the server's UI. Requests to any
    other host are refused: the UI must work offline."""
    context = browser.new_context(viewport=VIEWPORT, base_url=prefect_ui_server.url)
    context.set_default_timeout(UI_TIMEOUT_MS)
    context.route(re.compile(r"^https?://(?!127\.0\.0\.1[:/])"), lambda route: route.abort())
    page = context.new_page()
    try:
        yield page
    finally:
        context.close()


def small(path: Path) -> None:
    """Rewrite a screenshot with a 256-colour palette: the UI's flat colours survive, and the
    file is a third of the size (the docs' PNGs stay well under 300 KB)."""
    from PIL import Image

    with Image.open(path) as shot:
        palette = shot.convert("RGB").quantize(
            256, Image.Quantize.MEDIANCUT, dither=Image.Dither.NONE
        )
    palette.save(path, optimize=True)


# The height of the page's content, the scrolling panes' included.
CONTENT_HEIGHT = """() => Math.max(
    document.documentElement.scrollHeight,
    ...[...document.querySelectorAll("*")]
        .filter(e => ["auto", "scroll"].includes(getComputedStyle(e).overflowY))
        .map(e => e.scrollHeight + e.getBoundingClientRect().top))"""


@pytest.fixture
def screenshot(tmp_path: Path) -> Callable[[Any, str], Path]:
    """`screenshot(page, "name")`: a full-page PNG, into docs/assets/screenshots/ when
    ANIMUS_UPDATE_SCREENSHOTS=1 (for the docs), else into the test's temporary folder."""
    folder = SCREENSHOTS if os.environ.get("ANIMUS_UPDATE_SCREENSHOTS") == "1" else tmp_path
    folder.mkdir(parents=True, exist_ok=True)

    def take(page: Any, name: str) -> Path:
        page.wait_for_load_state("networkidle")  # the run's data, fetched and drawn
        # The UI scrolls inside its own pane, so the document is never taller than the
        # window: grow the window to the pane's content for the shot (within a bound).
        height = page.evaluate(CONTENT_HEIGHT)
        page.set_viewport_size({**VIEWPORT, "height": min(max(height, VIEWPORT["height"]), 2400)})
        path = folder / f"{name}.png"
        try:
            page.wait_for_load_state("networkidle")
            page.screenshot(path=str(path), full_page=True)
        finally:
            page.set_viewport_size(VIEWPORT)
        small(path)
        return path

    return take


# -- workflow runs -------------------------------------------------------------------------


@dataclass(frozen=True)
class AnimusRun:
    """One `animus run ... --json` against the session's server."""

    workflow_file: Path
    returncode: int
    summary: dict[str, Any] | None  # the --json document; None when the run printed none
    stderr: str

    @property
    def flow_run_id(self) -> str:
        assert self.summary is not None, f"the run printed no summary:\n{self.stderr}"
        return self.summary["flow_run_id"]


@pytest.fixture(scope="session")
def animus_run(prefect_ui_server: PrefectServer) -> Callable[..., AnimusRun]:
    """`animus_run(path, task_id=..., workflow=..., cwd=..., check=True)` runs
    `animus run PATH --json` as a subprocess against the session's server; with `check`, a
    non-zero exit fails the test with the run's stderr."""

    def run(
        workflow_file: Path,
        *,
        task_id: str | None = None,
        workflow: str | None = None,
        cwd: Path | None = None,
        check: bool = True,
    ) -> AnimusRun:
        where = cwd or workflow_file.parent
        shown = (
            workflow_file.relative_to(where)
            if workflow_file.is_relative_to(where)
            else workflow_file
        )
        command = [str(BIN / "animus"), "run", str(shown), "--json"]
        command += ["--task-id", task_id] if task_id is not None else []
        command += ["--workflow", workflow] if workflow is not None else []
        done = subprocess.run(
            command, cwd=where, env=prefect_ui_server.client_env(), capture_output=True,
            text=True, timeout=300,
        )  # fmt: skip
        if check:
            assert done.returncode == 0, (
                f"{' '.join(command)} exited {done.returncode}:\n{done.stderr}"
            )
        try:
            summary = json.loads(done.stdout)
        except json.JSONDecodeError:
            summary = None
        return AnimusRun(workflow_file, done.returncode, summary, done.stderr)

    return run


@pytest.fixture(scope="session")
def run_example(
    prefect_ui_server: PrefectServer,
    animus_run: Callable[..., AnimusRun],
    tmp_path_factory: pytest.TempPathFactory,
) -> Callable[..., AnimusRun]:
    """`run_example("trade-desk", task_id="RES-001")` copies examples/trade-desk into a
    temporary folder (the checkout's store is never touched), seeds it when it has a seed.py,
    lets `edit(copy)` change the copy, and runs `animus run examples/<name>/<workflow_file>
    --json` from the copy's parent, as from the repository root."""

    def run(
        name: str,
        *,
        workflow_file: str = "animus.yaml",
        edit: Callable[[Path], None] | None = None,
        **options: Any,
    ) -> AnimusRun:
        root = tmp_path_factory.mktemp(f"run-{name}")
        copy = root / "examples" / name
        shutil.copytree(
            EXAMPLES / name, copy, ignore=shutil.ignore_patterns(".animus", "__pycache__")
        )
        if (copy / "seed.py").exists():
            subprocess.run(
                [sys.executable, "seed.py"], cwd=copy, env=prefect_ui_server.client_env(),
                check=True, timeout=120, capture_output=True,
            )  # fmt: skip
        if edit is not None:
            edit(copy)
        return animus_run(copy / workflow_file, cwd=root, **options)

    return run
