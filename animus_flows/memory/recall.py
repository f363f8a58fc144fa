"""Recall: the store filters and the rule for one recall's criteria, the search that asks the
store for more while the rule drops hits, and the access a recall counts.

Stores filter what they can, and loosely (a missing key, a spelling); the predicate that
`criteria` returns is the rule, rechecked on every memory.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime

from animus_flows.errors import InvalidRequest
from animus_flows.memory.records import (
    Memory,
    MemoryTier,
    MemoryType,
    Sensitivity,
    choice,
    normalize_tags,
)
from animus_flows.memory.tiers import TierPolicy, after_access
from animus_flows.memory.versions import drop_superseded
from animus_flows.memory.writes import ScopedStore
from animus_flows.protocol import JSON
from animus_flows.retrieval.disclosure import EGRESS_FILTER, metadata_filter

#: The score a memory gets in `recall` for being linked to an entity the query names.
ENTITY_MATCH_SCORE = 0.5

Found = list[tuple[Memory, float]]


def check_number(name: str, value: object, low: float, high: float) -> float:
    """`value` as a float when it is a number from `low` to `high` (no bool, no NaN)."""
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or math.isnan(value)
        or not low <= value <= high
    ):
        raise InvalidRequest(f"{name} {value!r} must be a number from {low} to {high}")
    return float(value)


def criteria(
    memory_type: MemoryType | str | None,
    tags: Sequence[str] | None,
    source: str | None,
    min_confidence: float,
    allowed_tiers: Iterable[Sensitivity | str] | None,
    tier: MemoryTier | str | None,
) -> tuple[dict[str, JSON], Callable[[Memory], bool]]:
    """Store filters for what a store can filter, and a predicate rechecking everything."""
    filters: dict[str, JSON] = {}
    kind = None if memory_type is None else choice(MemoryType, memory_type, "memory_type")
    wanted_tier = None if tier is None else choice(MemoryTier, tier, "tier")
    required = normalize_tags(tags)
    check_number("min_confidence", min_confidence, 0.0, 1.0)
    if source is not None and (not isinstance(source, str) or not source):
        raise InvalidRequest(f"source {source!r} must be a non-empty string such as 'stated'")
    sensitivities = None
    if allowed_tiers is not None:
        if isinstance(allowed_tiers, str):
            allowed_tiers = [allowed_tiers]
        sensitivities = {choice(Sensitivity, s, "allowed_tiers") for s in allowed_tiers}
        if sensitivities == {Sensitivity.PUBLIC}:
            filters.update(EGRESS_FILTER)
        else:
            filters["sensitivity"] = metadata_filter("sensitivity", sensitivities)
    if kind is not None:
        filters["memory_type"] = metadata_filter("memory_type", [kind])
    if wanted_tier is not None:
        filters["tier"] = metadata_filter("tier", [wanted_tier])
    if source is not None:
        filters["source"] = metadata_filter("source", [source])
    if required:
        filters["tags"] = required[0]

    def wanted(memory: Memory) -> bool:
        return (
            (kind is None or memory.memory_type is kind)
            and (wanted_tier is None or memory.tier is wanted_tier)
            and (source is None or memory.source == source)
            and (sensitivities is None or memory.sensitivity in sensitivities)
            and memory.confidence >= min_confidence
            and all(tag in memory.tags for tag in required)
        )

    return filters, wanted


async def search(
    scoped: ScopedStore,
    text: str,
    filters: dict[str, JSON],
    want: int,
    wanted: Callable[[Memory], bool],
) -> Found:
    """Up to `want` current memories matching, best first, asking the store for more while
    filtering drops hits (up to its `max_query_top_k`)."""
    cap = scoped.cap
    top_k = min(cap, max(2 * want, 20))
    while True:
        hits = await scoped.store.query(scoped.scope, text, top_k=top_k, filters=filters)
        found = [(m, s) for m, s in await scoped.decode(hits) if wanted(m)]
        found = await drop_superseded(scoped, found)
        if len(found) >= want or len(hits) < top_k or top_k >= cap:
            return found[:want]
        top_k = min(cap, top_k * 4)


def merge(first: Found, second: Found) -> Found:
    """Both lists of found memories as one, best score per memory, best first."""
    best: dict[str, tuple[Memory, float]] = {}
    for memory, score in [*first, *second]:
        if memory.id not in best or score > best[memory.id][1]:
            best[memory.id] = (memory, score)
    order = {memory.id: n for n, (memory, _) in enumerate([*first, *second])}
    return sorted(best.values(), key=lambda pair: (-pair[1], order[pair[0].id]))


async def touch(
    scoped: ScopedStore, memories: list[Memory], policy: TierPolicy, now: datetime
) -> list[Memory]:
    """Count a recall: bump `access_count`, set `last_accessed`, move toward HOT, write them.

    Bookkeeping, not a change of content: a failure part-way leaves some counted."""
    for memory in memories:
        after_access(memory, policy, now)
    await scoped.write(memories)
    return memories
