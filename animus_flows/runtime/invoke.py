"""Run a phase's runner: a Python callable, or a command that gets the contract as a file."""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import inspect
import json
import os
import signal
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from animus_flows.config.models import CommandRunner
from animus_flows.errors import AnimusError
from animus_flows.hooks.contract import RuntimeContract
from animus_flows.protocol import canonical_json
from animus_flows.redaction import redact, redact_exception

STDERR_TAIL_CHARS = 2000


class PhaseFailed(AnimusError):
    """A phase's hook or runner failed; the flow run stops there."""


async def call_python_runner(
    runner: Callable[..., Any],
    name: str,
    contract: RuntimeContract,
    *,
    timeout_s: float | None = None,
) -> Any:
    """Call `runner(contract)`; a sync runner runs in a thread so the event loop stays free.

    Past `timeout_s` (None: no deadline) the phase fails: an async runner is cancelled; a sync
    runner's thread cannot be stopped, so it is abandoned and runs on until it returns or the
    process exits.
    """
    deadline = asyncio.timeout(timeout_s)
    try:
        async with deadline:
            if inspect.iscoroutinefunction(runner):
                output = await runner(contract)
            else:
                if timeout_s is None:
                    output = await asyncio.to_thread(runner, contract)
                else:
                    output = await _in_daemon_thread(runner, contract)
                output = await output if inspect.isawaitable(output) else output
    except PhaseFailed:
        raise
    except (Exception, SystemExit) as exc:  # SystemExit: user code calling sys.exit()
        if isinstance(exc, TimeoutError) and deadline.expired():
            how = (
                "it was cancelled"
                if inspect.iscoroutinefunction(runner)
                else "its thread was abandoned (a thread cannot be stopped)"
            )
            raise PhaseFailed(
                f"runner {name!r} did not finish within timeout_s {timeout_s:g} in phase "
                f"{contract.phase_id!r}; {how}"
            ) from None
        raise user_code_failed(f"runner {name!r}", contract.phase_id, exc) from exc
    try:
        canonical_json(output)
    except (TypeError, ValueError) as exc:
        raise PhaseFailed(
            f"runner {name!r} returned {type(output).__name__} output in phase "
            f"{contract.phase_id!r} that is not text or JSON data ({exc}); return a str, or "
            "JSON data (dicts, lists, strings, finite numbers, booleans, None)"
        ) from None
    return output


