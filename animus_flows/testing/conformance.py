"""The conformance suite every memory store passes, shipped so plugin authors can run it too.

Subclass `StoreConformance`, give it a `store` fixture returning a fresh, empty store, and
pytest runs every check against it::

    import pytest
    from animus_flows.testing.conformance import StoreConformance

    class TestMyStore(StoreConformance):
        @pytest.fixture
        def store(self, tmp_path):
            return MyStore(tmp_path / "db")

Async-indexed stores override `eventually_consistent` to wait until writes are searchable.
Tests of optional capabilities skip when the store's flag is off, and tests of the optional
in-process extension `BatchedKeyReads` when the store does not offer it.
Needs pytest and pytest-asyncio (`pip install pytest pytest-asyncio`), in any asyncio mode.

The suite is one class, longer than the ~500 lines other modules keep to, on purpose: it is
the protocol's checklist, which a store's author reads top to bottom, section by section.
"""

from __future__ import annotations

import asyncio
from typing import Any

try:
    import pytest
    import pytest_asyncio
except ImportError as exc:  # the test tools are not dependencies of the package
    raise ModuleNotFoundError(
        f"the conformance suite needs pytest and pytest-asyncio, and {exc.name} is not "
        "installed: pip install pytest pytest-asyncio",
        name=exc.name,
    ) from exc

from animus_flows.errors import InvalidRequest, InvalidScope
from animus_flows.protocol import (
    HOST_METADATA_PREFIX,
    MAX_TTL_SECONDS,
    BatchedKeyReads,
    MemoryItem,
    MemoryStore,
    QueryHit,
    Scope,
)

#: Pairs of ids that a careless store confuses: LIKE wildcards, path separators, quoting,
#: Unicode normalization and case, FTS operators, and our own scope-token spelling.
AWKWARD_ID_PAIRS = [
    ("a%", "ab"),
    ("a_c", "abc"),
    ("a/b", "a"),
    ("a.b", "a"),
    ("a.b", "a-b"),
    ("it's", 'it"s'),
    ("'; DROP TABLE items; --", "x"),
    ("café", "cafe"),
    ("Café", "café"),
    ("東京", "東"),
    ("zz1", "zz2"),
    ("a b", "a"),
    ("NEAR", "OR"),
    ("*", "a*"),
    ("%", "_"),
    ("\\", "/"),
    ("emoji-🙂", "emoji-"),
]

JSON_VALUES = [
    "plain text",
    "",
    {"content": "dict with content", "n": 1},
    {"nested": {"list": [1, 2.5, None, True]}},
    [1, "two", {"three": 3}],
    42,
    3.25,
    True,
    None,
    "ünïcødé ✓ 東京",
]

#: A secret in a shape the redaction patterns know, to check messages never quote it.
AWS_KEY = "AKIAIOSFODNN7EXAMPLE"


