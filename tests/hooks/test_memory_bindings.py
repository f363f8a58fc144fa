"""The memory_bindings hook, in-process: resolution, degradation, egress, disclosure, budgets."""

import asyncio
import time

import pytest
from helpers import COUNTER, phase_context, write_workflow

from animus_flows.budget import TokenBudget
from animus_flows.hooks import memory_bindings
from animus_flows.memory import AsyncMemoryLayer, AsyncMemoryLoader
from animus_flows.protocol import Capabilities, Scope
from animus_flows.stores import BaseStore, SQLiteStore

WORKFLOW = """
version: 1
project: desk
stores:
  local: {type: sqlite, path: memory.db}
budget: {flow_tokens: 5000, phase_tokens: 3000}
agents:
  analyst:
    memory_bindings:
      - plugin: local
        binding: market
        scope: {kind: agent}
        top_k: 8
        budget_tokens: 400
        inject_when: {phases: [research]}
workflows:
  research:
    memory_bindings:
      - plugin: local
        binding: playbook
        top_k: 5
        budget_tokens: 300
        memory_types: [procedural]
      - plugin: missing-plugin
        binding: wiki
    phases:
      - {id: research, agent: analyst, prompt: "EUR/USD rates hedging for {task_id}"}
      - {id: act, agent: analyst, prompt: "EUR/USD act"}
"""


async def seed(workflow, items):
    store = SQLiteStore(workflow.resolve_path("memory.db"))
    for scope, key, text, metadata in items:
        await store.put(scope, key, {"content": text}, metadata=metadata)
    await store.aclose()


@pytest.fixture
async def workflow(tmp_path):
    wf = write_workflow(tmp_path, WORKFLOW)
    agent, project = Scope("desk", agent_id="analyst"), Scope("desk")
    await seed(
        wf,
        [
            (agent, "hot-fx", "EUR/USD hot range note", {"tier": "hot"}),
            (agent, "warm-rates", "rates and EUR/USD warm note", {"tier": "warm"}),
            (agent, "untiered", "EUR/USD note without a tier", {}),
            (agent, "cold-old", "EUR/USD cold archive", {"tier": "cold"}),
            (
                agent,
                "secret-client",
                "EUR/USD client position",
                {"tier": "hot", "sensitivity": "confidential"},
            ),
            (agent, "typo-sensitivity", "EUR/USD typo", {"sensitivity": "pubic"}),
            (agent, "shouted-public", "EUR/USD shouted", {"sensitivity": "PUBLIC", "tier": "warm"}),
            (
                Scope("desk", agent_id="other-agent"),
                "other",
                "EUR/USD other agent",
                {"tier": "hot"},
            ),
            (project, "proc-hedge", "hedging procedure for EUR/USD", {"memory_type": "procedural"}),
            (project, "fact-hedge", "hedging fact about EUR/USD", {"memory_type": "semantic"}),
        ],
    )
    return wf


def events_by_binding(ctx):
    return {event.binding: event for event in ctx.audit.events()}


async def test_injects_only_public_items_hot_first_from_own_and_shared_scopes(workflow):
    ctx = phase_context(workflow, "research", "research")
    await memory_bindings(ctx)
    items = ctx.contract.memory_context.items
    keys = [item.key for item in items]
    assert set(keys) == {"hot-fx", "warm-rates", "untiered", "shouted-public", "proc-hedge"}
    assert keys[0] == "hot-fx"  # HOT before any WARM
    order = ["hot", "warm", None]  # untiered items (None) compete with WARM, after HOT
    ranks = [min(order.index(i.tier), 1) for i in items]
    assert ranks == sorted(ranks)
    assert {i.key: i.tier for i in items}["untiered"] is None
    text = ctx.contract.memory_context.text
    assert "client position" not in text and "other agent" not in text and "cold" not in text
    assert ctx.contract.memory_context.tokens == COUNTER.count(text)
    events = events_by_binding(ctx)
    assert events["market"].status == "ok" and events["market"].op == "query"
    assert events["market"].scope == {"project_id": "desk", "agent_id": "analyst", "task_id": None}
    assert events["playbook"].result_count == 1  # memory_types filter: procedural only
    assert events["wiki"].status == "unmatched"
    market_tokens = sum(i.tokens for i in items if i.binding == "market")
    assert events["market"].tokens_deducted == market_tokens
    assert ctx.budget.used("research", "memory") == ctx.contract.memory_context.tokens


