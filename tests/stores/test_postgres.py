"""The PostgreSQL store on the session's throwaway cluster: what only this store does
(migrations, the DSN, text search configurations, statistics, many writers at once); the
conformance suites run in `test_postgres_ledger.py`."""

import asyncio
import itertools
import logging
import math
import subprocess
import sys
import textwrap

import psycopg
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from animus_flows.errors import ConfigError, InvalidRequest, StoreUnavailable
from animus_flows.protocol import Scope
from animus_flows.stores import SyncStore
from animus_flows.stores.postgres import PostgresStore
from animus_flows.stores.postgres.lexical import K1, MAX_SCORED, B, Plan, tsquery
from animus_flows.stores.postgres.schema import SCHEMA_VERSION
from animus_flows.stores.postgres.writes import ANALYSE_APART_ROWS
from animus_flows.stores.sqlite import bm25_score

_schemas = itertools.count()
SECRET = "s3cret-Pa55word"


@pytest.fixture
def schema(postgres_dsn):
    """A schema name no test used: each test starts from an empty store."""
    return f"t{next(_schemas)}"


@pytest.fixture
def store(postgres_dsn, schema):
    with SyncStore(PostgresStore(postgres_dsn, schema=schema)) as sync:
        yield sync


def _rows(dsn, statement, params=()):
    with psycopg.connect(dsn) as conn:
        return conn.execute(statement, params).fetchall()


def _statistics(dsn, schema):
    """The statistics as stored, and as worked out from the items themselves."""
    s = f'"{schema}"'
    stored = (
        set(_rows(dsn, f"SELECT scope_id, lexeme, df FROM {s}.term_df")),
        set(_rows(dsn, f"SELECT id, items, terms FROM {s}.scopes WHERE items > 0")),
    )
    recounted = (
        set(
            _rows(
                dsn,
                f"SELECT scope_id, lexeme, count(*) FROM {s}.items,"
                " unnest(tsvector_to_array(tsv)) lexeme GROUP BY 1, 2",
            )
        ),
        set(
            _rows(
                dsn,
                f"SELECT scope_id, count(*), sum(length) FROM {s}.items GROUP BY 1",
            )
        ),
    )
    postings = _rows(
        dsn,
        f"SELECT count(*) FROM {s}.items WHERE postings <> ARRAY(SELECT scope_id || 'x' || l"
        " FROM unnest(tsvector_to_array(tsv)) l)",
    )
    assert postings == [(0,)]
    return stored, recounted


# -- migrations --------------------------------------------------------------------------------


def test_migrations_are_recorded_once_and_a_second_open_changes_nothing(postgres_dsn, schema):
    for _ in range(2):
        with SyncStore(PostgresStore(postgres_dsn, schema=schema)) as store:
            store.put(Scope("p"), "k", "walrus")
    versions = _rows(postgres_dsn, f'SELECT version FROM "{schema}".schema_migrations')
    assert versions == [(version,) for version in range(1, SCHEMA_VERSION + 1)]
    assert _rows(postgres_dsn, f'SELECT name, value FROM "{schema}".meta ORDER BY name') == [
        ("language", "english")
    ]


async def test_stores_that_connect_at_once_migrate_once(postgres_dsn, schema):
    stores = [PostgresStore(postgres_dsn, schema=schema) for _ in range(8)]
    await asyncio.gather(
        *(store.put(Scope("p", agent_id=str(n)), "k", "walrus") for n, store in enumerate(stores))
    )
    assert _rows(postgres_dsn, f'SELECT count(*) FROM "{schema}".schema_migrations') == [
        (SCHEMA_VERSION,)
    ]
    assert len((await stores[0].list_scopes(project_id="p")).scopes) == 8
    await asyncio.gather(*(store.aclose() for store in stores))


def test_a_schema_of_another_program_is_refused_and_left_untouched(postgres_dsn, schema):
    with psycopg.connect(postgres_dsn) as conn:
        conn.execute(f'CREATE SCHEMA "{schema}"')
        conn.execute(f'CREATE TABLE "{schema}".orders (id int)')
    with (
        SyncStore(PostgresStore(postgres_dsn, schema=schema)) as store,
        pytest.raises(StoreUnavailable, match=r"holds tables of another program \(orders\)"),
    ):
        store.get(Scope("p"), "k")
    tables = _rows(postgres_dsn, "SELECT tablename FROM pg_tables WHERE schemaname = %s", (schema,))
    assert tables == [("orders",)]


