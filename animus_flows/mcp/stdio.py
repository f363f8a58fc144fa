"""What both servers share: plain logs on stderr, so stdout carries the protocol only."""

from __future__ import annotations

import logging
import sys
from typing import TextIO

LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


class _StderrHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """Writes to whatever `sys.stderr` is at the time of the record."""

    @property  # type: ignore[override]
    def stream(self) -> TextIO:
        return sys.stderr

    @stream.setter
    def stream(self, value: TextIO) -> None:
        pass


def log_to_stderr(debug: bool = False) -> None:
    """One line per record on stderr; animus's own records at INFO, everyone else's at WARNING.

    Called once a server is about to serve (a configuration error never gets here), before
    the SDK builds its server, whose `logging.basicConfig` then leaves it alone.
    """
    root = logging.getLogger()
    if not any(isinstance(h, _StderrHandler) for h in root.handlers):
        handler = _StderrHandler()
        handler.setFormatter(logging.Formatter(LOG_FORMAT))
        root.addHandler(handler)
    root.setLevel(logging.DEBUG if debug else logging.WARNING)
    logging.getLogger("animus_flows").setLevel(logging.DEBUG if debug else logging.INFO)
