"""One scope of a store as the memory layer reads and writes it, writes all or nothing.

`ScopedStore` holds the store, the scope and the agent its records name. It reads memories
(`get`, `items`, `decode`), looks up the newer versions of records stored before the layer kept
links, and writes: memories over their keys (`write`), or several that must land together
(`write_all_or_nothing`): one `put_many` on a store where that is one transaction, else one
write at a time, undone on failure. Every rewrite keeps the remaining TTL of the item it
overwrites. `ingest` redacts the layer's own fields of a memory, once, before it is written.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Mapping, Sequence
from datetime import datetime

from animus_flows.errors import AnimusError, StoreError
from animus_flows.ledger import LedgerStore
from animus_flows.memory.entities import extract_entities
from animus_flows.memory.records import REDACTION_KEYS, Memory, normalize_tags
from animus_flows.memory.store_form import (
    from_store,
    is_legacy_tombstone,
    link_to_newest,
    link_whole_scope,
    memory_of,
    newest_versions,
    stored_time,
    to_store,
)
from animus_flows.protocol import (
    BatchedKeyReads,
    MemoryItem,
    MemoryStore,
    QueryHit,
    Scope,
    utcnow,
)
from animus_flows.redaction import redact_json, redaction_metadata
from animus_flows.stores.checks import PutEntry


def ingest(memory: Memory, *, entities: bool, extract: bool = True) -> None:
    """Redact the layer's own fields of `memory` in place, in one pass, adding to its redaction
    record; with `entities` and `extract`, link the entities the redacted content names.

    The store wrapper redacts every write again (`RedactingStore`) and finds nothing left;
    redacting here first is what makes the memory a caller gets back show the stored text and
    `_redaction_count`, and keeps a secret from becoming an entity. An entity kept from a
    record (an import's, or a new version's copy of its parent's) whose name held a secret is
    dropped: a secret is no name.
    """
    extracting = entities and extract
    fields = {
        "content": memory.content,
        "change_summary": memory.change_summary,
        "subtype": memory.subtype,
        "tags": list(memory.tags),
        "metadata": {k: v for k, v in memory.metadata.items() if k not in REDACTION_KEYS},
        "entities": [] if extracting else [entity.name for entity in memory.entities],
    }
    found = redact_json(fields)
    redacted: dict = found.value  # type: ignore[assignment]
    memory.content = redacted["content"]
    memory.change_summary = redacted["change_summary"]
    memory.subtype = redacted["subtype"]
    memory.tags = normalize_tags(redacted["tags"])
    kept = {k: memory.metadata[k] for k in REDACTION_KEYS if k in memory.metadata}
    memory.metadata = redaction_metadata(found.count, found.types, {**redacted["metadata"], **kept})
    if extracting:
        memory.entities = extract_entities(memory.content)
    else:
        names = redacted["entities"]
        memory.entities = [
            e for e, name in zip(memory.entities, names, strict=True) if name == e.name
        ]


def expiry_times_of(items: Mapping[str, MemoryItem]) -> dict[str, datetime]:
    """When the items in `items` that expire do, by key."""
    return {key: item.expires_at for key, item in items.items() if item.expires_at is not None}


def ttls(expiry_times: Mapping[str, datetime]) -> dict[str, int]:
    """The `ttl_seconds` (at least one) that make rewrites expire when `expiry_times` say, by
    key: a rewrite of a memory keeps its expiry (another tool may have stored it with a TTL),
    or a recall would make it permanent."""
    now = utcnow()
    return {key: max(1, math.ceil((at - now).total_seconds())) for key, at in expiry_times.items()}


def listed(keys: Sequence[str], *, more: bool = False) -> str:
    """Up to ten keys, then how many more, for a one-line message."""
    shown = ", ".join(keys[:10])
    if len(keys) > 10:
        shown += f" and {len(keys) - 10} more"
    return shown + (" and more" if more and len(keys) <= 10 else "")


class ScopedStore:
    """The store of one memory layer, narrowed to its scope."""

    def __init__(self, store: MemoryStore, scope: Scope, agent: str) -> None:
        self.store = store
        self.scope = scope
        self.agent = agent  # what records name as their agent: the scope's, or "shared"

    @property
    def cap(self) -> int:
        """The most hits one query returns (the store's `max_query_top_k`)."""
        return self.store.capabilities.max_query_top_k

    # -- reading -----------------------------------------------------------------------------

    async def get(self, memory_id: str) -> Memory | None:
        """The memory under this exact id, or None."""
        item = await self.store.get(self.scope, memory_id)
        if item is None or is_legacy_tombstone(item.metadata):
            return None
        return memory_of(item)

    async def items(self, keys: Sequence[str]) -> dict[str, MemoryItem]:
        """The scope's live items among `keys`, by key: in batches from a store that reads
        many keys at once, with a `get` per key from any other."""
        if isinstance(self.store, BatchedKeyReads):
            # what it buys: a re-import of 50,000 records over themselves, whose stored copies
            # are read here, took 18.4 s against 25.2 s with a get each (BENCHMARKS.md)
            return await self.store.get_many(self.scope, keys)
        unique = list(dict.fromkeys(keys))
        items = await asyncio.gather(*(self.store.get(self.scope, key) for key in unique))
        return {key: item for key, item in zip(unique, items, strict=True) if item is not None}

    async def decode(
        self, hits: Sequence[QueryHit], *, whole_scope: bool = False
    ) -> list[tuple[Memory, float]]:
        """Hits as memories with their scores; tombstones of older layers dropped. Items
        written by other tools carry no record times, so those are read from the store's item.
        `whole_scope`: the hits are every item of the scope, so they hold every newer version
        there is."""
        live = [hit for hit in hits if not is_legacy_tombstone(hit.metadata)]
        missing = [hit.key for hit in live if stored_time(hit.value, "created_at") is None]
        times = await self.items(missing) if missing else {}
        decoded = []
        for hit in live:
            item = times.get(hit.key)
            memory = from_store(
                hit.key,
                hit.value,
                hit.metadata,
                created_at=item.created_at if item else None,
                updated_at=item.updated_at if item else None,
            )
            decoded.append((memory, hit.score))
        if whole_scope:
            link_whole_scope([memory for memory, _ in decoded])
        return decoded

    async def look_up_links(self, memories: Sequence[Memory]) -> None:
        """Find the newer versions of the memories read from records without links."""
        unknown = [memory for memory in memories if memory.successor_unknown]
        if unknown:
            await self._link_successors(unknown)

    async def _link_successors(self, memories: list[Memory]) -> None:
        """Set `superseded_by` on `memories` from the newer versions in the scope.

        A listing filtered on `parent_id`, which stores without metadata indexes (SQLite)
        answer by reading the scope: only for records stored before the layer kept links. A
        listing that comes back full (the store's `max_query_top_k`) may have missed some: the
        memories are then split in two.
        """
        hits = await self.store.query(
            self.scope, "", top_k=self.cap, filters={"parent_id": [m.id for m in memories]}
        )
        if len(hits) >= self.cap and len(memories) > 1:
            half = len(memories) // 2
            await self._link_successors(memories[:half])
            await self._link_successors(memories[half:])
            return
        children = (
            from_store(hit.key, hit.value, hit.metadata)
            for hit in hits
            if not is_legacy_tombstone(hit.metadata)
        )
        link_to_newest(memories, newest_versions(children))

    async def expiring(self, keys: Sequence[str]) -> dict[str, int]:
        """The remaining `ttl_seconds` of the items under `keys` that expire, by key."""
        return ttls(await self.expiry_times(keys))

    async def expiry_times(self, keys: Sequence[str]) -> dict[str, datetime]:
        """When the items under `keys` that expire do, by key, read from the items."""
        return expiry_times_of(await self.items(keys))

    # -- writing -----------------------------------------------------------------------------

    def entry(self, memory: Memory, ttl_seconds: int | None) -> PutEntry:
        """`memory`'s `put_many` entry; the TTL field only where it expires."""
        entry = (self.scope, memory.id, *to_store(memory, agent=self.agent))
        return entry if ttl_seconds is None else (*entry, ttl_seconds)  # type: ignore[return-value]

    async def put(
        self, memory: Memory, ttl_seconds: int | None, expected_version: int | None = None
    ) -> None:
        """Write one memory; on a store that keeps a ledger, as a versioned write (only over
        `expected_version`, when given) that sets the memory's `ledger_version`."""
        value, metadata = to_store(memory, agent=self.agent)
        if isinstance(self.store, LedgerStore):
            written = await self.store.put_versioned(
                self.scope,
                memory.id,
                value,
                expected_version=expected_version,
                metadata=metadata,
                ttl_seconds=ttl_seconds,
            )
            memory.ledger_version = written.version
            return
        await self.store.put(
            self.scope, memory.id, value, metadata=metadata, ttl_seconds=ttl_seconds
        )

    async def write(
        self,
        memories: Sequence[Memory],
        *,
        expiring: dict[str, int] | None = None,
        expected_version: int | None = None,
    ) -> None:
        """Write `memories` over their keys, with the links they have looked up first.
        `expiring`: the remaining TTLs of the items they overwrite (see `ttls`), read here when
        not given. `expected_version`: of one memory, written only over that version of it in
        the store's ledger (`ScopedStore.put`)."""
        if not memories:
            return
        await self.look_up_links(memories)  # so the rewrite records them
        if expiring is None:
            expiring = await self.expiring([memory.id for memory in memories])
        put_many = getattr(self.store, "put_many", None)
        if len(memories) > 1 and callable(put_many):
            await put_many([self.entry(memory, expiring.get(memory.id)) for memory in memories])
            return
        for memory in memories:
            await self.put(memory, expiring.get(memory.id), expected_version)

    async def write_all_or_nothing(
        self,
        memories: Sequence[Memory],
        what: str,
        *,
        deletes: Sequence[str] = (),
        before: dict[str, MemoryItem] | None = None,
        expiring: dict[str, int] | None = None,
    ) -> None:
        """Delete `deletes` (the key `forget` removes), then write `memories`, so that a
        failure leaves the scope as it was, as far as the store allows. `what` names the
        operation in errors.

        Writes alone, into a store whose `put_many` is one transaction (`atomic_put_many`:
        SQLite), are one `put_many`. Otherwise the items under the keys are read first
        (`before`: the caller's copies, when it has them) and the changes made one at a time:
        should one fail, the keys tried (the failed one too, it may have landed) get back what
        `before` holds, and keys it lacks are deleted; then the error is raised, saying so.
        `expiring`: the `ttl_seconds` to write memories with, by id; by default a rewrite keeps
        the remaining TTL of the item it overwrites (see `ttls`).
        """
        await self.look_up_links(memories)  # so the rewrite records them
        if not deletes and getattr(self.store, "atomic_put_many", False) is True:
            if expiring is None:
                expiring = await self.expiring([memory.id for memory in memories])
            await self.store.put_many(  # type: ignore[attr-defined]
                [self.entry(memory, expiring.get(memory.id)) for memory in memories]
            )
            return
        if before is None:
            before = await self.items([*deletes, *(memory.id for memory in memories)])
        if expiring is None:
            expiring = ttls(expiry_times_of(before))
        tried: list[str] = []
        try:
            for key in deletes:
                tried.append(key)
                await self.store.delete(self.scope, key)
            for memory in memories:
                tried.append(memory.id)
                await self.put(memory, expiring.get(memory.id))
        except Exception as exc:
            raise await self._undo(tried, before, exc, what) from exc

    async def _undo(
        self, keys: list[str], before: dict[str, MemoryItem], error: Exception, what: str
    ) -> Exception:
        """Put `keys` back as `before` holds them after `error` stopped the writes of `what` (a
        plugin that crashed restarts on the next call); returns the error to raise, which says
        whether the scope is as it was or which keys may still hold the new writes."""
        kind = type(error) if isinstance(error, AnimusError) else StoreError
        remaining = ttls(expiry_times_of(before))
        for done, key in enumerate(keys):
            item = before.get(key)
            try:
                if item is None:
                    await self.store.delete(self.scope, key)
                else:
                    await self.store.put(
                        self.scope,
                        key,
                        item.value,
                        metadata=dict(item.metadata),
                        ttl_seconds=remaining.get(key),
                    )
            except Exception as undo_error:
                left = keys[done:]
                if what == "import":  # ids are kept: importing again completes it
                    written = "imported records"
                    retry = "import the same file again to complete the import"
                else:
                    written, retry = f"the {what}'s writes", f"check them and repeat the {what}"
                return kind(
                    f"{error}; undoing the {what} failed too ({undo_error}), so {self.scope} may "
                    f"still hold {written} under {len(left)} key(s): {listed(left)}; "
                    f"once the store works, {retry}"
                )
        return kind(f"{error}; the {what} was rolled back: {self.scope} holds what it held before")
