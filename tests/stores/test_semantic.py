"""The vector leg's query vectors (animus_flows.stores.semantic): embedded once per model and
text however many stores of a process ask, and never lost to a caller that gives up."""

import asyncio

import numpy as np
import pytest

from animus_flows.retrieval.degrade import run_degraded
from animus_flows.stores.semantic import SemanticLeg


class HeldEmbedder:
    """An embedder whose answers wait until `release` is set; counts its calls."""

    dimension = 3
    similarity_floor = 0.0

    def __init__(self, model: str) -> None:
        self.model = model
        self.release = asyncio.Event()
        self.calls = 0

    async def embed(self, texts, *, purpose):
        self.calls += 1
        await self.release.wait()
        return np.ones((len(texts), self.dimension), dtype=np.float32)


async def settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


async def test_stores_asking_the_same_prompt_share_one_embedding(request):
    embedder = HeldEmbedder(request.node.name)
    first = asyncio.create_task(SemanticLeg(embedder).query_vector("a prompt"))
    second = asyncio.create_task(SemanticLeg(embedder).query_vector("a prompt"))
    await settle()
    embedder.release.set()
    assert np.array_equal(await first, await second)
    assert embedder.calls == 1


async def test_the_vector_reaches_the_others_when_the_first_caller_is_cancelled(request):
    embedder = HeldEmbedder(request.node.name)
    first = asyncio.create_task(SemanticLeg(embedder).query_vector("a prompt"))
    await settle()
    second = asyncio.create_task(SemanticLeg(embedder).query_vector("a prompt"))
    await settle()
    first.cancel()
    await settle()
    embedder.release.set()
    assert (await second).shape == (3,)
    with pytest.raises(asyncio.CancelledError):
        await first
    assert embedder.calls == 1


async def test_a_binding_whose_deadline_is_later_times_out_rather_than_crash(request):
    # Two bindings of a phase ask the same prompt with the same timeout, a moment apart: the
    # first one's deadline passes first. The second must see its own timeout (a status), never
    # the first one's cancellation (which would crash the phase's Prefect task).
    embedder = HeldEmbedder(request.node.name)

    async def query(delay_s: float):
        await asyncio.sleep(delay_s)
        return await run_degraded(
            lambda: SemanticLeg(embedder).query_vector("a prompt"), timeout_ms=50, fallback=None
        )

    first, second = await asyncio.gather(query(0), query(0.01))
    assert (first.status, second.status) == ("timeout", "timeout")
    embedder.release.set()
    await settle()  # the embedding went on without them, into the cache
    assert embedder.calls == 1
    assert (await SemanticLeg(embedder).query_vector("a prompt")).shape == (3,)
    assert embedder.calls == 1
