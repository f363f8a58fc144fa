"""Resolve a binding's or command's `plugin` id to a memory store.

Ids resolve to the workflow file's `stores:` first. Stores are opened once per registry and
closed together.
"""

from __future__ import annotations

from animus_flows.config.models import WorkflowFile
from animus_flows.errors import ConfigError
from animus_flows.protocol import MemoryStore
from animus_flows.stores.specs import open_store


class PluginRegistry:
    """The memory stores a workflow file can reach, opened on first use."""

    def __init__(self, workflow: WorkflowFile) -> None:
        self.workflow = workflow
        self._open: dict[str, MemoryStore] = {}

    def ids(self) -> list[str]:
        """Plugin ids declared in the file, in file order."""
        return list(self.workflow.stores)

    def has(self, plugin_id: str) -> bool:
        return plugin_id in self.workflow.stores

    def get(self, plugin_id: str) -> MemoryStore | None:
        """The store for `plugin_id`, or None when nothing matches."""
        if plugin_id in self._open:
            return self._open[plugin_id]
        spec = self.workflow.stores.get(plugin_id)
        if spec is None:
            return None
        store = self._open[plugin_id] = open_store(spec, self.workflow, plugin_id)
        return store

    def choose(self, plugin_id: str | None) -> tuple[str, MemoryStore]:
        """The store a command should use: `plugin_id`, or the only one there is.

        Never picks silently between several stores.
        """
        ids = self.ids()
        if plugin_id is None:
            if len(ids) == 1:
                plugin_id = ids[0]
            elif not ids:
                raise ConfigError(
                    f"{self._where()} declares no stores; add one under stores: "
                    "(e.g. `memory-local: {type: sqlite}`)"
                )
            else:
                raise ConfigError(
                    f"{len(ids)} stores are available ({', '.join(ids)}); choose one with --plugin"
                )
        store = self.get(plugin_id)
        if store is None:
            raise ConfigError(
                f"unknown plugin {plugin_id!r}; {self._where()} declares "
                f"{', '.join(ids) or 'no stores'}"
            )
        return plugin_id, store

    def _where(self) -> str:
        return str(self.workflow.source) if self.workflow.source else "the workflow"

    async def aclose(self) -> None:
        for store in self._open.values():
            close = getattr(store, "aclose", None)
            if close is not None:
                await close()
        self._open.clear()
