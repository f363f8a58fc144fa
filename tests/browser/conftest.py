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
import contextlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

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
SERVER_STARTUP_S = 180  # a cold start migrates the database and copies the UI: slow on loaded CI
IDLE_SERVICES = ("SCHEDULER", "LATE_RUNS", "FOREMAN", "CANCELLATION_CLEANUP", "PAUSE_EXPIRATIONS",
                 "REPOSSESSOR", "TRIGGERS", "CLEANUP_RECONCILER")  # fmt: skip
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


def clean_environment() -> dict[str, str]:
    """This process's environment without Prefect settings: each child gets its own."""
    return {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}


# -- the Prefect server --------------------------------------------------------------------


@dataclass(frozen=True)
class PrefectServer:
    """A `prefect server start` of this session, with its UI at `url`."""

    url: str  # http://127.0.0.1:<port>
    root: Path  # its PREFECT_HOME, UI files and log are under here
    log: Path

    @property
    def api_url(self) -> str:
        return f"{self.url}/api"

    def client_env(self) -> dict[str, str]:
        """The environment for a client process (`animus run`, `prefect ...`) of this server."""
        return {
            **clean_environment(),
            "PREFECT_API_URL": self.api_url,
            "PREFECT_HOME": str(self.root / "client-home"),
            "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
        }

    def api(self, method: str, path: str, **kwargs: Any) -> Any:
        response = httpx.request(method, f"{self.api_url}{path}", timeout=30, **kwargs)
        response.raise_for_status()
        return response.json()

    def wait_for_events(
        self, flow_run_id: str, event: str, until: Callable[[list[dict[str, Any]]], bool]
    ) -> list[dict[str, Any]]:
        """The flow run's `event` events, once `until(events)` holds (or the UI timeout
        passed): the server persists events in batches, a moment after a run sent them."""
        deadline = time.monotonic() + UI_TIMEOUT_MS / 1000
        body = {
            "filter": {
                "event": {"name": [event]},
                "any_resource": {"id": [f"prefect.flow-run.{flow_run_id}"]},
            },
            "limit": 50,  # the API's most per page; a run of these tests makes fewer
        }
        while True:
            events = self.api("POST", "/events/filter", json=body)["events"]
            if until(events) or time.monotonic() > deadline:
                return events
            time.sleep(0.25)

    def log_tail(self, lines: int = 40) -> str:
        text = self.log.read_text(encoding="utf-8", errors="replace") if self.log.exists() else ""
        return "\n".join(text.splitlines()[-lines:])


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class ProcessGroup:
    """A child started in a process group of its own, and stopped whole: no orphans.

    The leader is reaped only once the group has been killed: until then its zombie keeps
    its pid, which is the group's id, from being reused, so the signals reach no one else.
    """

    def __init__(self, command: list[str], **options: Any) -> None:
        self.process = subprocess.Popen(command, start_new_session=True, **options)

    def poll(self) -> int | None:
        """The leader's exit status once it has exited, without reaping it."""
        if self.process.returncode is not None:
            return self.process.returncode
        info = os.waitid(os.P_PID, self.process.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
        return None if info is None else info.si_status

    def stop(self, grace_s: float = 15) -> None:
        """SIGTERM to the group, SIGKILL to whatever is left after `grace_s`; idempotent."""
        if self.process.returncode is not None:
            return  # stopped and reaped already
        pgid = self.process.pid
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pgid, signal.SIGTERM)
        deadline = time.monotonic() + grace_s
        while self.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        with contextlib.suppress(ProcessLookupError):  # stragglers, or a leader that hung
            os.killpg(pgid, signal.SIGKILL)
        self.process.wait(timeout=15)


def wait_until_healthy(server: PrefectServer, process: ProcessGroup) -> None:
    deadline = time.monotonic() + SERVER_STARTUP_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            pytest.fail(
                f"prefect server exited with code {process.poll()} before it answered:\n"
                f"{server.log_tail()}",
                pytrace=False,
            )
        with contextlib.suppress(httpx.HTTPError):
            health = httpx.get(f"{server.api_url}/health", timeout=2)
            if health.status_code == 200 and health.json() is True:
                ui = httpx.get(server.url, timeout=5, follow_redirects=True)
                assert ui.status_code == 200 and "<html" in ui.text.lower(), ui.text[:500]
                return
        time.sleep(0.25)
    pytest.fail(
        f"prefect server did not answer {server.api_url}/health within {SERVER_STARTUP_S} s:\n"
        f"{server.log_tail()}",
        pytrace=False,
    )


@pytest.fixture(scope="session")
def prefect_ui_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PrefectServer]:
    """`prefect server start` on a free port with its own PREFECT_HOME, UI included."""
    root = tmp_path_factory.mktemp("prefect-ui-server")
    port = free_port()
    server = PrefectServer(url=f"http://127.0.0.1:{port}", root=root, log=root / "server.log")
    env = {
        **clean_environment(),
        "PREFECT_HOME": str(root / "home"),
        "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
        "PREFECT_UI_API_URL": server.api_url,
        # The UI's files are copied out of the wheel at start-up: here, not into site-packages.
        "PREFECT_UI_STATIC_DIRECTORY": str(root / "ui"),
        "PREFECT_SERVER_UI_SHOW_PROMOTIONAL_CONTENT": "false",
        # Events reach the event feed once persisted; the default waits up to 5 s for a batch.
        "PREFECT_SERVER_SERVICES_EVENT_PERSISTER_FLUSH_INTERVAL": "0.5",
        "PREFECT_SERVER_LOGGING_LEVEL": "WARNING",
        # Services that schedule, reschedule or clean up runs: nothing here needs them, and
        # they share the machine's CPU with the suite. Events and task runs are recorded.
        **{f"PREFECT_SERVER_SERVICES_{service}_ENABLED": "false" for service in IDLE_SERVICES},
    }
    command = [str(BIN / "prefect"), "server", "start", "--host", "127.0.0.1", "--port", str(port)]
    with server.log.open("wb") as log:
        process = ProcessGroup(
            command, env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT
        )
    atexit.register(process.stop)  # should the session end without its teardown
    try:
        wait_until_healthy(server, process)
        yield server
    finally:
        process.stop()


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
