"""The `jsonrpc` store: any out-of-process plugin speaking the memory-store protocol on stdio.

The process starts on the first call, shakes hands (`initialize`: protocol version and
capabilities), and is restarted after a crash. The base class does the rest as for any
store: it validates arguments, clamps `top_k` to the plugin's `max_query_top_k`, and emulates
TTL through metadata when the plugin reports no `native_ttl`. A plugin of protocol 0.1.0 serves
every method but `memory/delete` and `memory/list_items`, which raise a `ConfigError` saying to
upgrade it.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from datetime import datetime
from pathlib import Path

from animus_flows.jsonrpc import codec
from animus_flows.protocol import (
    JSON,
    METHOD_DELETE,
    METHOD_DELETE_SCOPE,
    METHOD_GET,
    METHOD_LIST_ITEMS,
    METHOD_LIST_SCOPES,
    METHOD_PUT,
    METHOD_QUERY,
    Capabilities,
    ItemPage,
    MemoryItem,
    QueryHit,
    Scope,
    ScopePage,
    utcnow,
)
from animus_flows.stores.base import BaseStore
from animus_flows.stores.plugin_process import PluginProcess

#: What `capabilities` says before the handshake: only what every plugin can be assumed to do.
#: `max_query_top_k` is not narrowed here because the store applies the plugin's own limit,
#: learned at the handshake, before it sends any query.
BEFORE_HANDSHAKE = Capabilities(
    native_ttl=False, native_key_get=False, strong_consistency=False, max_query_top_k=1000
)


class JsonRpcStore(BaseStore):
    """A memory store served by a plugin process (JSON-RPC 2.0, one message per line).

    Args:
        command: the plugin's command line.
        plugin_id: the name used in errors and logs (the `stores:` id).
        env: extra environment variables, added to this process's environment.
        cwd: the plugin's working folder.
        startup_timeout_ms: deadline for starting and answering `initialize`.
        call_timeout_ms: deadline for one call; a plugin that misses it is stopped and
            restarted on the next call.

    Example:
        ```python
        from animus_flows.protocol import Scope
        from animus_flows.stores.jsonrpc import JsonRpcStore

        store = JsonRpcStore(["python", "my_plugin.py"], plugin_id="memory-dict")
        await store.put(Scope("demo"), "k", "hello")
        await store.aclose()  # stops the process
        ```
    """

    def __init__(
        self,
        command: Sequence[str],
        *,
        plugin_id: str | None = None,
        env: Mapping[str, str] | None = None,
        cwd: str | Path | None = None,
        startup_timeout_ms: int = 5000,
        call_timeout_ms: int = 5000,
    ) -> None:
        self.plugin_id = plugin_id or (Path(command[0]).name if command else "plugin")
        self.process = PluginProcess(
            command,
            name=self.plugin_id,
            env={**os.environ, **env} if env else None,
            cwd=Path(cwd) if cwd is not None else None,
            startup_timeout=startup_timeout_ms / 1000,
            call_timeout=call_timeout_ms / 1000,
        )

    @property
    def capabilities(self) -> Capabilities:  # type: ignore[override]
        """The plugin's capabilities once it has answered `initialize` (see `connect`)."""
        handshake = self.process.handshake
        return handshake.capabilities if handshake is not None else BEFORE_HANDSHAKE

    async def connect(self) -> codec.Handshake:
        """Start the plugin now rather than on the first call; returns its handshake."""
        return await self.process.ensure_started()

    def describe(self) -> str:
        return f"JsonRpcStore({self.plugin_id!r})"

    async def aclose(self) -> None:
        await self.process.close()

    async def _ready(self) -> None:
        # the base class reads `capabilities` before it calls the backend: shake hands first
        await self.connect()

    # -- the wire -------------------------------------------------------------------------

    @property
    def _source(self) -> str:
        return f"plugin {self.plugin_id}"

    async def _put(
        self,
        scope: Scope,
        key: str,
        value: JSON,
        metadata: dict[str, JSON],
        expires_at: datetime | None,
    ) -> MemoryItem:
        params: dict[str, JSON] = {
            "scope": scope.to_json(),
            "key": key,
            "value": value,
            "metadata": metadata,
        }
        if expires_at is not None and self.capabilities.native_ttl:
            # The base class turned ttl_seconds into expires_at a moment ago; the wire carries
            # seconds, and rounding absorbs the microseconds in between.
            params["ttl_seconds"] = max(1, round((expires_at - utcnow()).total_seconds()))
        result = await self.process.call(METHOD_PUT, params)
        return codec.parse_item(result, self._source, METHOD_PUT)

    async def _get(self, scope: Scope, key: str) -> MemoryItem | None:
        result = await self.process.call(METHOD_GET, {"scope": scope.to_json(), "key": key})
        return None if result is None else codec.parse_item(result, self._source, METHOD_GET)

    async def _query(
        self, scope: Scope, text: str, top_k: int, filters: dict[str, JSON] | None
    ) -> list[QueryHit]:
        params: dict[str, JSON] = {"scope": scope.to_json(), "text": text, "top_k": top_k}
        if filters:
            params["filters"] = filters
        return codec.parse_hits(await self.process.call(METHOD_QUERY, params), self._source)

    async def _list_scopes(
        self, project_id: str | None, cursor: str | None, limit: int
    ) -> ScopePage:
        params = {"project_id": project_id, "cursor": cursor, "limit": limit}
        return codec.parse_page(await self.process.call(METHOD_LIST_SCOPES, params), self._source)

    async def _delete_scope(self, scope: Scope) -> int:
        result = await self.process.call(METHOD_DELETE_SCOPE, {"scope": scope.to_json()})
        return codec.parse_deleted(result, self._source)

    async def _delete(self, scope: Scope, key: str) -> bool:
        self._check_served(METHOD_DELETE)
        # a plugin without native TTL cannot tell that the host's expiry has passed: an item
        # expired there counts as no item
        live = self.capabilities.native_ttl or await self.get(scope, key) is not None
        result = await self.process.call(METHOD_DELETE, {"scope": scope.to_json(), "key": key})
        return codec.parse_deleted_item(result, self._source) and live

    async def _list_items(
        self, scope: Scope, prefix: str | None, cursor: str | None, limit: int
    ) -> ItemPage:
        self._check_served(METHOD_LIST_ITEMS)
        params = {"scope": scope.to_json(), "prefix": prefix, "cursor": cursor, "limit": limit}
        result = await self.process.call(METHOD_LIST_ITEMS, params)
        return codec.parse_item_page(result, self._source)

    def _check_served(self, method: str) -> None:
        handshake = self.process.handshake
        if handshake is not None:  # `_ready` shook hands a moment ago
            codec.check_method_served(handshake, method, self._source)
