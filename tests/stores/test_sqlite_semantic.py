"""The SQLite store with the real local embedder: the conformance suite again, semantic cases
included, and what a write and a reader see of the vectors."""

import asyncio
import sqlite3

import pytest

from animus_flows.embedders import LocalEmbedder
from animus_flows.errors import ConfigError
from animus_flows.protocol import Scope
from animus_flows.stores import SQLiteStore
from animus_flows.testing.conformance import StoreConformance


@pytest.fixture(scope="module")
def embedder():
    return LocalEmbedder()


class TestSQLiteHybridConformance(StoreConformance):
    @pytest.fixture
    def store(self, tmp_path, embedder):
        return SQLiteStore(tmp_path / "memory.db", embedder=embedder)

    async def eventually_consistent(self, store):
        await store.wait_embedded()  # single puts embed in the background


SCOPE = Scope("desk", agent_id="analyst")


async def test_a_put_does_not_wait_for_the_model_and_is_found_by_words_at_once(tmp_path, embedder):
    store = SQLiteStore(tmp_path / "m.db", embedder=embedder)
    await store.put(SCOPE, "bike", "Tom bought a new bicycle for commuting")
    # by words at once; by meaning once the background task embedded it
    assert [hit.key for hit in await store.query(SCOPE, "bicycle")] == ["bike"]
    await store.wait_embedded()
    assert [hit.key for hit in await store.query(SCOPE, "a new cycle to ride to work")] == ["bike"]
    await store.aclose()


async def test_closing_a_store_embeds_what_it_queued_first(tmp_path, embedder):
    # every flow run is a process of its own: one that left its writes to the next would
    # leave a queue that grows run after run
    path = tmp_path / "m.db"
    store = SQLiteStore(path, embedder=embedder)
    await store.put(SCOPE, "bike", "Tom bought a new bicycle for commuting")
    await store.aclose()
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT count(*) FROM vector_pending").fetchone() == (0,)
        assert conn.execute("SELECT count(*) FROM item_vectors").fetchone() == (1,)


async def test_vectors_queued_by_a_process_that_ended_are_embedded_by_the_next(tmp_path, embedder):
    path = tmp_path / "m.db"
    first = SQLiteStore(path, embedder=embedder)
    await first.put(SCOPE, "bike", "Tom bought a new bicycle for commuting")
    await first.aclose()
    with sqlite3.connect(path) as conn:  # as a run killed before its close leaves it
        conn.execute("INSERT INTO vector_pending SELECT id FROM items")
        conn.execute("DELETE FROM item_vectors")
    second = SQLiteStore(path, embedder=embedder)
    await second.query(SCOPE, "anything")  # starts on the queue
    await second.wait_embedded()
    assert [hit.key for hit in await second.query(SCOPE, "cycling to the office")] == ["bike"]
    await second.aclose()


async def test_put_many_embeds_before_it_writes(tmp_path, embedder):
    store = SQLiteStore(tmp_path / "m.db", embedder=embedder)
    await store.put_many(
        [(SCOPE, f"k{n}", f"note {n} about the harbour ferry", None) for n in range(40)]
    )
    conn = sqlite3.connect(tmp_path / "m.db")
    assert conn.execute("SELECT count(*) FROM item_vectors").fetchone() == (40,)
    assert conn.execute("SELECT count(*) FROM vector_pending").fetchone() == (0,)
    conn.close()
    await store.aclose()


async def test_another_process_writes_are_seen_by_the_vector_leg(tmp_path, embedder):
    path = tmp_path / "m.db"
    reader, writer = SQLiteStore(path, embedder=embedder), SQLiteStore(path, embedder=embedder)
    await writer.put_many([(SCOPE, "rates", "The central bank raised interest rates", None)])
    assert [h.key for h in await reader.query(SCOPE, "monetary policy tightening")] == ["rates"]
    await writer.put_many([(SCOPE, "pottery", "She signed up for a pottery class", None)])
    await writer.delete_scope(Scope("desk", agent_id="nobody"))
    hits = await reader.query(SCOPE, "learning to make ceramics", top_k=1)
    assert [hit.key for hit in hits] == ["pottery"]  # the kept vectors were read again
    await asyncio.gather(reader.aclose(), writer.aclose())


async def test_a_file_embedded_by_one_model_is_not_read_with_another(tmp_path, embedder):
    path = tmp_path / "m.db"
    store = SQLiteStore(path, embedder=embedder)
    await store.put_many([(SCOPE, "k", "walrus", None)])
    await store.aclose()
    conn = sqlite3.connect(path)
    conn.execute("UPDATE animus_meta SET value = 'other-model/768' WHERE name = 'embedder'")
    conn.commit()
    conn.close()
    store = SQLiteStore(path, embedder=embedder)
    with pytest.raises(ConfigError) as raised:
        await store.query(SCOPE, "walrus")
    assert str(raised.value) == (
        f"SQLite store {path} holds vectors of the embedding model other-model/768, not "
        "multilingual-e5-small/384; run `animus memory reindex` to embed its items with the new "
        "model, or configure the model it was indexed with"
    )
    assert await store.reindex() == 1
    assert [hit.key for hit in await store.query(SCOPE, "a marine mammal")] == ["k"]
    await store.aclose()
    lexical = SQLiteStore(path)  # without an embedder: words only, the vectors left alone
    assert [hit.key for hit in await lexical.query(SCOPE, "walrus")] == ["k"]
    assert not lexical.capabilities.semantic
    await lexical.aclose()
