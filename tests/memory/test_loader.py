"""The memory loader on real SQLite stores: budgets, disclosure, sectors, privacy, degradation."""

import asyncio
import inspect
import uuid
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from animus_flows.blocks import SQLiteMemoryStore
from animus_flows.budget import TokenCounter
from animus_flows.config import parse_workflow
from animus_flows.errors import InvalidRequest, StoreUnavailable
from animus_flows.memory import (
    AGENT_SECTOR_PREFERENCES,
    AsyncMemoryLayer,
    AsyncMemoryLoader,
    MemoryLayer,
    MemoryLoader,
    MemoryTier,
    MemoryType,
)
from animus_flows.protocol import Capabilities, Scope
from animus_flows.retrieval.service import first_top_k
from animus_flows.stores import BaseStore, SQLiteStore

PROJECT = "desk"
COUNTER = TokenCounter("cl100k_base")


@pytest.fixture
def store(db):
    return SQLiteStore(db)


@pytest.fixture
def loader(store):
    with MemoryLoader(store, PROJECT) as blocking:
        yield blocking


def layer(store, agent=None):
    return MemoryLayer(store, Scope(PROJECT, agent_id=agent))


def remember(store, agent, content, **fields):
    with layer(store, agent) as memory:
        return memory.remember(content, **fields)


# -- load_for_agent ----------------------------------------------------------------------------


def test_an_agent_gets_its_own_and_the_shared_memories_public_hot_first(store, loader):
    remember(store, "dev", "use pytest fixtures", memory_type="procedural", tier="warm")
    remember(store, "dev", "the API is REST", tier="hot")
    remember(store, None, "deploys happen on Fridays", tier="hot")
    remember(store, "dev", "dev password hint", tier="hot", sensitivity="secret")
    remember(store, "dev", "my personal note", tier="hot", sensitivity="personal")
    remember(store, "dev", "old design", tier="cold")
    remember(store, "qa", "qa's private finding", memory_type="procedural", tier="hot")

    result = loader.load_for_agent("dev")
    assert [(m.agent, m.tier.value, m.content) for m in result.memories] == [
        ("dev", "hot", "the API is REST"),
        ("shared", "hot", "deploys happen on Fridays"),
        ("dev", "warm", "use pytest fixtures"),
    ]
    assert result.metrics.status == "ok" and result.metrics.detail == ""
    assert result.metrics.duration_ms >= 0
    assert result.metrics.started_at <= result.metrics.ended_at
    meta = result.metadata
    assert (meta.agent, meta.count, meta.budget, meta.tiers) == ("dev", 3, 2000, ("hot", "warm"))
    assert meta.tokens_used == COUNTER.count(result.text) == sum(m.tokens for m in result.memories)
    assert result.text.splitlines()[0].endswith("] the API is REST")
    assert result.memories[0].sector == "semantic"


def test_layers_choose_the_tiers(store, loader):
    remember(store, "dev", "hot one", tier="hot")
    remember(store, "dev", "warm one")
    remember(store, "dev", "cold one", tier="cold")

    def contents(**kwargs):
        return [m.content for m in loader.load_for_agent("dev", **kwargs).memories]

    assert contents() == ["hot one", "warm one"]
    assert contents(layers=(1, 2, 3)) == ["hot one", "warm one", "cold one"]
    assert contents(layers=["cold", MemoryTier.HOT]) == ["hot one", "cold one"]
    assert contents(layers=[1]) == ["hot one"]
    with pytest.raises(InvalidRequest, match="layer 4 is not 1 \\(hot\\), 2 \\(warm\\), 3"):
        loader.load_for_agent("dev", layers=[4])
    with pytest.raises(InvalidRequest, match="layers is empty"):
        loader.load_for_agent("dev", layers=[])


def test_older_versions_of_a_memory_are_never_loaded(store, loader):
    with layer(store, "dev") as memory:
        v1 = memory.remember("the desk closes at 17:00", tier="hot")
        v2 = memory.update_with_version(v1.id, content="the desk closes at 18:00")
        memory.promote_memory(v1.id)  # even back in a loaded tier, it is history
    assert [m.id for m in loader.load_for_agent("dev", layers=(1, 2, 3)).memories] == [v2.id]


