"""`PostgresMemoryStore`: the PostgreSQL store many workers share, as a Prefect block."""

from __future__ import annotations

from typing import ClassVar

from pydantic import Field, SecretStr

from animus_flows.blocks._logos import POSTGRES_LOGO
from animus_flows.blocks.base import MemoryStoreBlock
from animus_flows.config.embedder import EmbedderSpec
from animus_flows.protocol import MemoryStore


class PostgresMemoryStore(MemoryStoreBlock):
    """A memory store in PostgreSQL, shared by every worker that reaches the database.

    Ranked with BM25 over PostgreSQL's full-text search (stemming and stop words of the
    `language` configuration) with each scope's own statistics, and with an `embedder`, by
    meaning too. The tables live in one schema, created and migrated on first connect. The DSN
    is stored as a secret and never shown. Needs `pip install "animus-flows[postgres]"` on the
    workers.

    Example:
        Load a saved block and query it:
        ```python
        from animus_flows.blocks import PostgresMemoryStore
        from animus_flows.protocol import Scope

        block = PostgresMemoryStore.load("BLOCK_NAME")
        store = block.get_store()
        hits = await store.query(Scope("trade-desk", agent_id="analyst"), "EUR/USD", top_k=5)
        ```
    """

    _block_type_name: ClassVar[str] = "Animus PostgreSQL Memory Store"
    _block_type_slug: ClassVar[str] = "animus-postgres-memory-store"
    _logo_url: ClassVar[str] = POSTGRES_LOGO  # type: ignore[assignment]
    _documentation_url: ClassVar[str] = (
        "https://github.com/animus-flows/animus-flows/blob/main/docs/stores/postgres.md"  # type: ignore[assignment]
    )
    _description: ClassVar[str] = (
        "An animus-flows memory store in PostgreSQL, shared by many workers: full-text BM25 "
        "per scope, optional embeddings."
    )

    dsn: SecretStr = Field(
        description="The connection string, postgresql://USER:PASSWORD@HOST:5432/DATABASE; "
        "kept secret.",
    )
    schema_: str = Field(
        default="animus",
        alias="schema",
        description="The PostgreSQL schema holding the store's tables; created on first connect.",
    )
    language: str = Field(
        default="english",
        description="The text search configuration: its stop words and stemmer (english, "
        "german, ...), or simple for neither.",
    )
    pool_max_size: int = Field(
        default=10,
        ge=1,
        description="The most connections one worker process opens to the database.",
    )
    embedder: EmbedderSpec | None = Field(
        default=None,
        description="A model to rank by meaning too, e.g. {type: local}; none: words only.",
    )

    def _build_store(self) -> MemoryStore:
        from animus_flows.stores.postgres import PostgresStore
        from animus_flows.stores.specs import embedder_of

        return PostgresStore(
            self.dsn,
            schema=self.schema_,
            language=self.language,
            embedder=embedder_of(self.embedder),
            pool_max_size=self.pool_max_size,
        )