class StoreConformance:
    """Checks of the memory-store protocol; inherit and provide a `store` fixture."""

    # Every check is a coroutine: marked here, they run under pytest-asyncio's default strict
    # mode too, without the `asyncio_mode = "auto"` setting of this repository.
    pytestmark = pytest.mark.asyncio

    @pytest.fixture
    def store(self) -> MemoryStore:
        raise NotImplementedError("define a `store` fixture returning a fresh, empty store")

    @pytest_asyncio.fixture
    async def s(self, store: MemoryStore) -> Any:
        yield store
        close = getattr(store, "aclose", None)
        if close is not None:
            await close()

    async def eventually_consistent(self, store: MemoryStore) -> None:
        """Wait until earlier writes are visible to `query`; stores that index later override."""

    def skip_unless(self, store: MemoryStore, capability: str) -> None:
        if not getattr(store.capabilities, capability):
            pytest.skip(f"store does not report {capability}")

    # -- capabilities ---------------------------------------------------------------------

    async def test_capabilities_are_reported(self, s: MemoryStore) -> None:
        caps = s.capabilities
        for flag in ("native_ttl", "native_key_get", "strong_consistency", "semantic"):
            assert isinstance(getattr(caps, flag), bool)
        assert isinstance(caps.max_query_top_k, int) and caps.max_query_top_k >= 1

    # -- put and get ----------------------------------------------------------------------

    @pytest.mark.parametrize("value", JSON_VALUES, ids=repr)
    async def test_put_then_get_round_trips_json(self, s: MemoryStore, value: Any) -> None:
        scope = Scope("conformance")
        put = await s.put(scope, "k", value, metadata={"source": "test", "tags": ["a", "b"]})
        assert isinstance(put, MemoryItem)
        assert (put.scope, put.key, put.value) == (scope, "k", value)
        got = await s.get(scope, "k")
        assert got is not None
        assert (got.scope, got.key, got.value) == (scope, "k", value)
        assert got.metadata == {"source": "test", "tags": ["a", "b"]}
        assert got.created_at.tzinfo is not None and got.expires_at is None

    async def test_get_of_a_missing_key_is_none(self, s: MemoryStore) -> None:
        assert await s.get(Scope("conformance"), "missing") is None

    async def test_put_overwrites_and_keeps_created_at(self, s: MemoryStore) -> None:
        scope = Scope("conformance")
        first = await s.put(scope, "k", "one", metadata={"v": 1})
        await asyncio.sleep(0.01)
        second = await s.put(scope, "k", "two", metadata={"v": 2})
        got = await s.get(scope, "k")
        assert got is not None and got.value == "two" and got.metadata == {"v": 2}
        assert got.created_at == first.created_at
        assert got.updated_at >= second.created_at

    async def test_keys_are_exact(self, s: MemoryStore) -> None:
        scope = Scope("conformance")
        await s.put(scope, "task:RES-001/brief", "brief")
        await s.put(scope, "Key", "upper")
        assert await s.get(scope, "task:RES-001/brief*") is None
        assert await s.get(scope, "key") is None
        got = await s.get(scope, "Key")
        assert got is not None and got.value == "upper"

    @pytest.mark.parametrize("key", ["", "x" * 5000, "nul\x00"], ids=["empty", "long", "nul"])
    async def test_invalid_keys_are_refused(self, s: MemoryStore, key: str) -> None:
        with pytest.raises(InvalidRequest):
            await s.put(Scope("conformance"), key, "v")

    async def test_non_json_values_are_refused(self, s: MemoryStore) -> None:
        with pytest.raises(InvalidRequest):
            await s.put(Scope("conformance"), "k", {"bad": {1, 2}})
        with pytest.raises(InvalidRequest):
            await s.put(Scope("conformance"), "k", float("nan"))
        assert await s.get(Scope("conformance"), "k") is None

    async def test_values_come_back_as_json_keeps_them(self, s: MemoryStore) -> None:
        # JSON has arrays and string-keyed objects only: the item `put` returns holds what
        # `get` reads back, not the tuple or the integer key that went in.
        scope = Scope("conformance")
        put = await s.put(scope, "k", [{1: "a", 2: None}, (1, (2,))], metadata={"m": (1, 2)})
        got = await s.get(scope, "k")
        assert got is not None
        assert put.value == got.value == [{"1": "a", "2": None}, [1, [2]]]
        assert put.metadata == got.metadata == {"m": [1, 2]}

    async def test_mixed_object_keys_are_refused_by_name(self, s: MemoryStore) -> None:
        with pytest.raises(InvalidRequest, match="int key 1 beside string keys"):
            await s.put(Scope("conformance"), "k", {"a": [{1: "x", "b": 2}]})
        assert await s.get(Scope("conformance"), "k") is None

    async def test_host_metadata_keys_are_refused_before_anything_is_stored(
        self, s: MemoryStore
    ) -> None:
        scope = Scope("conformance")
        await s.put(scope, "k", "kept", metadata={"v": 1})
        for name, fix in [
            (f"{HOST_METADATA_PREFIX}expires_at", "pass ttl_seconds= instead"),
            (f"{HOST_METADATA_PREFIX}anything", "rename it"),
        ]:
            for key in ("k", "new"):
                with pytest.raises(InvalidRequest, match="is reserved") as refused:
                    await s.put(scope, key, f"ghp_{'A1b2' * 9}", metadata={name: "not-a-date"})
                assert repr(name) in str(refused.value) and fix in str(refused.value)
        await self.eventually_consistent(s)
        # nothing was written: the scope reads as before
        got = await s.get(scope, "k")
        assert got is not None and (got.value, got.metadata) == ("kept", {"v": 1})
        assert await s.get(scope, "new") is None
        assert [hit.key for hit in await s.query(scope, "")] == ["k"]

    async def test_long_keys_and_ids_are_quoted_with_secrets_redacted(self, s: MemoryStore) -> None:
        # The quoted head ends inside the key: cut first, it would no longer look like one.
        long = "x" * 30 + "/" + AWS_KEY + "/" + "y" * 1100
        with pytest.raises(InvalidRequest, match="1152 characters") as refused:
            await s.put(Scope("conformance"), long, "v")
        assert AWS_KEY[:4] not in str(refused.value)
        with pytest.raises(InvalidScope, match="352 characters") as refused:
            Scope(long[:352])
        assert AWS_KEY[:4] not in str(refused.value)

    async def test_text_that_is_not_valid_unicode_is_refused(self, s: MemoryStore) -> None:
        # A lone surrogate: what Python reads from the JSON escape "\ud800"; no UTF-8 form.
        lone = "\ud800"
        scope = Scope("conformance")
        for ids in ({"project_id": lone}, {"project_id": "p", "task_id": f"t{lone}"}):
            with pytest.raises(InvalidScope, match="pass valid UTF-8 text"):
                Scope(**ids)
        writes: list[dict[str, Any]] = [
            {"key": f"k{lone}", "value": "v"},
            {"key": "k", "value": lone},
            {"key": "k", "value": {"nested": ["ok", f"x{lone}"]}},
            {"key": "k", "value": {lone: 1}},
            {"key": "k", "value": "v", "metadata": {"m": lone}},
            {"key": "k", "value": "v", "metadata": {lone: "m"}},
        ]
        for write in writes:
            with pytest.raises(InvalidRequest, match="pass valid UTF-8 text"):
                await s.put(scope, **write)
        with pytest.raises(InvalidRequest, match="pass valid UTF-8 text"):
            await s.get(scope, lone)
        with pytest.raises(InvalidRequest, match="pass valid UTF-8 text"):
            await s.query(scope, f"walrus {lone}")
        with pytest.raises(InvalidRequest, match="pass valid UTF-8 text"):
            await s.query(scope, "walrus", filters={"tags": ["x", lone]})
        with pytest.raises(InvalidScope, match="pass valid UTF-8 text"):
            await s.list_scopes(project_id=lone)
        # nothing was written, and the scope reads as usual
        assert await s.get(scope, "k") is None
        assert await s.query(scope, "") == []

    async def test_invalid_scopes_are_refused(self, s: MemoryStore) -> None:
        for bad in ({"project_id": ""}, {"project_id": "p", "agent_id": ""}):
            with pytest.raises(InvalidScope):
                Scope(**bad)  # type: ignore[arg-type]
        with pytest.raises(InvalidScope):
            await s.put("not-a-scope", "k", "v")  # type: ignore[arg-type]

    # -- scope isolation ------------------------------------------------------------------

    @pytest.mark.parametrize("mine,theirs", AWKWARD_ID_PAIRS, ids=repr)
    async def test_scope_isolation_with_awkward_ids(
        self, s: MemoryStore, mine: str, theirs: str
    ) -> None:
        scopes = [
            Scope(mine),
            Scope(theirs),
            Scope("p", agent_id=mine),
            Scope("p", agent_id=theirs),
            Scope("p", task_id=mine),
            Scope("p", agent_id=mine, task_id=theirs),
            Scope("p"),
        ]
        for index, scope in enumerate(scopes):
            await s.put(scope, "shared-key", f"secret {index} walrus", metadata={"i": index})
        await self.eventually_consistent(s)
        for index, scope in enumerate(scopes):
            got = await s.get(scope, "shared-key")
            assert got is not None and got.metadata == {"i": index}, scope
            hits = await s.query(scope, "secret walrus", top_k=20)
            assert [hit.metadata["i"] for hit in hits] == [index], scope
        # deleting one scope leaves its neighbours whole
        assert await s.delete_scope(scopes[0]) == 1
        assert await s.get(scopes[0], "shared-key") is None
        for index, scope in enumerate(scopes[1:], start=1):
            got = await s.get(scope, "shared-key")
            assert got is not None and got.metadata == {"i": index}

    async def test_project_scope_does_not_see_agent_or_task_items(self, s: MemoryStore) -> None:
        await s.put(Scope("p", agent_id="a"), "k", "agent walrus")
        await s.put(Scope("p", task_id="t"), "k2", "task walrus")
        await self.eventually_consistent(s)
        assert await s.get(Scope("p"), "k") is None
        assert await s.query(Scope("p"), "walrus") == []

    # -- query ----------------------------------------------------------------------------

    async def _corpus(self, s: MemoryStore, scope: Scope) -> None:
        docs = {
            "fx": "EUR/USD rallied as the central bank held rates steady",
            "oil": "Brent crude fell on rising inventories",
            "rates": "The central bank raised rates by 25 basis points; rates outlook hawkish",
            "misc": "The office coffee machine was repaired",
        }
        for key, text in docs.items():
            await s.put(scope, key, {"content": text}, metadata={"topic": key})
        await self.eventually_consistent(s)

    async def test_query_finds_relevant_items_best_first(self, s: MemoryStore) -> None:
        scope = Scope("conformance")
        await self._corpus(s, scope)
        hits = await s.query(scope, "central bank rates", top_k=3)
        assert hits and all(isinstance(hit, QueryHit) for hit in hits)
        assert {hit.key for hit in hits[:2]} == {"rates", "fx"}
        assert "misc" not in {hit.key for hit in hits}

    async def test_scores_are_in_unit_range_and_descending(self, s: MemoryStore) -> None:
        scope = Scope("conformance")
        await self._corpus(s, scope)
        hits = await s.query(scope, "rates bank crude coffee", top_k=10)
        assert hits
        scores = [hit.score for hit in hits]
        assert all(0.0 <= score <= 1.0 for score in scores)
        assert scores == sorted(scores, reverse=True)

    async def test_top_k_limits_and_is_clamped(self, s: MemoryStore) -> None:
        scope = Scope("conformance")
        for index in range(12):
            await s.put(scope, f"k{index}", f"walrus number {index}")
        await self.eventually_consistent(s)
        assert len(await s.query(scope, "walrus", top_k=5)) == 5
        huge = s.capabilities.max_query_top_k + 50
        assert len(await s.query(scope, "walrus", top_k=huge)) == 12
        with pytest.raises(InvalidRequest):
            await s.query(scope, "walrus", top_k=0)

    @pytest.mark.parametrize(
        "text",
        ['"unbalanced', "a AND OR NOT b", "NEAR(a b)", "col:value", "*", "-x +y", "(", "🙂"],
    )
    async def test_query_syntax_in_text_is_inert(self, s: MemoryStore, text: str) -> None:
        scope = Scope("conformance")
        await s.put(scope, "k", "plain words here")
        await self.eventually_consistent(s)
        hits = await s.query(scope, text)
        assert isinstance(hits, list)

    async def test_query_text_is_indexed_from_str_content_or_json(self, s: MemoryStore) -> None:
        scope = Scope("conformance")
        await s.put(scope, "str", "alpha narwhal")
        await s.put(scope, "dict", {"content": "beta narwhal", "other": "ignored"})
        await s.put(scope, "json", {"title": "gamma narwhal"})
        await self.eventually_consistent(s)
        assert {hit.key for hit in await s.query(scope, "narwhal", top_k=10)} == {
            "str",
            "dict",
            "json",
        }

    async def test_filters_by_equality_membership_and_absence(self, s: MemoryStore) -> None:
        scope = Scope("conformance")
        await s.put(scope, "a", "walrus a", metadata={"memory_type": "semantic", "tags": ["x"]})
        await s.put(scope, "b", "walrus b", metadata={"memory_type": "episodic", "tags": ["y"]})
        await s.put(scope, "c", "walrus c", metadata={"tags": ["x", "y"]})
        await self.eventually_consistent(s)

        async def keys(filters: dict[str, Any]) -> set[str]:
            return {hit.key for hit in await s.query(scope, "walrus", top_k=10, filters=filters)}

        assert await keys({"memory_type": "semantic"}) == {"a"}
        assert await keys({"memory_type": ["semantic", "episodic"]}) == {"a", "b"}
        assert await keys({"memory_type": [None, "episodic"]}) == {"b", "c"}
        assert await keys({"tags": "x"}) == {"a", "c"}
        assert await keys({"tags": ["y"], "memory_type": [None]}) == {"c"}
        assert await keys({"nothing": "there"}) == set()
        with pytest.raises(InvalidRequest):
            await s.query(scope, "walrus", filters={"tags": {"nested": 1}})

    async def test_filters_match_scalars_only(self, s: MemoryStore) -> None:
        # an object or array in metadata is never equal to a filter's string, even one that
        # spells it as JSON; found by ranked queries and listings (empty text) alike
        scope = Scope("conformance")
        await s.put(scope, "obj", "walrus obj", metadata={"x": {"a": 1}, "tags": [{"a": 1}]})
        await s.put(scope, "str", "walrus str", metadata={"x": '{"a":1}', "tags": ['{"a":1}']})
        await self.eventually_consistent(s)
        for text in ("walrus", ""):
            for filters in ({"x": '{"a":1}'}, {"tags": '{"a":1}'}):
                hits = await s.query(scope, text, top_k=10, filters=filters)
                assert [hit.key for hit in hits] == ["str"], (text, filters)

    async def test_strongly_consistent_stores_read_their_writes(self, s: MemoryStore) -> None:
        self.skip_unless(s, "strong_consistency")
        scope = Scope("conformance")
        await s.put(scope, "k", "immediately searchable okapi")
        assert [hit.key for hit in await s.query(scope, "okapi")] == ["k"]

    # -- TTL ------------------------------------------------------------------------------

    async def test_expired_items_are_never_returned(self, s: MemoryStore) -> None:
        scope = Scope("conformance")
        item = await s.put(scope, "short", "ephemeral quokka", ttl_seconds=1)
        await s.put(scope, "long", "lasting quokka", ttl_seconds=3600)
        assert item.expires_at is not None
        await self.eventually_consistent(s)
        assert await s.get(scope, "short") is not None
        await asyncio.sleep(1.2)
        assert await s.get(scope, "short") is None
        assert [hit.key for hit in await s.query(scope, "quokka", top_k=10)] == ["long"]
        long = await s.get(scope, "long")
        assert long is not None and long.expires_at is not None

    async def test_invalid_ttl_is_refused(self, s: MemoryStore) -> None:
        for ttl in (0, -5, 1.5, MAX_TTL_SECONDS + 1, 10**20):
            with pytest.raises(InvalidRequest):
                await s.put(Scope("conformance"), "k", "v", ttl_seconds=ttl)  # type: ignore[arg-type]

    async def test_scopes_holding_only_expired_items_are_not_listed(self, s: MemoryStore) -> None:
        self.skip_unless(s, "native_ttl")
        await s.put(Scope("ttl-only"), "k", "v", ttl_seconds=1)
        await asyncio.sleep(1.2)
        assert (await s.list_scopes(project_id="ttl-only")).scopes == []

    # -- list_scopes ----------------------------------------------------------------------

    async def test_list_scopes_pages_without_duplicates(self, s: MemoryStore) -> None:
        expected = {Scope("paged", agent_id=f"agent-{i:02d}") for i in range(23)}
        expected.add(Scope("paged"))
        for scope in expected:
            await s.put(scope, "k", "v")
        await s.put(Scope("other-project"), "k", "v")
        seen: list[Scope] = []
        cursor = None
        for _ in range(20):
            page = await s.list_scopes(project_id="paged", cursor=cursor, limit=5)
            assert len(page.scopes) <= 5
            seen += page.scopes
            cursor = page.next_cursor
            if cursor is None:
                break
        assert len(seen) == len(set(seen))
        assert set(seen) == expected
        everything = await s.list_scopes(limit=1000)
        assert Scope("other-project") in everything.scopes

    async def test_list_scopes_rejects_bad_arguments(self, s: MemoryStore) -> None:
        for limit in (0, 100_000):
            with pytest.raises(InvalidRequest):
                await s.list_scopes(limit=limit)
        await s.put(Scope("paged"), "k", "v")
        # "²" is a digit to str.isdigit, not to int()
        for cursor in ("bogus", "²", "-1", "1.5", "\ud800"):
            with pytest.raises(InvalidRequest):
                await s.list_scopes(cursor=cursor)
        # a number no page ended at: refused, or read as past the last page
        try:
            page = await s.list_scopes(cursor="9" * 23)
        except InvalidRequest:
            pass
        else:
            assert page.scopes == [] and page.next_cursor is None

    # -- delete_scope ---------------------------------------------------------------------

    async def test_delete_scope_is_idempotent_and_exact(self, s: MemoryStore) -> None:
        scope, child = Scope("del"), Scope("del", agent_id="a")
        for index in range(3):
            await s.put(scope, f"k{index}", "gone soon")
        await s.put(child, "k", "stays")
        assert await s.delete_scope(scope) == 3
        assert await s.delete_scope(scope) == 0
        assert await s.get(scope, "k0") is None
        assert await s.get(child, "k") is not None
        assert scope not in (await s.list_scopes(project_id="del")).scopes
        assert await s.delete_scope(Scope("never-written")) == 0
        await s.put(scope, "k0", "back again")
        got = await s.get(scope, "k0")
        assert got is not None and got.value == "back again"

    # -- delete ---------------------------------------------------------------------------

    async def test_delete_is_idempotent_and_removes_one_item(self, s: MemoryStore) -> None:
        scope = Scope("del-one")
        await s.put(scope, "gone", "walrus to forget")
        await s.put(scope, "kept", "walrus to keep")
        assert await s.delete(scope, "gone") is True
        assert await s.delete(scope, "gone") is False
        assert await s.delete(scope, "never-written") is False
        assert await s.delete(Scope("never-written"), "gone") is False
        assert await s.get(scope, "gone") is None
        await self.eventually_consistent(s)
        assert [hit.key for hit in await s.query(scope, "walrus", top_k=10)] == ["kept"]
        assert [hit.key for hit in await s.query(scope, "", top_k=10)] == ["kept"]
        assert [item.key for item in (await s.list_items(scope)).items] == ["kept"]
        # the key can be written again, as a new item
        put = await s.put(scope, "gone", "back again")
        got = await s.get(scope, "gone")
        assert got is not None and got.value == "back again"
        assert got.created_at == put.created_at

    @pytest.mark.parametrize("mine,theirs", AWKWARD_ID_PAIRS, ids=repr)
    async def test_delete_acts_on_exactly_one_scope_and_key(
        self, s: MemoryStore, mine: str, theirs: str
    ) -> None:
        scopes = [
            Scope(mine),
            Scope(theirs),
            Scope("p", agent_id=mine),
            Scope("p", agent_id=theirs),
        ]
        for scope in scopes:
            for key in (mine, theirs):
                await s.put(scope, key, "v")
        assert await s.delete(scopes[0], mine) is True
        for scope in scopes:
            for key in (mine, theirs):
                got = await s.get(scope, key)
                assert (got is None) is (scope == scopes[0] and key == mine), (scope, key)

    async def test_delete_of_an_expired_item_removes_nothing_live(self, s: MemoryStore) -> None:
        scope = Scope("del-expired")
        await s.put(scope, "short", "v", ttl_seconds=1)
        await asyncio.sleep(1.2)
        assert await s.delete(scope, "short") is False
        assert await s.get(scope, "short") is None

    async def test_delete_refuses_bad_keys_and_scopes(self, s: MemoryStore) -> None:
        for key in ("", "nul\x00", "x" * 5000):
            with pytest.raises(InvalidRequest):
                await s.delete(Scope("conformance"), key)
        with pytest.raises(InvalidScope):
            await s.delete("not-a-scope", "k")  # type: ignore[arg-type]

    # -- list_items -----------------------------------------------------------------------

    async def _walk(self, s: MemoryStore, scope: Scope, **options: Any) -> list[MemoryItem]:
        items: list[MemoryItem] = []
        cursor = None
        for _ in range(1000):
            page = await s.list_items(scope, cursor=cursor, **options)
            items += page.items
            cursor = page.next_cursor
            if cursor is None:
                return items
        raise AssertionError("list_items never reached its last page")

    async def test_list_items_walks_one_scope_in_code_point_order(self, s: MemoryStore) -> None:
        scope = Scope("walk", agent_id="a")
        keys = sorted({key for pair in AWKWARD_ID_PAIRS for key in pair})
        for key in reversed(keys):
            await s.put(scope, key, {"key": key}, metadata={"k": key})
        await s.put(Scope("walk", agent_id="b"), "another scope's", "v")
        await s.put(Scope("walk"), "a", "the project scope's")
        for limit in (1, 3, 100):
            walked = await self._walk(s, scope, limit=limit)
            assert [item.key for item in walked] == keys  # Python sorts by code point
        first = (await s.list_items(scope, limit=1)).items[0]
        got = await s.get(scope, keys[0])
        assert got is not None
        assert (first.scope, first.key, first.value, first.metadata) == (
            got.scope,
            got.key,
            got.value,
            got.metadata,
        )
        assert first.created_at == got.created_at and first.expires_at == got.expires_at
        assert (await s.list_items(Scope("never-written"))).items == []

    @pytest.mark.parametrize("mine,theirs", AWKWARD_ID_PAIRS, ids=repr)
    async def test_list_items_isolates_scopes_exactly(
        self, s: MemoryStore, mine: str, theirs: str
    ) -> None:
        scopes = [
            Scope(mine),
            Scope(theirs),
            Scope("p", agent_id=mine),
            Scope("p", agent_id=theirs),
            Scope("p", task_id=mine),
            Scope("p"),
        ]
        for index, scope in enumerate(scopes):
            await s.put(scope, f"k{index}", index)
        for index, scope in enumerate(scopes):
            assert [item.value for item in (await s.list_items(scope)).items] == [index], scope

    @pytest.mark.parametrize(
        "prefix",
        [
            "a",
            "a%",
            "a_",
            "%",
            "_",
            "*",
            "a*",
            "?",
            "[a]",
            "\\",
            "it'",
            'it"',
            "Caf",
            "caf",
            "東",
            "emoji-",
            "emoji-🙂",
            "",
            "zz",
            "nothing-starts-so",
        ],
    )
    async def test_list_items_matches_prefixes_literally(self, s: MemoryStore, prefix: str) -> None:
        scope = Scope("prefix")
        keys = sorted({key for pair in AWKWARD_ID_PAIRS for key in pair} | {"[a]b", "?x", "ab"})
        for key in keys:
            await s.put(scope, key, "v")
        await s.put(Scope("prefix", agent_id="x"), f"{prefix}-of-another-scope", "v")
        walked = await self._walk(s, scope, prefix=prefix, limit=2)
        assert [item.key for item in walked] == [k for k in keys if k.startswith(prefix)]

    async def test_list_items_never_lists_expired_items(self, s: MemoryStore) -> None:
        scope = Scope("list-expired")
        await s.put(scope, "a-short", "v", ttl_seconds=1)
        await s.put(scope, "b-long", "v", ttl_seconds=3600)
        await s.put(scope, "c-lasting", "v")
        assert [item.key for item in await self._walk(s, scope)] == [
            "a-short",
            "b-long",
            "c-lasting",
        ]
        await asyncio.sleep(1.2)
        for limit in (1, 100):
            walked = await self._walk(s, scope, limit=limit)
            assert [item.key for item in walked] == ["b-long", "c-lasting"]
        assert walked[0].expires_at is not None and walked[1].expires_at is None
        assert all(not key.startswith("_animus") for item in walked for key in item.metadata)

    async def test_list_items_visits_every_item_once_while_items_are_added(
        self, s: MemoryStore
    ) -> None:
        scope = Scope("paging")
        present = [f"m-{n:02d}" for n in range(12)]
        for key in present:
            await s.put(scope, key, "v")
        seen: list[str] = []
        cursor = None
        for round_ in range(100):
            page = await s.list_items(scope, cursor=cursor, limit=5)
            assert len(page.items) <= 5
            seen += [item.key for item in page.items]
            # writes between pages: before the walk's position, after it, and over an item
            # already listed
            await s.put(scope, f"a-new-{round_}", "v")
            await s.put(scope, f"z-new-{round_}", "v")
            await s.put(scope, seen[0], "overwritten")
            cursor = page.next_cursor
            if cursor is None:
                break
        assert len(seen) == len(set(seen))
        assert [key for key in seen if key.startswith("m-")] == present

    async def test_list_items_pages_hold_at_most_limit(self, s: MemoryStore) -> None:
        scope = Scope("limits")
        for n in range(7):
            await s.put(scope, f"k{n}", n)
        assert len((await s.list_items(scope, limit=1)).items) == 1
        assert len((await s.list_items(scope, limit=1000)).items) == 7
        page = await s.list_items(scope, limit=7)
        assert len(page.items) == 7
        rest = (
            await s.list_items(scope, limit=7, cursor=page.next_cursor)
            if page.next_cursor
            else None
        )
        assert rest is None or rest.items == []
        for limit in (0, -1, 1001, True, 2.0, "5"):
            with pytest.raises(InvalidRequest):
                await s.list_items(scope, limit=limit)  # type: ignore[arg-type]

    async def test_list_items_refuses_a_cursor_it_did_not_return(self, s: MemoryStore) -> None:
        scope = Scope("cursors")
        for n in range(3):
            await s.put(scope, f"k{n}", n)
        for cursor in ("bogus", "²", "\ud800", "k.", "!!!", 5):
            with pytest.raises(InvalidRequest):
                await s.list_items(scope, cursor=cursor)  # type: ignore[arg-type]
        for prefix in ("nul\x00", "\ud800", 5, "x" * 5000):
            with pytest.raises(InvalidRequest):
                await s.list_items(scope, prefix=prefix)  # type: ignore[arg-type]
        with pytest.raises(InvalidScope):
            await s.list_items("not-a-scope")  # type: ignore[arg-type]

    # -- optional in-process extensions ---------------------------------------------------

    def skip_unless_offered(self, store: MemoryStore, extension: type) -> None:
        if not isinstance(store, extension):
            pytest.skip(f"store does not offer {extension.__name__}")

    async def test_get_many_reads_what_get_reads(self, s: MemoryStore) -> None:
        self.skip_unless_offered(s, BatchedKeyReads)
        scope = Scope("many", agent_id="a")
        keys = list(dict.fromkeys(key for pair in AWKWARD_ID_PAIRS for key in pair))
        for key in keys[::2]:
            await s.put(scope, key, {"key": key})
        await s.put(Scope("many", agent_id="b"), keys[1], "another scope's")
        wanted = [*keys, keys[0], "absent"]
        found = await s.get_many(scope, wanted)  # type: ignore[attr-defined]
        one_by_one = {key: await s.get(scope, key) for key in wanted}
        assert found == {key: item for key, item in one_by_one.items() if item is not None}
        with pytest.raises(InvalidRequest):
            await s.get_many(scope, "a key, not a list")  # type: ignore[attr-defined]

    # -- the semantic leg (capabilities.semantic) ------------------------------------------

    async def test_meaning_finds_a_paraphrase_with_no_shared_word(self, s: MemoryStore) -> None:
        self.skip_unless(s, "semantic")
        scope = Scope("semantic")
        await s.put(scope, "pottery", "She signed up for a pottery class on Thursday evenings")
        await s.put(scope, "rates", "The central bank raised interest rates by a quarter point")
        await self.eventually_consistent(s)
        hits = await s.query(scope, "learning to make ceramics", top_k=2)
        assert hits and hits[0].key == "pottery"
        assert all(0.0 <= hit.score <= 1.0 for hit in hits)

    async def test_meaning_never_crosses_scopes_with_awkward_ids(self, s: MemoryStore) -> None:
        self.skip_unless(s, "semantic")
        for left, right in AWKWARD_ID_PAIRS:
            for agent in (left, right):
                text = f"The walrus rests on the ice floe near the harbour ({agent})"
                await s.put(Scope("vectors", agent_id=agent), f"walrus-{agent}", text)
        await self.eventually_consistent(s)
        for left, right in AWKWARD_ID_PAIRS:
            for agent in (left, right):
                hits = await s.query(Scope("vectors", agent_id=agent), "a marine mammal resting")
                assert [hit.key for hit in hits] == [f"walrus-{agent}"], (left, right)
