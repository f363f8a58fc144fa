"""SQLite-specific behaviour: files, processes, corruption, migrations, the FTS mapping."""

import asyncio
import json
import sqlite3
import subprocess
import sys
import textwrap
from contextlib import closing
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from animus_flows.errors import ConfigError, InvalidRequest, StoreTimeout, StoreUnavailable
from animus_flows.protocol import Scope, matches_filters
from animus_flows.retrieval.degrade import run_degraded
from animus_flows.stores import SQLiteStore, SyncStore
from animus_flows.stores.analysis import Analyzer
from animus_flows.stores.checks import EXPIRES_KEY, prefix_end
from animus_flows.stores.sqlite import lexical
from animus_flows.stores.sqlite.reads import bm25_score, filter_clause
from animus_flows.stores.sqlite.schema import SCHEMA_VERSION, id_range, scoped_body
from animus_flows.stores.sqlite.store import KEY_BATCH as GET_MANY_BATCH


@pytest.fixture
def store(tmp_path):
    with SyncStore(SQLiteStore(tmp_path / "m.db")) as sync:
        yield sync


def test_terms_are_prefixed_with_their_scope_once_each():
    assert scoped_body(7, ["eur", "usd", "eur", "x"]) == "7xeur 7xusd 7xx"
    assert scoped_body(7, []) == ""
    # the prefix delimits itself: scope 71's "x" words never spell scope 7's "1x..." words
    assert scoped_body(71, ["xeur"]) != scoped_body(7, ["1xxeur"])


def test_inflections_find_each_other_and_stop_words_find_nothing(store):
    store.put(Scope("p"), "fx", "EUR markets rallied on new policies")
    store.put(Scope("p"), "trip", {"content": "She was exploring the old harbour"})
    store.put(Scope("p"), "other", "a market note")
    for query, key in [("market", "fx"), ("POLICY", "fx"), ("rallies", "fx"), ("explored", "trip")]:
        assert key in [hit.key for hit in store.query(Scope("p"), query)], query
    assert store.query(Scope("p"), "what did she do with the") == []  # stop words only


def test_word_rarity_is_measured_in_the_scope_searched(store):
    # "harbour" is in every item of scope a, so there it says little; "ferry" is rare there
    busy = Scope("a")
    store._run("put_many", [(busy, f"h{n}", f"harbour walk number {n}", None) for n in range(20)])
    store.put(busy, "ferry", "harbour ferry")
    store.put(busy, "long", "ferry " + " ".join(f"filler{n}" for n in range(30)))
    for n in range(200):  # elsewhere in the file "ferry" is everywhere
        store.put(Scope("b", task_id=str(n)), "x", "ferry ferry")
    hits = store.query(busy, "harbour ferry", top_k=3)
    assert [hit.key for hit in hits][:2] == ["ferry", "long"]  # the rare word decides


def _index_state(path) -> tuple[set[str], dict[tuple[int, str], int], list[tuple[int, int, int]]]:
    """The full-text index's terms, `term_df` and every scope's statistics, as stored."""
    conn = sqlite3.connect(path)
    conn.execute("CREATE VIRTUAL TABLE temp.vocab USING fts5vocab(main, items_fts, 'row')")
    terms = {t for (t,) in conn.execute("SELECT term FROM temp.vocab WHERE doc > 0")}
    df = {(s, t): n for s, t, n in conn.execute("SELECT scope_id, term, df FROM term_df")}
    stats = conn.execute("SELECT id, items, terms FROM scopes ORDER BY id").fetchall()
    conn.close()
    return terms, df, stats


def _recomputed(path) -> tuple[set[str], dict[tuple[int, str], int], list[tuple[int, int, int]]]:
    """What `_index_state` must be, worked out from the items themselves."""
    conn = sqlite3.connect(path)
    rows = conn.execute("SELECT scope_id, value FROM items").fetchall()
    scopes = [s for (s,) in conn.execute("SELECT id FROM scopes ORDER BY id")]
    conn.close()
    analyzer, terms, df = Analyzer(), set(), {}
    stats = {s: [s, 0, 0] for s in scopes}
    for scope_id, value in rows:
        value = json.loads(value)
        words = analyzer.terms(value["content"] if isinstance(value, dict) else value)
        terms |= {f"{scope_id}x{w}" for w in words}
        for w in set(words):
            df[scope_id, w] = df.get((scope_id, w), 0) + 1
        stats[scope_id][1] += 1
        stats[scope_id][2] += len(words)
    return terms, df, [tuple(s) for s in stats.values()]


def test_updates_and_deletes_keep_the_index_and_statistics_in_step(tmp_path):
    path = tmp_path / "m.db"
    with SyncStore(SQLiteStore(path)) as store:
        store.put(Scope("p"), "k", {"content": "walrus café walrus"})
        store.put(Scope("p"), "k", "narwhal")  # an update re-indexes the item
        store.put(Scope("p"), "gone", "dolphin pods")
        store._run("put_many", [(Scope("q"), f"k{n}", f"orca {n} pods", None) for n in range(5)])
        assert _index_state(path) == _recomputed(path)
        assert (
            _index_state(path)[1][1, "narwhal"] == 1 and (1, "walrus") not in _index_state(path)[1]
        )
        conn = sqlite3.connect(path)
        conn.execute("UPDATE items SET expires_at = 1 WHERE key = 'gone'")
        conn.commit()
        conn.close()
        assert store._run("purge_expired") == 1
        assert _index_state(path) == _recomputed(path)
        assert store._run("_delete", Scope("q"), "k1") is True
        assert store._run("_delete", Scope("q"), "k1") is False
        assert _index_state(path) == _recomputed(path)
        assert [hit.key for hit in store.query(Scope("p"), "walrus")] == []
        assert store.delete_scope(Scope("p")) == 1
        assert _index_state(path) == _recomputed(path)
        assert not {t for t in _index_state(path)[0] if t.startswith("1x")}