def test_the_budget_is_never_exceeded_and_warm_waits_for_room(store, loader):
    for n in range(12):
        remember(store, "dev", f"hot memory number {n} " + "with padding " * 10, tier="hot")
    remember(store, "dev", "a warm memory", tier="warm")
    tight = loader.load_for_agent("dev", budget=300)
    assert 0 < tight.metadata.tokens_used <= 300
    assert {m.tier for m in tight.memories} == {MemoryTier.HOT}  # hot used over 70%
    roomy = loader.load_for_agent("dev", budget=5000)
    assert roomy.metadata.count == 13 and roomy.memories[-1].content == "a warm memory"
    assert loader.load_for_agent("dev", budget=0).memories == []
    with pytest.raises(InvalidRequest, match="budget -1 must be an integer >= 0"):
        loader.load_for_agent("dev", budget=-1)


def test_small_memories_fill_the_budget_past_the_first_page(store, loader):
    with layer(store, "dev") as memory:
        memory.import_memories(
            "["
            + ",".join(
                f'{{"id": "{uuid.uuid4()}", "content": "tip {n}", "tier": "hot"}}'
                for n in range(120)
            )
            + "]"
        )
    result = loader.load_for_agent("dev", budget=5000)
    assert result.metadata.count == 120  # far more than one first page of a source


class QueryLog(SQLiteStore):
    """A real SQLite store that keeps the tier and top_k of every query it answers."""

    def __init__(self, path):
        super().__init__(path)
        self.queries = []

    async def query(self, scope, text, *, top_k=8, filters=None):
        self.queries.append(((filters or {}).get("tier", [None])[0], top_k))
        return await super().query(scope, text, top_k=top_k, filters=filters)


def test_warm_is_not_fetched_again_once_it_fills_70_percent_of_the_budget(db):
    records = ",".join(
        f'{{"id": "{uuid.uuid4()}", "content": "note {n} {"word " * 60}", "tier": "warm"}}'
        for n in range(300)
    )
    with layer(SQLiteStore(db), "dev") as memory:
        memory.import_memories(f"[{records}]")
    store = QueryLog(db)
    with MemoryLoader(store, PROJECT, timeout_ms=None) as loader:
        result = loader.load_for_agent("dev", budget=2000)
    assert 0.7 * 2000 <= result.metadata.tokens_used <= 2000
    # one query per scope and tier: more WARM could never be disclosed past 70%, so asking for
    # it (top_k 100, 400, 1000 of a large scope) only cost the 500 ms deadline time
    first = first_top_k(2000)
    assert sorted(store.queries) == sorted([("hot", first)] * 2 + [("warm", first)] * 2)


def test_budgets_come_from_the_agent_then_the_default(store):
    remember(store, "dev", "x " * 300, tier="hot")
    with MemoryLoader(store, PROJECT, budgets={"dev": 3000}) as configured:
        assert configured.budget_for("dev") == 3000 and configured.budget_for("qa") == 2000
        assert configured.load_for_agent("dev").metadata.budget == 3000
        assert configured.load_for_agent("dev", budget=100).metadata.budget == 100


def test_budget_and_sectors_from_the_workflow_file(store):
    workflow = parse_workflow(
        "version: 1\nproject: desk\nbudget: {encoding: o200k_base}\nagents:\n"
        "  dev: {memory_loader: {budget: 900}}\n"
        "  trade-analyst: {memory_loader: {sectors: [episodic]}}\n"
        "  qa: {}\n",
        "animus.yaml",
    )
    remember(store, "trade-analyst", "traded EUR/USD", memory_type="episodic", tier="hot")
    remember(store, "trade-analyst", "EUR/USD is a pair", memory_type="semantic", tier="hot")
    with MemoryLoader.from_workflow(workflow, store) as loader:
        assert loader.project_id == "desk" and loader.budget_for("dev") == 900
        assert loader.sectors_for("trade-analyst") == (MemoryType.EPISODIC,)
        assert loader.sectors_for("qa") == AGENT_SECTOR_PREFERENCES["qa"]
        result = loader.load_for_agent("trade-analyst")
    assert [m.content for m in result.memories] == ["traded EUR/USD"]
    assert result.metadata.tokens_used == TokenCounter("o200k_base").count(result.text)


def test_sector_preferences_follow_seed_002_and_can_be_overridden(store, loader):
    for kind in MemoryType:
        remember(store, None, f"shared {kind.value}", memory_type=kind, tier="hot")

    def sectors(agent, **kwargs):
        return {m.sector for m in loader.load_for_agent(agent, **kwargs).memories}

    assert sectors("dev") == {"procedural", "semantic"}
    assert sectors("qa") == {"reflective", "episodic"}
    assert sectors("architect") == {"semantic", "reflective"}
    assert sectors("pm") == sectors("po") == {"episodic", "semantic"}
    assert sectors("sm") == {"procedural", "episodic"}
    assert sectors("trade-analyst") == {t.value for t in MemoryType}
    assert sectors("dev", sectors=["active"]) == {"active"}
    with MemoryLoader(store, PROJECT, sectors={"dev": ["episodic"]}) as custom:
        assert {m.sector for m in custom.load_for_agent("dev").memories} == {"episodic"}
    with pytest.raises(InvalidRequest, match="sectors: 'dream' is not a valid MemoryType"):
        loader.load_for_agent("dev", sectors=["dream"])