def _in_daemon_thread(runner: Callable[..., Any], contract: RuntimeContract) -> asyncio.Future[Any]:
    """`runner(contract)` in a new daemon thread, in a copy of this context (as
    `asyncio.to_thread` does). Not in the loop's executor: its threads are joined when the loop
    and the interpreter shut down, so a runner abandoned at its deadline would hold the process
    open until it returned."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future[Any] = loop.create_future()
    context = contextvars.copy_context()

    def settle(result: Any, error: BaseException | None) -> None:
        if future.done():  # cancelled at the deadline
            return
        if error is None:
            future.set_result(result)
        else:
            future.set_exception(error)

    def work() -> None:
        try:
            result, error = context.run(runner, contract), None
        except BaseException as exc:  # handed to the awaiting phase, like asyncio.to_thread
            result, error = None, exc
        with contextlib.suppress(RuntimeError):  # the loop closed meanwhile: no one waits
            loop.call_soon_threadsafe(settle, result, error)

    threading.Thread(target=work, name=f"animus-runner-{contract.phase_id}", daemon=True).start()
    return future


def user_code_failed(what: str, phase_id: str, exc: BaseException) -> PhaseFailed:
    """The phase failure for an exception a runner or hook raised: one line naming it, with
    the exception's message redacted in place too (it travels on as the failure's cause, which
    Prefect logs whole)."""
    redact_exception(exc)
    text = "; ".join(line.strip() for line in str(exc).splitlines() if line.strip())
    return PhaseFailed(f"{what} failed in phase {phase_id!r}: {type(exc).__name__}: {text}")


def command_files(contract: RuntimeContract, folder: Path) -> dict[str, Path]:
    """Write the contract and the MCP server list where a command runner can read them.

    `mcp.json` is `{"mcpServers": {name: {"command", "args", "env"}}}`, the shape agent CLIs
    read (Claude Code's `--mcp-config FILE`, Claude Desktop's config file).
    """
    contract_path = folder / "contract.json"
    contract_path.write_text(contract.model_dump_json(indent=2), encoding="utf-8")
    mcp_path = folder / "mcp.json"
    mcp_path.write_text(
        json.dumps({"mcpServers": contract.mcp_servers}, indent=2), encoding="utf-8"
    )
    return {"contract_path": contract_path, "mcp_config_path": mcp_path}


def fill_placeholders(part: str, files: dict[str, Path]) -> str:
    """`{contract_path}` and `{mcp_config_path}` replaced; any other brace is left as written
    (a JSON argument or a prompt with braces is not a template)."""
    for name, path in files.items():
        part = part.replace(f"{{{name}}}", str(path))
    return part


async def run_command_runner(spec: CommandRunner, contract: RuntimeContract, cwd: Path) -> str:
    """Spawn the agent process; its stdout is the phase output.

    `{contract_path}` and `{mcp_config_path}` in the command are replaced by files holding the
    contract and `{"mcpServers": ...}`; both paths are also in ANIMUS_CONTRACT and
    ANIMUS_MCP_CONFIG. A timeout kills the whole process group; a non-zero exit fails the
    phase with the tail of stderr.
    """
    with tempfile.TemporaryDirectory(prefix="animus-phase-") as folder:
        files = command_files(contract, Path(folder))
        argv = [fill_placeholders(part, files) for part in spec.command]
        env = {
            **os.environ,
            **spec.env,
            "ANIMUS_CONTRACT": str(files["contract_path"]),
            "ANIMUS_MCP_CONFIG": str(files["mcp_config_path"]),
        }
        name = spec.command[0]
        try:
            process = await asyncio.create_subprocess_exec(
                *argv,
                cwd=cwd,
                env=env,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                start_new_session=True,
            )
        except OSError as exc:
            raise PhaseFailed(
                f"runner command {name!r} cannot start in phase {contract.phase_id!r} "
                f"({exc.strerror}); check the `command:` of agent {contract.agent_id!r}"
            ) from None
        try:
            async with asyncio.timeout(spec.timeout_s):
                stdout, stderr = await process.communicate()
        except TimeoutError:
            _kill_group(process)
            await process.wait()
            raise PhaseFailed(
                f"runner command {name!r} did not finish within timeout_s {spec.timeout_s:g} "
                f"in phase {contract.phase_id!r}; it was killed"
            ) from None
        except asyncio.CancelledError:
            _kill_group(process)
            raise
    if process.returncode != 0:
        tail = stderr_tail(stderr)
        raise PhaseFailed(
            f"runner command {name!r} exited with code {process.returncode} in phase "
            f"{contract.phase_id!r}: {tail or '(no stderr)'}"
        )
    return stdout.decode("utf-8", "replace").rstrip("\n")


def stderr_tail(stderr: bytes) -> str:
    """The last `STDERR_TAIL_CHARS` characters of a runner's stderr, secrets redacted.

    Redacted before the cut, which could split a secret into a piece no pattern knows; only the
    end is redacted (stderr may be megabytes), from a line start when that end was cut out.
    """
    window = stderr[-4 * STDERR_TAIL_CHARS :].decode("utf-8", "replace")
    if len(stderr) > 4 * STDERR_TAIL_CHARS and "\n" in window:
        window = window.partition("\n")[2]
    return redact(window.strip()).text[-STDERR_TAIL_CHARS:]


def _kill_group(process: asyncio.subprocess.Process) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