def test_a_newer_schema_is_refused(postgres_dsn, schema):
    with SyncStore(PostgresStore(postgres_dsn, schema=schema)) as store:
        store.put(Scope("p"), "k", "v")
    with psycopg.connect(postgres_dsn) as conn:
        conn.execute(
            f"INSERT INTO \"{schema}\".schema_migrations (version, description) VALUES (99, 'x')"
        )
    with (
        SyncStore(PostgresStore(postgres_dsn, schema=schema)) as store,
        pytest.raises(StoreUnavailable, match="schema version 99, newer than this"),
    ):
        store.get(Scope("p"), "k")


@pytest.mark.parametrize("name", ["Animus", "1st", "pg_catalog", "a-b", "a" * 64, "", 5])
def test_schema_names_are_plain_identifiers(postgres_dsn, name):
    with pytest.raises(ConfigError, match="is not a schema name this store uses"):
        PostgresStore(postgres_dsn, schema=name)


# -- the DSN is never shown --------------------------------------------------------------------


@pytest.mark.parametrize(
    "dsn",
    [
        f"postgresql://animus:{SECRET}@127.0.0.1:1/animus_test",
        f"host=127.0.0.1 port=1 user=animus password={SECRET} dbname=animus_test",
        f"postgresql://animus:{SECRET}@127.0.0.1:notaport/animus_test",
        f"postgresql://animus:{SECRET}@127.0.0.1:1/animus_test?sslmode=nonsense",
        f"postgresql://animus:{SECRET}@no-such-host.invalid/animus_test",
    ],
    ids=["url", "keywords", "bad-port", "bad-option", "unknown-host"],
)
def test_the_dsn_never_appears_in_errors_reprs_or_logs(dsn, caplog):
    caplog.set_level(logging.DEBUG)
    store = PostgresStore(dsn, connect_timeout_s=2)
    with SyncStore(store) as sync, pytest.raises(StoreUnavailable) as raised:
        sync.get(Scope("p"), "k")
    shown = [str(raised.value), repr(store), store.describe(), repr(store._db), caplog.text]
    assert raised.value.__cause__ is None and raised.value.__context__ is None
    for text in shown:
        assert SECRET not in text and dsn not in text
    assert str(raised.value).startswith("PostgreSQL store (schema animus): cannot reach")
    assert "\n" not in str(raised.value)


@pytest.mark.parametrize("dsn", [f"not a dsn {SECRET} =", f"password='{SECRET}"])
def test_a_dsn_libpq_cannot_read_is_refused_without_quoting_it(dsn):
    with pytest.raises(ConfigError) as raised:
        PostgresStore(dsn)
    assert SECRET not in str(raised.value) and raised.value.__context__ is None
    assert "is not a PostgreSQL connection string" in str(raised.value)


def test_an_empty_dsn_is_a_config_error():
    with pytest.raises(ConfigError, match="DSN is empty"):
        PostgresStore("  ")


# -- text search configurations ----------------------------------------------------------------


def test_inflections_find_each_other_and_stop_words_find_nothing(store):
    store.put(Scope("p"), "fx", "EUR markets rallied on new policies")
    store.put(Scope("p"), "trip", {"content": "She was exploring the old harbour"})
    store.put(Scope("p"), "other", "a market note")
    for query, key in [("market", "fx"), ("POLICY", "fx"), ("rallies", "fx"), ("explored", "trip")]:
        assert key in [hit.key for hit in store.query(Scope("p"), query)], query
    assert store.query(Scope("p"), "what did she do with the") == []  # stop words only
    assert all(0 < hit.score < 1 for hit in store.query(Scope("p"), "market harbour"))


def test_the_simple_configuration_keeps_every_word_as_written(postgres_dsn, schema):
    with SyncStore(PostgresStore(postgres_dsn, schema=schema, language="simple")) as store:
        store.put(Scope("p"), "k", "what she was exploring")
        assert [hit.key for hit in store.query(Scope("p"), "what")] == ["k"]
        assert store.query(Scope("p"), "explore") == []


