"""Keep Prefect's console chatter out of `animus run` and `animus preflight` output.

Prefect reads these settings when it first configures logging, so they must be set before
Prefect is imported. Only the console is quieted: flow-run logs still reach the API (and the
UI) at INFO, audit lines included. Users' explicit settings win.
"""

from __future__ import annotations

import os

QUIET_SETTINGS = {
    # the CLI prints its own one-line warnings and errors; API logs (the UI) are untouched
    "PREFECT_LOGGING_HANDLERS_CONSOLE_LEVEL": "CRITICAL",
    # the temporary server's start/stop banners
    "PREFECT_SERVER_LOGGING_LEVEL": "WARNING",
    "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
    # the first temporary server migrates a new database; on a busy machine that exceeds 20 s
    "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "120",
}


def quiet_prefect(debug: bool = False) -> None:
    """Quiet Prefect's console; with `debug`, leave it as configured (tracebacks included)."""
    if debug:
        return
    for name, value in QUIET_SETTINGS.items():
        os.environ.setdefault(name, value)
