"""Byte channels over file descriptors for the plugin server: stdin in, protocol stdout out.

Pipes and sockets go through asyncio's pipe transports; files and terminals (a person typing
requests, or `< requests.jsonl`) through a worker thread, because the event loop cannot poll
them and switching a terminal to non-blocking mode would break the shell around it.
"""

from __future__ import annotations

import asyncio
import os
import stat
import sys
import threading


def claim_stdout() -> int:
    """Reserve the real stdout for protocol messages and point fd 1 at stderr.

    Returns a new descriptor for the original stdout. Afterwards anything else that writes to
    stdout (a stray print, a library, a C extension) lands on stderr and cannot corrupt the
    protocol stream.
    """
    sys.stdout.flush()
    protocol_fd = os.dup(1)
    os.dup2(2, 1)
    return protocol_fd


def _pollable(fd: int) -> bool:
    mode = os.fstat(fd).st_mode
    return (stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)) and not os.isatty(fd)


class FdReader:
    """Reads chunks from a descriptor; `read()` returns b"" at end of input."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self._stream: asyncio.StreamReader | None = None

    async def open(self) -> None:
        if _pollable(self.fd):
            loop = asyncio.get_running_loop()
            self._stream = asyncio.StreamReader(limit=2**16)
            protocol = asyncio.StreamReaderProtocol(self._stream)
            pipe = os.fdopen(self.fd, "rb", buffering=0, closefd=False)
            await loop.connect_read_pipe(lambda: protocol, pipe)

    async def read(self) -> bytes:
        if self._stream is not None:
            return await self._stream.read(2**16)
        return await asyncio.to_thread(os.read, self.fd, 2**16)


class FdWriter:
    """Writes whole messages to a descriptor, one at a time, in order."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self._stream: asyncio.StreamWriter | None = None
        self._lock = threading.Lock()

    async def open(self) -> None:
        if _pollable(self.fd):
            loop = asyncio.get_running_loop()
            pipe = os.fdopen(self.fd, "wb", buffering=0, closefd=False)
            transport, protocol = await loop.connect_write_pipe(
                asyncio.streams.FlowControlMixin, pipe
            )
            self._stream = asyncio.StreamWriter(transport, protocol, None, loop)

    async def write(self, data: bytes) -> None:
        if self._stream is not None:
            self._stream.write(data)
            await self._stream.drain()
        else:
            await asyncio.to_thread(self._write_all, data)

    def _write_all(self, data: bytes) -> None:
        with self._lock:
            view = memoryview(data)
            while view:
                view = view[os.write(self.fd, view) :]

    def close(self) -> None:
        if self._stream is not None:
            self._stream.close()
