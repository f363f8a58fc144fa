"""Enumerating one scope with the protocol's `list_items`: every memory (export, backup, tags,
tier review) and the memories whose ids start with a prefix.

A scope is walked in key order a page at a time, so a scope of any size is enumerated whole,
on every store, and a page's read stays short.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import datetime

from animus_flows.errors import InvalidRequest
from animus_flows.memory.records import TIER_LADDER, Memory
from animus_flows.memory.store_form import is_legacy_tombstone, link_whole_scope, memory_of
from animus_flows.memory.tiers import TierPolicy, reviewed
from animus_flows.memory.versions import current
from animus_flows.memory.writes import ScopedStore, listed
from animus_flows.protocol import MemoryItem

# Items per read when the layer walks a scope: short reads keep the event loop free, and a
# page of a JSON-RPC plugin stays well within the protocol's 16 MiB message.
SCAN_PAGE = 500
# Items read per spelling of an id prefix: a prefix that matches more names no memory.
PREFIX_PAGE = 100


async def pages(scoped: ScopedStore, prefix: str | None = None) -> AsyncIterator[list[MemoryItem]]:
    """The scope's live items, a page at a time, in key order; with `prefix`, only the keys
    starting with it. Tombstones of older layers are left out."""
    cursor = None
    while True:
        page = await scoped.store.list_items(
            scoped.scope, prefix=prefix, cursor=cursor, limit=SCAN_PAGE
        )
        yield [item for item in page.items if not is_legacy_tombstone(item.metadata)]
        cursor = page.next_cursor
        if cursor is None:
            return


async def all_memories(scoped: ScopedStore) -> list[Memory]:
    """Every memory of the scope, all versions, linked to their newest versions."""
    memories = [memory_of(item) async for page in pages(scoped) for item in page]
    link_whole_scope(memories)
    return memories


async def with_id_prefix(scoped: ScopedStore, memory_id: str) -> Memory | None:
    """The one memory whose id starts with `memory_id`, as typed or in lowercase (the layer's
    ids are lowercase; other tools' keys are matched as typed), or None.

    Raises:
        InvalidRequest: the prefix matches several memories (they are named).
    """
    found: dict[str, MemoryItem] = {}
    more = False
    for form in dict.fromkeys([memory_id.lower(), memory_id]):
        page = await scoped.store.list_items(scoped.scope, prefix=form, limit=PREFIX_PAGE)
        found.update((i.key, i) for i in page.items if not is_legacy_tombstone(i.metadata))
        more = more or page.next_cursor is not None
    if not found:
        return None
    if len(found) > 1:
        raise InvalidRequest(
            f"memory id prefix {memory_id!r} is ambiguous: it matches "
            f"{listed(sorted(found), more=more)}; pass more characters"
        )
    (item,) = found.values()
    return memory_of(item)


async def tag_counts(scoped: ScopedStore) -> dict[str, int]:
    """Every tag in use with how many current memories carry it, most used first."""
    counts: dict[str, int] = {}
    for memory in current(await all_memories(scoped)):
        for tag in memory.tags:
            counts[tag] = counts.get(tag, 0) + 1
    return dict(sorted(counts.items(), key=lambda item: (-item[1], item[0])))


async def review_tiers(
    scoped: ScopedStore, policy: TierPolicy, now: datetime
) -> tuple[list[Memory], list[Memory]]:
    """The current memories a tier review moves, `(demoted, promoted)`, with their new tiers
    set (not written)."""
    demoted: list[Memory] = []
    promoted: list[Memory] = []
    for memory in current(await all_memories(scoped)):
        tier = reviewed(memory, policy, now)
        if tier is not None:
            hotter = TIER_LADDER.index(tier) > TIER_LADDER.index(memory.tier)
            memory.tier = tier
            (promoted if hotter else demoted).append(memory)
    return demoted, promoted
