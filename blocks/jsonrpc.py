"""`JsonRpcMemoryStore`: an out-of-process memory-store plugin as a Prefect block."""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

from prefect.blocks.fields import SecretDict
from pydantic import Field

from animus_flows.blocks._logos import JSONRPC_LOGO
from animus_flows.blocks.base import MemoryStoreBlock
from animus_flows.stores.jsonrpc import JsonRpcStore


class JsonRpcMemoryStore(MemoryStoreBlock):
    """A memory store served by a plugin process speaking the animus memory-store protocol.

    The plugin (any program, in any language) reads JSON-RPC 2.0 requests on stdin, one per
    line, and answers on stdout; docs/protocol.md in the repository is its specification.
    The process starts on the first call, is stopped when it hangs or misbehaves, and is
    restarted on the next call. `animus memory serve --plugin ID` turns any configured store
    into such a plugin.

    Example:
        Load a saved block and query it:
        ```python
        from animus_flows.blocks import JsonRpcMemoryStore
        from animus_flows.protocol import Scope

        block = JsonRpcMemoryStore.load("BLOCK_NAME")
        store = block.get_store()
        hits = await store.query(Scope("trade-desk"), "EUR/USD", top_k=5)
        ```
    """

    _block_type_name: ClassVar[str] = "Animus JSON-RPC Memory Store"
    _block_type_slug: ClassVar[str] = "animus-jsonrpc-memory-store"
    _logo_url: ClassVar[str] = JSONRPC_LOGO  # type: ignore[assignment]
    _documentation_url: ClassVar[str] = (
        "https://github.com/animus-flows/animus-flows/blob/main/docs/protocol.md"  # type: ignore[assignment]
    )
    _description: ClassVar[str] = (
        "An out-of-process animus-flows memory store: any program speaking the memory-store "
        "protocol (JSON-RPC 2.0 on stdio)."
    )

    command: list[str] = Field(
        min_length=1,
        description="The plugin's command line: the program, then its arguments.",
    )
    env: SecretDict = Field(
        default_factory=lambda: SecretDict({}),
        description="Extra environment variables for the plugin, kept secret because they "
        "often carry credentials.",
    )
    cwd: str | None = Field(
        default=None,
        description="The plugin's working folder; by default the worker's working folder.",
    )
    startup_timeout_ms: int = Field(
        default=5000,
        ge=1,
        description="Deadline for starting the plugin and its handshake, in milliseconds.",
    )
    call_timeout_ms: int = Field(
        default=5000,
        ge=1,
        description="Deadline for one call, in milliseconds; a plugin that misses it is "
        "stopped and restarted on the next call.",
    )

    def _build_store(self) -> JsonRpcStore:
        env = {name: str(value) for name, value in self.env.get_secret_value().items()}
        return JsonRpcStore(
            self.command,
            plugin_id=self._block_document_name,
            env=env,
            cwd=Path(self.cwd) if self.cwd is not None else None,
            startup_timeout_ms=self.startup_timeout_ms,
            call_timeout_ms=self.call_timeout_ms,
        )
