"""The outbox of the audit's hand-offs to Prefect: held off the hooks, sent in order while a
runner works and at the drain, each in the context that queued it."""

import asyncio
import contextvars
import threading
import time

import pytest
from helpers import write_workflow
from prefect import flow
from prefect.exceptions import TerminationSignal

from animus_flows.config.loader import load_workflow
from animus_flows.protocol import Scope
from animus_flows.runtime.engine import RunState, compile_workflow, run_phase
from animus_flows.runtime.sinks import Outbox, Queued
from animus_flows.stores import SQLiteStore

PHASE = contextvars.ContextVar("phase", default=None)


async def test_nothing_is_sent_before_a_send_or_a_drain():
    outbox, sent = Outbox(), []
    outbox.put("log", lambda: sent.append("log"))
    await asyncio.sleep(0.01)  # the loop idles, yet nothing goes: only a runner's wait opens it
    assert sent == []
    await outbox.drain()
    assert sent == ["log"]


async def test_the_drain_sends_everything_in_order_one_at_a_time():
    outbox, sent, in_flight, most = Outbox(), [], 0, 0

    def artifact(key):
        async def write():
            nonlocal in_flight, most
            in_flight += 1
            most = max(most, in_flight)
            await asyncio.sleep(0.01)
            sent.append(key)
            in_flight -= 1

        return write

    outbox.put("log-a", lambda: sent.append("log-a"))
    outbox.put("memory-ops-a", artifact("memory-ops-a"))
    outbox.put("memory-context-a", artifact("memory-context-a"))
    outbox.put("log-b", lambda: sent.append("log-b"))
    await outbox.drain()
    assert sent == ["log-a", "memory-ops-a", "memory-context-a", "log-b"]
    assert most == 1
    outbox.put("after", lambda: sent.append("after"))  # a later drain sends what came later
    await outbox.drain()
    assert sent[-1] == "after"


async def test_sending_sends_while_open_and_stops_after_the_one_in_flight():
    outbox, sent = Outbox(), []

    def artifact(key):
        async def write():
            await asyncio.sleep(0.02)
            sent.append(key)

        return write

    for key in ("one", "two", "three"):
        outbox.put(key, artifact(key))
    async with outbox.sending():
        await asyncio.sleep(0.03)  # a runner waiting on its model: "one" goes, "two" starts
    assert sent == ["one"]
    await asyncio.sleep(0.05)
    assert sent == ["one", "two"]  # the write in flight finished; "three" waits
    await outbox.drain()
    assert sent == ["one", "two", "three"]


async def test_a_signal_landing_in_a_send_stops_the_runner_it_ran_beside():
    # Prefect raises SIGTERM as a TerminationSignal wherever the main thread is: in a send it
    # would only end the sender, and the run would go on as if nothing happened
    outbox, sent = Outbox(), []

    async def interrupted():
        raise TerminationSignal(signal=15)

    outbox.put("memory-ops-a", interrupted)
    outbox.put("memory-context-a", lambda: sent.append("memory-context-a"))
    started = time.perf_counter()
    with pytest.raises(TerminationSignal):
        async with outbox.sending():
            await asyncio.sleep(30)  # a runner waiting on its model
    assert time.perf_counter() - started < 5
    assert sent == []  # no more sends: the run is stopping
    await outbox.drain()  # raised once; what is left is still sent at the end
    assert sent == ["memory-context-a"]


async def test_a_signal_landing_in_a_send_after_the_runner_is_raised_by_the_drain():
    outbox = Outbox()

    def interrupted():
        raise TerminationSignal(signal=15)

    outbox.put("LoggerSink", interrupted)
    with pytest.raises(TerminationSignal):
        await outbox.drain()


