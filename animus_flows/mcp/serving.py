"""What both servers share: plain logs on stderr (stdout carries the protocol only), and the
choice of tool-name style for clients that refuse dots in tool names."""

from __future__ import annotations

import logging
import sys
from typing import TextIO

from animus_flows.errors import ConfigError
from animus_flows.redaction import get_logger

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
    get_logger("animus_flows").setLevel(logging.DEBUG if debug else logging.INFO)


#: `dotted` keeps the contract's names (`animus.memory.read`); `underscored` serves
#: `animus_memory_read` for clients, such as Claude Desktop, that accept only [A-Za-z0-9_-].
TOOL_NAME_STYLES = ("dotted", "underscored")


def check_tool_names(style: str) -> str:
    """`style` when it is a `--tool-names` style; ConfigError otherwise."""
    if style not in TOOL_NAME_STYLES:
        raise ConfigError(f"--tool-names {style!r} is not a style; use dotted or underscored")
    return style


def tool_name(name: str, style: str) -> str:
    """`name` in the given style: `animus.memory.read` or `animus_memory_read`."""
    return name if check_tool_names(style) == "dotted" else name.replace(".", "_")
