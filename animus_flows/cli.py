"""The `animus` command line: thin wrappers that parse flags, call the library and print.

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

from animus_flows.errors import AnimusError, ConfigError, InvalidRequest

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
    # AnimusError messages are redacted when made; anything else an error quotes is not.
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


# -- workflow files --------------------------------------------------------------------------


@app.command()
@handles_errors
def validate(
    workflow_file: Annotated[Path, typer.Argument(help="The workflow YAML file.")],
) -> None:
    """Check a workflow file; exit 0 when valid, 2 with one line per problem otherwise."""
    from animus_flows.config.loader import load_workflow, workflow_warnings

    workflow = load_workflow(workflow_file)
    for warning in workflow_warnings(workflow):
        typer.echo(f"warning: {warning}", err=True)
    typer.echo(
        f"{workflow_file}: ok (project {workflow.project_id}: {len(workflow.stores)} stores, "
        f"{len(workflow.agents)} agents, {len(workflow.workflows)} workflows)"
    )


@app.command()
@handles_errors
def schema() -> None:
    """Print the JSON Schema of the workflow file, for editor completion."""
    from animus_flows.config.schema import workflow_json_schema

    _print_json(workflow_json_schema())


@app.command()
@handles_errors
def run(
    workflow_file: Annotated[Path, typer.Argument(help="The workflow YAML file.")],
    workflow: Annotated[
        str | None, typer.Option("--workflow", help="Workflow to run; optional when there is one.")
    ] = None,
    task_id: Annotated[
        str | None, typer.Option("--task-id", help="The task the run is for.")
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Run a workflow as a Prefect flow and show what each phase received."""
    if task_id == "":  # the flow reads "" as no task: a run meant for one would skip it silently
        raise ConfigError("--task-id is empty; pass a task id or leave the flag out")
    from animus_flows.runtime.quiet import quiet_prefect

    quiet_prefect(_state["debug"])
    from animus_flows.cli_support import run_workflow_file, summary_text

    summary = run_workflow_file(workflow_file, workflow, task_id)
    if as_json:
        _print_json(summary)
    else:
        typer.echo(summary_text(summary))


@app.command()
@handles_errors
def preflight(
    workflow_file: Annotated[Path, typer.Argument(help="The workflow YAML file.")],
    as_json: JsonOpt = False,
) -> None:
    """Check stores and bindings before a run: capabilities, reachability, unmatched plugins."""
    from animus_flows.runtime.quiet import quiet_prefect

    quiet_prefect(_state["debug"])
    from animus_flows.cli_support import preflight_text
    from animus_flows.runtime.preflight import run_preflight

    report = run_preflight(workflow_file)
    if as_json:
        _print_json(report)
    else:
        typer.echo(preflight_text(report))


# -- animus memory ---------------------------------------------------------------------------

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
    from animus_flows.cli_support import open_cli_store

    with open_cli_store(workflow_file, plugin) as opened:
        yield opened


def _scope(
    kind: str,
    project_id: str | None,
    agent_id: str | None,
    task_id: str | None,
    default_project: str,
) -> Any:
    from animus_flows.cli_support import scope_from_flags

    return scope_from_flags(kind, project_id, agent_id, task_id, default_project=default_project)