async def test_each_hand_off_runs_in_the_context_that_queued_it():
    outbox, seen = Outbox(), []

    async def artifact():
        seen.append(("artifact", PHASE.get()))

    for phase in ("research", "plan"):
        token = PHASE.set(phase)
        outbox.put("log", lambda: seen.append(("log", PHASE.get())))
        outbox.put("artifact", artifact)
        PHASE.reset(token)
    await outbox.drain()
    assert seen == [
        ("log", "research"),
        ("artifact", "research"),
        ("log", "plan"),
        ("artifact", "plan"),
    ]


async def test_a_failure_is_recorded_and_the_rest_still_sent():
    outbox, sent = Outbox(), []

    async def unreachable():
        raise ConnectionError("API at http://127.0.0.1:9 refused the connection")

    def broken_log():
        raise ValueError("handler closed")

    outbox.put("memory-ops-a", unreachable)
    outbox.put("LoggerSink", broken_log)
    outbox.put("memory-context-a", lambda: sent.append("memory-context-a"))
    await outbox.drain()
    assert sent == ["memory-context-a"]
    assert outbox.failures == [
        "memory-ops-a: API at http://127.0.0.1:9 refused the connection",
        "LoggerSink: handler closed",
    ]


async def test_a_hand_off_queued_from_another_thread_is_sent_by_the_drain():
    outbox, sent = Outbox(), []
    async with outbox.sending():
        thread = threading.Thread(target=outbox.put, args=("log", lambda: sent.append("log")))
        thread.start()
        thread.join()
    await outbox.drain()
    assert sent == ["log"]


class Clock:
    """A sink that notes when each memory op reached it."""

    def __init__(self):
        self.times = []

    def record(self, event):
        self.times.append(time.perf_counter())


RUNNERS = """
import asyncio, time

async def waits(contract):
    started = time.perf_counter()
    await asyncio.sleep(0.2)
    return [started, time.perf_counter()]
"""


@pytest.fixture
async def two_runners(tmp_path):
    store = SQLiteStore(tmp_path / "memory.db")
    await store.put(Scope("desk", agent_id="slow"), "fx", "EUR/USD ranges", metadata={})
    await store.put(Scope("desk", agent_id="quick"), "fx", "EUR/USD ranges", metadata={})
    await store.aclose()
    (tmp_path / "runners.py").write_text(RUNNERS)
    write_workflow(
        tmp_path,
        """
        version: 1
        project: desk
        stores: {local: {type: sqlite, path: memory.db}}
        agents:
          slow:
            runner: runners.py:waits
            memory_bindings: [{plugin: local, binding: market, scope: {kind: agent}}]
          quick:
            memory_bindings: [{plugin: local, binding: market, scope: {kind: agent}}]
        workflows:
          w:
            phases:
              - {id: slow, agent: slow, prompt: "EUR/USD"}
              - {id: quick, agent: quick, prompt: "EUR/USD"}
        """,
    )
    return compile_workflow(load_workflow(tmp_path / "animus.yaml"), "w")


@pytest.mark.usefixtures("prefect_api")
async def test_the_audit_goes_out_while_the_runner_works_never_beside_the_hooks(two_runners):
    clock, outbox = Clock(), Outbox()
    seen = {}

    @flow
    async def two_phases():
        state = RunState.start(two_runners, "T-1", None, [Queued(clock, outbox)], outbox)
        slow, quick = two_runners.phases
        seen["slow"] = (await run_phase(state, slow)).output
        seen["after slow"] = list(clock.times)
        await run_phase(state, quick)  # the echo runner returns at once: no time to send
        seen["after quick"] = list(clock.times)
        await outbox.drain()
        seen["drained"] = list(clock.times)
        await state.plugins.aclose()

    await two_phases()
    started, ended = seen["slow"]
    assert len(seen["after slow"]) == 1 and started <= seen["after slow"][0] <= ended
    assert seen["after quick"] == seen["after slow"]
    assert len(seen["drained"]) == 2
    assert outbox.failures == []  # the four phase artifacts, written at the drain
