"""Versions of a memory: a new version instead of an edit, the chain from any version, and
forgetting one version, with the links between them kept on the records.

A new version has a new id, `version` + 1 and `parent_id` = the old id; the old one names it
in `superseded_by`, so a read knows whether a memory is current without searching the scope. A
link counts only while the newer version is there.
"""

from __future__ import annotations

from animus_flows.memory.records import (
    REDACTION_KEYS,
    Memory,
    MemoryTier,
    check_user_metadata,
)
from animus_flows.memory.store_form import (
    is_legacy_tombstone,
    link_to_newest,
    newest_versions,
)
from animus_flows.memory.writes import ScopedStore, expiry_times_of, ingest, ttls
from animus_flows.protocol import JSON


def describe_changes(parent: Memory, child: Memory) -> str:
    """What changed between two versions, in words, for `update_with_version`."""
    parts = []
    if child.content != parent.content:
        parts.append("content updated")
    added = [tag for tag in child.tags if tag not in parent.tags]
    removed = [tag for tag in parent.tags if tag not in child.tags]
    if added:
        parts.append("tags added: " + ", ".join(added))
    if removed:
        parts.append("tags removed: " + ", ".join(removed))
    before = {k: v for k, v in parent.metadata.items() if k not in REDACTION_KEYS}
    after = {k: v for k, v in child.metadata.items() if k not in REDACTION_KEYS}
    changed = sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k))
    if changed:
        parts.append("metadata changed: " + ", ".join(changed))
    summary = "; ".join(parts) or "no changes"
    return f"v{child.version}: {summary[0].upper()}{summary[1:]}"


def carry_link(stored: Memory, memory: Memory) -> None:
    """Give `memory` (a caller's copy, an imported record) the version link of the record it
    overwrites: the layer keeps the links, callers do not."""
    memory.superseded_by = stored.superseded_by
    memory.successor_unknown = stored.successor_unknown


def current(memories: list[Memory]) -> list[Memory]:
    """Memories no newer version among `memories` points to."""
    superseded = {memory.parent_id for memory in memories if memory.parent_id}
    return [memory for memory in memories if memory.id not in superseded]


async def drop_superseded(
    scoped: ScopedStore, found: list[tuple[Memory, float]]
) -> list[tuple[Memory, float]]:
    """`found` less the memories a newer version replaced; a link counts only while the newer
    version is there (the few linked ones are read at once)."""
    await scoped.look_up_links([memory for memory, _ in found])
    linked = [(m, m.superseded_by) for m, _ in found if m.superseded_by is not None]
    newer = await scoped.items([key for _, key in linked]) if linked else {}
    superseded = {
        memory.id
        for memory, key in linked
        if (item := newer.get(key)) is not None
        and not is_legacy_tombstone(item.metadata)
        and item.metadata.get("parent_id") == memory.id
    }
    return [(memory, score) for memory, score in found if memory.id not in superseded]


async def new_version(
    scoped: ScopedStore,
    parent: Memory,
    *,
    content: str | None,
    tags: list[str] | None,
    metadata: dict[str, JSON] | None,
    change_summary: str | None,
    provenance: str,
    entities: bool,
) -> Memory:
    """Store a new version of `parent` (the arguments are checked) and demote the parent to
    COLD, linked to it; both land or neither does. Returns the new version."""
    user_metadata = (
        {k: v for k, v in parent.metadata.items() if k not in REDACTION_KEYS}
        if metadata is None
        else check_user_metadata(metadata)
    )
    if content is None:  # the inherited text was redacted already; keep its record
        user_metadata.update(
            {k: parent.metadata[k] for k in REDACTION_KEYS if k in parent.metadata}
        )
    child = Memory(
        content=parent.content if content is None else content,
        memory_type=parent.memory_type,
        tags=list(parent.tags if tags is None else tags),
        source=parent.source,
        confidence=parent.confidence,
        subtype=parent.subtype,
        version=parent.version + 1,
        parent_id=parent.id,
        change_summary=change_summary,
        provenance=provenance,
        sensitivity=parent.sensitivity,
        tier=parent.tier,
        metadata=user_metadata,
        # the same text names the same entities, also on a layer that does not extract them
        entities=list(parent.entities) if content is None else [],
    )
    ingest(child, entities=entities)
    if child.change_summary is None:
        child.change_summary = describe_changes(parent, child)
    parent.tier = MemoryTier.COLD
    parent.link(child.id)
    before = await scoped.items([parent.id])  # the child's id is new: nothing under it
    expiring = ttls(expiry_times_of(before))
    if parent.id in expiring:  # an edit does not outlive the memory it edits
        expiring[child.id] = expiring[parent.id]
    # the parent first: should the child never land, its link to a missing child counts for
    # nothing, and the parent stays current
    await scoped.write_all_or_nothing([parent, child], "update", before=before, expiring=expiring)
    return child


async def forget(scoped: ScopedStore, memory: Memory) -> None:
    """Delete `memory`; its version chain closes around it.

    Forgetting the newest version makes the one before it current again; forgetting one in the
    middle makes its newer versions newer versions of its parent, which stays history. The
    delete and the relinks land together or not at all.
    """
    parent = None if memory.parent_id is None else await scoped.get(memory.parent_id)
    has_newer = memory.superseded_by is not None or memory.successor_unknown
    if parent is None or (parent.superseded_by != memory.id and not has_newer):
        await scoped.store.delete(scoped.scope, memory.id)
        return
    # the parent's other newer versions (versions can branch) and this one's, read from a
    # listing filtered on parent_id: only for versioned memories
    hits = await scoped.store.query(
        scoped.scope, "", top_k=scoped.cap, filters={"parent_id": [parent.id, memory.id]}
    )
    versions = [m for m, _ in await scoped.decode(hits) if m.id != memory.id]
    moved = [version for version in versions if version.parent_id == memory.id]
    for version in moved:
        version.parent_id = parent.id
    link_to_newest([parent], newest_versions(versions))
    await scoped.write_all_or_nothing([parent, *moved], "forget", deletes=[memory.id])


async def history(scoped: ScopedStore, memory: Memory) -> list[Memory]:
    """Every version of `memory`'s chain, oldest first."""
    chain = [memory]
    seen = {memory.id}
    while chain[0].parent_id is not None and chain[0].parent_id not in seen:
        parent = await scoped.get(chain[0].parent_id)
        if parent is None:
            break
        seen.add(parent.id)
        chain.insert(0, parent)
    while True:
        await scoped.look_up_links([chain[-1]])
        if chain[-1].superseded_by is None or chain[-1].superseded_by in seen:
            return chain
        child = await scoped.get(chain[-1].superseded_by)
        if child is None or child.parent_id != chain[-1].id:
            return chain
        seen.add(child.id)
        chain.append(child)
