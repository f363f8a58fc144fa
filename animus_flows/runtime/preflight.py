"""`animus preflight`: what a run would find, before it runs.

Runners and hooks that do not import; stores with their capabilities and whether they
answer; every binding as matched or unmatched (an unmatched binding is a no-op at run time,
never an error); warnings, one per problem; what was not checked and why.
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
from animus_flows.runtime.engine import import_problems
from animus_flows.stores.registry import PluginRegistry, prefect_server_configured

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


#: What preflight says when it does not look undeclared plugins up among saved blocks.
BLOCKS_SKIPPED = (
    "saved Prefect blocks were not looked up: no Prefect server is configured "
    "(PREFECT_API_URL is unset), and starting Prefect's temporary server only for that takes "
    "seconds; `animus run` looks there, or set PREFECT_API_URL to check now"
)


async def preflight(workflow: WorkflowFile) -> dict[str, Any]:
    """The preflight report of a loaded workflow file.

    Every runner and hook is imported (`errors` lists, located, each that cannot be); every
    store is opened and asked for one scope; every binding is matched or unmatched, with one
    warning per unmatched binding. A binding whose plugin is not under `stores:` is looked up
    among saved Prefect blocks only when a Prefect server is configured (`skipped` says so).
    """
    errors = import_problems(workflow)
    warnings = list(workflow_warnings(workflow, undeclared_plugins=False))
    use_blocks = prefect_server_configured(read_settings=True)
    registry = PluginRegistry(workflow, use_blocks=use_blocks)
    skipped: list[str] = []
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
                entry: dict[str, Any] = {
                    "owner": owner,
                    "binding": binding.binding,
                    "plugin": binding.plugin,
                    "read": binding.read,
                    "write": binding.write,
                }
                declared = binding.plugin in workflow.stores
                if not declared and not use_blocks:
                    entry["blocks_checked"] = False
                    unmatched.append(entry)
                    warnings.append(
                        f"{owner}: binding {binding.binding!r}: plugin {binding.plugin!r} is "
                        "not under stores: and saved blocks were not looked up; the binding "
                        "is a no-op unless a saved block has that name"
                    )
                    skipped.append(BLOCKS_SKIPPED)
                    continue
                try:
                    found = await registry.resolve(binding.plugin) is not None
                except AnimusError as exc:
                    found, entry["error"] = False, _describe(exc)
                if found:
                    if document := registry.block_document(binding.plugin):
                        entry["block"] = document[1]
                    matched.append(entry)
                    continue
                unmatched.append(entry)
                if declared:  # its store's own warning below says why
                    continue
                if "error" in entry:  # a block of that name that does not load
                    why, status = f"{binding.plugin!r} does not load ({entry['error']})", "error"
                else:
                    why = f"no store or saved memory-store block is named {binding.plugin!r}"
                    status = "unmatched"
                warnings.append(
                    f"{owner}: binding {binding.binding!r}: {why}; the binding is a no-op "
                    f"(audited as {status}: the run ends Degraded)"
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
        "skipped": list(dict.fromkeys(skipped)),
        "errors": errors,
    }


def run_preflight(path: Path) -> dict[str, Any]:
    return asyncio.run(preflight(load_workflow(path)))
