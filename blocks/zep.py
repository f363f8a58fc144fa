"""`ZepMemoryStore`: the Zep reference store as a Prefect block."""

from __future__ import annotations

from typing import ClassVar

from pydantic import Field, SecretStr

from animus_flows.blocks._logos import ZEP_LOGO
from animus_flows.blocks.base import MemoryStoreBlock
from animus_flows.stores.zep import DEFAULT_BASE_URL, ZepStore


class ZepMemoryStore(MemoryStoreBlock):
    """A memory store in Zep (https://www.getzep.com), reached with the official SDK.

    Each project is a Zep user and each scope a Zep session; items are messages, searched with
    Zep's semantic search. Zep indexes asynchronously: a write becomes searchable a moment
    later. The API key is stored as a secret and never shown.

    Example:
        Load a saved block and query it:
        ```python
        from animus_flows.blocks import ZepMemoryStore
        from animus_flows.protocol import Scope

        block = ZepMemoryStore.load("BLOCK_NAME")
        store = block.get_store()
        hits = await store.query(Scope("trade-desk", agent_id="analyst"), "EUR/USD", top_k=5)
        ```
    """

    _block_type_name: ClassVar[str] = "Animus Zep Memory Store"
    _block_type_slug: ClassVar[str] = "animus-zep-memory-store"
    _logo_url: ClassVar[str] = ZEP_LOGO  # type: ignore[assignment]
    _documentation_url: ClassVar[str] = (
        "https://github.com/animus-flows/animus-flows/blob/main/docs/stores/zep.md"  # type: ignore[assignment]
    )
    _description: ClassVar[str] = (
        "An animus-flows memory store in Zep: projects as users, scopes as sessions, "
        "semantic search over stored items."
    )

    api_key: SecretStr = Field(description="The API key of the Zep project.")
    base_url: str = Field(
        default=DEFAULT_BASE_URL,
        description="The Zep server, without the /api/v2 suffix.",
    )
    timeout_s: float = Field(
        default=10.0,
        gt=0,
        description="Deadline of one store operation in seconds, retries included.",
    )
    max_retries: int = Field(
        default=3,
        ge=0,
        description="How often a 408, 429 or 5xx answer is retried, with the SDK's backoff.",
    )

    def _build_store(self) -> ZepStore:
        return ZepStore(
            self.api_key,
            base_url=self.base_url,
            timeout_s=self.timeout_s,
            max_retries=self.max_retries,
        )
