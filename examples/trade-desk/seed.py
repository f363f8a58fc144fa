"""Load the trade desk's seed memories into the example's SQLite store (idempotent).

python examples/trade-desk/seed.py
"""

import asyncio
import json
from pathlib import Path

from animus_flows import load_workflow
from animus_flows.protocol import Scope
from animus_flows.stores.registry import PluginRegistry

HERE = Path(__file__).resolve().parent


async def main() -> None:
    workflow = load_workflow(HERE / "animus.yaml")
    registry = PluginRegistry(workflow, use_blocks=False)
    store = registry.get("memory-local")
    scopes = {
        "project": Scope(workflow.project_id),
        "agent": Scope(workflow.project_id, agent_id="trade-analyst"),
    }
    records = json.loads((HERE / "seed.json").read_text())
    await store.put_many(
        [(scopes[r["scope"]], r["key"], r["value"], r["metadata"]) for r in records]
    )
    await registry.aclose()
    print(f"seeded {len(records)} memories into {workflow.resolve_path('.animus/memory.db')}")


if __name__ == "__main__":
    asyncio.run(main())
