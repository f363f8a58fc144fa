"""`SQLiteMemoryStore`: the embedded default store as a Prefect block."""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

from pydantic import Field

from animus_flows.blocks._logos import SQLITE_LOGO
from animus_flows.blocks.base import MemoryStoreBlock
from animus_flows.stores.sqlite import SQLiteStore


class SQLiteMemoryStore(MemoryStoreBlock):
    """An embedded memory store in one SQLite file, with full-text (BM25) search.

    Safe for several processes on one machine (WAL, busy timeout). Use a path every worker
    sees, such as a shared volume, when flows run on several machines.

    Example:
        Load a saved block and query it:
        ```python
        from animus_flows.blocks import SQLiteMemoryStore
        from animus_flows.protocol import Scope

        block = SQLiteMemoryStore.load("BLOCK_NAME")
        store = block.get_store()
        hits = await store.query(Scope("trade-desk"), "EUR/USD", top_k=5)
        ```
    """

    _block_type_name: ClassVar[str] = "Animus SQLite Memory Store"
    _block_type_slug: ClassVar[str] = "animus-sqlite-memory-store"
    _logo_url: ClassVar[str] = SQLITE_LOGO  # type: ignore[assignment]
    _documentation_url: ClassVar[str] = (
        "https://github.com/animus-flows/animus-flows#the-sqlite-store"  # type: ignore[assignment]
    )
    _description: ClassVar[str] = (
        "An embedded animus-flows memory store: one SQLite file with BM25 full-text search."
    )

    path: str = Field(
        default=".animus/memory.db",
        description="Path of the database file; relative paths resolve against the worker's "
        "working folder.",
    )
    busy_timeout_ms: int = Field(
        default=5000,
        ge=0,
        description="How long a write waits for another process's lock, in milliseconds.",
    )

    language: str = Field(
        default="english",
        description="How text is searched: a Snowball language's stop words and stemming, or "
        "simple for neither.",
    )

    def _build_store(self) -> SQLiteStore:
        return SQLiteStore(
            Path(self.path), busy_timeout_ms=self.busy_timeout_ms, language=self.language
        )
