"""Run async APIs from plain scripts and the CLI.

One event loop per facade, reused across calls, so stores that hold loop-bound resources (HTTP
pools, plugin pipes) keep working between calls. Calling from inside a running loop is refused:
block the loop and nothing else runs, so the caller is told to `await` instead.
"""

from __future__ import annotations

import asyncio
import functools
import threading
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any, TypeVar

from animus_flows.ledger import require_ledger

if TYPE_CHECKING:
    from animus_flows.ledger import LedgerEvent, VersionedItem
    from animus_flows.protocol import (
        JSON,
        Capabilities,
        ItemPage,
        MemoryItem,
        MemoryStore,
        QueryHit,
        Scope,
        ScopePage,
    )

T = TypeVar("T")


class LoopRunner:
    """Owns a private event loop and runs coroutines on it to completion.

    `owner` names the facade in the error a call after `close()` raises.
    """

    def __init__(self, owner: str = "this sync facade") -> None:
        self._runner = asyncio.Runner()
        self._lock = threading.Lock()
        self._started = False
        self._owner = owner
        self.closed = False

    def run(self, coro: Coroutine[Any, Any, T], *, await_form: str) -> T:
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            pass
        else:
            coro.close()
            raise RuntimeError(
                f"called the sync API inside a running event loop; use `{await_form}` instead"
            )
        with self._lock:
            if self.closed:
                coro.close()  # never run: closing it spares the "never awaited" warning
                raise RuntimeError(f"{self._owner} is closed; create a new one to use it again")
            self._started = True
            return self._runner.run(coro)

    def close(self) -> None:
        """Close the loop; a second close does nothing."""
        if self.closed:
            return
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            pass
        else:
            if not self._started:  # no loop of ours to close
                return
            raise RuntimeError(
                "closed a sync facade inside a running event loop; close it from synchronous code "
                "or use the async API (`await store.aclose()`) instead"
            )
        with self._lock:
            self._runner.close()
            self.closed = True


def blocking_method(name: str, async_method: Callable[..., Any], *, await_form: str) -> Any:
    """A blocking method that runs `self._async.<name>(...)` on `self._loop` (a LoopRunner).

    Facades declare one per async method, so the async class is the only implementation; the
    blocking one keeps its signature and docstring for `help()` and editors.
    """

    @functools.wraps(async_method)
    def method(self: Any, *args: Any, **kwargs: Any) -> Any:
        coro = getattr(self._async, name)(*args, **kwargs)
        return self._loop.run(coro, await_form=await_form)

    return method


class SyncStore:
    """Blocking facade over any `MemoryStore`, for scripts and the CLI.

    Example:
        ```python
        from animus_flows.protocol import Scope
        from animus_flows.stores import SQLiteStore, SyncStore

        store = SyncStore(SQLiteStore("memory.db"))
        store.put(Scope("demo"), "greeting", "hello")
        print(store.query(Scope("demo"), "hello"))
        ```
    """

    def __init__(self, store: MemoryStore) -> None:
        self.store = store
        self._loop = LoopRunner()

    @property
    def capabilities(self) -> Capabilities:
        return self.store.capabilities

    def _run(self, name: str, *args: Any, **kwargs: Any) -> Any:
        coro = getattr(self.store, name)(*args, **kwargs)
        return self._loop.run(coro, await_form=f"await store.{name}(...)")

    def put(
        self,
        scope: Scope,
        key: str,
        value: JSON,
        *,
        metadata: dict[str, JSON] | None = None,
        ttl_seconds: int | None = None,
    ) -> MemoryItem:
        return self._run("put", scope, key, value, metadata=metadata, ttl_seconds=ttl_seconds)

    def get(self, scope: Scope, key: str) -> MemoryItem | None:
        return self._run("get", scope, key)

    def query(
        self, scope: Scope, text: str, *, top_k: int = 8, filters: dict[str, JSON] | None = None
    ) -> list[QueryHit]:
        return self._run("query", scope, text, top_k=top_k, filters=filters)

    def list_scopes(
        self, *, project_id: str | None = None, cursor: str | None = None, limit: int = 100
    ) -> ScopePage:
        return self._run("list_scopes", project_id=project_id, cursor=cursor, limit=limit)

    def delete_scope(self, scope: Scope) -> int:
        return self._run("delete_scope", scope)

    def delete(self, scope: Scope, key: str) -> bool:
        return self._run("delete", scope, key)

    def list_items(
        self,
        scope: Scope,
        *,
        prefix: str | None = None,
        cursor: str | None = None,
        limit: int = 100,
    ) -> ItemPage:
        return self._run("list_items", scope, prefix=prefix, cursor=cursor, limit=limit)

    def count(self, scope: Scope) -> int:
        return self._run("count", scope)

    # -- the ledger, where the store keeps one (`animus_flows.ledger.LedgerStore`) ------------

    def get_versioned(self, scope: Scope, key: str) -> VersionedItem | None:
        return self._run_ledger("get_versioned", scope, key)

    def put_versioned(
        self,
        scope: Scope,
        key: str,
        value: JSON,
        *,
        expected_version: int | None = None,
        metadata: dict[str, JSON] | None = None,
        ttl_seconds: int | None = None,
    ) -> VersionedItem:
        return self._run_ledger(
            "put_versioned",
            scope,
            key,
            value,
            expected_version=expected_version,
            metadata=metadata,
            ttl_seconds=ttl_seconds,
        )

    def ledger_events(self, scope: Scope, key: str) -> list[LedgerEvent]:
        return self._run_ledger("ledger_events", scope, key)

    def _run_ledger(self, name: str, *args: Any, **kwargs: Any) -> Any:
        require_ledger(self.store, name)
        return self._run(name, *args, **kwargs)

    def reindex(self) -> int:
        """Index the store's items again, where the store keeps an index (SQLite)."""
        return self._run("reindex")

    def close(self) -> None:
        """Close the wrapped store and the facade's event loop."""
        if hasattr(self.store, "aclose"):
            self._run("aclose")
        self._loop.close()

    def __enter__(self) -> SyncStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
