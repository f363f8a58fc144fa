"""Graceful degradation: run a store call under a deadline and report, never raise.

Shared by the memory loader and the `memory_bindings` hook, so a slow, failing or missing store
degrades the same way everywhere: the caller gets a fallback value and a status of `ok`,
`timeout` or `error` with the time it took, and decides what to audit.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Generic, Literal, TypeVar

from animus_flows.errors import StoreTimeout

T = TypeVar("T")
Status = Literal["ok", "timeout", "error"]

#: Seed 002's timeout safeguard for one memory load.
DEFAULT_TIMEOUT_MS = 500


@dataclass(frozen=True)
class Outcome(Generic[T]):
    """What a degraded call produced: its value (or the fallback), status and timing.

    `detail` says why a call did not succeed (the exception's type and message; store errors
    never carry secrets), and is empty when `status` is `ok`.
    """

    value: T
    status: Status
    duration_ms: float
    started_at: datetime
    ended_at: datetime
    detail: str = ""

    @property
    def ok(self) -> bool:
        return self.status == "ok"


async def run_degraded(
    call: Callable[[], Awaitable[T]],
    *,
    timeout_ms: float | None = DEFAULT_TIMEOUT_MS,
    fallback: T,
) -> Outcome[T]:
    """Await `call()` within `timeout_ms` (None: no deadline) and never raise its errors.

    A call that outlives its deadline is cancelled and reported as `timeout`, as is a store that
    gives up on its own deadline (`StoreTimeout`); any other exception is `error`. Either way the
    result holds `fallback`. Cancellation of the caller itself still propagates.

    Example:
        ```python
        from animus_flows.retrieval.degrade import run_degraded
        from animus_flows.protocol import Scope
        from animus_flows.stores import SQLiteStore

        store, scope = SQLiteStore(".animus/memory.db"), Scope("trade-desk")
        outcome = await run_degraded(lambda: store.query(scope, "fx"), timeout_ms=500,
                                     fallback=[])
        hits, status = outcome.value, outcome.status  # [], 'ok'
        ```
    """
    started_at = datetime.now(UTC)
    start = time.perf_counter()

    def finish(value: T, status: Status, detail: str = "") -> Outcome[T]:
        duration_ms = (time.perf_counter() - start) * 1000
        return Outcome(value, status, duration_ms, started_at, datetime.now(UTC), detail)

    deadline = asyncio.timeout(None if timeout_ms is None else timeout_ms / 1000)
    try:
        async with deadline:
            value = await call()
    except TimeoutError as exc:
        if deadline.expired():
            return finish(fallback, "timeout", f"no answer within {timeout_ms:g} ms")
        return finish(fallback, "timeout", f"{type(exc).__name__}: {exc}")
    except StoreTimeout as exc:
        return finish(fallback, "timeout", str(exc))
    except Exception as exc:  # degrading is the point: any store failure becomes a status
        return finish(fallback, "error", f"{type(exc).__name__}: {exc}")
    return finish(value, "ok")