def test_an_unknown_configuration_names_those_the_server_has(postgres_dsn, schema):
    with (
        SyncStore(PostgresStore(postgres_dsn, schema=schema, language="klingon")) as store,
        pytest.raises(ConfigError, match=r"no text search configuration 'klingon'.*english"),
    ):
        store.get(Scope("p"), "k")
    with pytest.raises(ConfigError, match="is not a text search configuration name"):
        PostgresStore(postgres_dsn, schema=schema, language="english; DROP TABLE x")


def test_a_schema_indexed_for_one_language_is_reindexed_for_another(postgres_dsn, schema):
    with SyncStore(PostgresStore(postgres_dsn, schema=schema)) as store:
        store.put(Scope("p"), "k", "the walruses were exploring")
    german = PostgresStore(postgres_dsn, schema=schema, language="german")
    with SyncStore(german) as store:
        with pytest.raises(ConfigError) as raised:
            store.get(Scope("p"), "k")
        assert str(raised.value) == (
            f"PostgreSQL store (schema {schema}) is indexed for language 'english', not "
            "'german'; run `animus memory reindex` to index its 1 items for 'german', or set "
            "language: english"
        )
        assert store.reindex() == 1
        # indexed for German now: "the" is no stop word there
        assert [hit.key for hit in store.query(Scope("p"), "the")] == ["k"]
        assert [hit.key for hit in store.query(Scope("p"), "walruses")] == ["k"]
    before, after = _statistics(postgres_dsn, schema)
    assert before == after


# -- ranking and statistics --------------------------------------------------------------------


def test_word_rarity_is_measured_in_the_scope_searched(store):
    busy = Scope("a")
    store._run("put_many", [(busy, f"h{n}", f"harbour walk number {n}", None) for n in range(20)])
    store.put(busy, "ferry", "harbour ferry")
    store.put(busy, "long", "ferry " + " ".join(f"filler{n}" for n in range(30)))
    store._run("put_many", [(Scope("b", task_id=str(n)), "x", "ferry", None) for n in range(200)])
    hits = store.query(busy, "harbour ferry", top_k=3)
    assert [hit.key for hit in hits][:2] == ["ferry", "long"]  # the rare word decides


def test_writes_keep_the_statistics_and_postings_in_step(postgres_dsn, schema, store):
    store.put(Scope("p"), "k", {"content": "walrus café walrus"})
    store.put(Scope("p"), "k", "narwhal")  # an update indexes the item again
    store.put(Scope("p"), "gone", "dolphin pods", ttl_seconds=3600)
    store._run("put_many", [(Scope("q"), f"k{n}", f"orca {n} pods", None) for n in range(5)])
    before, after = _statistics(postgres_dsn, schema)
    assert before == after
    assert not any(lexeme == "walrus" for _, lexeme, _ in before[0])
    with psycopg.connect(postgres_dsn) as conn:
        conn.execute(
            f"UPDATE \"{schema}\".items SET expires_at = now() - interval '1 s' WHERE key = 'gone'"
        )
    assert store._run("purge_expired") == 1
    assert store.delete(Scope("q"), "k1") is True
    assert store.delete(Scope("q"), "k1") is False
    before, after = _statistics(postgres_dsn, schema)
    assert before == after
    assert store.delete_scope(Scope("p")) == 1
    before, after = _statistics(postgres_dsn, schema)
    assert before == after
    # the emptied scope keeps its row (its id names its history in the ledger), no statistics
    assert _rows(postgres_dsn, f'SELECT count(*) FROM "{schema}".scopes') == [(2,)]
    assert _rows(postgres_dsn, f'SELECT count(*) FROM "{schema}".scopes WHERE items > 0') == [(1,)]


WORDS = ["walrus", "orca", "seal", "otter", "kelp", "reef", "tide", "gull"]  # their own stems
_examples = itertools.count()


