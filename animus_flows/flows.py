"""`run_workflow`: one deployable flow that runs any workflow of any workflow file.

prefect deploy --name research animus_flows/flows.py:run_workflow   # or via prefect.yaml
"""

from __future__ import annotations

from typing import Any

from prefect import flow

from animus_flows.config.loader import load_workflow
from animus_flows.redaction import redacted_errors
from animus_flows.runtime.engine import compile_workflow
from animus_flows.runtime.flows import execute


@flow(name="animus-run-workflow", persist_result=False, log_prints=False)
async def run_workflow(
    workflow_file: str, workflow: str | None = None, task_id: str | None = None
) -> dict[str, Any]:
    """Run `workflow` (optional when the file has one) of `workflow_file` for `task_id`.

    Example:
        ```python
        import asyncio
        from animus_flows import run_workflow

        summary = asyncio.run(run_workflow("examples/trade-desk/animus.yaml", task_id="RES-001"))
        ```
    """
    with redacted_errors():  # a file's error leaves through Prefect's state and logs
        compiled = compile_workflow(load_workflow(workflow_file), workflow)
    return await execute(compiled, task_id)
