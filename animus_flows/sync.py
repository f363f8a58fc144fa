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
from typing import Any, TypeVar

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
