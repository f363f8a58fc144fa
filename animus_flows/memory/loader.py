"""Seed 002's memory loader: what an agent knows when it starts, within a token budget.

An agent sees its own scope `Scope(project_id, agent_id=X)` and the shared project scope
`Scope(project_id)`, never another agent's: the two scopes are the only ones ever queried, so
privacy holds by construction. Loaded memories go into prompts, so only PUBLIC ones are loaded
(`disclosure.py`, as on every egress path). Disclosure and budgeting are `budget.pack`, the
same code the `memory_bindings` hook runs: HOT first, WARM only while less than 70% of the
budget is used, COLD only when asked for, never over the budget. A missing, failing or slow
store degrades to no memories with a status, through `degrade.py`.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal

from animus_flows.budget import shared_counter
from animus_flows.errors import InvalidRequest, StoreUnavailable
from animus_flows.memory.layer import SHARED_AGENT, resolve_store
from animus_flows.memory.load_request import (
    AGENT_SECTOR_PREFERENCES,
    LAYER_TIERS,
    LoadRequest,
    counted,
    days_ago,
    sectors_of,
    tiers_of,
    workflow_options,
)
from animus_flows.memory.load_result import LoadedMemory, LoadMetadata, LoadMetrics, LoadResult
from animus_flows.memory.records import MemoryTier, MemoryType, normalize_tags
from animus_flows.memory.store_form import memory_type_of, stored_time, tags_of
from animus_flows.protocol import JSON, MemoryStore, QueryHit, Scope
from animus_flows.redaction import get_logger
from animus_flows.retrieval.degrade import DEFAULT_TIMEOUT_MS, Status, run_degraded
from animus_flows.retrieval.disclosure import ReadRules, tier_of
from animus_flows.retrieval.service import Source, read
from animus_flows.stores.sync import LoopRunner, blocking_method

logger = get_logger(__name__)

DEFAULT_BUDGET = 2000
#: How the project scope's memories are reported (seed 002's `agent === 'shared'`).
SHARED = SHARED_AGENT

# The single binding every loaded memory is packed under: one budget, one 70% gate.
_BINDING = "memory"


@dataclass(frozen=True)
class _Gathered:
    """What one load found, or why it found nothing (a store that failed or timed out)."""

    memories: list[LoadedMemory]
    text: str
    tokens: int
    status: Status = "ok"
    detail: str = ""


class AsyncMemoryLoader:
    """Seed 002's memory loader for one project; every method is a coroutine.

    Args:
        store: a `MemoryStore`, a memory-store Block, or None (no store: every load degrades
            to no memories with status `error`).
        project_id: the project whose scopes are read.
        budgets: token budget per agent id (seed 002's `memoryBudget`); default 2000.
        sectors: memory types per agent id, replacing `AGENT_SECTOR_PREFERENCES` for those
            agents (None: every type); agents in neither get every type.
        timeout_ms: deadline of one load (seed 002's 500 ms safeguard); None for none.
        encoding: the tiktoken encoding that counts tokens.

    Example:
        ```python
        from animus_flows.memory import AsyncMemoryLoader
        from animus_flows.stores import SQLiteStore

        loader = AsyncMemoryLoader(SQLiteStore(".animus/memory.db"), "trade-desk")
        result = await loader.load_for_agent("dev", budget=2000)
        print(result.metadata.tokens_used, result.metrics.status, result.text)
        ```
    """

    def __init__(
        self,
        store: object,
        project_id: str,
        *,
        budgets: Mapping[str, int] | None = None,
        sectors: Mapping[str, Sequence[MemoryType | str]] | None = None,
        timeout_ms: float | None = DEFAULT_TIMEOUT_MS,
        encoding: str = "cl100k_base",
    ) -> None:
        Scope(project_id)  # validates the id
        self.project_id = project_id
        self._store_source = store
        self._store: MemoryStore | None = None
        self.budgets = {agent: counted("budget", b, 0) for agent, b in (budgets or {}).items()}
        self.sectors: dict[str, tuple[MemoryType, ...]] = dict(AGENT_SECTOR_PREFERENCES)
        for agent, chosen in (sectors or {}).items():
            self.sectors[agent] = sectors_of(chosen)  # type: ignore[assignment]
        if timeout_ms is not None and (
            isinstance(timeout_ms, bool)
            or not isinstance(timeout_ms, (int, float))
            or not timeout_ms > 0
        ):
            raise InvalidRequest(f"timeout_ms {timeout_ms!r} must be a number > 0, or None")
        self.timeout_ms = timeout_ms
        self.counter = shared_counter(encoding)

    @classmethod
    def from_workflow(cls, workflow: Any, store: object, **options: Any) -> AsyncMemoryLoader:
        """A loader for a workflow file's project, with each agent's `memory_loader:` budget
        and sectors and the file's token encoding."""
        return cls(store, workflow.project_id, **{**workflow_options(workflow), **options})

    def budget_for(self, agent_id: str) -> int:
        """The agent's configured budget, else 2000."""
        return self.budgets.get(agent_id, DEFAULT_BUDGET)

    def sectors_for(self, agent_id: str) -> tuple[MemoryType, ...] | None:
        """The memory types loaded for the agent; None means every type."""
        return self.sectors.get(agent_id)

    # -- the six methods ---------------------------------------------------------------------

    async def load_for_agent(
        self,
        agent_id: str,
        budget: int | None = None,
        layers: Iterable[int | str | MemoryTier] = (1, 2),
        *,
        sectors: Iterable[MemoryType | str] | None = None,
    ) -> LoadResult:
        """Load what `agent_id` should know: its own and the shared memories, PUBLIC only,
        HOT first, WARM while under 70% of the budget, never over it.

        Args:
            agent_id: the agent; never "shared" (that names the project scope).
            budget: tokens; default the agent's `memory_loader.budget`, else 2000.
            layers: seed 002's layers, 1 = HOT, 2 = WARM, 3 = COLD (tier names work too).
            sectors: memory types to load; default the agent's preferences.

        Never raises for a store problem: `metrics.status` says `timeout` or `error` and the
        result holds no memories.
        """
        return await self._load(
            LoadRequest(
                self._agent(agent_id),
                self._budget(agent_id, budget),
                tiers_of(layers),
                self.sectors_for(agent_id) if sectors is None else sectors_of(sectors),
            )
        )

    async def query_memories(
        self,
        agent_id: str,
        *,
        token_budget: int | None = None,
        attention_min: float = 0.3,
        sectors: Iterable[MemoryType | str] | None = None,
        tags: Sequence[str] | None = None,
        tier: MemoryTier | str | None = None,
        layer: int | None = None,
        limit: int = 10,
        text: str = "",
    ) -> list[LoadedMemory]:
        """Memories for `agent_id` with seed 002's filters, within a token budget.

        `attention_min` picks tiers as seed 002's attention scores do: 0.7 or more HOT only,
        0.3 or more HOT and WARM (the default), below that COLD too. `tier` or `layer` name one
        tier instead. `sectors` overrides the agent's preferences; `tags` must all match;
        `text` ranks by the store's relevance instead of recency.
        """
        if tier is not None:
            tiers = tiers_of([tier])
        elif layer is not None:
            tiers = tiers_of([layer])
        elif isinstance(attention_min, bool) or not isinstance(attention_min, (int, float)):
            raise InvalidRequest(f"attention_min {attention_min!r} must be a number")
        else:
            # seed 002: HOT above 0.7 attention, WARM from 0.3, COLD below
            tiers = tiers_of(
                [1] if attention_min >= 0.7 else [1, 2] if attention_min >= 0.3 else [1, 2, 3]
            )
        if not isinstance(text, str):
            raise InvalidRequest(f"text {text!r} must be a string")
        result = await self._load(
            LoadRequest(
                self._agent(agent_id),
                self._budget(agent_id, token_budget),
                tiers,
                self.sectors_for(agent_id) if sectors is None else sectors_of(sectors),
                tags=tuple(normalize_tags(tags)),
                text=text,
                limit=counted("limit", limit, 1),
            )
        )
        return self._memories(result, "query_memories")

    async def get_hot_memories(
        self, agent_id: str, *, limit: int = 5, token_budget: int | None = None
    ) -> list[LoadedMemory]:
        """HOT memories only (seed 002's attention > 0.7)."""
        return await self.query_memories(
            agent_id, tier=MemoryTier.HOT, limit=limit, token_budget=token_budget
        )

    async def get_warm_memories(
        self, agent_id: str, *, limit: int = 10, token_budget: int | None = None
    ) -> list[LoadedMemory]:
        """WARM memories only (seed 002's 0.3 <= attention < 0.7); as everywhere, WARM stops
        once 70% of the budget is used."""
        return await self.query_memories(
            agent_id, tier=MemoryTier.WARM, limit=limit, token_budget=token_budget
        )

    async def search_by_tags(
        self,
        agent_id: str,
        tags: Sequence[str],
        *,
        limit: int = 5,
        token_budget: int | None = None,
        match: Literal["all", "any"] = "all",
    ) -> list[LoadedMemory]:
        """HOT and WARM memories carrying all of `tags` (`match="any"`: at least one)."""
        wanted = tuple(normalize_tags(tags))
        if not wanted:
            raise InvalidRequest("search_by_tags needs at least one tag")
        if match not in ("all", "any"):
            raise InvalidRequest(f"match {match!r} must be 'all' or 'any'")
        result = await self._load(
            LoadRequest(
                self._agent(agent_id),
                self._budget(agent_id, token_budget),
                (MemoryTier.HOT, MemoryTier.WARM),
                self.sectors_for(agent_id),
                tags=wanted,
                match=match,
                limit=counted("limit", limit, 1),
            )
        )
        return self._memories(result, "search_by_tags")

    async def get_recent_memories(
        self,
        agent_id: str,
        days: float = 7,
        *,
        limit: int = 10,
        token_budget: int | None = None,
    ) -> list[LoadedMemory]:
        """HOT and WARM memories created in the last `days` days, newest first."""
        if isinstance(days, bool) or not isinstance(days, (int, float)) or not days > 0:
            raise InvalidRequest(f"days {days!r} must be a number > 0")
        result = await self._load(
            LoadRequest(
                self._agent(agent_id),
                self._budget(agent_id, token_budget),
                (MemoryTier.HOT, MemoryTier.WARM),
                self.sectors_for(agent_id),
                since=days_ago(days),
                limit=counted("limit", limit, 1),
            )
        )
        memories = self._memories(result, "get_recent_memories")
        return sorted(memories, key=lambda m: m.created_at or datetime.min, reverse=True)

    # -- the one implementation --------------------------------------------------------------

    def _agent(self, agent_id: object) -> str:
        if not isinstance(agent_id, str) or not agent_id:
            raise InvalidRequest(f"agent_id {agent_id!r} must be a non-empty string")
        if agent_id == SHARED:
            raise InvalidRequest(
                f"agent_id {SHARED!r} names the shared project scope, not an agent; "
                "load for a real agent id"
            )
        Scope(self.project_id, agent_id=agent_id)  # validates the id
        return agent_id

    def _budget(self, agent_id: str, budget: object) -> int:
        return self.budget_for(agent_id) if budget is None else counted("budget", budget, 0)

    def _memories(self, result: LoadResult, method: str) -> list[LoadedMemory]:
        if result.metrics.status != "ok":
            logger.warning(
                "memory loader %s for agent %r degraded to nothing: %s (%s)",
                method,
                result.metadata.agent,
                result.metrics.status,
                result.metrics.detail,
            )
        return result.memories

    async def _load(self, request: LoadRequest) -> LoadResult:
        outcome = await run_degraded(
            lambda: self._gather_and_pack(request), timeout_ms=self.timeout_ms, fallback=None
        )
        gathered = outcome.value or _Gathered([], "", 0, outcome.status, outcome.detail)
        memories = gathered.memories
        tiers = tuple(t.value for t in LAYER_TIERS.values() if any(m.tier is t for m in memories))
        return LoadResult(
            memories,
            LoadMetadata(request.agent_id, len(memories), gathered.tokens, request.budget, tiers),
            LoadMetrics(
                gathered.status,
                outcome.duration_ms,
                outcome.started_at,
                outcome.ended_at,
                gathered.detail,
            ),
            gathered.text,
        )

    def _resolve(self) -> MemoryStore:
        if self._store is None:
            if self._store_source is None:
                raise StoreUnavailable(
                    f"no memory store configured for project {self.project_id!r}; pass a "
                    "store or a memory-store block to the loader"
                )
            self._store = resolve_store(self._store_source)
        return self._store

    async def _gather_and_pack(self, request: LoadRequest) -> _Gathered:
        store = self._resolve()
        created: dict[tuple[Scope, str], datetime | None] = {}

        # (a forgotten memory is deleted; the tombstones older layers left are SECRET, which
        # the egress rule of `read` never loads)
        async def refuse(hit: QueryHit, *, scope: Scope) -> str | None:
            if request.tags and not self._tags_match(tags_of(hit.metadata), request):
                return "tags do not match"
            if request.since is not None:
                when = stored_time(hit.value, "created_at") or await self._created_at(
                    store, scope, hit.key
                )
                created[scope, hit.key] = when
                if when is None or when < request.since:
                    return "older than asked"
            return None

        filters: dict[str, JSON] = {}
        if request.tags:
            filters["tags"] = list(request.tags) if request.match == "any" else request.tags[0]
        rules = [
            ReadRules((tier.value,), tuple(request.sectors) if request.sectors else None)
            for tier in request.tiers
        ]
        sources = [
            Source(
                _BINDING,
                store,
                scope,
                text=request.text,
                rules=rule,
                budget_tokens=request.budget,
                timeout_ms=None,  # the whole load has one deadline (`_load`)
                filters=filters,
                refuse=functools.partial(refuse, scope=scope),
                shown_key=functools.partial(_shown_key, scope.agent_id or SHARED),
            )
            for scope in (Scope(self.project_id, agent_id=request.agent_id), Scope(self.project_id))
            for rule in rules
        ]
        # recent memories are chosen newest first, which the packing order does not know
        recent = request.since is not None
        reading = await read(sources, self.counter, limit=None if recent else request.limit)
        for fetched in reading.fetches:  # one store: a query that failed fails the load
            if fetched.status != "ok":
                return _Gathered([], "", 0, fetched.status, "; ".join(fetched.notes))
        memories = []
        for packed in reading.packed.selected:
            hit: QueryHit = packed.candidate.metadata["hit"]
            scope: Scope = packed.candidate.metadata["source"].scope
            memories.append(
                LoadedMemory(
                    id=hit.key,
                    content=packed.candidate.text,
                    memory_type=memory_type_of(hit.metadata),
                    tier=MemoryTier(tier_of(hit.metadata)),
                    agent=scope.agent_id or SHARED,
                    score=packed.candidate.score,
                    tokens=packed.tokens,
                    tags=tuple(tags_of(hit.metadata)),
                    created_at=created.get((scope, hit.key))
                    or stored_time(hit.value, "created_at"),
                )
            )
        blocks = [packed.block for packed in reading.packed.selected]
        if recent:
            order = sorted(
                range(len(memories)),
                key=lambda n: memories[n].created_at or datetime.min.replace(tzinfo=UTC),
                reverse=True,
            )[: request.limit]
            memories, blocks = [memories[n] for n in order], [blocks[n] for n in order]
        # a text's count is the sum of its blocks' (budget.render_block)
        return _Gathered(memories, "".join(blocks), sum(m.tokens for m in memories))

    @staticmethod
    def _tags_match(tags: list[str], request: LoadRequest) -> bool:
        if request.match == "any":
            return any(tag in tags for tag in request.tags)
        return all(tag in tags for tag in request.tags)

    @staticmethod
    async def _created_at(store: MemoryStore, scope: Scope, key: str) -> datetime | None:
        item = await store.get(scope, key)  # items other tools wrote carry no record times
        return None if item is None else item.created_at


def _shown_key(agent: str, key: str) -> str:
    """How a loaded memory is labelled in the text: whose it is and its id's start."""
    return f"{agent}/{key[:8]}"


def _blocking(name: str) -> Any:
    return blocking_method(
        name,
        getattr(AsyncMemoryLoader, name),
        await_form=f"await AsyncMemoryLoader(store, project_id).{name}(...)",
    )


class MemoryLoader:
    """The blocking memory loader: `AsyncMemoryLoader`'s methods, run to completion.

    Arguments are those of `AsyncMemoryLoader`; inside a running event loop use that instead.

    Example:
        ```python
        from animus_flows.memory import MemoryLoader
        from animus_flows.stores import SQLiteStore

        loader = MemoryLoader(SQLiteStore(".animus/memory.db"), "trade-desk")
        result = loader.load_for_agent("dev", budget=2000, layers=(1, 2))
        for memory in result.memories:
            print(memory.agent, memory.tier, memory.content)
        ```
    """

    def __init__(self, store: object, project_id: str, **options: Any) -> None:
        self._async = AsyncMemoryLoader(store, project_id, **options)
        self._loop = LoopRunner("MemoryLoader")

    @classmethod
    def from_workflow(cls, workflow: Any, store: object, **options: Any) -> MemoryLoader:
        """See `AsyncMemoryLoader.from_workflow`."""
        return cls(store, workflow.project_id, **{**workflow_options(workflow), **options})

    load_for_agent = _blocking("load_for_agent")
    query_memories = _blocking("query_memories")
    get_hot_memories = _blocking("get_hot_memories")
    get_warm_memories = _blocking("get_warm_memories")
    search_by_tags = _blocking("search_by_tags")
    get_recent_memories = _blocking("get_recent_memories")

    @property
    def project_id(self) -> str:
        return self._async.project_id

    def budget_for(self, agent_id: str) -> int:
        return self._async.budget_for(agent_id)

    def sectors_for(self, agent_id: str) -> tuple[MemoryType, ...] | None:
        return self._async.sectors_for(agent_id)

    def close(self) -> None:
        """Release the facade's event loop (the store stays the caller's)."""
        self._loop.close()

    def __enter__(self) -> MemoryLoader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
