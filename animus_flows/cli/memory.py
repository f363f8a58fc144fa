"""`animus memory ...`: read and write a memory store from the command line."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated

import typer

from animus_flows.cli.app import (
    DEFAULT_WORKFLOW_FILE,
    AgentOpt,
    JsonOpt,
    PluginOpt,
    ProjectOpt,
    ScopeOpt,
    TaskOpt,
    WorkflowFileOpt,
    _parse_json,
    _print_json,
    _scope,
    _store,
    handles_errors,
    memory_app,
)
from animus_flows.errors import ConfigError, InvalidRequest


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
    parsed = _parse_json("--value", value)
    meta = _parse_json("--metadata", metadata, want_object=True) if metadata else None
    before = (meta or {}).get("_redaction_count", 0)
    with _store(workflow_file, plugin) as (workflow, store):
        target = _scope(scope, project_id, agent_id, task_id, workflow.project_id)
        item = store.put(target, key, parsed, metadata=meta, ttl_seconds=ttl)  # redacted on the way
    redacted = item.metadata.get("_redaction_count", 0) - (before if isinstance(before, int) else 0)
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
    yes: Annotated[
        bool, typer.Option("--yes", help="Do not ask for confirmation on a terminal.")
    ] = False,
    workflow_file: WorkflowFileOpt = DEFAULT_WORKFLOW_FILE,
    as_json: JsonOpt = False,
) -> None:
    """Delete EVERY item of one scope, expired or not (idempotent): not only expired ones.

    On a terminal it asks first, naming the scope and the count, unless --yes; --dry-run only
    counts. To remove one item, use `animus memory delete --key K`.
    """
    with _store(workflow_file, plugin) as (workflow, store):
        target = _scope(scope, project_id, agent_id, task_id, workflow.project_id)
        if not dry_run and not yes and sys.stdin.isatty():
            count = store.count(target)
            if count and not typer.confirm(
                f"delete all {count} item(s) of {target}?", default=False, err=True
            ):
                raise typer.Abort()
        count = store.count(target) if dry_run else store.delete_scope(target)
    if as_json:
        _print_json({"would_delete": count} if dry_run else {"deleted": count})
    else:
        typer.echo(f"{'would delete' if dry_run else 'deleted'} {count} item(s) in {target}")


@memory_app.command("reindex")
@handles_errors
def memory_reindex(
    plugin: PluginOpt = None,
    workflow_file: WorkflowFileOpt = DEFAULT_WORKFLOW_FILE,
    as_json: JsonOpt = False,
) -> None:
    """Index every item of a store again: after an upgrade, or a new language or embedder."""
    with _store(workflow_file, plugin) as (_, store):
        if not hasattr(store.store, "reindex"):
            raise ConfigError(
                f"store {store.store.describe()} keeps no index of its own to rebuild (its "
                "backend indexes what it is given); reindex works on sqlite and postgres stores"
            )
        count = store.reindex()
    if as_json:
        _print_json({"reindexed": count})
    else:
        typer.echo(f"reindexed {count} item(s) of {store.store.describe()}")


@memory_app.command("delete")
@handles_errors
def memory_delete(
    key: Annotated[str, typer.Option("--key", help="Item key within the scope.")],
    scope: ScopeOpt,
    plugin: PluginOpt = None,
    project_id: ProjectOpt = None,
    agent_id: AgentOpt = None,
    task_id: TaskOpt = None,
    workflow_file: WorkflowFileOpt = DEFAULT_WORKFLOW_FILE,
    as_json: JsonOpt = False,
) -> None:
    """Delete the item stored under a key (idempotent: exit 0 whether or not it was there)."""
    with _store(workflow_file, plugin) as (workflow, store):
        target = _scope(scope, project_id, agent_id, task_id, workflow.project_id)
        deleted = store.delete(target, key)
    if as_json:
        _print_json({"deleted": deleted})
    elif deleted:
        typer.echo(f"deleted {key!r} from {target}")
    else:
        typer.echo(f"no item {key!r} in {target}; nothing to delete")


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
    from animus_flows.cli.support import open_cli_layer
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
    from animus_flows.cli.support import open_cli_layer, read_input

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