@memory_app.command("put")
@handles_errors
def memory_put(
    key: Annotated[str, typer.Option("--key", help="Item key within the scope.")],
    value: Annotated[str, typer.Option("--value", help="The value, as JSON.")],
    scope: ScopeOpt,
    plugin: PluginOpt = None,
    project_id: ProjectOpt = None,
    agent_id: AgentOpt = None,
    task_id: TaskOpt = None,
    metadata: Annotated[
        str | None, typer.Option("--metadata", help="Metadata, as a JSON object.")
    ] = None,
    ttl: Annotated[
        int | None, typer.Option("--ttl", min=1, help="Expire after this many seconds.")
    ] = None,
    workflow_file: WorkflowFileOpt = DEFAULT_WORKFLOW_FILE,
    as_json: JsonOpt = False,
) -> None:
    """Store a JSON value under a key; secrets in it are redacted first."""
    from animus_flows.redaction import redact_item, refuse_secret_in_key

    refuse_secret_in_key(key)
    parsed = _parse_json("--value", value)
    meta = _parse_json("--metadata", metadata, want_object=True) if metadata else None
    before = (meta or {}).get("_redaction_count", 0)
    parsed, meta = redact_item(parsed, meta)
    redacted = (meta or {}).get("_redaction_count", 0) - before
    with _store(workflow_file, plugin) as (workflow, store):
        target = _scope(scope, project_id, agent_id, task_id, workflow.project_id)
        item = store.put(target, key, parsed, metadata=meta, ttl_seconds=ttl)
    if as_json:
        _print_json(item.to_json())
        return
    note = f" ({redacted} secret(s) redacted)" if redacted else ""
    typer.echo(f"stored {key!r} in {target}{note}")


@memory_app.command("get")
@handles_errors
def memory_get(
    key: Annotated[str, typer.Option("--key", help="Item key within the scope.")],
    scope: ScopeOpt,
    plugin: PluginOpt = None,
    project_id: ProjectOpt = None,
    agent_id: AgentOpt = None,
    task_id: TaskOpt = None,
    workflow_file: WorkflowFileOpt = DEFAULT_WORKFLOW_FILE,
    as_json: JsonOpt = False,
) -> None:
    """Print the item stored under a key; exit 1 when there is none."""
    with _store(workflow_file, plugin) as (workflow, store):
        target = _scope(scope, project_id, agent_id, task_id, workflow.project_id)
        item = store.get(target, key)
    if item is None:
        typer.echo(f"error: no item {key!r} in {target}", err=True)
        raise typer.Exit(1)
    if as_json:
        _print_json(item.to_json())
    else:
        typer.echo(json.dumps(item.value, indent=2, ensure_ascii=False))


@memory_app.command("query")
@handles_errors
def memory_query(
    query: Annotated[str, typer.Option("--query", help="Search text.")],
    scope: ScopeOpt,
    plugin: PluginOpt = None,
    project_id: ProjectOpt = None,
    agent_id: AgentOpt = None,
    task_id: TaskOpt = None,
    top_k: Annotated[int, typer.Option("--top-k", min=1, help="Most hits to return.")] = 8,
    workflow_file: WorkflowFileOpt = DEFAULT_WORKFLOW_FILE,
    as_json: JsonOpt = False,
) -> None:
    """Search a scope; hits best first with scores in [0, 1]."""
    with _store(workflow_file, plugin) as (workflow, store):
        target = _scope(scope, project_id, agent_id, task_id, workflow.project_id)
        hits = store.query(target, query, top_k=top_k)
    if as_json:
        _print_json({"hits": [hit.to_json() for hit in hits]})
        return
    if not hits:
        typer.echo(f"no hits in {target}")
    for hit in hits:
        text = json.dumps(hit.value, ensure_ascii=False)
        typer.echo(f"{hit.score:.3f}  {hit.key}  {text[:100]}")


@memory_app.command("list-scopes")
@handles_errors
def memory_list_scopes(
    plugin: PluginOpt = None,
    project_id: Annotated[
        str | None, typer.Option("--project-id", help="Only this project's scopes.")
    ] = None,
    cursor: Annotated[
        str | None, typer.Option("--cursor", help="next_cursor of the previous page.")
    ] = None,
    limit: Annotated[int, typer.Option("--limit", min=1, max=1000, help="Page size.")] = 100,
    workflow_file: WorkflowFileOpt = DEFAULT_WORKFLOW_FILE,
    as_json: JsonOpt = False,
) -> None:
    """List the scopes that hold items, a page at a time."""
    with _store(workflow_file, plugin) as (_, store):
        page = store.list_scopes(project_id=project_id, cursor=cursor, limit=limit)
    if as_json:
        _print_json(page.to_json())
        return
    for item_scope in page.scopes:
        typer.echo(str(item_scope))
    if not page.scopes:
        typer.echo("no scopes hold items" + (f" in project {project_id!r}" if project_id else ""))
    if page.next_cursor:
        typer.echo(f"more: --cursor {page.next_cursor}", err=True)


