"""The `write_back` post-phase hook: keep the phase's output as an episodic memory.

Writes through every binding of the phase's agent and workflow that has `write: true` and a
resolvable plugin; read-only bindings are never written. Each write is audited as op `put`; a
failing store degrades (audited `error` or `timeout`) without failing the phase.
"""

from __future__ import annotations

import asyncio
import time

from animus_flows.errors import AnimusError, WriteDenied
from animus_flows.hooks.context import PhaseContext
from animus_flows.protocol import canonical_json

#: Writes get at least this long, whatever a binding's read deadline says.
MIN_WRITE_TIMEOUT_MS = 2000


def output_text(output: object) -> str:
    return output if isinstance(output, str) else canonical_json(output)


async def write_back(ctx: PhaseContext) -> None:
    """Store `ctx.output` through the phase's writable bindings."""
    if ctx.output is None:
        return
    contract = ctx.contract
    key = f"phase-output/{contract.workflow}/{contract.phase_id}/{contract.flow_run_id or 'local'}"
    # the registry's stores redact what they write (`animus_flows.stores.redacting`)
    value = {"content": output_text(ctx.output)}
    metadata = {
        "memory_type": "episodic",
        "tier": "warm",
        "source": "phase-output",
        "provenance": "flow-run",
        "agent": contract.agent_id,
        "workflow": contract.workflow,
        "phase_id": contract.phase_id,
        "task_id": contract.task_id,
        "flow_run_id": contract.flow_run_id,
    }
    for binding in ctx.bindings:
        if not binding.write:
            continue
        scope = None
        status, detail, started = "ok", "", time.perf_counter()
        try:
            scope = ctx.scope_for(binding)
            store = await ctx.plugins.resolve(binding.plugin)
            if store is None:
                status, detail = "unmatched", f"no store or saved block named {binding.plugin!r}"
            else:
                timeout = max(binding.timeout_ms, MIN_WRITE_TIMEOUT_MS) / 1000
                async with asyncio.timeout(timeout):
                    await store.put(scope, key, value, metadata=metadata)
                detail = f"stored {key}"
        except TimeoutError:
            status, detail = "timeout", f"no answer within {timeout * 1000:.0f} ms"
        except WriteDenied as exc:  # the store refuses writes: a refusal, not a fault
            status, detail = "denied", str(exc)
        except (AnimusError, ValueError) as exc:
            status, detail = "error", str(exc)
        except Exception as exc:  # a broken plugin must not fail the phase that produced output
            status, detail = "error", f"{type(exc).__name__}: {exc}"
        ctx.record_op(
            "put",
            binding,
            scope,
            bytes_in=len(canonical_json(value).encode()),
            result_count=1 if status == "ok" else 0,
            latency_ms=round((time.perf_counter() - started) * 1000, 3),
            status=status,
            detail=detail,
        )
