"""Export, import and backup of one scope's memories, on top of `export.py`'s document.

An export walks the scope (`scan.py`); an import validates every record before anything is
written, links versions across the records and the memories already stored, and writes all of
them at once or none (`ScopedStore.write_all_or_nothing`).
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

from animus_flows.errors import InvalidRequest, StoreError
from animus_flows.memory.export import (
    ImportCount,
    dumps,
    export_document,
    parse_export_with_expiries,
    write_backup,
)
from animus_flows.memory.records import Memory, check_user_metadata
from animus_flows.memory.scan import all_memories
from animus_flows.memory.store_form import (
    is_legacy_tombstone,
    memory_of,
    newest_versions,
    successor_unknown,
)
from animus_flows.memory.versions import carry_link
from animus_flows.memory.writes import ScopedStore, expiry_times_of, ingest, ttls
from animus_flows.protocol import JSON, MemoryItem, utcnow
from animus_flows.redaction import get_logger
from animus_flows.retrieval.disclosure import is_superseded

logger = get_logger(__name__)

# An import of this many records ends with the store's optimize(): a bulk write leaves SQLite's
# full-text index in many segments. After a 100,000-memory import, queries took 1.64 ms instead
# of 0.88 ms until it was merged, which took 0.44 s of a 15 s import (bench_layer).
OPTIMIZE_AFTER_IMPORT = 1000


async def document(scoped: ScopedStore) -> dict[str, JSON]:
    """The export document of the scope: every memory, all versions, with their expiries."""
    memories = await all_memories(scoped)
    expiries = await scoped.expiry_times([memory.id for memory in memories])
    return export_document(memories, scoped.scope, expiries=expiries)


async def export_text(scoped: ScopedStore) -> str:
    return dumps(await document(scoped))


async def backup(scoped: ScopedStore, path: str | os.PathLike[str]) -> Path:
    """Write a ZIP backup of the scope to `path` (see `AsyncMemoryLayer.backup`)."""
    if not isinstance(path, (str, os.PathLike)) or not str(path):
        raise InvalidRequest(f"backup path {path!r} must be a file path such as 'backup.zip'")
    exported = await document(scoped)
    return await asyncio.to_thread(write_backup, path, dumps(exported), exported)


async def import_records(scoped: ScopedStore, data: str | bytes, *, entities: bool) -> ImportCount:
    """Import an export (or a JSON list of records) into the scope (see
    `AsyncMemoryLayer.import_memories`)."""
    if not isinstance(data, (str, bytes)):
        raise InvalidRequest(f"import_memories takes JSON text, not {type(data).__name__}")
    memories, expiries = parse_export_with_expiries(data)
    for index, memory in enumerate(memories):
        try:
            check_user_metadata(memory.metadata, redaction=True)
        except InvalidRequest as exc:
            raise InvalidRequest(f"memories[{index}]: {exc}") from None
    now = utcnow()
    live = [m for m in memories if m.id not in expiries or expiries[m.id] > now]
    for memory in live:
        ingest(memory, entities=entities, extract=not memory.entities)
    stored = await _stored_copies(scoped, live)
    relinked = _link_versions(live, stored)
    # The records' own expiries, not those of the copies they overwrite: the record is what
    # is restored. A stored parent relinked to an imported version keeps its own.
    expiring = ttls(
        expiry_times_of({parent.id: stored[parent.id] for parent in relinked})
        | {m.id: expiries[m.id] for m in live if m.id in expiries}
    )
    await scoped.write_all_or_nothing(live + relinked, "import", before=stored, expiring=expiring)
    if len(live) >= OPTIMIZE_AFTER_IMPORT:
        await _optimize(scoped)
    return ImportCount(len(live), skipped=len(memories) - len(live))


async def _optimize(scoped: ScopedStore) -> None:
    """Run the store's `optimize()`, when it has one, after a bulk import. The import stands
    whatever happens: a failure is logged, not raised."""
    optimize = getattr(scoped.store, "optimize", None)
    if not callable(optimize):
        return
    try:
        await optimize()
    except StoreError as exc:
        logger.warning("imported into %s, but could not optimize the store: %s", scoped.scope, exc)


async def _stored_copies(scoped: ScopedStore, memories: list[Memory]) -> dict[str, MemoryItem]:
    """The scope's items under the records' ids and their parents' ids: what an import links
    to and what it overwrites. An empty scope, as a restore's usually is, reads none."""
    keys = [memory.id for memory in memories]
    keys += [memory.parent_id for memory in memories if memory.parent_id is not None]
    if not keys or not (await scoped.store.list_items(scoped.scope, limit=1)).items:
        return {}
    return await scoped.items(list(dict.fromkeys(keys)))


def _link_versions(memories: list[Memory], stored: dict[str, MemoryItem]) -> list[Memory]:
    """Link imported records to their newer versions; returns stored parents to rewrite.

    A record's link is its newest version among the records (exports from before
    `superseded_by` lack links), else its stored copy's in `stored` (an older export restored
    over newer versions leaves them newer), else its own. A stored parent of an imported
    version gets a link when it has none.
    """
    newest = newest_versions(memories)
    imported = {memory.id: memory for memory in memories}
    for memory_id, child in newest.items():
        if memory_id in imported:
            imported[memory_id].link(child.id)
    # the stored copies that matter: of records that no record supersedes, and of parents
    wanted = [i for i in imported if i not in newest] + [i for i in newest if i not in imported]
    relinked = []
    for memory_id in wanted:
        item = stored.get(memory_id)
        if item is None or is_legacy_tombstone(item.metadata):
            continue
        record = imported.get(memory_id)
        if record is None:
            if not is_superseded(item.value):
                parent = memory_of(item)
                parent.link(newest[memory_id].id)
                relinked.append(parent)
        # decoded only when its link carries over: most records of a re-import have none
        elif is_superseded(item.value) or successor_unknown(item.value, item.metadata):
            carry_link(memory_of(item), record)
    return relinked
