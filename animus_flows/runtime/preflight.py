"""`animus preflight`: what a run would find, before it runs.

Stores with their capabilities and whether they answer; every binding as matched or unmatched
(an unmatched binding is a no-op at run time, never an error); warnings.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

from animus_flows.config.loader import load_workflow, workflow_warnings
from animus_flows.config.models import WorkflowFile
from animus_flows.errors import AnimusError
from animus_flows.redaction import redact
from animus_flows.runtime.engine import compile_workflow
from animus_flows.stores.registry import PluginRegistry

REACH_TIMEOUT_S = 3.0
# Loading a saved block may first start Prefect's temporary server (several seconds): that is
# not the store's answer time, so it gets its own, longer deadline.
RESOLVE_TIMEOUT_S = 60.0


def _describe(exc: Exception) -> str:
    """What a failed probe shows, secrets redacted (preflight prints it and --json carries it)."""
    text = str(exc) if isinstance(exc, AnimusError) else f"{type(exc).__name__}: {exc}"
    return redact(text).text


async def _probe(registry: PluginRegistry, plugin_id: str, kind: str) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "plugin_id": plugin_id,
        "type": kind,
        "capabilities": None,
        "reachable": False,
        "error": None,
        "latency_ms": None,
    }
    try:
        async with asyncio.timeout(RESOLVE_TIMEOUT_S):
            store = await registry.resolve(plugin_id)
    except TimeoutError:
        entry["error"] = f"could not be loaded within {RESOLVE_TIMEOUT_S:g} s"
        return entry
    except Exception as exc:
        entry["error"] = _describe(exc)
        return entry
    if store is None:
        entry["error"] = "no saved memory-store block with this name"
        return entry
    started = time.perf_counter()
    try:
        async with asyncio.timeout(REACH_TIMEOUT_S):
            entry["capabilities"] = store.capabilities.to_json()
            await store.list_scopes(limit=1)
        entry["reachable"] = True
    except TimeoutError:
        entry["error"] = f"no answer within {REACH_TIMEOUT_S:g} s"
    except Exception as exc:
        entry["error"] = _describe(exc)
    entry["latency_ms"] = round((time.perf_counter() - started) * 1000, 1)
    return entry


async def preflight(workflow: WorkflowFile) -> dict[str, Any]:
    """The preflight report of a loaded workflow file."""
    warnings = list(workflow_warnings(workflow))
    for name in workflow.workflows:
        compile_workflow(workflow, name)  # unimportable hooks or runners are config errors
    registry = PluginRegistry(workflow)
    try:
        stores = [
            await _probe(registry, plugin_id, spec.type)
            for plugin_id, spec in workflow.stores.items()
        ]
        owners = [(f"agents.{a}", agent.memory_bindings) for a, agent in workflow.agents.items()]
        owners += [(f"workflows.{w}", f.memory_bindings) for w, f in workflow.workflows.items()]
        matched, unmatched = [], []
        for owner, bindings in owners:
            for binding in bindings:
                entry = {
                    "owner": owner,
                    "binding": binding.binding,
                    "plugin": binding.plugin,
                    "read": binding.read,
                    "write": binding.write,
                }
                try:
                    found = await registry.resolve(binding.plugin) is not None
                except AnimusError as exc:
                    found = False
                    entry["error"] = str(exc)
                (matched if found else unmatched).append(entry)
        for entry in unmatched:
            warnings.append(
                f"{entry['owner']}: binding {entry['binding']!r} has no store {entry['plugin']!r}; "
                "it is a no-op until one is declared under stores: or saved as a block"
            )
        warnings += [
            f"store {s['plugin_id']!r} is unreachable: {s['error']}"
            for s in stores
            if not s["reachable"]
        ]
    finally:
        await registry.aclose()
    return {
        "workflow_file": str(workflow.source),
        "project_id": workflow.project_id,
        "stores": stores,
        "memory_bindings": {"matched": matched, "unmatched": unmatched},
        "warnings": list(dict.fromkeys(warnings)),
    }


def run_preflight(path: Path) -> dict[str, Any]:
    return asyncio.run(preflight(load_workflow(path)))
