"""A real `prefect server start` for tests and benchmarks, on a free port, stopped whole.

    server = start_prefect_server(tmp_path, ui=True)
    try:
        subprocess.run(["animus", "run", "animus.yaml"], env=server.client_env())
    finally:
        server.stop()

The server gets its own PREFECT_HOME under `root` and none of this process's Prefect settings;
the services that schedule, reschedule or clean up runs are off (nothing submitted by a test
needs them, and they share the machine's CPU). Its database is Prefect's SQLite file unless
`env` names another (`PREFECT_API_DATABASE_CONNECTION_URL`).
"""

from __future__ import annotations

import contextlib
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from animus_flows.testing.postgres import free_port
from animus_flows.testing.processes import ProcessGroup, clean_environment

STARTUP_S = 180  # a cold start migrates the database (and copies the UI): slow on a busy CI
IDLE_SERVICES = ("SCHEDULER", "LATE_RUNS", "FOREMAN", "CANCELLATION_CLEANUP", "PAUSE_EXPIRATIONS",
                 "REPOSSESSOR", "TRIGGERS", "CLEANUP_RECONCILER")  # fmt: skip


@dataclass(frozen=True)
class PrefectServer:
    """A running `prefect server start`, its API at `api_url` (and its UI at `url`)."""

    url: str  # http://127.0.0.1:<port>
    root: Path  # its PREFECT_HOME, UI files and log are under here
    log: Path
    process: ProcessGroup

    @property
    def api_url(self) -> str:
        return f"{self.url}/api"

    def client_env(self, home: str = "client-home") -> dict[str, str]:
        """The environment of a client process (the CLI, a worker) of this server."""
        return {
            **clean_environment(),
            "PREFECT_API_URL": self.api_url,
            "PREFECT_HOME": str(self.root / home),
            "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
        }

    def api(self, method: str, path: str, **kwargs: Any) -> Any:
        """One call of the server's REST API; its JSON answer."""
        response = httpx.request(method, f"{self.api_url}{path}", timeout=60, **kwargs)
        response.raise_for_status()
        return response.json()

    def wait_for_events(
        self,
        flow_run_id: str,
        event: str,
        until: Callable[[list[dict[str, Any]]], bool],
        timeout_s: float = 30,
    ) -> list[dict[str, Any]]:
        """The flow run's `event` events, once `until(events)` holds (or `timeout_s` passed):
        the server persists events in batches, a moment after a run sent them."""
        deadline = time.monotonic() + timeout_s
        body = {
            "filter": {
                "event": {"name": [event]},
                "any_resource": {"id": [f"prefect.flow-run.{flow_run_id}"]},
            },
            "limit": 50,  # the API's most per page
        }
        while True:
            events = self.api("POST", "/events/filter", json=body)["events"]
            if until(events) or time.monotonic() > deadline:
                return events
            time.sleep(0.25)

    def log_tail(self, lines: int = 40) -> str:
        text = self.log.read_text(encoding="utf-8", errors="replace") if self.log.exists() else ""
        return "\n".join(text.splitlines()[-lines:])

    def stop(self) -> None:
        """Stop the server and every process it started; idempotent."""
        self.process.stop()


def start_prefect_server(
    root: Path, *, ui: bool = False, env: Mapping[str, str] | None = None
) -> PrefectServer:
    """Start a server under `root` and wait until it answers (and serves its UI, with `ui`).

    Raises:
        RuntimeError: the server exited or did not answer within `STARTUP_S`; the message
            ends with its log's last lines.
    """
    root.mkdir(parents=True, exist_ok=True)
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    settings = {
        **clean_environment(),
        "PREFECT_HOME": str(root / "home"),
        "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
        "PREFECT_SERVER_LOGGING_LEVEL": "WARNING",
        **{f"PREFECT_SERVER_SERVICES_{service}_ENABLED": "false" for service in IDLE_SERVICES},
    }
    if ui:
        settings |= {
            "PREFECT_UI_API_URL": f"{url}/api",
            # The UI's files are copied out of the wheel at start-up: here, not into the wheel.
            "PREFECT_UI_STATIC_DIRECTORY": str(root / "ui"),
            "PREFECT_SERVER_UI_SHOW_PROMOTIONAL_CONTENT": "false",
        }
    else:
        settings["PREFECT_UI_ENABLED"] = "false"
    log = root / "server.log"
    prefect = str(Path(sys.executable).with_name("prefect"))
    command = [prefect, "server", "start", "--host", "127.0.0.1", "--port", str(port)]
    with log.open("wb") as out:
        process = ProcessGroup(
            command,
            env={**settings, **(env or {})},
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    server = PrefectServer(url, root, log, process)
    try:
        _wait_until_healthy(server, ui)
    except BaseException:
        server.stop()
        raise
    return server


def _wait_until_healthy(server: PrefectServer, ui: bool) -> None:
    deadline = time.monotonic() + STARTUP_S
    while time.monotonic() < deadline:
        if server.process.poll() is not None:
            raise RuntimeError(
                f"prefect server exited with code {server.process.poll()} before it answered:"
                f"\n{server.log_tail()}"
            )
        with contextlib.suppress(httpx.HTTPError):
            health = httpx.get(f"{server.api_url}/health", timeout=2)
            if health.status_code == 200 and health.json() is True:
                if ui:
                    page = httpx.get(server.url, timeout=5, follow_redirects=True)
                    if page.status_code != 200 or "<html" not in page.text.lower():
                        raise RuntimeError(f"prefect server's UI answered {page.text[:500]}")
                return
        time.sleep(0.25)
    raise RuntimeError(
        f"prefect server did not answer {server.api_url}/health within {STARTUP_S} s:\n"
        f"{server.log_tail()}"
    )