CORPUS = st.lists(
    st.lists(
        st.sampled_from(["walrus", "orca", "seal", "otter", "kelp", "reef", "tide", "gull"]),
        max_size=8,
    ),
    min_size=1,
    max_size=30,
)


@settings(max_examples=60, deadline=None)
@given(
    docs=CORPUS,
    query=st.lists(
        st.sampled_from(["walrus", "orca", "seal", "kelp", "gull"]), min_size=1, max_size=4
    ),
    top_k=st.integers(1, 8),
)
def test_ranking_finds_the_exact_bm25_top_k(tmp_path_factory, docs, query, top_k):
    """MaxScore's early stop never changes the result: the same as scoring every item."""
    path = tmp_path_factory.mktemp("rank") / "m.db"
    with SyncStore(SQLiteStore(path)) as store:
        entries = [(Scope("p"), f"d{n}", " ".join(words), None) for n, words in enumerate(docs)]
        store._run("put_many", entries)
        hits = store.query(Scope("p"), " ".join(query), top_k=top_k)
    analyzer = Analyzer()
    terms = [analyzer.terms(" ".join(words)) for words in docs]
    wanted = set(analyzer.terms(" ".join(query)))
    average = max(sum(map(len, terms)) / len(terms), 1.0)
    df = {w: sum(1 for t in terms if w in t) for w in wanted}
    scores = {
        f"d{n}": sum(
            lexical.term_score(lexical.idf(df[w], len(docs)), t.count(w), len(t), average)
            for w in wanted
            if w in t
        )
        for n, t in enumerate(terms)
        if wanted & set(t)
    }
    best = sorted(scores.values(), reverse=True)[:top_k]
    assert [round(hit.score, 9) for hit in hits] == [round(bm25_score(s), 9) for s in best]
    assert all(bm25_score(scores[hit.key]) == pytest.approx(hit.score) for hit in hits)


# keys around every edge of a key-index range: pattern characters, quotes, case, code
# points past ASCII, before the surrogates, and the last one
PREFIX_KEYS = ["a", "ab", "ab%", "ab_", "abc", "a'b", 'a"b', "Ab", "AB", "é", "éa", "z"]
PREFIX_KEYS += ["\ud7ff", "\ud7ffx", "\ue000", "\U0010ffff", "\U0010ffffa", "\U0010ffff\U0010ffff"]


@pytest.fixture(scope="module")
def prefixed(tmp_path_factory):
    path = tmp_path_factory.mktemp("prefix") / "m.db"
    with SyncStore(SQLiteStore(path)) as store:
        for key in PREFIX_KEYS:
            store.put(Scope("p"), key, "v")
        store.put(Scope("p"), "ab-expired", "v")
        store.put(Scope("p", agent_id="other"), "abz", "v")
    conn = sqlite3.connect(path)
    conn.execute("UPDATE items SET expires_at = 1 WHERE key = 'ab-expired'")
    conn.commit()
    conn.close()
    with SyncStore(SQLiteStore(path)) as store:
        yield store


@given(
    prefix=st.one_of(
        st.sampled_from([key[:n] for key in PREFIX_KEYS for n in range(1, len(key) + 1)]),
        st.text(
            st.characters(blacklist_categories=["Cs", "Cc", "Zl", "Zp"]),
            min_size=1,
            max_size=3,
        ),
    ),
    limit=st.integers(1, 20),
)
@settings(deadline=None)
def test_items_with_a_key_prefix_are_a_range_of_the_key_index(prefixed, prefix, limit):
    page = prefixed.list_items(Scope("p"), prefix=prefix, limit=limit)
    matching = sorted(key for key in PREFIX_KEYS if key.startswith(prefix))
    assert [item.key for item in page.items] == matching[:limit]
    assert (page.next_cursor is None) is (len(matching) <= limit)
    assert all(item.scope == Scope("p") and item.value == "v" for item in page.items)


def test_a_key_prefix_read_walks_a_range_of_the_key_index(tmp_path):
    path = tmp_path / "m.db"
    with SyncStore(SQLiteStore(path)) as store:
        store.put(Scope("p"), "k", "v")
    assert prefix_end("ab") == "ac" and prefix_end("a\U0010ffff") == "b"
    assert prefix_end("\ud7ff") == "\ue000" and prefix_end("\U0010ffff") is None
    conn = sqlite3.connect(path)
    plan = " ".join(
        row[3]
        for row in conn.execute(
            "EXPLAIN QUERY PLAN SELECT i.key FROM items i JOIN scopes s ON s.id = i.scope_id"
            " WHERE s.project_id = ? AND s.agent_id = ? AND s.task_id = ?"
            " AND i.key >= ? AND i.key < ? ORDER BY i.key",
            ("p", "", "", "a", "b"),
        )
    )
    conn.close()
    assert "(scope_id=? AND key>? AND key<?)" in plan and "TEMP B-TREE" not in plan


