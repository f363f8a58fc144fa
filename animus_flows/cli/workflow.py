"""`animus validate`, `schema`, `run` and `preflight`: the workflow-file commands."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from animus_flows.cli.app import (
    JsonOpt,
    _print_error,
    _print_json,
    _state,
    app,
    handles_errors,
)
from animus_flows.errors import ConfigError


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
    from animus_flows.cli.support import run_workflow_file, summary_text

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
    """Check a workflow before a run: import its runners and hooks, open its stores, match
    its bindings. Exit 2 when a runner or hook cannot be imported (each named with its file,
    line and a did-you-mean)."""
    from animus_flows.runtime.quiet import quiet_prefect

    quiet_prefect(_state["debug"])
    from animus_flows.cli.support import preflight_text
    from animus_flows.runtime.preflight import run_preflight

    report = run_preflight(workflow_file)
    if as_json:
        _print_json(report)
    else:
        typer.echo(preflight_text(report))
    for error in report["errors"]:
        _print_error(error)
    if report["errors"]:
        raise typer.Exit(ConfigError.exit_code)
