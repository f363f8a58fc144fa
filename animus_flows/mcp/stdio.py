"""What both servers share: plain logs on stderr, so stdout carries the protocol only."""

from __future__ import annotations

import logging
import sys

LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


def log_to_stderr(debug: bool = False) -> None:
    """One line per record on stderr; animus's own records at INFO, everyone else's at WARNING.

    Runs before the SDK builds its server, whose `logging.basicConfig` then leaves it alone.
    """
    root = logging.getLogger()
    if not any(getattr(h, "_animus_mcp", False) for h in root.handlers):
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter(LOG_FORMAT))
        handler._animus_mcp = True  # type: ignore[attr-defined]
        root.addHandler(handler)
    root.setLevel(logging.DEBUG if debug else logging.WARNING)
    logging.getLogger("animus_flows").setLevel(logging.DEBUG if debug else logging.INFO)
