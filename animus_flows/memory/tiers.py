"""Temperature tiers: when a memory heats up or cools down. Pure rules, no store.

The layer applies them on recall (`after_access`), on `promote_memory`/`demote_memory`
(`shifted`) and in `run_tier_review` (`reviewed`).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from animus_flows.errors import InvalidRequest
from animus_flows.memory.records import TIER_LADDER, Memory, MemoryTier
from animus_flows.protocol import check_count


@dataclass(frozen=True)
class TierPolicy:
    """When memories move between temperature tiers.

    HOT memories idle (not recalled, not modified) for longer than `hot_idle` cool to WARM, WARM
    ones idle longer than `warm_idle` to COLD. A WARM memory recalled `promote_after` times or
    more, last within `hot_idle`, heats to HOT; a COLD one recalled within `hot_idle`, to WARM.
    """

    hot_idle: timedelta = timedelta(days=1)
    warm_idle: timedelta = timedelta(days=30)
    promote_after: int = 3

    def __post_init__(self) -> None:
        for name in ("hot_idle", "warm_idle"):
            value = getattr(self, name)
            if not isinstance(value, timedelta) or value <= timedelta(0):
                raise InvalidRequest(
                    f"tier policy {name} {value!r} must be a positive timedelta such as "
                    "timedelta(days=1)"
                )
        check_count("promote_after", self.promote_after)


def shifted(tier: MemoryTier, step: int) -> MemoryTier | None:
    """The tier `step` rungs hotter (negative: colder), or None past HOT or COLD."""
    rung = TIER_LADDER.index(tier) + step
    return TIER_LADDER[rung] if 0 <= rung < len(TIER_LADDER) else None


def after_access(memory: Memory, policy: TierPolicy, now: datetime) -> None:
    """Count one recall of `memory`, in place: access count, time, and a step toward HOT.

    A COLD memory someone recalls is in use again (WARM); a WARM one becomes HOT once it has
    been recalled `promote_after` times.
    """
    memory.access_count += 1
    memory.last_accessed = now
    if memory.tier is MemoryTier.COLD:
        memory.tier = MemoryTier.WARM
    elif memory.tier is MemoryTier.WARM and memory.access_count >= policy.promote_after:
        memory.tier = MemoryTier.HOT


def reviewed(memory: Memory, policy: TierPolicy, now: datetime) -> MemoryTier | None:
    """The tier a periodic review moves `memory` to, or None when it stays.

    A memory is idle since it was last recalled or modified, whichever came later; it heats
    up only for recalls.
    """
    last_active = max(memory.updated_at, memory.last_accessed or memory.updated_at)
    idle = now - last_active
    recently_used = (
        memory.last_accessed is not None and now - memory.last_accessed <= policy.hot_idle
    )
    if memory.tier is MemoryTier.HOT:
        return MemoryTier.WARM if idle > policy.hot_idle else None
    if memory.tier is MemoryTier.WARM:
        if idle > policy.warm_idle:
            return MemoryTier.COLD
        if recently_used and memory.access_count >= policy.promote_after:
            return MemoryTier.HOT
        return None
    return MemoryTier.WARM if recently_used else None
