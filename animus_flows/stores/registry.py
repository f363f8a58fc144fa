"""Resolve a binding's or command's `plugin` id to a memory store.

An id resolves to the workflow file's `stores:` first, then to a saved Prefect block document
of a memory-store block type with that name. Lookups of file stores never touch the Prefect API.
Stores are opened once per registry, behind the redaction wrapper (every write through them is
redacted), and closed together.
"""

from __future__ import annotations

import os
from typing import Any

from animus_flows.config.models import BlockRef, WorkflowFile
from animus_flows.errors import ConfigError, StoreUnavailable
from animus_flows.protocol import MemoryStore
from animus_flows.redaction import get_logger
from animus_flows.stores.redacting import redacting
from animus_flows.stores.specs import open_store

MEMORY_STORE_CAPABILITY = "memory-store"
logger = get_logger("animus_flows.stores.registry")


async def find_memory_blocks(name: str | None = None) -> dict[str, str]:
    """Saved block documents of memory-store block types: document name -> `slug/name`.

    Reads the Prefect API; `name` narrows the search to one document name.
    """
    from prefect.client.orchestration import get_client

    body: dict[str, Any] = {
        "block_schemas": {"block_capabilities": {"all_": [MEMORY_STORE_CAPABILITY]}},
        "include_secrets": False,
    }
    if name is not None:
        body["block_documents"] = {"name": {"any_": [name]}}
    async with get_client() as client:
        response = await client.request("POST", "/block_documents/filter", json=body)  # type: ignore[arg-type]
    return {doc["name"]: f"{doc['block_type']['slug']}/{doc['name']}" for doc in response.json()}


async def load_block_store(slug_and_name: str) -> MemoryStore:
    """The store of a saved memory-store block, e.g. `animus-zep-memory-store/memory-zep`."""
    return (await load_block_document(slug_and_name))[0]


async def load_block_document(slug_and_name: str) -> tuple[MemoryStore, str | None]:
    """The store of a saved memory-store block and the id of its block document."""
    from prefect.blocks.core import Block

    import animus_flows.blocks  # noqa: F401 - registers our block types for Block.aload

    try:
        block = await Block.aload(slug_and_name)
    except ValueError as exc:
        raise ConfigError(
            f"no saved block {slug_and_name!r} ({exc}); create it in the Prefect UI or with "
            "`Block.save(...)`, or fix the name"
        ) from None
    get_store = getattr(block, "get_store", None)
    if get_store is None:
        raise ConfigError(
            f"block {slug_and_name!r} is a {type(block).__name__}, not a memory-store block; "
            "use a block type with the memory-store capability"
        )
    document_id = getattr(block, "_block_document_id", None)
    return get_store(), None if document_id is None else str(document_id)


def prefect_server_configured(*, read_settings: bool = False) -> bool:
    """Whether a Prefect server (or Prefect Cloud) is configured: PREFECT_API_URL in the
    environment or, with `read_settings`, anywhere Prefect reads it (its profile, `.env`,
    `prefect.toml`); that imports Prefect, a second or so, which commands on a file's own
    stores need not pay."""
    if os.environ.get("PREFECT_API_URL"):
        return True
    if not read_settings:
        return False
    from prefect.settings import get_current_settings

    return bool(get_current_settings().api.url)


def blocks_wanted(workflow: WorkflowFile, plugin_id: str | None) -> bool:
    """Whether a command should look among saved Prefect blocks for `plugin_id`.

    Always when PREFECT_API_URL names a server. Otherwise only for an id the file does not
    declare, where the alternative is an error: the lookup then starts Prefect's temporary
    server, which takes seconds, so commands on the file's own stores never pay for it.
    """
    return prefect_server_configured() or (
        plugin_id is not None and plugin_id not in workflow.stores
    )