async def test_an_item_without_a_memory_type_is_semantic_as_the_loader_reads_it(workflow):
    # `animus memory put` without metadata stores no memory_type: seed 003's default, SEMANTIC
    await seed(workflow, [(Scope("desk"), "untyped-hedge", "hedging note on EUR/USD", {})])
    text = WORKFLOW.replace("memory_types: [procedural]", "memory_types: [semantic]")
    ctx = phase_context(
        write_workflow(workflow.base_dir, text, "typed.yaml"), "research", "research"
    )
    await memory_bindings(ctx)
    playbook = {
        item.key for item in ctx.contract.memory_context.items if item.binding == "playbook"
    }
    assert playbook == {"fact-hedge", "untyped-hedge"}
    store = SQLiteStore(workflow.resolve_path("memory.db"))
    loaded = await AsyncMemoryLoader(store, "desk").load_for_agent("analyst", sectors=["semantic"])
    await store.aclose()
    assert "untyped-hedge" in {memory.id for memory in loaded.memories}


async def test_reserved_values_spelled_by_other_tools_match_in_any_case(workflow):
    # `tier: HOT` reads as hot everywhere (tier_of); the store's filter must not drop it first
    await seed(
        workflow,
        [(Scope("desk"), "loud-hedge", "hedging note on EUR/USD", {"tier": "HOT"})],
    )
    text = WORKFLOW.replace("memory_types: [procedural]", "memory_types: [semantic]")
    ctx = phase_context(
        write_workflow(workflow.base_dir, text, "typed.yaml"), "research", "research"
    )
    await memory_bindings(ctx)
    injected = {item.key: item.tier for item in ctx.contract.memory_context.items}
    assert injected["loud-hedge"] == "hot"


async def test_inject_when_limits_agent_bindings_to_listed_phases(workflow):
    ctx = phase_context(workflow, "research", "act")
    await memory_bindings(ctx)
    assert {e.binding for e in ctx.audit.events()} == {"playbook", "wiki"}


async def test_cold_is_disclosed_only_when_listed(workflow):
    text = WORKFLOW.replace(
        "inject_when: {phases: [research]}",
        "inject_when: {phases: [research]}\n        tiers: [hot, warm, cold]",
    )
    wf = write_workflow(workflow.base_dir, text, "cold.yaml")
    ctx = phase_context(wf, "research", "research")
    await memory_bindings(ctx)
    market = [item for item in ctx.contract.memory_context.items if item.binding == "market"]
    assert market[-1].key == "cold-old" and market[-1].tier == "cold"


async def test_an_older_version_of_a_memory_is_never_injected(workflow):
    store = SQLiteStore(workflow.resolve_path("memory.db"))
    memory = AsyncMemoryLayer(store, Scope("desk", agent_id="analyst"))
    v1 = await memory.remember("EUR/USD limit is 5m", tier="cold")
    v2 = await memory.update_with_version(v1.id, content="EUR/USD limit is 7m")
    await store.aclose()
    text = WORKFLOW.replace(
        "inject_when: {phases: [research]}",
        "inject_when: {phases: [research]}\n        tiers: [hot, warm, cold]",
    )
    ctx = phase_context(
        write_workflow(workflow.base_dir, text, "cold.yaml"), "research", "research"
    )
    await memory_bindings(ctx)
    keys = [item.key for item in ctx.contract.memory_context.items if item.binding == "market"]
    assert v2.id in keys and v1.id not in keys
    assert "1 refused: superseded by a newer version" in events_by_binding(ctx)["market"].detail


async def test_budgets_cap_the_injected_text(workflow):
    budget = TokenBudget(flow_tokens=5000, phase_tokens=40)
    ctx = phase_context(workflow, "research", "research", budget=budget)
    budget.deduct("research", "prompt", 10)
    await memory_bindings(ctx)
    assert ctx.contract.memory_context.tokens <= 30
    assert budget.used("research") <= 40
    assert "over the phase budget" in events_by_binding(ctx)["market"].detail


@pytest.mark.parametrize(
    "caps,spent",
    [
        ({"flow_tokens": 0}, "the flow budget"),
        ({"flow_tokens": 5000, "phase_tokens": 0}, "the phase cap"),
        ({"flow_tokens": 0, "phase_tokens": 0}, "the flow budget"),
    ],
)
async def test_a_spent_budget_injects_nothing_queries_nothing_and_says_so(workflow, caps, spent):
    # a store that fails when queried: its binding would be audited as an error
    text = WORKFLOW.replace("- plugin: missing-plugin", "- plugin: broken")
    wf = write_workflow(workflow.base_dir, text, "broken.yaml")
    ctx = phase_context(wf, "research", "research", budget=TokenBudget(**caps))
    ctx.plugins.register("broken", SlowStore(fail=RuntimeError("queried")))
    await memory_bindings(ctx)
    assert ctx.contract.memory_context.items == [] and ctx.contract.memory_context.text == ""
    events = events_by_binding(ctx)
    assert set(events) == {"market", "playbook", "wiki"}
    assert {(e.op, e.status, e.result_count, e.detail) for e in events.values()} == {
        ("query", "ok", 0, f"not queried: {spent} is spent")
    }
    assert ctx.budget.used() == 0


