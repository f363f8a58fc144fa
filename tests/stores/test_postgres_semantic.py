"""The PostgreSQL store with the real local embedder: the conformance suite again, semantic
cases included, and what writers and readers in other processes see of the vectors."""

import asyncio
import itertools

import psycopg
import pytest

from animus_flows.embedders import LocalEmbedder
from animus_flows.errors import ConfigError
from animus_flows.protocol import Scope
from animus_flows.stores.postgres import PostgresStore
from animus_flows.testing.conformance import StoreConformance

_schemas = itertools.count()
SCOPE = Scope("desk", agent_id="analyst")


@pytest.fixture(scope="module")
def embedder():
    return LocalEmbedder()


@pytest.fixture
def schema(postgres_dsn):
    return f"sem{next(_schemas)}"


class TestPostgresHybridConformance(StoreConformance):
    @pytest.fixture
    def store(self, postgres_dsn, schema, embedder):
        return PostgresStore(postgres_dsn, schema=schema, embedder=embedder)

    async def eventually_consistent(self, store):
        await store.wait_embedded()  # single puts embed in the background


class CountingEmbedder:
    """The local model, keeping the documents it embeds (an `Embedder` of its own)."""

    def __init__(self, model: LocalEmbedder) -> None:
        self.local = model
        self.model, self.dimension = model.model, model.dimension
        self.similarity_floor = model.similarity_floor
        self.documents: list[str] = []

    async def embed(self, texts, *, purpose):
        if purpose == "document":
            self.documents += texts
        return await self.local.embed(texts, purpose=purpose)


def count(dsn: str, sql: str) -> int:
    with psycopg.connect(dsn) as conn:
        return conn.execute(sql).fetchone()[0]


async def test_a_put_does_not_wait_for_the_model_and_is_found_by_words_at_once(
    postgres_dsn, schema, embedder
):
    store = PostgresStore(postgres_dsn, schema=schema, embedder=embedder)
    await store.put(SCOPE, "bike", "Tom bought a new bicycle for commuting")
    assert [hit.key for hit in await store.query(SCOPE, "bicycle")] == ["bike"]
    await store.wait_embedded()
    assert [hit.key for hit in await store.query(SCOPE, "a new cycle to ride to work")] == ["bike"]
    assert count(postgres_dsn, f'SELECT count(*) FROM "{schema}".embedding_queue') == 0
    await store.aclose()


async def test_closing_a_store_embeds_what_it_queued_first(postgres_dsn, schema, embedder):
    # every flow run is a process of its own: one that left its writes to the next would
    # leave a queue that grows run after run
    store = PostgresStore(postgres_dsn, schema=schema, embedder=embedder)
    for n in range(3):
        await store.put(SCOPE, f"k{n}", f"note {n} about the harbour ferry")
    await store.aclose()
    assert count(postgres_dsn, f'SELECT count(*) FROM "{schema}".embedding_queue') == 0
    assert count(postgres_dsn, f'SELECT count(*) FROM "{schema}".item_vectors') == 3


async def test_workers_embed_each_queued_item_once(postgres_dsn, schema, embedder):
    models = [CountingEmbedder(embedder) for _ in range(3)]
    workers = [PostgresStore(postgres_dsn, schema=schema, embedder=m) for m in models]
    # each worker's background task claims from the one queue while the others do
    for n in range(30):
        await workers[n % 3].put(SCOPE, f"k{n}", f"note {n} about the harbour ferry")
    await asyncio.gather(*(worker.wait_embedded() for worker in workers))
    embedded = [text for model in models for text in model.documents]
    assert len(embedded) == len(set(embedded)) == 30  # no item embedded twice
    assert count(postgres_dsn, f'SELECT count(*) FROM "{schema}".item_vectors') == 30
    await asyncio.gather(*(worker.aclose() for worker in workers))


async def test_a_claim_holds_while_its_process_lives_and_lapses_when_it_dies(
    postgres_dsn, schema, embedder
):
    words = PostgresStore(postgres_dsn, schema=schema, embedder=embedder)
    await words.put(SCOPE, "bike", "Tom bought a new bicycle for commuting")
    await words.wait_embedded()
    claimer = psycopg.connect(postgres_dsn, autocommit=True)  # another worker, embedding it
    claimer.execute(
        f"INSERT INTO \"{schema}\".embedding_queue SELECT id, now(), now() + interval '1 hour',"
        f' pg_backend_pid() FROM "{schema}".items'
    )
    claimer.execute(f'DELETE FROM "{schema}".item_vectors')
    store = PostgresStore(postgres_dsn, schema=schema, embedder=embedder)
    with pytest.raises(TimeoutError):  # left to the worker that claimed it
        await asyncio.wait_for(store.wait_embedded(), 1.0)
    assert count(postgres_dsn, f'SELECT count(*) FROM "{schema}".item_vectors') == 0
    claimer.close()  # the worker died: its claim lapses at once, lease or not
    await asyncio.wait_for(store.wait_embedded(), 30)
    assert [hit.key for hit in await store.query(SCOPE, "cycling to the office")] == ["bike"]
    await asyncio.gather(store.aclose(), words.aclose())