@memory_app.command("prune")
@handles_errors
def memory_prune(
    scope: ScopeOpt,
    plugin: PluginOpt = None,
    project_id: ProjectOpt = None,
    agent_id: AgentOpt = None,
    task_id: TaskOpt = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Count, delete nothing.")] = False,
    workflow_file: WorkflowFileOpt = DEFAULT_WORKFLOW_FILE,
    as_json: JsonOpt = False,
) -> None:
    """Delete every item of one scope (idempotent)."""
    with _store(workflow_file, plugin) as (workflow, store):
        target = _scope(scope, project_id, agent_id, task_id, workflow.project_id)
        count = store.count(target) if dry_run else store.delete_scope(target)
    if as_json:
        _print_json({"would_delete": count} if dry_run else {"deleted": count})
    else:
        typer.echo(f"{'would delete' if dry_run else 'deleted'} {count} item(s) in {target}")


@memory_app.command("export")
@handles_errors
def memory_export(
    scope: ScopeOpt,
    plugin: PluginOpt = None,
    project_id: ProjectOpt = None,
    agent_id: AgentOpt = None,
    task_id: TaskOpt = None,
    output: Annotated[
        Path | None,
        typer.Option(
            "--output", "-o", help="Write the export here instead of to stdout (`-`: stdout)."
        ),
    ] = None,
    workflow_file: WorkflowFileOpt = DEFAULT_WORKFLOW_FILE,
    as_json: JsonOpt = False,
) -> None:
    """Export every memory of one scope as a JSON document (stdout, or --output FILE)."""
    from animus_flows.cli_support import open_cli_layer
    from animus_flows.memory.export import write_atomically

    with open_cli_layer(workflow_file, plugin, scope, project_id, agent_id, task_id) as layer:
        text = layer.export_memories()
        target = layer.scope
    if output is None or str(output) == "-":
        typer.echo(text)  # the export is itself one JSON document, with or without --json
        return
    write_atomically(output, lambda raw: raw.write(text.encode("utf-8")))
    count = json.loads(text)["count"]
    if as_json:
        _print_json({"exported": count, "path": str(output)})
    else:
        typer.echo(f"exported {count} memories from {target} to {output}")


@memory_app.command("import")
@handles_errors
def memory_import(
    path: Annotated[Path, typer.Argument(help="An export file (`-` reads stdin).")],
    scope: ScopeOpt,
    plugin: PluginOpt = None,
    project_id: ProjectOpt = None,
    agent_id: AgentOpt = None,
    task_id: TaskOpt = None,
    workflow_file: WorkflowFileOpt = DEFAULT_WORKFLOW_FILE,
    as_json: JsonOpt = False,
) -> None:
    """Import an export into one scope; all-or-nothing (undone on stores without
    transactions), and idempotent on memory ids."""
    from animus_flows.cli_support import open_cli_layer, read_input

    text = read_input(path)
    with open_cli_layer(workflow_file, plugin, scope, project_id, agent_id, task_id) as layer:
        try:
            count = layer.import_memories(text)
        except InvalidRequest as exc:  # about the input: say which
            raise InvalidRequest(f"{'stdin' if str(path) == '-' else path}: {exc}") from None
        target = layer.scope
    if as_json:
        _print_json({"imported": count, "skipped": count.skipped})
    else:
        expired = f" (skipped {count.skipped} that had expired)" if count.skipped else ""
        typer.echo(f"imported {count} memories into {target}{expired}")