class PluginRegistry:
    """The memory stores a workflow file can reach, opened on first use.

    With `use_blocks`, ids not under `stores:` are looked up among saved Prefect blocks.
    """

    def __init__(self, workflow: WorkflowFile, *, use_blocks: bool = True) -> None:
        self.workflow = workflow
        self.use_blocks = use_blocks
        self._open: dict[str, MemoryStore] = {}
        self._missing: set[str] = set()
        self._documents: dict[str, tuple[str, str]] = {}

    def block_document(self, plugin_id: str) -> tuple[str, str] | None:
        """The id and `slug/name` of the saved block `plugin_id` was loaded from, if any."""
        return self._documents.get(plugin_id)

    def ids(self) -> list[str]:
        """Plugin ids declared in the file, in file order."""
        return list(self.workflow.stores)

    def has(self, plugin_id: str) -> bool:
        return plugin_id in self.workflow.stores

    def register(self, plugin_id: str, store: MemoryStore) -> None:
        """Make `store` answer for `plugin_id` in this registry (stores built in code)."""
        self._open[plugin_id] = redacting(store)
        self._missing.discard(plugin_id)

    def get(self, plugin_id: str) -> MemoryStore | None:
        """The store for a file-declared, non-block `plugin_id`; None otherwise. No I/O."""
        if plugin_id in self._open:
            return self._open[plugin_id]
        spec = self.workflow.stores.get(plugin_id)
        if spec is None or isinstance(spec, BlockRef):
            return None
        store = self._open[plugin_id] = redacting(open_store(spec, self.workflow, plugin_id))
        return store

    async def resolve(self, plugin_id: str) -> MemoryStore | None:
        """The store for `plugin_id`: the file's `stores:` first, then saved blocks by name.

        None when nothing matches (the caller treats the binding as a no-op). A Prefect API
        that cannot be reached counts as no match, with a warning.
        """
        store = self.get(plugin_id)
        if store is not None or plugin_id in self._missing:
            return store
        spec = self.workflow.stores.get(plugin_id)
        document: tuple[MemoryStore, str | None] | None = None
        if isinstance(spec, BlockRef):
            document, name = await load_block_document(spec.block), spec.block
        elif self.use_blocks:
            try:
                found = await find_memory_blocks(plugin_id)
            except Exception as exc:  # the API is optional for file stores; say so, go on
                logger.warning("cannot list saved Prefect blocks for %r: %s", plugin_id, exc)
                found = {}
            if plugin_id in found:
                document, name = await load_block_document(found[plugin_id]), found[plugin_id]
        if document is not None:
            store, document_id = document
            if document_id is not None:
                self._documents[plugin_id] = (document_id, name)
        if store is None:
            self._missing.add(plugin_id)
            return None
        store = self._open[plugin_id] = redacting(store)
        return store

    async def choose(self, plugin_id: str | None) -> tuple[str, MemoryStore]:
        """The store a command should use: `plugin_id`, or the only one there is.

        Never picks silently between several stores: without `plugin_id`, the file's stores and
        (with `use_blocks`) the saved memory-store blocks are counted, and more than one is an
        error.
        """
        if plugin_id is None:
            available = list(self.ids())
            if self.use_blocks:
                try:
                    available += [n for n in await find_memory_blocks() if n not in available]
                except Exception as exc:
                    logger.debug("no Prefect API to list blocks: %s", exc)
            if len(available) > 1:
                raise ConfigError(
                    f"{len(available)} stores are available ({', '.join(available)}); "
                    "choose one with --plugin"
                )
            if not available:
                raise ConfigError(
                    f"{self._where()} declares no stores and no memory-store block is saved; "
                    "add one under stores: (e.g. `memory-local: {type: sqlite}`)"
                )
            plugin_id = available[0]
        store = await self.resolve(plugin_id)
        if store is None:
            blocks = (
                "no saved memory-store block has that name"
                if self.use_blocks
                else "without --plugin, saved Prefect blocks are counted only when "
                "PREFECT_API_URL names a server"
            )
            raise ConfigError(
                f"unknown plugin {plugin_id!r}; {self._where()} declares "
                f"{', '.join(self.ids()) or 'no stores'} ({blocks})"
            )
        return plugin_id, store

    def _where(self) -> str:
        return str(self.workflow.source) if self.workflow.source else "the workflow"

    async def aclose(self) -> None:
        for plugin_id, store in list(self._open.items()):
            close = getattr(store, "aclose", None)
            if close is not None:
                try:
                    await close()
                except StoreUnavailable as exc:
                    logger.warning("closing %s failed: %s", plugin_id, exc)
        self._open.clear()
