"""Built-in runners. `animus_flows.runners:echo` is the default when an agent names none.

A runner is `def runner(contract: RuntimeContract) -> str | JSON` (or `async def`).
"""

from __future__ import annotations

from animus_flows.hooks.contract import RuntimeContract


def render_envelope(contract: RuntimeContract) -> str:
    """The prompt envelope an agent would receive: the prompt, then memory, then scratchpad."""
    task = f", task {contract.task_id}" if contract.task_id else ""
    parts = [f"# Phase {contract.phase_id} (agent {contract.agent_id}{task})", contract.prompt]
    if contract.memory_context.text:
        parts += ["## Memory context", contract.memory_context.text.rstrip("\n")]
    if contract.scratchpad is not None and contract.scratchpad.text:
        parts += ["## Scratchpad", contract.scratchpad.text.rstrip("\n")]
    return "\n\n".join(parts) + "\n"


async def echo(contract: RuntimeContract) -> str:
    """Return the rendered prompt envelope: what a model would have been given.

    Async although it never waits: sync runners run in a thread, a hop this one does not need.
    """
    return render_envelope(contract)