def test_the_shared_scope_is_not_an_agent(loader):
    with pytest.raises(InvalidRequest, match="'shared' names the shared project scope"):
        loader.load_for_agent("shared")
    with pytest.raises(InvalidRequest, match="agent_id '' must be a non-empty string"):
        loader.load_for_agent("")


def test_items_other_tools_wrote_are_loaded_too(store, loader, raw):
    raw.put(
        Scope(PROJECT, agent_id="dev"), "cli-note", "EUR/USD broke 1.10", metadata={"tier": "hot"}
    )
    (loaded,) = loader.load_for_agent("dev").memories
    assert (loaded.id, loaded.content, loaded.memory_type) == (
        "cli-note",
        "EUR/USD broke 1.10",
        MemoryType.SEMANTIC,
    )
    (recent,) = loader.get_recent_memories("dev", days=1)
    assert recent.created_at == raw.get(Scope(PROJECT, agent_id="dev"), "cli-note").created_at


# -- the other five methods --------------------------------------------------------------------


def test_query_memories_with_seed_002_filters(store, loader):
    remember(store, "dev", "hot procedure", memory_type="procedural", tier="hot", tags=["ci"])
    remember(store, "dev", "warm fact about ci", tier="warm", tags=["ci", "perf"])
    remember(store, "dev", "cold fact", tier="cold", tags=["perf"])
    remember(store, "dev", "warm event", memory_type="episodic", tags=["ci"])

    def contents(**kwargs):
        return [m.content for m in loader.query_memories("dev", **kwargs)]

    assert contents() == ["hot procedure", "warm fact about ci"]
    assert contents(attention_min=0.7) == ["hot procedure"]
    assert contents(attention_min=0.1) == ["hot procedure", "warm fact about ci", "cold fact"]
    assert contents(tier="cold") == ["cold fact"]
    assert contents(layer=2) == ["warm fact about ci"]
    assert contents(tags=["ci", "perf"]) == ["warm fact about ci"]
    assert contents(sectors=["episodic"]) == ["warm event"]
    assert contents(limit=1) == ["hot procedure"]
    assert contents(text="fact ci", attention_min=0.0) == ["warm fact about ci", "cold fact"]
    assert contents(token_budget=4) == []  # no block is that small
    with pytest.raises(InvalidRequest, match="limit 0 must be an integer >= 1"):
        loader.query_memories("dev", limit=0)


def test_hot_and_warm_shortcuts(store, loader):
    for n in range(8):
        remember(store, "dev", f"hot {n}", tier="hot")
    remember(store, "dev", "warm 0")
    assert len(loader.get_hot_memories("dev")) == 5
    assert len(loader.get_hot_memories("dev", limit=2)) == 2
    assert [m.content for m in loader.get_warm_memories("dev")] == ["warm 0"]
    assert all(m.tier is MemoryTier.HOT for m in loader.get_hot_memories("dev", limit=50))


def test_search_by_tags_all_or_any(store, loader):
    remember(store, "dev", "mcp in docker", tags=["mcp", "docker"], tier="hot")
    remember(store, None, "mcp only", tags=["MCP"])
    remember(store, "dev", "docker only", tags=["docker"], tier="cold")
    assert [m.content for m in loader.search_by_tags("dev", ["mcp", "docker"])] == ["mcp in docker"]
    assert sorted(m.content for m in loader.search_by_tags("dev", ["mcp"], match="any")) == [
        "mcp in docker",
        "mcp only",
    ]
    with pytest.raises(InvalidRequest, match="at least one tag"):
        loader.search_by_tags("dev", [])
    with pytest.raises(InvalidRequest, match="match 'some' must be 'all' or 'any'"):
        loader.search_by_tags("dev", ["x"], match="some")


