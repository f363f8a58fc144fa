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


async def test_a_put_is_found_by_meaning_when_it_returns(postgres_dsn, schema, embedder):
    store = PostgresStore(postgres_dsn, schema=schema, embedder=embedder)
    await store.put(SCOPE, "bike", "Tom bought a new bicycle for commuting")
    hits = await store.query(SCOPE, "a new cycle to ride to work")
    assert [hit.key for hit in hits] == ["bike"]
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
