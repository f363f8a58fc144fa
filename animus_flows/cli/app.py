"""The `animus` application: its command groups, shared options, and how errors are shown.

Exit codes: 0 success, 1 runtime failure, 2 usage or configuration error. Errors are one line
on stderr (a traceback only with `--debug`); `--json` prints exactly one JSON document on stdout.
"""

from __future__ import annotations

import functools
import json
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer

from animus_flows.errors import AnimusError, ConfigError

F = TypeVar("F", bound=Callable[..., Any])

app = typer.Typer(
    name="animus",
    help="Memory for agent workflows on Prefect.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
    rich_markup_mode=None,  # plain click errors: one "Error: ..." line, no boxes
)
memory_app = typer.Typer(
    help="Read and write memory stores.", no_args_is_help=True, rich_markup_mode=None
)
app.add_typer(memory_app, name="memory")
mcp_app = typer.Typer(
    help="Serve memory to agents as MCP servers over stdio.",
    no_args_is_help=True,
    rich_markup_mode=None,
)
app.add_typer(mcp_app, name="mcp")

_state = {"debug": False}
JsonOpt = Annotated[bool, typer.Option("--json", help="Print one JSON document.")]


@app.callback()
def _main(
    debug: Annotated[bool, typer.Option("--debug", help="Show tracebacks on errors.")] = False,
) -> None:
    _state["debug"] = debug


def handles_errors(command: F) -> F:
    """Turn library errors into one stderr line and the right exit code, secrets redacted."""

    @functools.wraps(command)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return command(*args, **kwargs)
        except (typer.Exit, typer.Abort, KeyboardInterrupt):
            raise
        except AnimusError as exc:
            if _state["debug"]:
                raise
            for line in str(exc).splitlines() or [type(exc).__name__]:
                _print_error(line)
            raise typer.Exit(exc.exit_code) from None
        except Exception as exc:  # a bug: still one line, unless asked for more
            if _state["debug"]:
                raise
            _print_error(f"unexpected {type(exc).__name__}: {exc} (rerun with --debug for details)")
            raise typer.Exit(1) from None
        except BaseException as exc:
            # Prefect turns SIGTERM into its TerminationSignal (a BaseException) inside a run
            signal_number = _termination_signal(exc)
            if signal_number is None or _state["debug"]:
                raise
            _print_error(f"stopped by signal {signal_number} ({_signal_name(signal_number)})")
            raise typer.Exit(128 + signal_number) from None

    return wrapper  # type: ignore[return-value]


def _print_error(message: str) -> None:
    # the CLI is where errors leave the program: every message is redacted here
    from animus_flows.redaction import redact

    typer.echo(f"error: {redact(message).text}", err=True)


def _termination_signal(exc: BaseException) -> int | None:
    """The signal number of Prefect's TerminationSignal, or None for any other exception."""
    exceptions = sys.modules.get("prefect.exceptions")  # loaded by then if a run was going
    signal_type = getattr(exceptions, "TerminationSignal", None)
    if signal_type is not None and isinstance(exc, signal_type):
        return int(exc.signal)  # type: ignore[attr-defined]
    return None


def _signal_name(number: int) -> str:
    import signal

    try:
        return signal.Signals(number).name
    except ValueError:
        return "unknown signal"


def _print_json(document: Any) -> None:
    typer.echo(json.dumps(document, indent=2, ensure_ascii=False))


def _parse_json(flag: str, text: str, *, want_object: bool = False) -> Any:
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(
            f"{flag} {text!r} is not valid JSON ({exc.msg} at character {exc.pos}); "
            f"""quote text as JSON, e.g. {flag} '"hello"'"""
        ) from None
    except RecursionError:
        from animus_flows.protocol import shown_head

        raise ConfigError(
            f"{flag} {shown_head(text, 20)} is JSON nested too deeply to read; pass flatter JSON"
        ) from None
    if want_object and not isinstance(value, dict):
        raise ConfigError(f"{flag} {text!r} must be a JSON object, e.g. {flag} '{{\"k\": 1}}'")
    return value


# -- options shared by the store-facing commands ------------------------------------------

PluginOpt = Annotated[
    str | None, typer.Option("--plugin", help="Store id; required when several are available.")
]
WorkflowFileOpt = Annotated[
    Path, typer.Option("--workflow-file", help="Workflow file declaring `stores:`.")
]
ScopeOpt = Annotated[str, typer.Option("--scope", help="Scope kind: project, agent or task.")]
ProjectOpt = Annotated[
    str | None, typer.Option("--project-id", help="Project id; default: the file's project.")
]
AgentOpt = Annotated[str | None, typer.Option("--agent-id", help="Agent id (--scope agent).")]
TaskOpt = Annotated[str | None, typer.Option("--task-id", help="Task id (--scope task).")]
DEFAULT_WORKFLOW_FILE = Path("animus.yaml")
ToolNamesOpt = Annotated[
    str,
    typer.Option(
        "--tool-names",
        help="dotted (animus.memory.read) or underscored (animus_memory_read, for clients "
        "such as Claude Desktop that refuse dots).",
    ),
]


@contextmanager
def _store(workflow_file: Path, plugin: str | None) -> Iterator[Any]:
    from animus_flows.cli.support import open_cli_store

    with open_cli_store(workflow_file, plugin) as opened:
        yield opened


def _scope(
    kind: str,
    project_id: str | None,
    agent_id: str | None,
    task_id: str | None,
    default_project: str,
) -> Any:
    from animus_flows.cli.support import scope_from_flags

    return scope_from_flags(kind, project_id, agent_id, task_id, default_project=default_project)
