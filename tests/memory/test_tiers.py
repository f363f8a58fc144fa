"""Temperature tier rules, as pure functions of a memory, a policy and a time."""

from datetime import UTC, datetime, timedelta

import pytest

from animus_flows.errors import InvalidRequest
from animus_flows.memory import Memory, MemoryTier, TierPolicy
from animus_flows.memory.tiers import after_access, reviewed, shifted

NOW = datetime(2026, 3, 1, tzinfo=UTC)
DAY = timedelta(days=1)
POLICY = TierPolicy(hot_idle=DAY, warm_idle=30 * DAY, promote_after=3)


def memory(tier, *, updated=NOW, accessed=None, count=0):
    return Memory(
        content="x", tier=tier, updated_at=updated, last_accessed=accessed, access_count=count
    )


def test_shifting_stops_at_either_end():
    assert shifted(MemoryTier.COLD, +1) is MemoryTier.WARM
    assert shifted(MemoryTier.WARM, +1) is MemoryTier.HOT
    assert shifted(MemoryTier.HOT, +1) is None
    assert shifted(MemoryTier.HOT, -2) is MemoryTier.COLD
    assert shifted(MemoryTier.COLD, -1) is None


def test_an_access_counts_and_heats_one_step():
    cold = memory(MemoryTier.COLD)
    after_access(cold, POLICY, NOW)
    assert (cold.tier, cold.access_count, cold.last_accessed) == (MemoryTier.WARM, 1, NOW)
    warm = memory(MemoryTier.WARM, count=1)
    after_access(warm, POLICY, NOW)
    assert warm.tier is MemoryTier.WARM  # two recalls: not yet busy
    after_access(warm, POLICY, NOW)
    assert (warm.tier, warm.access_count) == (MemoryTier.HOT, 3)
    hot = memory(MemoryTier.HOT)
    after_access(hot, POLICY, NOW)
    assert hot.tier is MemoryTier.HOT


@pytest.mark.parametrize(
    ("tier", "fields", "expected"),
    [
        ("hot", {"updated": NOW - 2 * DAY}, "warm"),
        ("hot", {"accessed": NOW - DAY / 2}, None),
        ("hot", {"updated": NOW - 2 * DAY, "accessed": NOW - DAY / 2}, None),
        ("warm", {"updated": NOW - 31 * DAY}, "cold"),
        ("warm", {"updated": NOW - 29 * DAY}, None),
        # modified since its last recall: idle since the change, not since the recall
        ("warm", {"updated": NOW - DAY, "accessed": NOW - 40 * DAY}, None),
        ("hot", {"updated": NOW - DAY / 2, "accessed": NOW - 2 * DAY, "count": 4}, None),
        ("hot", {"updated": NOW - 3 * DAY, "accessed": NOW - 2 * DAY}, "warm"),
        ("warm", {"accessed": NOW - DAY / 2, "count": 3}, "hot"),
        ("warm", {"accessed": NOW - DAY / 2, "count": 2}, None),
        ("warm", {"accessed": NOW - 2 * DAY, "count": 9}, None),
        ("cold", {"accessed": NOW - DAY / 2, "count": 1}, "warm"),
        ("cold", {"updated": NOW - 400 * DAY}, None),
        ("cold", {"accessed": NOW - 3 * DAY, "count": 5}, None),
    ],
)
def test_review_moves_stale_memories_down_and_busy_ones_up(tier, fields, expected):
    assert reviewed(memory(tier, **fields), POLICY, NOW) == expected


def test_tier_policy_is_validated():
    with pytest.raises(InvalidRequest, match="promote_after 0 must be an integer >= 1"):
        TierPolicy(promote_after=0)
    with pytest.raises(InvalidRequest, match="promote_after True must be an integer"):
        TierPolicy(promote_after=True)
    with pytest.raises(InvalidRequest, match="hot_idle .* must be a positive timedelta"):
        TierPolicy(hot_idle=timedelta(0))
    # not a timedelta at all: named, not a TypeError from comparing it
    with pytest.raises(InvalidRequest, match="hot_idle 5 must be a positive timedelta"):
        TierPolicy(hot_idle=5)
    with pytest.raises(InvalidRequest, match="warm_idle None must be a positive timedelta"):
        TierPolicy(warm_idle=None)