def test_a_key_prefix_is_checked_like_a_key(store):
    with pytest.raises(InvalidRequest, match="control character"):
        store.list_items(Scope("p"), prefix="a\x00")
    with pytest.raises(InvalidRequest, match="limit 0 must be an integer from 1 to 1000"):
        store.list_items(Scope("p"), prefix="a", limit=0)
    assert store.list_items(Scope("p"), prefix="").items == []


def test_a_delete_of_a_missing_key_writes_nothing(tmp_path):
    # a write takes the file's lock, which other processes' writes wait for
    with SyncStore(SQLiteStore(tmp_path / "m.db")) as store:
        store.put(Scope("p"), "k", "v")
        statements: list[str] = []
        store._loop.run(
            store.store._file.run(lambda conn: conn.set_trace_callback(statements.append)),
            await_form="",
        )
        assert store.delete(Scope("p"), "absent") is False
        assert not any("BEGIN" in statement for statement in statements)
        assert store.delete(Scope("p"), "k") is True
        assert sum("BEGIN" in statement for statement in statements) == 1


@given(
    keys=st.lists(
        st.one_of(
            st.sampled_from([*PREFIX_KEYS, "ab-expired", "abz"]),
            st.text(
                st.characters(blacklist_categories=["Cs", "Cc", "Zl", "Zp"]),
                min_size=1,
                max_size=8,
            ),
        ),
        max_size=12,
    )
)
@settings(deadline=None)
def test_get_many_reads_what_get_reads_key_by_key(prefixed, keys):
    # with duplicates, absent keys, an expired item and a key another scope holds
    found = prefixed._run("get_many", Scope("p"), keys)
    one_by_one = {key: prefixed.get(Scope("p"), key) for key in keys}
    assert found == {key: item for key, item in one_by_one.items() if item is not None}


def test_get_many_reads_past_one_batch(tmp_path):
    keys = [f"k{n}" for n in range(2 * GET_MANY_BATCH + 1)]
    with SyncStore(SQLiteStore(tmp_path / "m.db")) as store:
        store._run("put_many", [(Scope("p"), key, {"n": n}, {}) for n, key in enumerate(keys)])
        found = store._run("get_many", Scope("p"), [*keys, "absent"])
    assert found.keys() == set(keys) and found[keys[-1]].value == {"n": len(keys) - 1}


def test_get_many_checks_its_keys_like_get(store):
    with pytest.raises(InvalidRequest, match="keys 'key' must be a list of keys, not a str"):
        store._run("get_many", Scope("p"), "key")
    with pytest.raises(InvalidRequest, match="not a set"):
        store._run("get_many", Scope("p"), {"key"})
    with pytest.raises(InvalidRequest, match="control character"):
        store._run("get_many", Scope("p"), ["ok", "a\x00"])
    assert store._run("get_many", Scope("p"), []) == {}


def test_each_scope_owns_a_disjoint_id_range():
    assert id_range(1) == (1 << 32, (2 << 32) - 1)
    assert id_range(1)[1] < id_range(2)[0]


def test_bm25_scores_map_into_the_unit_interval_monotonically():
    raw = [0.0, 0.5, 1.0, 10.0, 100.0]
    scores = [bm25_score(score) for score in raw]
    assert scores == sorted(scores)
    assert all(0.0 <= score < 1.0 for score in scores)
    assert bm25_score(-3.0) == 0.0


@pytest.mark.parametrize(
    "filters",
    [
        {"memory_type": "semantic"},
        {"memory_type": ["semantic", "episodic"]},
        {"tags": "x"},
        {"tags": ["y", "z"]},
        {"tier": [None, "warm"]},
        {"we\"ird'key": "v"},
        {"n": 1},
        {"flag": True},
    ],
)
def test_sql_filters_agree_with_the_reference_semantics(filters):
    rows = [
        {"memory_type": "semantic", "tags": ["x"], "tier": "hot", "n": 1, "flag": True},
        {"memory_type": "episodic", "tags": ["y"], "tier": "warm"},
        {"tags": ["x", "z"], "we\"ird'key": "v"},
        {"tier": None, "n": 2},
        {},
    ]
    conn = sqlite3.connect(":memory:")
    conn.execute("CREATE TABLE items (id INTEGER PRIMARY KEY, metadata TEXT)")
    conn.executemany("INSERT INTO items (metadata) VALUES (?)", [(json.dumps(r),) for r in rows])
    where, params = filter_clause(filters)
    got = [r[0] - 1 for r in conn.execute(f"SELECT id FROM items i WHERE 1{where}", params)]
    assert got == [i for i, row in enumerate(rows) if matches_filters(row, filters)]


def test_creates_missing_parent_folders(tmp_path):
    with SyncStore(SQLiteStore(tmp_path / "a" / "b" / "m.db")) as store:
        store.put(Scope("p"), "k", "v")
    assert (tmp_path / "a" / "b" / "m.db").exists()


def test_a_folder_as_path_is_a_clear_error(tmp_path):
    with SyncStore(SQLiteStore(tmp_path)) as store, pytest.raises(StoreUnavailable, match="folder"):
        store.get(Scope("p"), "k")


def test_an_unusable_path_is_a_clear_error(tmp_path):
    blocker = tmp_path / "file.txt"
    blocker.write_text("not a folder")
    store = SyncStore(SQLiteStore(blocker / "m.db"))
    with store, pytest.raises(StoreUnavailable, match="writable `path`"):
        store.put(Scope("p"), "k", "v")


