"""Degraded calls: a value and `ok`, or the fallback with `timeout` or `error`, never a raise."""

import asyncio

import pytest

from animus_flows.errors import StoreTimeout, StoreUnavailable
from animus_flows.retrieval.degrade import run_degraded


async def test_a_call_that_answers_is_ok_with_its_value():
    async def answer():
        return [1, 2]

    outcome = await run_degraded(answer, timeout_ms=500, fallback=[])
    assert (outcome.value, outcome.status, outcome.detail) == ([1, 2], "ok", "")
    assert outcome.ok and outcome.duration_ms >= 0
    assert outcome.started_at <= outcome.ended_at


async def test_a_call_past_its_deadline_is_cancelled_and_reported_as_timeout():
    cancelled = asyncio.Event()

    async def hang():
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            cancelled.set()
            raise

    outcome = await run_degraded(hang, timeout_ms=20, fallback=["nothing"])
    assert (outcome.value, outcome.status) == (["nothing"], "timeout")
    assert outcome.detail == "no answer within 20 ms"
    assert cancelled.is_set() and not outcome.ok


async def test_a_store_that_gives_up_on_its_own_deadline_is_a_timeout():
    async def locked():
        raise StoreTimeout("SQLite store x.db stayed locked for 5000 ms")

    outcome = await run_degraded(locked, fallback=None)
    assert outcome.status == "timeout"
    assert "stayed locked" in outcome.detail


@pytest.mark.parametrize(
    ("error", "detail"),
    [
        (StoreUnavailable("store down; start it"), "StoreUnavailable: store down; start it"),
        (RuntimeError("boom"), "RuntimeError: boom"),
        (TimeoutError("socket read"), "TimeoutError: socket read"),
    ],
)
async def test_failures_become_a_status_with_the_reason(error, detail):
    async def fail():
        raise error

    outcome = await run_degraded(fail, timeout_ms=500, fallback=0)
    assert outcome.value == 0 and outcome.detail == detail
    assert outcome.status == ("timeout" if isinstance(error, TimeoutError) else "error")


async def test_a_failure_before_the_first_await_is_caught_too():
    def no_store():
        raise StoreUnavailable("no store configured")

    outcome = await run_degraded(no_store, fallback=[])
    assert outcome.status == "error" and outcome.value == []


async def test_no_deadline_when_timeout_is_none():
    async def slowish():
        await asyncio.sleep(0.01)
        return "done"

    assert (await run_degraded(slowish, timeout_ms=None, fallback="")).value == "done"


async def test_cancelling_the_caller_still_cancels():
    async def hang():
        await asyncio.sleep(30)

    task = asyncio.create_task(run_degraded(hang, timeout_ms=None, fallback=None))
    await asyncio.sleep(0.01)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