def test_recent_memories_by_creation_time(store, loader):
    now = datetime.now(UTC)
    with layer(store, "dev") as memory:
        memory.import_memories(
            "["
            + ",".join(
                f'{{"id": "{uuid.uuid4()}", "content": "{name}", "tier": "hot",'
                f' "created_at": "{(now - timedelta(days=age)).isoformat()}"}}'
                for name, age in [("today", 0.1), ("last week", 6), ("last month", 30)]
            )
            + "]"
        )
    assert [m.content for m in loader.get_recent_memories("dev")] == ["today", "last week"]
    assert [m.content for m in loader.get_recent_memories("dev", 1)] == ["today"]
    assert [m.content for m in loader.get_recent_memories("dev", 60, limit=1)] == ["today"]
    with pytest.raises(InvalidRequest, match="days 0 must be a number > 0"):
        loader.get_recent_memories("dev", 0)
    # further back than the calendar goes: every memory is that recent
    for days in (float("inf"), 10**9):
        assert len(loader.get_recent_memories("dev", days)) == 3


def test_bad_layers_and_timeouts_are_named(store, loader):
    remember(store, "dev", "hot note", tier="hot")
    with pytest.raises(
        InvalidRequest, match=r"layers None must be a list of layers such as \(1, 2\)"
    ):
        loader.load_for_agent("dev", layers=None)
    assert [m.content for m in loader.load_for_agent("dev", layers=1).memories] == ["hot note"]
    assert [m.content for m in loader.load_for_agent("dev", layers="hot").memories] == ["hot note"]
    for timeout in ("5", True, float("nan")):
        with pytest.raises(InvalidRequest, match=f"timeout_ms {timeout!r} must be a number > 0"):
            MemoryLoader(store, PROJECT, timeout_ms=timeout)


def test_a_closed_loader_says_so(store):
    loader = MemoryLoader(store, PROJECT)
    loader.close()
    with pytest.raises(RuntimeError, match="^MemoryLoader is closed; create a new one"):
        loader.load_for_agent("dev")
    loader.close()


# -- privacy and egress, for every method ------------------------------------------------------

AGENTS = ["dev", "qa", "pm"]
SENSITIVITIES = ["public", "personal", "confidential", "secret"]


def every_method(loader, agent):
    """(method, memories) for each of the six loader methods."""
    yield (
        "load_for_agent",
        loader.load_for_agent(agent, layers=(1, 2, 3), sectors=list(MemoryType)).memories,
    )
    yield (
        "query_memories",
        loader.query_memories(agent, attention_min=0.0, sectors=list(MemoryType), limit=100),
    )
    yield "get_hot_memories", loader.get_hot_memories(agent, limit=100)
    yield "get_warm_memories", loader.get_warm_memories(agent, limit=100)
    yield "search_by_tags", loader.search_by_tags(agent, ["t"], limit=100)
    yield "get_recent_memories", loader.get_recent_memories(agent, 1, limit=100)


@settings(
    max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    memories=st.lists(
        st.tuples(
            st.sampled_from([*AGENTS, None]),
            st.sampled_from(SENSITIVITIES),
            st.sampled_from(["hot", "warm", "cold"]),
            st.sampled_from(list(MemoryType)),
        ),
        min_size=1,
        max_size=15,
    )
)
def test_no_agent_ever_receives_another_agents_or_a_non_public_memory(store, memories):
    project = f"p-{uuid.uuid4()}"
    owner: dict[str, str | None] = {}
    public: set[str] = set()
    for agent, sensitivity, tier, kind in memories:
        with MemoryLayer(store, Scope(project, agent_id=agent)) as memory:
            stored = memory.remember(
                f"note by {agent}", kind, tags=["t"], sensitivity=sensitivity, tier=tier
            )
        owner[stored.id] = agent
        if sensitivity == "public":
            public.add(stored.id)
    with MemoryLoader(store, project) as loader:
        for agent in AGENTS:
            for method, loaded in every_method(loader, agent):
                for memory in loaded:
                    assert owner[memory.id] in (agent, None), (method, memory)
                    assert memory.agent == (agent if owner[memory.id] else "shared"), method
                    assert memory.id in public, (method, memory)
            everything = loader.load_for_agent(
                agent, budget=100_000, layers=(1, 2, 3), sectors=list(MemoryType)
            )
            visible = {i for i in public if owner[i] in (agent, None)}
            assert {m.id for m in everything.memories} == visible


# -- degradation -------------------------------------------------------------------------------


