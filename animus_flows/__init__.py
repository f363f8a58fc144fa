"""animus-flows: the memory layer for agent workflows on Prefect 3.

Example:
    ```python
    import asyncio
    from animus_flows import load_workflow, workflow_flow

    workflow = load_workflow("animus.yaml")
    research = workflow_flow(workflow, "research")
    asyncio.run(research(task_id="RES-001"))
    ```
"""

from typing import TYPE_CHECKING, Any

from animus_flows.config.loader import load_workflow

if TYPE_CHECKING:
    from animus_flows.flows import run_workflow
    from animus_flows.runtime.flows import workflow_flow

__all__ = ["load_workflow", "run_workflow", "workflow_flow"]
__version__ = "0.1.0"


def __getattr__(name: str) -> Any:
    # Prefect is imported only by what needs it: loading and validating stays fast.
    if name == "workflow_flow":
        from animus_flows.runtime.flows import workflow_flow

        return workflow_flow
    if name == "run_workflow":
        from animus_flows.flows import run_workflow

        return run_workflow
    raise AttributeError(f"module 'animus_flows' has no attribute {name!r}")