def test_a_corrupt_file_is_reported_and_left_untouched(tmp_path):
    path = tmp_path / "m.db"
    garbage = b"this is not a database" * 100
    path.write_bytes(garbage)
    store = SyncStore(SQLiteStore(path))
    with store, pytest.raises(StoreUnavailable, match="move it aside"):
        store.put(Scope("p"), "k", "v")
    assert path.read_bytes() == garbage


FOREIGN_FILES = {
    "another table": ["CREATE TABLE other (a)", "INSERT INTO other VALUES (1)"],
    "a user_version": ["CREATE TABLE other (a)", "PRAGMA user_version = 999"],
    "a table named items": ["CREATE TABLE items (a)", "INSERT INTO items VALUES ('theirs')"],
    "no tables but a user_version": ["PRAGMA user_version = 7"],
}


@pytest.mark.parametrize("statements", FOREIGN_FILES.values(), ids=FOREIGN_FILES)
def test_another_programs_file_is_refused_and_left_byte_identical(tmp_path, statements):
    path = tmp_path / "theirs.db"
    conn = sqlite3.connect(path)
    for statement in statements:
        conn.execute(statement)
    conn.commit()
    conn.close()
    before = path.read_bytes()
    for operation in (
        lambda store: store.get(Scope("p"), "k"),
        lambda store: store.put(Scope("p"), "k", "v"),
        lambda store: store.query(Scope("p"), "v"),
    ):
        store = SyncStore(SQLiteStore(path))
        with (
            store,
            pytest.raises(StoreUnavailable, match="is not an animus SQLite store") as caught,
        ):
            operation(store)
        assert "\n" not in str(caught.value) and "move that file aside" in str(caught.value)
        assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["theirs.db"]


def test_an_empty_file_becomes_a_store(tmp_path):
    path = tmp_path / "m.db"
    path.touch()
    with SyncStore(SQLiteStore(path)) as store:
        store.put(Scope("p"), "k", "v")
        assert store.get(Scope("p"), "k").value == "v"
    assert _version_and_indexes(path)[0] == str(SCHEMA_VERSION)


def test_a_read_behind_a_lock_waits_off_the_event_loop_and_then_times_out(tmp_path):
    path = tmp_path / "m.db"

    async def run():
        store = SQLiteStore(path, busy_timeout_ms=300)
        await store.put(Scope("p"), "k", "walrus")
        await store.aclose()
        # another process's exclusive lock keeps even WAL readers out
        holder = sqlite3.connect(path, isolation_level=None)
        holder.execute("PRAGMA locking_mode = EXCLUSIVE")
        holder.execute("BEGIN EXCLUSIVE")
        ticks = 0

        async def tick():
            nonlocal ticks
            while True:
                await asyncio.sleep(0.01)
                ticks += 1

        ticker = asyncio.create_task(tick())
        with pytest.raises(StoreTimeout, match="stayed locked for 300 ms"):
            await store.query(Scope("p"), "walrus")
        ticker.cancel()
        holder.execute("ROLLBACK")
        holder.close()
        hits = await store.query(Scope("p"), "walrus")
        await store.aclose()
        return ticks, [hit.key for hit in hits]

    ticks, keys = asyncio.run(run())
    assert ticks >= 5  # the loop ran on while the read waited on the store's thread
    assert keys == ["k"]


HOLD_A_WRITE = textwrap.dedent(
    """
    import sqlite3, sys
    conn = sqlite3.connect(sys.argv[1], isolation_level=None)
    conn.execute("BEGIN IMMEDIATE")
    conn.execute("UPDATE items SET value = '\\"changed\\"'")
    print("holding", flush=True)
    sys.stdin.readline()
    conn.execute("ROLLBACK")
    """
)