class SlowStore(BaseStore):
    """A real store whose every call takes `delay` seconds (an unresponsive backend)."""

    capabilities = Capabilities(
        native_ttl=False, native_key_get=True, strong_consistency=True, max_query_top_k=100
    )

    def __init__(self, delay: float) -> None:
        self.delay = delay

    async def _put(self, scope, key, value, metadata, expires_at):
        await asyncio.sleep(self.delay)
        raise NotImplementedError  # never reached within a test's deadline

    async def _get(self, scope, key):
        await asyncio.sleep(self.delay)
        return None

    async def _query(self, scope, text, top_k, filters):
        await asyncio.sleep(self.delay)
        return []

    async def _list_scopes(self, project_id, cursor, limit):
        await asyncio.sleep(self.delay)
        raise NotImplementedError

    async def _delete_scope(self, scope):
        await asyncio.sleep(self.delay)
        return 0

    async def _delete(self, scope, key):
        await asyncio.sleep(self.delay)
        return False

    async def _list_items(self, scope, prefix, cursor, limit):
        await asyncio.sleep(self.delay)
        raise NotImplementedError


class BrokenStore(SlowStore):
    """A real store whose backend refuses every query."""

    async def _query(self, scope, text, top_k, filters):
        raise StoreUnavailable("backend at db.internal refused the connection; start it")


def test_a_hanging_store_times_out_at_500_ms_by_default():
    with MemoryLoader(SlowStore(delay=30), PROJECT) as loader:
        result = loader.load_for_agent("dev")
        assert result.memories == [] and result.text == ""
        assert result.metrics.status == "timeout"
        assert result.metrics.detail == "no answer within 500 ms"
        assert result.metadata.count == 0 and result.metadata.tokens_used == 0
        assert loader.get_hot_memories("dev") == []


def test_the_timeout_is_configurable():
    with MemoryLoader(SlowStore(delay=30), PROJECT, timeout_ms=20) as loader:
        assert loader.load_for_agent("dev").metrics.detail == "no answer within 20 ms"
    with MemoryLoader(SlowStore(delay=0.01), PROJECT, timeout_ms=None) as patient:
        assert patient.load_for_agent("dev").metrics.status == "ok"
    with pytest.raises(InvalidRequest, match="timeout_ms 0 must be a number > 0"):
        MemoryLoader(SlowStore(delay=0), PROJECT, timeout_ms=0)


def test_a_failing_store_is_an_error_status_not_an_exception(caplog):
    with MemoryLoader(BrokenStore(delay=0), PROJECT) as loader:
        result = loader.load_for_agent("dev")
        assert (result.memories, result.metrics.status) == ([], "error")
        assert result.metrics.detail == (
            "StoreUnavailable: backend at db.internal refused the connection; start it"
        )
        assert loader.search_by_tags("dev", ["x"]) == []
    assert "search_by_tags for agent 'dev' degraded to nothing: error" in caplog.text


def test_a_missing_store_is_an_error_status(tmp_path):
    with MemoryLoader(None, PROJECT) as loader:
        result = loader.load_for_agent("dev")
    assert (result.memories, result.metrics.status) == ([], "error")
    assert result.metrics.detail.startswith(
        "StoreUnavailable: no memory store configured for project 'desk'"
    )
    unusable = SQLiteMemoryStore(path=str(tmp_path))  # a folder: the block's store fails
    with MemoryLoader(unusable, PROJECT) as loader:
        assert loader.load_for_agent("dev").metrics.status == "error"


def test_a_memory_store_block_works_as_the_store(db, store):
    remember(store, "dev", "via block", tier="hot")
    with MemoryLoader(SQLiteMemoryStore(path=str(db)), PROJECT) as loader:
        assert [m.content for m in loader.load_for_agent("dev").memories] == ["via block"]


# -- async and the facade ----------------------------------------------------------------------


async def test_the_async_loader_is_the_implementation(store):
    await AsyncMemoryLayer(store, Scope(PROJECT, agent_id="dev")).remember("async hot", tier="hot")
    loader = AsyncMemoryLoader(store, PROJECT)
    result = await loader.load_for_agent("dev")
    assert [m.content for m in result.memories] == ["async hot"]
    blocking = MemoryLoader(store, PROJECT)
    with pytest.raises(RuntimeError, match=r"use `await AsyncMemoryLoader\(store, project_id\)"):
        blocking.load_for_agent("dev")
    blocking.close()


def test_the_blocking_loader_mirrors_the_six_methods():
    names = [
        "load_for_agent",
        "query_memories",
        "get_hot_memories",
        "get_warm_memories",
        "search_by_tags",
        "get_recent_memories",
    ]
    for name in names:
        blocking, coroutine = getattr(MemoryLoader, name), getattr(AsyncMemoryLoader, name)
        assert inspect.iscoroutinefunction(coroutine) and not inspect.iscoroutinefunction(blocking)
        assert inspect.signature(blocking) == inspect.signature(coroutine)
