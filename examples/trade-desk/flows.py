"""The trade desk's workflows as module-level Prefect flows, for `prefect deploy`.

prefect deploy --all        # from this folder; see prefect.yaml
"""

from animus_flows import workflow_flow

# relative to this file, so the deployment runs from any working folder
research = workflow_flow("animus.yaml", "research")

if __name__ == "__main__":
    import asyncio

    print(asyncio.run(research(task_id="RES-001"))["budget"])
