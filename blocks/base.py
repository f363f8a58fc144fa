"""The interface every memory-store block implements: configuration in, a `MemoryStore` out."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, ClassVar

from prefect.blocks.core import Block
from pydantic import PrivateAttr

from animus_flows.protocol import MemoryStore

MEMORY_STORE_CAPABILITY = "memory-store"


class MemoryStoreBlock(Block, ABC):
    """A Prefect block that configures a memory store and hands it out with `get_store()`.

    Subclasses implement `_build_store`; the live store is cached on the instance and never
    pickled, so a block can travel to workers.
    """

    _block_schema_capabilities: ClassVar[list[str]] = [MEMORY_STORE_CAPABILITY]
    _store: MemoryStore | None = PrivateAttr(None)

    def get_store(self) -> MemoryStore:
        """The memory store this block configures (created on first call, then reused)."""
        if self._store is None:
            self._store = self._build_store()
        return self._store

    @abstractmethod
    def _build_store(self) -> MemoryStore: ...

    def __getstate__(self) -> dict[Any, Any]:
        state = super().__getstate__()
        private = dict(state.get("__pydantic_private__") or {})
        private["_store"] = None
        return {**state, "__pydantic_private__": private}
