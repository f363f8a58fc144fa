"""Drive animus's MCP servers the way an agent does: the official client over stdio."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, TextIO

from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

ANIMUS = [sys.executable, "-m", "animus_flows"]


@asynccontextmanager
async def mcp_session(
    command: str,
    args: list[str],
    *,
    env: dict[str, str] | None = None,
    cwd: str | Path | None = None,
    errlog: TextIO | None = None,
) -> AsyncIterator[ClientSession]:
    """An initialized client session on a server process started like an agent CLI would."""
    params = StdioServerParameters(command=command, args=args, env=env, cwd=cwd)
    async with (
        stdio_client(params, errlog=errlog or sys.stderr) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        yield session


@asynccontextmanager
async def animus_mcp(*args: str, **kwargs: Any) -> AsyncIterator[ClientSession]:
    """A session on `python -m animus_flows mcp ARGS...`."""
    async with mcp_session(ANIMUS[0], [*ANIMUS[1:], "mcp", *args], **kwargs) as session:
        yield session


def text_of(result: Any) -> str:
    return "".join(getattr(block, "text", "") for block in result.content)
