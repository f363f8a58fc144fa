"""What `MemoryLoader.load_for_agent` and its siblings return: seed 002's `LoadResult`."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from animus_flows.memory.records import MemoryTier, MemoryType
from animus_flows.retrieval.degrade import Status


@dataclass(frozen=True)
class LoadedMemory:
    """One memory as handed to an agent: text, sector, tier, origin and cost."""

    id: str
    content: str
    memory_type: MemoryType
    tier: MemoryTier
    agent: str  # the agent's own id, or "shared" for the project scope
    score: float  # the store's relevance score (1.0 for every memory of a plain listing)
    tokens: int  # tokens of this memory's block in `LoadResult.text`
    tags: tuple[str, ...] = ()
    created_at: datetime | None = None

    @property
    def sector(self) -> str:
        """Seed 002's name for the memory type."""
        return self.memory_type.value


@dataclass(frozen=True)
class LoadMetadata:
    """What a load holds: count, tokens against the budget, tiers present, for whom."""

    agent: str
    count: int
    tokens_used: int
    budget: int
    tiers: tuple[str, ...]


@dataclass(frozen=True)
class LoadMetrics:
    """How a load went: `ok`, `timeout` or `error`, and how long it took."""

    status: Status
    duration_ms: float
    started_at: datetime
    ended_at: datetime
    detail: str = ""


@dataclass(frozen=True)
class LoadResult:
    """Seed 002's result: `memories`, `metadata`, `metrics`, plus `text`, the rendered
    memories exactly as counted (`metadata.tokens_used` tokens, never above the budget)."""

    memories: list[LoadedMemory]
    metadata: LoadMetadata
    metrics: LoadMetrics
    text: str = ""
