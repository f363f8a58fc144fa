"""Load the trade desk's seed memories into the example's SQLite store (idempotent).

python examples/trade-desk/seed.py
"""

import asyncio
import json
from pathlib import Path

from animus_flows import load_workflow
from animus_flows.plugins import PluginRegistry
from animus_flows.protocol import Scope

HERE = Path(__file__).resolve().parent


async def main() -> None:
    workflow = load_workflow(HERE / "animus.yaml")
    registry = PluginRegistry(workflow)
    store = registry.get("memory-local")
    scopes = {
        "project": Scope(workflow.project_id),
        "agent": Scope(workflow.project_id, agent_id="trade-analyst"),
    }
    records = json.loads((HERE / "seed.json").read_text())
    for record in records:
        await store.put(
            scopes[record["scope"]], record["key"], record["value"], metadata=record["metadata"]
        )
    await registry.aclose()
    print(f"seeded {len(records)} memories into {workflow.resolve_path('.animus/memory.db')}")


if __name__ == "__main__":
    asyncio.run(main())