@pytest.fixture(scope="module")
def ranked_store(postgres_cluster):
    dsn = postgres_cluster.create_database("animus_ranking")
    with SyncStore(PostgresStore(dsn, schema="ranking")) as sync:
        yield sync


@settings(max_examples=40, deadline=None)
@given(
    docs=st.lists(st.lists(st.sampled_from(WORDS), max_size=8), min_size=1, max_size=30),
    query=st.lists(st.sampled_from(WORDS[:5]), min_size=1, max_size=4),
    top_k=st.integers(1, 8),
)
def test_ranking_finds_the_exact_bm25_top_k(ranked_store, docs, query, top_k):
    """BM25 with the scope's statistics, lengths in distinct lexemes: the store's SQL agrees
    with the formula worked out here for every item."""
    scope = Scope("p", task_id=str(next(_examples)))
    entries = [(scope, f"d{n}", " ".join(words), None) for n, words in enumerate(docs)]
    ranked_store._run("put_many", entries)
    hits = ranked_store.query(scope, " ".join(query), top_k=top_k)
    wanted = set(query)
    lengths = [len(set(words)) for words in docs]
    average = max(sum(lengths) / len(docs), 1.0)
    df = {w: sum(1 for words in docs if w in words) for w in wanted}
    scores = {}
    for n, words in enumerate(docs):
        terms = wanted & set(words)
        if terms:
            scores[f"d{n}"] = sum(
                math.log(1 + (len(docs) - df[w] + 0.5) / (df[w] + 0.5))
                * words.count(w)
                * (K1 + 1)
                / (words.count(w) + K1 * (1 - B + B * lengths[n] / average))
                for w in terms
            )
    best = sorted(scores.values(), reverse=True)[:top_k]
    assert [round(hit.score, 9) for hit in hits] == [round(bm25_score(s), 9) for s in best]
    assert all(bm25_score(scores[hit.key]) == pytest.approx(hit.score) for hit in hits)


def test_a_prompt_of_common_words_reads_a_bounded_part_of_a_large_scope(store):
    scope = Scope("p")
    store._run(
        "put_many", [(scope, f"k{n}", f"harbour ferry tide {n % 7}", None) for n in range(3000)]
    )
    store.put(scope, "rare", "harbour walrus")
    hits = store.query(scope, "harbour ferry walrus", top_k=5)
    assert hits[0].key == "rare"  # the rare word's one item, then the best of the rest
    assert len(hits) == 5 and len({hit.score for hit in hits[1:]}) == 1
    # a cut at the newest items never returns fewer than asked when more match
    assert len(store.query(scope, "harbour ferry", top_k=MAX_SCORED + 50)) == MAX_SCORED + 50


def test_filters_walk_past_the_first_items_of_a_ranking(store):
    scope = Scope("p")
    entries = [(scope, f"k{n}", f"walrus {n}", {"tier": "cold"}) for n in range(100)]
    entries.append((scope, "hot", "walrus far down", {"tier": "hot"}))
    store._run("put_many", entries)
    hits = store.query(scope, "walrus", top_k=3, filters={"tier": "hot"})
    assert [hit.key for hit in hits] == ["hot"]
    listed = store.query(scope, "", top_k=3, filters={"tier": "hot"})
    assert [hit.key for hit in listed] == ["hot"]


def test_a_text_too_large_for_a_tsvector_is_stored_whole_and_indexed_in_part(store):
    huge = " ".join(f"w{n}" for n in range(100_000)) + " walrus"
    store.put(Scope("p"), "huge", huge)
    assert store.get(Scope("p"), "huge").value == huge
    assert [hit.key for hit in store.query(Scope("p"), "w7")] == ["huge"]


def _tsvectors(dsn, schema, project):
    """Each item's tsvector (as text) in the scope of `project`, by key."""
    statement = (
        f'SELECT i.key, i.tsv::text FROM "{schema}".items i JOIN "{schema}".scopes s'
        " ON s.id = i.scope_id WHERE s.project_id = %s"
    )
    return dict(_rows(dsn, statement, (project,)))


ODD_TEXTS = [
    "Walruses explored the harbours",
    "the of and",  # stop words only: an empty tsvector
    "it's a 'quoted' \\ back\\slash: user@example.com e-mail v1.2.3",
    "walrus\x00narwhal",
    {"content": "café crème", "tags": ["x"]},
    ["not", "a", "string"],
    "",
]