@memory_app.command("serve")
@handles_errors
def memory_serve(
    plugin: PluginOpt = None,
    workflow_file: WorkflowFileOpt = DEFAULT_WORKFLOW_FILE,
) -> None:
    """Serve a configured store as a plugin process: JSON-RPC 2.0 lines on stdin/stdout.

    Runs until stdin ends; stdout carries protocol messages only, logs go to stderr.
    """
    from animus_flows.jsonrpc.server import serve_plugin

    serve_plugin(workflow_file, plugin)


# -- animus mcp ------------------------------------------------------------------------------


@mcp_app.command("scratchpad")
@handles_errors
def mcp_scratchpad(
    agent: Annotated[str, typer.Option("--agent", help="Agent id from the file's agents:.")],
    workflow_file: Annotated[
        Path, typer.Option("--workflow-file", help="Workflow file declaring the agent.")
    ] = DEFAULT_WORKFLOW_FILE,
    tool_names: ToolNamesOpt = "dotted",
) -> None:
    """Serve an agent's scratchpad as the animus.memory.* tools (MCP over stdio)."""
    from animus_flows.cli_support import load_cli_workflow
    from animus_flows.mcp.scratchpad_server import serve_scratchpad

    workflow = load_cli_workflow(workflow_file)
    serve_scratchpad(workflow, agent, tool_names=tool_names, debug=_state["debug"])


@mcp_app.command("binding")
@handles_errors
def mcp_binding(
    plugin: Annotated[str, typer.Option("--plugin", help="Store id the binding names.")],
    scope: ScopeOpt,
    project_id: ProjectOpt = None,
    agent_id: AgentOpt = None,
    task_id: TaskOpt = None,
    binding: Annotated[
        str | None,
        typer.Option("--binding", help="Binding label; required when several match."),
    ] = None,
    workflow_file: Annotated[
        Path, typer.Option("--workflow-file", help="Workflow file declaring the binding.")
    ] = DEFAULT_WORKFLOW_FILE,
    tool_names: ToolNamesOpt = "dotted",
) -> None:
    """Serve one memory binding's store to an agent (MCP over stdio), egress-safe and audited."""
    from animus_flows.cli_support import load_cli_workflow
    from animus_flows.mcp.binding_server import serve_binding

    workflow = load_cli_workflow(workflow_file)
    target = _scope(scope, project_id, agent_id, task_id, workflow.project_id)
    serve_binding(
        workflow, plugin, target, label=binding, tool_names=tool_names, debug=_state["debug"]
    )


def main() -> None:
    """Console-script entry point.

    Click reports a bad flag or command in four lines (usage, hint, blank line, error); here it
    is one line like every other error, naming the flag and where its help is.
    """
    from typer.exceptions import TyperException  # the base of typer's (vendored) click errors

    try:
        code = app(prog_name="animus", standalone_mode=False)
    except TyperException as exc:
        context = getattr(exc, "ctx", None)
        if context is not None and exc.format_message() == context.get_help():
            exc.show()  # a command group run bare: its help, as click shows it
        else:
            where = context.command_path if context is not None else "animus"
            message = exc.format_message().removesuffix(".")
            given = _given_value(getattr(exc, "param", None), sys.argv[1:])
            if given is not None:
                message += f" (got {given!r})"
            joint = " " if message.endswith("?") else "; "  # after "Did you mean 'x'?"
            _print_error(f"{message}{joint}see '{where} --help'")  # the value typed may be a key
        sys.exit(exc.exit_code)
    except typer.Abort:
        _print_error("aborted")
        sys.exit(1)
    sys.exit(code if isinstance(code, int) else 0)


def _given_value(param: Any, argv: list[str]) -> str | None:
    """What was typed for a rejected option (click's message leaves it out), if findable."""
    for flag in getattr(param, "opts", ()):
        for index, arg in enumerate(argv):
            if arg == flag and index + 1 < len(argv):
                return argv[index + 1]
            if arg.startswith(flag + "="):
                return arg[len(flag) + 1 :]
    return None


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
