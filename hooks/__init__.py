"""Phase hooks, installed as `animus_flows.hooks`.

A hook is `def hook(ctx: PhaseContext) -> None` or `async def`. Built-ins are named by their
short names in the workflow file; anything else is a `module:function` or `file.py:function`.
"""

from animus_flows.hooks.memory_bindings import memory_bindings
from animus_flows.hooks.scratchpad import scratchpad
from animus_flows.hooks.write_back import write_back

BUILTIN_HOOKS = {
    "memory_bindings": memory_bindings,
    "scratchpad": scratchpad,
    "write_back": write_back,
}

__all__ = ["BUILTIN_HOOKS", "memory_bindings", "scratchpad", "write_back"]