def test_a_large_batch_analysed_ahead_indexes_as_single_puts_do(postgres_dsn, schema, store):
    values = [ODD_TEXTS[n % len(ODD_TEXTS)] for n in range(ANALYSE_APART_ROWS + 3)]
    values[7] = " ".join(f"w{n}" for n in range(100_000))  # larger than a tsvector holds
    for n, value in enumerate(values[:20]):
        store.put(Scope("single"), f"k{n:04}", value)
    store._run("put_many", [(Scope("batch"), f"k{n:04}", v, None) for n, v in enumerate(values)])
    single = _tsvectors(postgres_dsn, schema, "single")
    batch = _tsvectors(postgres_dsn, schema, "batch")
    assert len(single) == 20 and len(batch) == len(values)
    assert {key: batch[key] for key in single} == single
    assert single["k0001"] == ""  # stop words only
    before, after = _statistics(postgres_dsn, schema)
    assert before == after
    (hit,) = store.query(Scope("batch"), "walrus exploring", top_k=1)
    assert hit.value == "Walruses explored the harbours"


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        ((Scope("p"), "", "walrus", None), "key '' must be a non-empty string"),
        ((Scope("p"), "k", "lone \ud800 surrogate", None), "lone surrogate"),
        ((Scope("p"), "k", {1, 2}, None), "not JSON-serializable"),
        ("not an entry", "pass tuples"),
    ],
)
def test_a_bad_entry_in_a_large_batch_writes_nothing(postgres_dsn, schema, store, bad, message):
    entries = [(Scope("p"), f"k{n}", f"walrus {n}", None) for n in range(ANALYSE_APART_ROWS)]
    entries.insert(ANALYSE_APART_ROWS // 2, bad)
    with pytest.raises(InvalidRequest, match=message):
        store._run("put_many", entries)
    assert _rows(postgres_dsn, f'SELECT count(*) FROM "{schema}".items') == [(0,)]
    store._run("put_many", entries[:3])  # the store goes on: no connection was left busy
    assert store.count(Scope("p")) == 3


def test_nul_characters_are_stored_and_found_around(store):
    store.put(Scope("p"), "k", "walrus\x00narwhal", metadata={"m": "a\x00b"})
    got = store.get(Scope("p"), "k")
    assert (got.value, got.metadata) == ("walrus\x00narwhal", {"m": "a\x00b"})
    assert [hit.key for hit in store.query(Scope("p"), "narwhal")] == ["k"]


def test_optimize_after_a_bulk_load_keeps_every_item_findable(store):
    store._run("put_many", [(Scope("p"), f"k{n}", f"walrus {n}", None) for n in range(50)])
    store._run("optimize")
    assert len(store.query(Scope("p"), "walrus", top_k=100)) == 50


def test_get_many_reads_what_get_reads_and_checks_its_keys(store):
    store.put(Scope("p"), "a", 1)
    store.put(Scope("p"), "b", 2, ttl_seconds=1)
    assert set(store._run("get_many", Scope("p"), ["a", "b", "c"])) == {"a", "b"}
    assert store._run("get_many", Scope("p"), []) == {}
    with pytest.raises(InvalidRequest):
        store._run("get_many", Scope("p"), "a")


# -- connections ---------------------------------------------------------------------------


def test_a_store_serves_several_event_loops(postgres_dsn, schema):
    store = PostgresStore(postgres_dsn, schema=schema)
    asyncio.run(store.put(Scope("p"), "k", "walrus"))  # a loop that ends: its pool with it
    with SyncStore(store) as sync:
        assert sync.get(Scope("p"), "k").value == "walrus"
    assert asyncio.run(store.get(Scope("p"), "k")).value == "walrus"


async def test_a_query_abandoned_by_its_deadline_leaves_the_store_usable(postgres_dsn, schema):
    store = PostgresStore(postgres_dsn, schema=schema, pool_max_size=1)
    await store.put_many([(Scope("p"), f"k{n}", f"walrus {n}", None) for n in range(2000)])
    for _ in range(5):
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(store.query(Scope("p"), "walrus", top_k=1000), 0.001)
    assert len(await store.query(Scope("p"), "walrus", top_k=3)) == 3
    await store.aclose()


def test_without_psycopg_the_store_names_the_extra(postgres_dsn):
    script = textwrap.dedent(
        """
        import sys
        sys.modules["psycopg"] = None  # as if the postgres extra were not installed
        from animus_flows.errors import ConfigError
        from animus_flows.stores.postgres import PostgresStore
        try:
            PostgresStore("postgresql://localhost/x")
        except ConfigError as exc:
            print(exc)
        """
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert done.stdout.strip() == (
        "the PostgreSQL store needs psycopg and psycopg-pool, and psycopg is not installed; "
        'install the postgres extra: pip install "animus-flows[postgres]"'
    )


# -- many writers ----------------------------------------------------------------------------

WRITER = textwrap.dedent(
    """
    import sys
    from animus_flows.protocol import Scope
    from animus_flows.stores import SyncStore
    from animus_flows.stores.postgres import PostgresStore
    dsn, schema, worker = sys.argv[1], sys.argv[2], sys.argv[3]
    with SyncStore(PostgresStore(dsn, schema=schema)) as store:
        for i in range(60):
            store.put(Scope("p", agent_id=worker), f"k{i}", f"worker {worker} item {i}")
            store.put(Scope("p"), f"{worker}-{i}", "shared scope walrus")
            store.put(Scope("p"), "contended", f"last writer {worker}")
        store._run("put_many", [
            (Scope("p", task_id=str(n % 3)), f"{worker}-{n}", f"batch walrus {n}", None)
            for n in range(200)
        ])
    """
)


def test_eight_writer_processes_lose_and_duplicate_nothing(postgres_dsn, schema):
    workers = [
        subprocess.Popen([sys.executable, "-c", WRITER, postgres_dsn, schema, str(n)])
        for n in range(8)
    ]
    assert [worker.wait(timeout=300) for worker in workers] == [0] * 8
    with SyncStore(PostgresStore(postgres_dsn, schema=schema)) as store:
        assert store.count(Scope("p")) == 8 * 60 + 1
        for n in range(8):
            assert store.count(Scope("p", agent_id=str(n))) == 60
        assert sum(store.count(Scope("p", task_id=str(t))) for t in range(3)) == 8 * 200
        assert len(store.query(Scope("p"), "walrus", top_k=1000)) == 8 * 60
    duplicates = _rows(
        postgres_dsn,
        f'SELECT scope_id, key FROM "{schema}".items GROUP BY 1, 2 HAVING count(*) > 1',
    )
    assert duplicates == []
    before, after = _statistics(postgres_dsn, schema)
    assert before == after


@pytest.mark.parametrize("lexeme", ["it's", "a\\b", "x y", "|", "!", "(", "'", "\\", "é東", "a:b"])
def test_any_lexeme_is_matched_and_counted_as_itself(postgres_dsn, lexeme):
    # lexemes reach the SQL as a tsquery's text and come back as a tsvector's text
    quoted = tsquery([lexeme])
    with psycopg.connect(postgres_dsn) as conn:
        vector = "setweight(%s::tsvector, 'A', ARRAY[%s])"
        matched, text = conn.execute(
            f"SELECT {vector} @@ %s::tsquery, ts_filter({vector}, '{{a}}')::text",
            (f"{quoted}:1,7 other:2", lexeme, tsquery([lexeme, "zz"]), f"{quoted}:3", lexeme),
        ).fetchone()
    assert matched is True
    plan = Plan({lexeme: 2.0}, {lexeme: 1}, 1, [lexeme], [], 1.0, MAX_SCORED)
    assert plan.score(1, text) == pytest.approx(2.0)  # tf 1, at the average length: BM25 = idf
    thrice = Plan({"it's": 1.0, "a\\b": 1.0}, {}, 1, [], [], 1.0, MAX_SCORED)
    tf = 3 * (K1 + 1) / (3 + K1)
    assert thrice.score(1, "'it''s':1A,4A,9A 'a\\\\b'") == pytest.approx(tf + 1.0)