def test_a_store_opened_while_another_process_writes_reads_at_once(tmp_path):
    path = tmp_path / "m.db"
    with SyncStore(SQLiteStore(path)) as store:
        store.put(Scope("p"), "k", "walrus")
    writer = subprocess.Popen(
        [sys.executable, "-c", HOLD_A_WRITE, str(path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert writer.stdout.readline() == "holding\n"
        # opening a writer would wait for the lock and time out; a read needs none
        with SyncStore(SQLiteStore(path, busy_timeout_ms=300)) as store:
            assert [hit.key for hit in store.query(Scope("p"), "walrus")] == ["k"]
            assert store.get(Scope("p"), "k").value == "walrus"  # the write is not committed
            with pytest.raises(StoreTimeout, match="stayed locked for 300 ms"):
                store.put(Scope("p"), "other", "v")
    finally:
        writer.communicate("done\n", timeout=30)
    assert writer.returncode == 0


def test_a_read_switches_a_file_back_to_wal_before_reading_it(tmp_path):
    path = tmp_path / "m.db"
    with SyncStore(SQLiteStore(path)) as store:
        store.put(Scope("p"), "k", "walrus")
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA journal_mode = DELETE").fetchone() == ("delete",)
    conn.close()
    with SyncStore(SQLiteStore(path)) as store:
        assert [hit.key for hit in store.query(Scope("p"), "walrus")] == ["k"]
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA journal_mode").fetchone() == ("wal",)
    conn.close()


def test_a_read_of_a_missing_file_creates_an_empty_store(tmp_path):
    path = tmp_path / "new" / "m.db"
    with SyncStore(SQLiteStore(path)) as store:
        assert store.query(Scope("p"), "walrus") == []
    assert _version_and_indexes(path)[0] == str(SCHEMA_VERSION)


def test_a_filtered_listing_runs_off_the_event_loop_where_a_timeout_can_abandon_it(tmp_path):
    async def run():
        store = SQLiteStore(tmp_path / "m.db")
        await store.put_many(
            [(Scope("p"), f"k{n}", f"note {n}", {"tier": "warm"}) for n in range(30_000)]
        )
        # no item passes the filter, so the listing reads the whole scope
        outcome = await run_degraded(
            lambda: store.query(Scope("p"), "", filters={"tier": "hot"}), timeout_ms=1, fallback=[]
        )
        listed = await store.query(Scope("p"), "", top_k=2, filters={"tier": "warm"})
        await store.aclose()
        return outcome.status, [hit.key for hit in listed]

    status, listed = asyncio.run(run())
    assert status == "timeout"  # inline, the scan would have finished before the deadline fired
    assert listed == ["k29999", "k29998"]


def test_a_newer_schema_is_refused(tmp_path):
    path = tmp_path / "m.db"
    with SyncStore(SQLiteStore(path)) as store:
        store.put(Scope("p"), "k", "v")
    conn = sqlite3.connect(path)
    conn.execute(
        "UPDATE animus_meta SET value = ? WHERE name = 'schema_version'", (str(SCHEMA_VERSION + 1),)
    )
    conn.commit()
    conn.close()
    with SyncStore(SQLiteStore(path)) as store, pytest.raises(StoreUnavailable, match="upgrade"):
        store.get(Scope("p"), "k")


def _set_version(path, version: str, *statements: str) -> None:
    conn = sqlite3.connect(path)
    for statement in statements:
        conn.execute(statement)
    conn.execute("UPDATE animus_meta SET value = ? WHERE name = 'schema_version'", (version,))
    conn.commit()
    conn.close()


def _version_and_indexes(path) -> tuple[str, set[str]]:
    conn = sqlite3.connect(path)
    indexes = {row[1] for row in conn.execute("PRAGMA index_list(items)")}
    (version,) = conn.execute(
        "SELECT value FROM animus_meta WHERE name = 'schema_version'"
    ).fetchone()
    conn.close()
    return version, indexes


V3_SCHEMA = [
    "CREATE TABLE animus_meta (name TEXT PRIMARY KEY, value TEXT NOT NULL)",
    "CREATE TABLE scopes (id INTEGER PRIMARY KEY, project_id TEXT NOT NULL, agent_id TEXT NOT"
    " NULL DEFAULT '', task_id TEXT NOT NULL DEFAULT '', next_item INTEGER NOT NULL DEFAULT 0,"
    " UNIQUE (project_id, agent_id, task_id))",
    "CREATE TABLE items (id INTEGER PRIMARY KEY, scope_id INTEGER NOT NULL, key TEXT NOT NULL,"
    " value TEXT NOT NULL, metadata TEXT NOT NULL, created_at REAL NOT NULL, updated_at REAL NOT"
    " NULL, expires_at REAL, UNIQUE (scope_id, key))",
    "CREATE VIRTUAL TABLE items_fts USING fts5(body, tokenize = 'ascii', content = '')",
    "CREATE VIRTUAL TABLE items_vocab USING fts5vocab(items_fts, 'row')",
    "INSERT INTO animus_meta VALUES ('schema_version', '3'), ('write_token', 'ab')",
]


def _version_3_file(path, items: int) -> None:
    """A store file as animus-flows wrote it before stemming (schema 3)."""
    conn = sqlite3.connect(path)
    for statement in V3_SCHEMA:
        conn.execute(statement)
    conn.execute("INSERT INTO scopes (id, project_id, next_item) VALUES (1, 'p', ?)", (items,))
    conn.executemany(
        "INSERT INTO items VALUES (?, 1, ?, ?, '{}', 1.0, 1.0, NULL)",
        [((1 << 32) + n, f"k{n}", json.dumps(f"explored harbour {n}")) for n in range(items)],
    )
    conn.executemany(  # its own words, unstemmed
        "INSERT INTO items_fts (rowid, body) VALUES (?, ?)",
        [((1 << 32) + n, f"1xexplored 1xharbour 1x{n}") for n in range(items)],
    )
    conn.commit()
    conn.close()


def test_a_version_3_file_is_indexed_again_as_it_opens(tmp_path, caplog):
    path = tmp_path / "m.db"
    _version_3_file(path, 3)
    with SyncStore(SQLiteStore(path)) as store:
        assert {hit.key for hit in store.query(Scope("p"), "exploring harbours")} == {
            "k0", "k1", "k2"
        }  # fmt: skip
        store.put(Scope("p"), "k1", "replaced")  # the rebuilt index forgets the old body
        assert {hit.key for hit in store.query(Scope("p"), "explore")} == {"k0", "k2"}
    assert "3 items indexed again (schema 5, language english)" in caplog.text
    assert _version_and_indexes(path)[0] == str(SCHEMA_VERSION) == "5"
    assert _index_state(path) == _recomputed(path)


def test_a_large_old_file_waits_for_reindex(tmp_path, monkeypatch):
    from animus_flows.stores.sqlite import prepare

    monkeypatch.setattr(prepare, "AUTO_REINDEX_ITEMS", 2)
    path = tmp_path / "m.db"
    _version_3_file(path, 3)
    old = pytest.raises(StoreUnavailable, match=r"holds 3 items indexed by an older .*reindex")
    with SyncStore(SQLiteStore(path)) as store, old:
        store.get(Scope("p"), "k0")
    with SyncStore(SQLiteStore(path)) as store:
        assert store._run("reindex") == 3
        assert len(store.query(Scope("p"), "explore")) == 3


def test_a_file_indexed_for_one_language_is_not_read_for_another(tmp_path):
    path = tmp_path / "m.db"
    with SyncStore(SQLiteStore(path)) as store:
        store.put(Scope("p"), "k", "Die Kinder spielten im Garten")
    with SyncStore(SQLiteStore(path, language="german")) as store:
        with pytest.raises(ConfigError) as raised:
            store.get(Scope("p"), "k")
        assert str(raised.value) == (
            f"SQLite store {path} is indexed for language 'english', not 'german'; run "
            "`animus memory reindex` to index its 1 items for 'german', or set language: english"
        )
    with SyncStore(SQLiteStore(path, language="german")) as store:
        assert store._run("reindex") == 1
        assert [hit.key for hit in store.query(Scope("p"), "Kind spielen")] == ["k"]


@pytest.mark.parametrize("analyzed", [False, True])
def test_listing_a_scope_walks_the_recency_index_instead_of_sorting(tmp_path, analyzed):
    path = tmp_path / "m.db"
    with SyncStore(SQLiteStore(path)) as store:
        for n in range(20):
            store.put(Scope("p"), f"k{n}", "v", metadata={"tier": "hot"})
    where, params = filter_clause({"tier": ["hot", None]})
    conn = sqlite3.connect(path)
    if analyzed:  # statistics as `optimize()` leaves them for one scope of 100,000 items
        conn.execute("ANALYZE")
        conn.execute(
            "UPDATE sqlite_stat1 SET stat = CASE idx"
            " WHEN 'items_by_recency' THEN '100000 100000 10000 1'"
            " ELSE '100000 100000 1' END WHERE tbl = 'items'"
        )
        conn.execute("ANALYZE sqlite_schema")  # reload the statistics
    listing = (
        "SELECT i.key, i.value, i.metadata FROM items i INDEXED BY items_by_recency"
        f" WHERE i.scope_id = ? AND (i.expires_at IS NULL OR i.expires_at > ?){where}"
        " ORDER BY i.updated_at DESC, i.id DESC LIMIT ?"
    )
    plan = conn.execute(f"EXPLAIN QUERY PLAN {listing}", (1, 0.0, *params, 8)).fetchall()
    conn.close()
    details = " | ".join(row[-1] for row in plan)
    assert "USING INDEX items_by_recency" in details
    assert "TEMP B-TREE" not in details


def test_data_survives_reopening(tmp_path):
    path = tmp_path / "m.db"
    with SyncStore(SQLiteStore(path)) as store:
        store.put(Scope("p", agent_id="a"), "k", {"content": "persisted walrus"})
    with SyncStore(SQLiteStore(path)) as store:
        assert store.get(Scope("p", agent_id="a"), "k").value == {"content": "persisted walrus"}
        assert [hit.key for hit in store.query(Scope("p", agent_id="a"), "walrus")] == ["k"]


def test_empty_text_lists_the_scope_most_recent_first(store):
    for key in ("first", "second", "third"):
        store.put(Scope("p"), key, key)
    assert [hit.key for hit in store.query(Scope("p"), "", top_k=2)] == ["third", "second"]


def test_put_many_writes_in_one_transaction(tmp_path):
    async def run():
        sqlite = SQLiteStore(tmp_path / "m.db")
        items = [(Scope("p"), f"k{i}", f"bulk value {i}", {"i": i}) for i in range(500)]
        items += [(Scope("p", agent_id="a"), "k0", "other scope", None)]
        items += [(Scope("p"), "k0", "bulk value revised", {"i": -1})]  # the later entry wins
        assert await sqlite.put_many(items) == 501
        with pytest.raises(InvalidRequest):
            await sqlite.put_many([(Scope("q"), "ok", "v", None), (Scope("q"), "", "v", None)])
        hits = await sqlite.query(Scope("p"), "revised")
        counts = [await sqlite.count(Scope(*ids)) for ids in (("p",), ("p", "a"), ("q",))]
        await sqlite.aclose()
        return counts, [(hit.key, hit.metadata) for hit in hits]

    counts, hits = asyncio.run(run())
    assert counts == [500, 1, 0]  # the bad batch wrote nothing
    assert hits == [("k0", {"i": -1})]


async def test_put_many_entries_may_carry_a_ttl(tmp_path):
    scope = Scope("p")
    store = SQLiteStore(tmp_path / "m.db")
    await store.put(scope, "was-expiring", "old", ttl_seconds=60)
    await store.put(scope, "was-lasting", "old")
    started = datetime.now(UTC)
    written = await store.put_many(
        [
            (scope, "was-expiring", "now lasting", None),  # as a put: no TTL, no expiry
            (scope, "was-lasting", "now expiring", None, 600),
            (scope, "new", "expires too", {"n": 1}, 3600),
            (scope, "plain", "lasts", None, None),
        ]
    )
    assert written == 4
    for key in ("was-expiring", "plain"):
        assert (await store.get(scope, key)).expires_at is None
    for key, ttl in (("was-lasting", 600), ("new", 3600)):
        expires_at = (await store.get(scope, key)).expires_at
        assert started + timedelta(seconds=ttl) <= expires_at
        assert expires_at <= datetime.now(UTC) + timedelta(seconds=ttl)
    # one bad entry, a bad TTL or a wrong shape, writes nothing
    with pytest.raises(InvalidRequest, match=r"ttl_seconds 0 must be an integer >= 1"):
        await store.put_many([(scope, "a", "v", None), (scope, "b", "v", None, 0)])
    with pytest.raises(InvalidRequest) as raised:
        await store.put_many([(scope, "a", "v", None), (scope, "b", "v")])
    assert str(raised.value) == (
        "a put_many entry is a tuple of 3 fields; pass tuples (scope, key, value, metadata)"
        " or (scope, key, value, metadata, ttl_seconds)"
    )
    assert await store.get(scope, "a") is None and await store.get(scope, "b") is None
    await store.aclose()


def test_a_put_costs_the_same_in_a_large_scope_as_in_a_small_one(tmp_path):
    # Finding which keys already exist probes the (scope, key) index once per key; a plan
    # that scanned the scope per key made writes into a large scope quadratic.
    async def instructions_per_put(items: int) -> int:
        sqlite = SQLiteStore(tmp_path / f"{items}.db")
        scope = Scope("p")
        await sqlite.put_many([(scope, f"k{i}", f"value {i}", None) for i in range(items)])
        ticks = 0

        def tick() -> int:  # SQLite calls this every 10 virtual-machine instructions
            nonlocal ticks
            ticks += 1
            return 0

        await sqlite._file.run(lambda conn: conn.set_progress_handler(tick, 10))
        await sqlite.put_many([(scope, "k1", "updated", None), (scope, "new", "fresh", None)])
        await sqlite.aclose()
        return ticks

    small, large = asyncio.run(instructions_per_put(10)), asyncio.run(instructions_per_put(5000))
    assert large < 2 * small


def test_sync_facade_refuses_to_run_inside_an_event_loop(tmp_path):
    store = SyncStore(SQLiteStore(tmp_path / "m.db"))

    async def inside():
        with pytest.raises(RuntimeError, match=r"await store\.get"):
            store.get(Scope("p"), "k")

    asyncio.run(inside())
    store.close()


def test_several_processes_can_write_at_once(tmp_path):
    path = tmp_path / "m.db"
    script = textwrap.dedent(
        """
        import sys
        from animus_flows.protocol import Scope
        from animus_flows.stores import SQLiteStore, SyncStore
        worker = sys.argv[2]
        with SyncStore(SQLiteStore(sys.argv[1])) as store:
            for i in range(200):
                store.put(Scope("p", agent_id=worker), f"k{i}", f"worker {worker} item {i}")
                store.put(Scope("p"), f"{worker}-{i}", "shared scope")
        """
    )
    workers = [
        subprocess.Popen([sys.executable, "-c", script, str(path), str(n)]) for n in range(4)
    ]
    assert [w.wait(timeout=120) for w in workers] == [0, 0, 0, 0]
    with SyncStore(SQLiteStore(path)) as store:
        assert store.count(Scope("p")) == 800
        for n in range(4):
            assert store.count(Scope("p", agent_id=str(n))) == 200


def test_a_prompt_of_common_words_reads_a_bounded_part_of_a_large_scope(tmp_path):
    path = tmp_path / "m.db"
    scope = Scope("p")
    with SyncStore(SQLiteStore(path)) as store:
        store._run(
            "put_many", [(scope, f"k{n}", f"harbour ferry tide {n % 7}", None) for n in range(3000)]
        )
        store.put(scope, "rare", "harbour walrus")
        hits = store.query(scope, "harbour ferry walrus", top_k=5)
    assert hits[0].key == "rare"  # the rare word's one item, then the best of the rest
    assert len(hits) == 5 and len({hit.score for hit in hits[1:]}) == 1


def test_an_old_item_holding_two_rare_words_outranks_many_newer_holding_one(tmp_path):
    # more items hold each word than one window scores exactly: the estimates (the idf of the
    # words each candidate was found by) put the item holding both first
    scope = Scope("p")
    with SyncStore(SQLiteStore(tmp_path / "m.db")) as store:
        store.put(scope, "both", "walrus kelp")
        entries = [(scope, f"w{n}", f"walrus note {n}", None) for n in range(2 * lexical.RESCORED)]
        entries += [(scope, f"k{n}", f"kelp note {n}", None) for n in range(3 * lexical.RESCORED)]
        store._run("put_many", entries)
        hits = store.query(scope, "walrus kelp", top_k=3)
    assert hits[0].key == "both"


def test_filters_reach_past_the_first_window_of_candidates(tmp_path):
    # every item holds the word; only the three oldest pass the filter, past two windows
    scope = Scope("p")
    with SyncStore(SQLiteStore(tmp_path / "m.db")) as store:
        old = [(scope, f"old{n}", "walrus", {"kind": "kept"}) for n in range(3)]
        new = [(scope, f"new{n}", "walrus", None) for n in range(2 * lexical.RESCORED + 10)]
        store._run("put_many", old)
        store._run("put_many", new)
        hits = store.query(scope, "walrus", top_k=3, filters={"kind": "kept"})
    assert sorted(hit.key for hit in hits) == ["old0", "old1", "old2"]


def test_optimize_keeps_every_item_findable(tmp_path):
    async def run():
        sqlite = SQLiteStore(tmp_path / "m.db")
        for batch in range(5):
            await sqlite.put_many(
                [
                    (Scope("p"), f"k{batch}-{n}", f"walrus batch {batch} item {n}", None)
                    for n in range(50)
                ]
            )
        before = {hit.key for hit in await sqlite.query(Scope("p"), "walrus", top_k=1000)}
        await sqlite.optimize()
        after = {hit.key for hit in await sqlite.query(Scope("p"), "walrus", top_k=1000)}
        await sqlite.aclose()
        return before, after

    before, after = asyncio.run(run())
    assert len(before) == 250 and after == before


def test_closing_the_sync_facade_inside_an_event_loop_names_the_fix(tmp_path):
    store = SyncStore(SQLiteStore(tmp_path / "m.db"))
    store.put(Scope("p"), "k", "v")  # the facade's loop exists now

    async def inside():
        with pytest.raises(RuntimeError, match="await store.aclose"):
            store._loop.close()

    asyncio.run(inside())
    store.close()


def test_an_expiry_written_by_another_tool_does_not_break_reads(tmp_path, caplog):
    path, scope = tmp_path / "m.db", Scope("p")
    with SyncStore(SQLiteStore(path)) as store:
        for key in ("bad", "good", "gone"):
            store.put(scope, key, f"walrus {key}", metadata={"v": 1})
    # Another program edits the file: a token where the expiry goes, and a past date (no
    # offset: UTC). Writes through the store refuse that key.
    secret = "ghp_" + "A1b2" * 9
    past = (datetime.now(UTC) - timedelta(minutes=1)).replace(tzinfo=None).isoformat()
    with closing(sqlite3.connect(path)) as conn, conn:
        for key, raw in (("bad", secret), ("gone", past)):
            metadata = json.dumps({"v": 1, EXPIRES_KEY: raw})
            conn.execute("UPDATE items SET metadata = ? WHERE key = ?", (metadata, key))
    with SyncStore(SQLiteStore(path)) as store:
        bad = store.get(scope, "bad")
        assert bad is not None and bad.metadata == {"v": 1} and bad.expires_at is None
        assert store.get(scope, "gone") is None
        assert sorted(hit.key for hit in store.query(scope, "walrus")) == ["bad", "good"]
        assert sorted(hit.key for hit in store.query(scope, "")) == ["bad", "good"]
    assert "item 'bad' in project=p has _animus_expires_at" in caplog.text
    assert "reading it as not expiring" in caplog.text and secret not in caplog.text


async def test_a_write_after_the_file_was_deleted_is_refused_not_lost(tmp_path):
    path = tmp_path / "m.db"
    store = SQLiteStore(path)
    await store.put(Scope("p"), "kept", "written before")
    assert await store.get(Scope("p"), "kept")  # the reader is open too
    path.unlink()  # the open connections hold the unlinked file
    for write in (
        store.put(Scope("p"), "late", "would go nowhere"),
        store.put_many([(Scope("p"), "late", "would go nowhere", None)]),
        store.delete_scope(Scope("p")),
        store.purge_expired(),
    ):
        with pytest.raises(StoreUnavailable) as raised:
            await write
        assert str(raised.value) == (
            f"SQLite store {path} was deleted or replaced while open, so nothing was "
            "written; reopen the store (restart the run) to use the file at that path"
        )
    assert not path.exists()  # no new, empty file in its place either
    assert (await store.get(Scope("p"), "kept")).value == "written before"  # reads go on
    await store.aclose()


async def test_a_first_read_after_the_file_was_deleted_says_so_and_creates_nothing(tmp_path):
    path = tmp_path / "m.db"
    store = SQLiteStore(path)
    await store.put(Scope("p"), "kept", "written before")  # the writer alone is open
    path.unlink()
    with pytest.raises(StoreUnavailable) as raised:
        await store.get(Scope("p"), "kept")
    assert str(raised.value) == (
        f"SQLite store {path} was deleted while open; reopen the store (restart the run) to "
        "start a new file at that path"
    )
    assert not path.exists()  # the reader did not create an empty file in its place
    await store.aclose()


def test_a_write_after_another_store_was_moved_over_the_file_is_refused(tmp_path):
    path, other = tmp_path / "m.db", tmp_path / "restored.db"
    with SyncStore(SQLiteStore(other)) as restored:
        restored.put(Scope("p"), "restored", "from the backup")
    with SyncStore(SQLiteStore(path)) as store:
        store.put(Scope("p"), "old", "written before")
        other.replace(path)
        with pytest.raises(StoreUnavailable, match="was deleted or replaced while open"):
            store.put(Scope("p"), "late", "would land in the replaced file")
    with SyncStore(SQLiteStore(path)) as reopened:  # what the error says to do
        # (which items it shows is SQLite's affair: the old file's -wal is still at the path)
        assert reopened.get(Scope("p"), "late") is None
        reopened.put(Scope("p"), "late", "written again")
        assert reopened.get(Scope("p"), "late").value == "written again"


def test_a_relative_path_stays_the_same_file_after_a_chdir(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with SyncStore(SQLiteStore("m.db")) as store:
        store.put(Scope("p"), "first", "one")
        (tmp_path / "elsewhere").mkdir()
        monkeypatch.chdir(tmp_path / "elsewhere")  # SQLite keeps the file it opened
        store.put(Scope("p"), "second", "two")
    with SyncStore(SQLiteStore(tmp_path / "m.db")) as store:
        assert store.count(Scope("p")) == 2
