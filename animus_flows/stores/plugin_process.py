"""One plugin child process and the JSON-RPC conversation with it.

Requests carry ids and run concurrently; one reader task per process hands each response to
the call waiting for it. Whatever goes wrong with the child ends the same way, within the
caller's deadline: a hang, a crash, an early exit or garbage on stdout stops the process (its
whole process group, so helpers it spawned go too), reaps it, fails the calls in flight with
`StoreTimeout` or `StoreUnavailable`, and the next call starts a fresh process. Process
groups make this POSIX-only (Linux, macOS), like the workers that run it.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shlex
import signal
from collections import deque
from collections.abc import Mapping, Sequence
from pathlib import Path

from animus_flows.errors import ConfigError, StoreTimeout, StoreUnavailable
from animus_flows.jsonrpc import codec
from animus_flows.protocol import JSON, METHOD_INITIALIZE, PROTOCOL_VERSION
from animus_flows.redaction import get_logger, redact, redact_head

log = get_logger("animus_flows.stores.registry")

STDERR_TAIL_LINES = 20
#: How much of a garbage stdout line an error quotes.
SHOWN_LINE_CHARS = 80
#: How long a plugin gets to exit by itself after its stdin closes, then after SIGTERM.
EXIT_GRACE_S = 1.0


class PluginProcess:
    """Starts a plugin on demand and exchanges requests with it.

    Args:
        command: the program and its arguments.
        name: how errors and logs refer to the plugin (its id in the workflow file).
        env: the complete environment of the child.
        cwd: the child's working folder.
        startup_timeout: seconds for starting and answering `initialize`.
        call_timeout: seconds for one call; a plugin that misses it is stopped.
    """

    def __init__(
        self,
        command: Sequence[str],
        *,
        name: str,
        env: Mapping[str, str] | None = None,
        cwd: Path | None = None,
        startup_timeout: float = 5.0,
        call_timeout: float = 5.0,
    ) -> None:
        if not command:
            raise ConfigError(f"plugin {name}: command is empty; give the program to run")
        self.command = list(command)
        self.name = name
        self.env = dict(env) if env is not None else None
        self.cwd = cwd
        self.startup_timeout = startup_timeout
        self.call_timeout = call_timeout
        self.handshake: codec.Handshake | None = None
        self._proc: asyncio.subprocess.Process | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._lock: asyncio.Lock | None = None
        self._pending: dict[int, asyncio.Future[codec.Response]] = {}
        self._next_id = 0
        self._tasks: list[asyncio.Task[None]] = []
        self._stderr_tail: deque[str] = deque(maxlen=STDERR_TAIL_LINES)

    @property
    def pid(self) -> int | None:
        """The running child's pid, None when no child is running."""
        return self._proc.pid if self._alive() else None  # type: ignore[union-attr]

    def _alive(self) -> bool:
        return self._proc is not None and self._proc.returncode is None

    # -- calls ----------------------------------------------------------------------------

    async def ensure_started(self) -> codec.Handshake:
        """Start the plugin and shake hands, unless a live plugin already did."""
        loop = asyncio.get_running_loop()
        if self._loop is loop and self.handshake is not None and self._alive():
            return self.handshake  # the common case: no lock on the hot path
        if self._loop is not loop:
            # Pipes belong to the loop that opened them; a new loop gets a new process.
            self._abandon()
            self._loop, self._lock = loop, asyncio.Lock()
        assert self._lock is not None
        async with self._lock:
            if self._alive() and self.handshake is not None:
                return self.handshake
            return await self._start()

    async def call(self, method: str, params: Mapping[str, JSON]) -> JSON:
        """Send one request and return its result; raises the error the plugin answered."""
        await self.ensure_started()
        proc = self._proc
        try:
            async with asyncio.timeout(self.call_timeout):  # no extra task, unlike wait_for
                response = await self._exchange(method, params)
        except TimeoutError:
            await self._stop(proc, hard=True)
            raise StoreTimeout(
                f"plugin {self.name} did not answer {method} within "
                f"{self.call_timeout * 1000:.0f} ms; it was stopped and will restart on the next "
                "call (raise call_timeout_ms, or fix the plugin)"
            ) from None
        if response.error is not None:
            raise codec.error_from_response(response.error, f"plugin {self.name}")
        return response.result

    async def _exchange(self, method: str, params: Mapping[str, JSON]) -> codec.Response:
        proc = self._proc
        if proc is None or proc.stdin is None:
            raise StoreUnavailable(f"plugin {self.name} is not running")
        self._next_id += 1
        request_id = self._next_id
        future: asyncio.Future[codec.Response] = asyncio.get_running_loop().create_future()
        self._pending[request_id] = future
        try:
            try:
                proc.stdin.write(codec.request(request_id, method, params))
                await proc.stdin.drain()
            except (BrokenPipeError, ConnectionResetError):
                # The reader sees the exit too and explains it; wait for that explanation.
                pass
            return await future
        finally:
            # A caller that gave up (timeout, cancellation) leaves no entry behind; a late
            # response for it is dropped by the reader.
            self._pending.pop(request_id, None)

    # -- starting -------------------------------------------------------------------------

    async def _start(self) -> codec.Handshake:
        if self._proc is not None:
            await self._stop(self._proc, hard=True)
        self.handshake = None
        self._stderr_tail.clear()
        self._check_cwd()
        try:
            proc = await asyncio.create_subprocess_exec(
                *self.command,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                env=self.env,
                cwd=self.cwd,
                start_new_session=True,  # its own process group: stopping it stops its helpers
            )
        except FileNotFoundError:
            raise ConfigError(
                f"plugin {self.name}: command {self.command[0]!r} was not found"
                f"{self._where()}; install it, or fix `command:` (use an absolute path or a "
                "program on PATH)"
            ) from None
        except PermissionError:
            raise ConfigError(
                f"plugin {self.name}: command {self.command[0]!r} is not executable; "
                "make it executable (chmod +x) or run it through its interpreter"
            ) from None
        except OSError as exc:
            raise ConfigError(
                f"plugin {self.name}: cannot start {self.command[0]!r} ({exc.strerror}); "
                "fix `command:`"
            ) from None
        self._proc = proc
        stderr = asyncio.create_task(self._read_stderr(proc))
        self._tasks = [asyncio.create_task(self._read_stdout(proc, stderr)), stderr]
        params = {"protocol_version": PROTOCOL_VERSION, "host": {"name": "animus-flows"}}
        try:
            response = await asyncio.wait_for(
                self._exchange(METHOD_INITIALIZE, params), self.startup_timeout
            )
            if response.error is not None:
                raise codec.error_from_response(response.error, f"plugin {self.name}")
            handshake = codec.parse_initialize(response.result, f"plugin {self.name}")
        except TimeoutError:
            await self._stop(proc, hard=True)
            raise StoreTimeout(
                f"plugin {self.name} did not answer initialize within "
                f"{self.startup_timeout * 1000:.0f} ms; it was stopped. Check that "
                f"{self.command[0]!r} is a plugin reading JSON-RPC lines on stdin, or raise "
                "startup_timeout_ms"
            ) from None
        except BaseException:  # a refusal, a bad answer, a crash, or the caller giving up
            await self._stop(proc, hard=True)
            raise
        self.handshake = handshake
        log.debug("plugin %s started (pid %s): %s", self.name, proc.pid, handshake)
        return handshake

    def _check_cwd(self) -> None:
        if self.cwd is not None and not self.cwd.is_dir():
            raise ConfigError(
                f"plugin {self.name}: working folder {self.cwd} does not exist; fix `cwd:`"
            )

    def _where(self) -> str:
        return f" (working folder {self.cwd})" if self.cwd is not None else ""

    # -- reading --------------------------------------------------------------------------

    async def _read_stdout(
        self, proc: asyncio.subprocess.Process, stderr: asyncio.Task[None]
    ) -> None:
        assert proc.stdout is not None
        splitter = codec.LineSplitter()
        while chunk := await proc.stdout.read(2**16):
            for line in splitter.feed(chunk):
                problem = self._deliver(line)
                if problem is not None:
                    await self._fail(proc, StoreUnavailable(problem))
                    return
        leftover = splitter.pending()
        if leftover is not None and (problem := self._deliver(leftover)) is not None:
            await self._fail(proc, StoreUnavailable(problem))
            return
        # stdout closed: the plugin exited, or can no longer answer; make sure it is gone.
        try:
            code = await asyncio.wait_for(proc.wait(), EXIT_GRACE_S)
        except TimeoutError:
            code = None
        # Its last words on stderr usually say why; give them a moment to arrive.
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.shield(stderr), EXIT_GRACE_S / 2)
        how = f"exited with code {code}" if code is not None else "closed its stdout"
        await self._fail(
            proc,
            StoreUnavailable(
                f"plugin {self.name} {how}{self._stderr_hint()}; it restarts on the next call "
                f"(run {shlex.join(self.command)!r} by hand to see why)"
            ),
        )

    def _deliver(self, line: bytes | codec.OversizedLine) -> str | None:
        """Hand a response to its caller; returns what is wrong when the line is not one."""
        if isinstance(line, codec.OversizedLine):
            return (
                f"plugin {self.name} wrote a {line.size}-byte line, over the "
                f"{codec.MAX_MESSAGE_BYTES}-byte limit; it was stopped"
            )
        if not line.strip():
            return None
        try:
            response = codec.parse_response(codec.decode(line))
        except (codec.ProtocolError, ValueError):
            # Only the head is decoded: the line may be megabytes long.
            head = line[: 64 * SHOWN_LINE_CHARS].decode("utf-8", "replace")
            shown = redact_head(head, SHOWN_LINE_CHARS)
            return (
                f"plugin {self.name} wrote {shown!r} to stdout, which is not a JSON-RPC "
                "response; it was stopped. A plugin writes only protocol messages to stdout "
                "and logs to stderr"
            )
        future = self._pending.get(response.id) if isinstance(response.id, int) else None
        if future is None:
            log.debug("plugin %s: dropping a response to %r", self.name, response.id)
        elif not future.done():
            future.set_result(response)
        return None

    async def _read_stderr(self, proc: asyncio.subprocess.Process) -> None:
        assert proc.stderr is not None
        splitter = codec.LineSplitter(limit=2**16)
        while chunk := await proc.stderr.read(2**16):
            for line in splitter.feed(chunk):
                if isinstance(line, bytes) and line.strip():
                    # Redacted as it arrives: the line goes to the log and into error messages.
                    text = redact(line.decode("utf-8", "replace").rstrip()).text
                    self._stderr_tail.append(text)
                    log.info("plugin %s: %s", self.name, text)

    def _stderr_hint(self) -> str:
        if not self._stderr_tail:
            return ""
        return f"; its stderr ended with: {self._stderr_tail[-1][:200]!r}"

    # -- stopping -------------------------------------------------------------------------

    async def _fail(self, proc: asyncio.subprocess.Process, error: StoreUnavailable) -> None:
        """Stop `proc`, then fail every call waiting on it with `error`."""
        await self._stop(proc, hard=True, error=error)

    async def _stop(
        self,
        proc: asyncio.subprocess.Process | None,
        *,
        hard: bool,
        error: StoreUnavailable | None = None,
    ) -> None:
        """End `proc` and reap it (SIGKILL when `hard`, else EOF, then SIGTERM, then SIGKILL),
        then fail the calls that were waiting on it."""
        if proc is None:
            return
        waiting: list[asyncio.Future[codec.Response]] = []
        if self._proc is proc:
            self._proc = None
            self.handshake = None
            waiting = list(self._pending.values())
        if proc.returncode is None and not hard:
            if proc.stdin is not None:
                proc.stdin.close()
            for sig in (signal.SIGTERM, None):
                try:
                    await asyncio.wait_for(proc.wait(), EXIT_GRACE_S)
                    break
                except TimeoutError:
                    if sig is not None:
                        _signal_group(proc.pid, sig)
        if proc.returncode is None:
            # Only while the leader is unreaped: its pid, hence the group id, cannot be reused.
            _signal_group(proc.pid, signal.SIGKILL)
        await proc.wait()
        if proc.stdin is not None:
            proc.stdin.close()
        # Callers hear about it only once the process is gone: nothing is left behind.
        error = error or StoreUnavailable(f"plugin {self.name} was stopped{self._stderr_hint()}")
        for future in waiting:
            if not future.done():
                future.set_exception(error)

    def _abandon(self) -> None:
        """Forget a process started on another (possibly closed) event loop, killing it."""
        if self._proc is not None and self._proc.returncode is None:
            _signal_group(self._proc.pid, signal.SIGKILL)
        self._proc = None
        self.handshake = None
        self._pending.clear()
        self._tasks = []

    async def close(self) -> None:
        """Stop the plugin gracefully (EOF, then SIGTERM, then SIGKILL) and reap it."""
        if self._loop is not None and self._loop is not asyncio.get_running_loop():
            self._abandon()
            return
        proc = self._proc
        await self._stop(proc, hard=False)
        tasks, self._tasks = self._tasks, []
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task


def _signal_group(pid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, sig)
