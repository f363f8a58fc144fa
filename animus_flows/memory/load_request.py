"""What a memory load asks for (seed 002): the agent, the budget, the layers (tiers), the
sectors (memory types), and the loader's options from a workflow file, each checked with a
one-line error naming the value and the fix."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

from animus_flows.errors import InvalidRequest
from animus_flows.memory.records import MemoryTier, MemoryType
from animus_flows.protocol import utcnow

#: Seed 002's cognitive sectors per agent role; override per agent in the workflow file
#: (`agents.<id>.memory_loader.sectors`) or per call.
AGENT_SECTOR_PREFERENCES: dict[str, tuple[MemoryType, ...]] = {
    "dev": (MemoryType.PROCEDURAL, MemoryType.SEMANTIC),
    "qa": (MemoryType.REFLECTIVE, MemoryType.EPISODIC),
    "architect": (MemoryType.SEMANTIC, MemoryType.REFLECTIVE),
    "pm": (MemoryType.EPISODIC, MemoryType.SEMANTIC),
    "po": (MemoryType.EPISODIC, MemoryType.SEMANTIC),
    "sm": (MemoryType.PROCEDURAL, MemoryType.EPISODIC),
}

#: Seed 002's progressive-disclosure layers.
LAYER_TIERS = {1: MemoryTier.HOT, 2: MemoryTier.WARM, 3: MemoryTier.COLD}


@dataclass(frozen=True)
class LoadRequest:
    """One load: whose memories, within what budget, of which tiers and sectors, matching what."""

    agent_id: str
    budget: int
    tiers: tuple[MemoryTier, ...]
    sectors: tuple[MemoryType, ...] | None
    tags: tuple[str, ...] = ()
    match: Literal["all", "any"] = "all"
    text: str = ""
    since: datetime | None = None
    limit: int | None = None


def tiers_of(layers: Iterable[int | str | MemoryTier]) -> tuple[MemoryTier, ...]:
    if isinstance(layers, (int, str)):  # one layer (a MemoryTier is a str)
        layers = [layers]
    if not isinstance(layers, Iterable):
        raise InvalidRequest(
            f"layers {layers!r} must be a list of layers such as (1, 2) for HOT and WARM"
        )
    tiers: list[MemoryTier] = []
    for layer in layers:
        if isinstance(layer, int) and not isinstance(layer, bool) and layer in LAYER_TIERS:
            tier = LAYER_TIERS[layer]
        else:
            try:
                tier = MemoryTier(str(layer).lower())
            except ValueError:
                raise InvalidRequest(
                    f"layer {layer!r} is not 1 (hot), 2 (warm), 3 (cold) or a tier name"
                ) from None
        if tier not in tiers:
            tiers.append(tier)
    if not tiers:
        raise InvalidRequest("layers is empty; pass e.g. (1, 2) for HOT and WARM")
    return tuple(sorted(tiers, key=list(LAYER_TIERS.values()).index))


def sectors_of(sectors: Iterable[MemoryType | str] | None) -> tuple[MemoryType, ...] | None:
    if sectors is None:
        return None
    if isinstance(sectors, str):
        sectors = [sectors]
    try:
        chosen = tuple(dict.fromkeys(MemoryType(str(s).lower()) for s in sectors))
    except ValueError as exc:
        choices = ", ".join(t.value for t in MemoryType)
        raise InvalidRequest(f"sectors: {exc}; use {choices}") from None
    if not chosen:
        raise InvalidRequest("sectors is empty; pass None for every type")
    return chosen


def workflow_options(workflow: Any) -> dict[str, Any]:
    """Loader options from a workflow file: each agent's `memory_loader:` budget and sectors,
    and the file's token encoding."""
    settings = {agent: config.memory_loader for agent, config in workflow.agents.items()}
    return {
        "budgets": {a: s.budget for a, s in settings.items() if s.budget is not None},
        "sectors": {a: s.sectors for a, s in settings.items() if s.sectors},
        "encoding": workflow.budget.encoding,
    }


def days_ago(days: float) -> datetime:
    """The moment `days` days ago; further back than the calendar goes, its first moment."""
    try:
        return utcnow() - timedelta(days=days)
    except OverflowError:  # days=inf or 10**9: every memory is that recent
        return datetime.min.replace(tzinfo=UTC)


def counted(name: str, value: object, least: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < least:
        raise InvalidRequest(f"{name} {value!r} must be an integer >= {least}")
    return value
