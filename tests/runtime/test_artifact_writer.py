"""The background artifact writer: one request at a time, in order, failures kept apart."""

import asyncio

from animus_flows.runtime.sinks import ArtifactWriter


async def test_writes_run_one_at_a_time_in_order_and_drain_waits_for_all():
    writer = ArtifactWriter()
    in_flight, most_in_flight, written = 0, 0, []

    def write(key: str):
        async def call() -> None:
            nonlocal in_flight, most_in_flight
            in_flight += 1
            most_in_flight = max(most_in_flight, in_flight)
            await asyncio.sleep(0.01)
            written.append(key)
            in_flight -= 1

        return call

    for key in ("memory-ops-a", "memory-context-a"):
        writer.submit(key, write(key))
    await asyncio.sleep(0)  # the phase goes on; later phases queue behind
    for key in ("memory-ops-b", "memory-context-b"):
        writer.submit(key, write(key))
    assert written == []  # nothing was awaited inline
    await writer.drain()
    assert written == ["memory-ops-a", "memory-context-a", "memory-ops-b", "memory-context-b"]
    assert most_in_flight == 1


async def test_a_failed_write_is_recorded_and_the_rest_still_written():
    writer = ArtifactWriter()
    written = []

    async def unreachable() -> None:
        raise ConnectionError("API at http://127.0.0.1:9 refused the connection")

    async def fine() -> None:
        written.append("memory-context-a")

    writer.submit("memory-ops-a", unreachable)
    writer.submit("memory-context-a", fine)
    await writer.drain()
    assert written == ["memory-context-a"]
    assert writer.failures == ["memory-ops-a: API at http://127.0.0.1:9 refused the connection"]


async def test_writes_queued_after_a_drain_start_a_new_writer():
    writer = ArtifactWriter()
    written = []

    async def one() -> None:
        written.append(len(written))

    writer.submit("first", one)
    await writer.drain()
    writer.submit("second", one)
    await writer.drain()
    assert written == [0, 1]