async def test_an_item_rewritten_while_embedded_keeps_no_vector_of_its_old_text(
    postgres_dsn, schema, embedder
):
    words = PostgresStore(postgres_dsn, schema=schema)
    await words.put(SCOPE, "pet", "The walrus rests on the ice floe")
    await words.aclose()
    with psycopg.connect(postgres_dsn) as conn:  # queued, as a put with the model queues it
        conn.execute(
            f'INSERT INTO "{schema}".embedding_queue SELECT id, now() FROM "{schema}".items'
        )
    store = PostgresStore(postgres_dsn, schema=schema, embedder=embedder)
    queue = store._embedding.queue
    (claimed,) = await queue.claim(1, None)  # as a background task claims it
    await store.put(SCOPE, "pet", "Green tea with jasmine flowers")  # rewritten meanwhile
    (old,) = await store._semantic.embed_documents(["The walrus rests on the ice floe"])
    assert await queue.store([(claimed, old)]) == []  # the old text's vector is not stored
    await store.wait_embedded()  # the new text, queued again, is
    (new,) = await store._semantic.embed_documents(["Green tea with jasmine flowers"])
    stored = count(postgres_dsn, f'SELECT vector FROM "{schema}".item_vectors')
    assert bytes(stored) == new
    assert count(postgres_dsn, f'SELECT count(*) FROM "{schema}".item_vectors') == 1
    assert count(postgres_dsn, f'SELECT count(*) FROM "{schema}".embedding_queue') == 0
    await store.aclose()


async def test_put_many_embeds_every_item_before_it_writes(postgres_dsn, schema, embedder):
    store = PostgresStore(postgres_dsn, schema=schema, embedder=embedder)
    await store.put_many(
        [(SCOPE, f"k{n}", f"note {n} about the harbour ferry", None) for n in range(40)]
    )
    with psycopg.connect(postgres_dsn) as conn:
        (count,) = conn.execute(f'SELECT count(*) FROM "{schema}".item_vectors').fetchone()
    assert count == 40
    await store.aclose()


async def test_another_workers_writes_reach_the_vector_leg(postgres_dsn, schema, embedder):
    reader = PostgresStore(postgres_dsn, schema=schema, embedder=embedder)
    writer = PostgresStore(postgres_dsn, schema=schema, embedder=embedder)
    await writer.put_many([(SCOPE, "rates", "The central bank raised interest rates", None)])
    assert [h.key for h in await reader.query(SCOPE, "monetary policy tightening")] == ["rates"]
    await writer.put_many([(SCOPE, "pottery", "She signed up for a pottery class", None)])
    hits = await reader.query(SCOPE, "learning to make ceramics", top_k=1)
    assert [hit.key for hit in hits] == ["pottery"]  # the kept vectors were read again
    assert await writer.delete(SCOPE, "pottery") is True
    hits = await reader.query(SCOPE, "learning to make ceramics", top_k=1)
    assert "pottery" not in [hit.key for hit in hits]
    await asyncio.gather(reader.aclose(), writer.aclose())


async def test_a_scope_deleted_and_written_again_never_shows_its_old_vectors(
    postgres_dsn, schema, embedder
):
    reader = PostgresStore(postgres_dsn, schema=schema, embedder=embedder)
    other = PostgresStore(postgres_dsn, schema=schema, embedder=embedder)
    await other.put(SCOPE, "walrus", "The walrus rests on the ice floe")
    assert [h.key for h in await reader.query(SCOPE, "a marine mammal resting")] == ["walrus"]
    assert await other.delete_scope(SCOPE) == 1
    await other.put(SCOPE, "tea", "Green tea with jasmine flowers")
    hits = await reader.query(SCOPE, "a marine mammal resting")
    assert "walrus" not in [hit.key for hit in hits]
    await asyncio.gather(reader.aclose(), other.aclose())


async def test_a_schema_embedded_by_one_model_is_not_read_with_another(
    postgres_dsn, schema, embedder
):
    store = PostgresStore(postgres_dsn, schema=schema, embedder=embedder)
    await store.put_many([(SCOPE, "k", "walrus", None)])
    await store.aclose()
    with psycopg.connect(postgres_dsn) as conn:
        conn.execute(
            f"UPDATE \"{schema}\".meta SET value = 'other-model/768' WHERE name = 'embedder'"
        )
    store = PostgresStore(postgres_dsn, schema=schema, embedder=embedder)
    with pytest.raises(ConfigError) as raised:
        await store.query(SCOPE, "walrus")
    assert str(raised.value) == (
        f"PostgreSQL store (schema {schema}) holds vectors of the embedding model "
        "other-model/768, not multilingual-e5-small/384; run `animus memory reindex` to embed "
        "its items with the new model, or configure the model it was indexed with"
    )
    assert await store.reindex() == 1
    assert [hit.key for hit in await store.query(SCOPE, "a marine mammal")] == ["k"]
    await store.aclose()
    lexical = PostgresStore(postgres_dsn, schema=schema)  # words only; the vectors left alone
    assert [hit.key for hit in await lexical.query(SCOPE, "walrus")] == ["k"]
    assert not lexical.capabilities.semantic
    await lexical.aclose()