async def test_a_budget_with_room_left_still_queries(workflow):
    text = WORKFLOW.replace("- plugin: missing-plugin", "- plugin: broken")
    wf = write_workflow(workflow.base_dir, text, "broken.yaml")
    budget = TokenBudget(flow_tokens=5000, phase_tokens=10)
    budget.deduct("research", "prompt", 9)
    ctx = phase_context(wf, "research", "research", budget=budget)
    ctx.plugins.register("broken", SlowStore(fail=RuntimeError("queried")))
    await memory_bindings(ctx)
    assert events_by_binding(ctx)["wiki"].status == "error"


class SlowStore(BaseStore):
    capabilities = Capabilities(False, False, True, 50)

    def __init__(self, delay: float = 30.0, fail: Exception | None = None) -> None:
        self.delay, self.fail = delay, fail

    async def _query(self, scope, text, top_k, filters):
        if self.fail is not None:
            raise self.fail
        await asyncio.sleep(self.delay)
        return []

    async def _put(self, *args):
        raise NotImplementedError

    _get = _list_scopes = _delete_scope = _delete = _list_items = _put


@pytest.mark.parametrize(
    "store,status,detail",
    [
        (SlowStore(delay=30), "timeout", "no answer within 100 ms; went on without it"),
        (SlowStore(fail=RuntimeError("plugin exploded")), "error", "RuntimeError: plugin exploded"),
    ],
)
async def test_a_hanging_or_failing_store_degrades_only_its_binding(
    workflow, store, status, detail
):
    text = WORKFLOW.replace(
        "- plugin: missing-plugin\n        binding: wiki",
        "- plugin: flaky\n        binding: wiki\n        timeout_ms: 100",
    )
    wf = write_workflow(workflow.base_dir, text, "flaky.yaml")
    ctx = phase_context(wf, "research", "research")
    ctx.plugins.register("flaky", store)
    started = time.perf_counter()
    await memory_bindings(ctx)
    assert time.perf_counter() - started < 2.0
    events = events_by_binding(ctx)
    assert events["wiki"].status == status and detail in events["wiki"].detail
    assert events["market"].status == "ok"
    assert ctx.contract.memory_context.items


async def test_top_k_is_clamped_to_the_store_and_audited(workflow):
    text = WORKFLOW.replace(
        "- plugin: missing-plugin\n        binding: wiki",
        "- plugin: small\n        binding: wiki\n        top_k: 500",
    )
    wf = write_workflow(workflow.base_dir, text, "small.yaml")
    ctx = phase_context(wf, "research", "research")
    ctx.plugins.register("small", SlowStore(delay=0))
    await memory_bindings(ctx)
    assert "top_k 500 clamped to 50" in events_by_binding(ctx)["wiki"].detail


async def test_key_strategy_gets_the_templated_key(workflow):
    text = WORKFLOW.replace(
        "- plugin: missing-plugin\n        binding: wiki",
        "- plugin: local\n        binding: brief\n        scope: {kind: task}\n"
        '        query_strategy: key\n        key: "{task_id}/brief"',
    )
    wf = write_workflow(workflow.base_dir, text, "key.yaml")
    await seed(wf, [(Scope("desk", task_id="T-9"), "T-9/brief", "the brief for T-9", {})])
    ctx = phase_context(wf, "research", "research", task_id="T-9")
    await memory_bindings(ctx)
    brief = [i for i in ctx.contract.memory_context.items if i.binding == "brief"]
    assert [(i.key, i.score) for i in brief] == [("T-9/brief", 1.0)]
    assert events_by_binding(ctx)["brief"].op == "get"


async def test_a_task_binding_without_a_task_id_is_an_audited_error(workflow):
    text = WORKFLOW.replace(
        "- plugin: missing-plugin\n        binding: wiki",
        "- plugin: local\n        binding: per-task\n        scope: {kind: task}",
    )
    wf = write_workflow(workflow.base_dir, text, "task.yaml")
    ctx = phase_context(wf, "research", "research", task_id=None)
    await memory_bindings(ctx)
    event = events_by_binding(ctx)["per-task"]
    assert event.status == "error" and "no task_id" in event.detail


async def test_read_false_and_strategy_none_are_not_queried(workflow):
    text = WORKFLOW.replace("top_k: 5\n", "top_k: 5\n        read: false\n").replace(
        "- plugin: missing-plugin\n        binding: wiki",
        "- plugin: local\n        binding: by-mcp\n        query_strategy: none",
    )
    wf = write_workflow(workflow.base_dir, text, "none.yaml")
    ctx = phase_context(wf, "research", "research")
    await memory_bindings(ctx)
    assert {e.binding for e in ctx.audit.events()} == {"market"}
