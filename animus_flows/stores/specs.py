"""Build a store from its `stores:` entry in the workflow file."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from animus_flows.config.embedder import EmbedderSpec
from animus_flows.config.models import (
    BlockRef,
    JsonRpcSpec,
    PostgresSpec,
    SQLiteSpec,
    StoreSpec,
    WorkflowFile,
    ZepSpec,
)
from animus_flows.errors import ConfigError
from animus_flows.protocol import MemoryStore
from animus_flows.stores.sqlite import SQLiteStore

if TYPE_CHECKING:
    from animus_flows.embedders import Embedder


def embedder_of(spec: EmbedderSpec | None) -> Embedder | None:
    """The embedder a store entry names, or None; without the `semantic` extra a local one is
    a ConfigError saying to install it."""
    if spec is None:
        return None
    from animus_flows.embedders import embedder_from_spec

    return embedder_from_spec(spec)


def open_store(
    spec: StoreSpec, workflow: WorkflowFile, plugin_id: str | None = None
) -> MemoryStore:
    """A new store for `spec`; relative paths resolve against the workflow file's folder.

    `plugin_id` (the `stores:` key) names the store in errors and logs. `block` specs are
    resolved by `animus_flows.stores.registry`, which can reach Prefect.
    """
    if isinstance(spec, SQLiteSpec):
        return SQLiteStore(
            workflow.resolve_path(spec.path),
            busy_timeout_ms=spec.busy_timeout_ms,
            language=spec.language,
            embedder=embedder_of(spec.embedder),
        )
    if isinstance(spec, PostgresSpec):
        return _postgres(spec, plugin_id)
    if isinstance(spec, JsonRpcSpec):
        from animus_flows.stores.jsonrpc import JsonRpcStore

        return JsonRpcStore(
            spec.command,
            plugin_id=plugin_id,
            env=spec.env,
            # Plugins start next to the workflow file unless told otherwise, so a command
            # like `python plugin.py` finds a script kept beside it.
            cwd=workflow.resolve_path(spec.cwd) if spec.cwd is not None else workflow.base_dir,
            startup_timeout_ms=spec.startup_timeout_ms,
            call_timeout_ms=spec.call_timeout_ms,
        )
    if isinstance(spec, ZepSpec):
        from animus_flows.stores.zep import ZepStore

        return ZepStore.from_spec(spec, plugin_id=plugin_id)
    if isinstance(spec, BlockRef):
        raise ConfigError(
            f"store {spec.block!r} is a saved Prefect block; resolve it through "
            "animus_flows.stores.registry.PluginRegistry"
        )
    raise ConfigError(
        f"store type {spec.type!r} is not supported by this version of animus-flows; "
        "use type: sqlite, postgres, zep or jsonrpc"
    )


def _postgres(spec: PostgresSpec, plugin_id: str | None) -> MemoryStore:
    """The store of a `type: postgres` entry; its DSN comes from `dsn_env`, never the file."""
    from animus_flows.stores.postgres.connection import require_psycopg

    where = f"stores.{plugin_id}" if plugin_id else "the postgres store"
    dsn = os.environ.get(spec.dsn_env, "")
    if not dsn.strip():
        raise ConfigError(
            f"{where}: no PostgreSQL DSN; set the {spec.dsn_env} environment variable to "
            "postgresql://USER:PASSWORD@HOST:PORT/DATABASE (or name another one with dsn_env)"
        )
    require_psycopg()
    from animus_flows.stores.postgres import PostgresStore

    return PostgresStore(
        dsn,
        schema=spec.schema_,
        language=spec.language,
        embedder=embedder_of(spec.embedder),
        pool_max_size=spec.pool_max_size,
    )
