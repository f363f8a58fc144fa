"""Build a store from its `stores:` entry in the workflow file."""

from __future__ import annotations

from animus_flows.config.models import BlockRef, SQLiteSpec, StoreSpec, WorkflowFile
from animus_flows.errors import ConfigError
from animus_flows.protocol import MemoryStore
from animus_flows.stores.sqlite import SQLiteStore


def open_store(spec: StoreSpec, workflow: WorkflowFile) -> MemoryStore:
    """A new store for `spec`; relative paths resolve against the workflow file's folder.

    `block` specs are resolved by `animus_flows.plugins`, which can reach Prefect.
    """
    if isinstance(spec, SQLiteSpec):
        return SQLiteStore(workflow.resolve_path(spec.path), busy_timeout_ms=spec.busy_timeout_ms)
    if isinstance(spec, BlockRef):
        raise ConfigError(
            f"store {spec.block!r} is a saved Prefect block; resolve it through "
            "animus_flows.plugins.PluginRegistry"
        )
    raise ConfigError(
        f"store type {spec.type!r} is not supported by this version of animus-flows; "
        "use type: sqlite"
    )
