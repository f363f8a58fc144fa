"""The memory layer of seed 003 over any `MemoryStore`: one scope's memories as records.

`AsyncMemoryLayer` is the implementation; `MemoryLayer` is its blocking facade. Everything goes
through the five protocol methods, so the layer runs on every store. Three protocol limits shape
it, each documented in docs/memory.md:

- No list method: a scope is enumerated with empty-text queries (newest first), sliced by the
  `_bucket` metadata key (the id's first two hex digits; ids that do not start with two, such as
  imported keys of other tools, have none and share one slice) when it holds more than the
  store's `max_query_top_k` items; a slice that is still too large is reported, never silently
  cut.
- No single-item delete: `forget` overwrites the memory with an empty, SECRET tombstone that
  expires after one second.
- No transactions across calls: read-modify-write updates (access counts, tags) are last
  writer wins. Writes of several records (import, a new version, forgetting one, a tier review)
  are all or nothing: one `put_many` on a store where that is one transaction, else undone put
  by put on failure (`_write_all_or_nothing`). Recall's access counts are the exception: they
  are bookkeeping, and a failure part-way leaves some counted, no content changed.
"""

from __future__ import annotations

import asyncio
import math
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from animus_flows.errors import AnimusError, InvalidRequest, StoreError
from animus_flows.memory.entities import extract_entities, query_entity_keys
from animus_flows.memory.export import (
    ImportCount,
    dumps,
    export_document,
    parse_export_with_expiries,
    write_backup,
)
from animus_flows.memory.records import (
    BUCKET_KEY,
    DELETED_KEY,
    ENTITIES_KEY,
    PROVENANCES,
    REDACTION_KEYS,
    SOURCES,
    TIER_LADDER,
    Memory,
    MemoryTier,
    MemoryType,
    Sensitivity,
    bucket_metadata,
    check_choice,
    check_user_metadata,
    entity_key,
    from_store,
    is_tombstone,
    newest_versions,
    normalize_tag,
    normalize_tags,
    redaction_record,
    stored_time,
    successor_unknown,
    to_store,
)
from animus_flows.memory.tiers import TierPolicy, after_access, reviewed, shifted
from animus_flows.protocol import (
    JSON,
    BatchedKeyReads,
    KeyExpiries,
    KeyPrefixReads,
    MemoryItem,
    MemoryStore,
    QueryHit,
    Scope,
    ScopeReads,
    check_count,
    utcnow,
)
from animus_flows.redaction import get_logger, redact, redact_json, redaction_metadata
from animus_flows.retrieval.disclosure import EGRESS_FILTER, is_superseded, metadata_filter
from animus_flows.stores.base import PutEntry, check_scope
from animus_flows.stores.redacting import redacting
from animus_flows.stores.sync import LoopRunner, SyncStore, blocking_method

_HEX = "0123456789abcdef"
# An import of this many records ends with the store's optimize(): a bulk write leaves SQLite's
# full-text index in many segments. After a 100,000-memory import, queries took 1.64 ms instead
# of 0.88 ms until it was merged, which took 0.44 s of a 15 s import (bench_layer).
OPTIMIZE_AFTER_IMPORT = 1000
# Seconds a tombstone lives: long enough to hide the memory at once, short enough that the
# store drops it soon after.
TOMBSTONE_TTL = 1
# Items per read when a store walks a scope (`ScopeReads`): short reads keep the event loop free.
SCAN_PAGE = 500

logger = get_logger(__name__)

#: The agent the project scope's memories are recorded under (and the loader reports).
SHARED_AGENT = "shared"

#: The score a memory gets in `recall` for being linked to an entity the query names.
ENTITY_MATCH_SCORE = 0.5


def resolve_store(store: object) -> MemoryStore:
    """The async store behind `store` (a `MemoryStore`, a memory-store Block's `get_store()`,
    or a `SyncStore` facade's store), behind the redaction wrapper: every write is redacted."""
    if isinstance(store, SyncStore):
        return store.store
    get_store = getattr(store, "get_store", None)
    if callable(get_store):
        store = get_store()
    if not isinstance(store, MemoryStore):
        raise InvalidRequest(
            f"store {store!r} is not a memory store; pass a MemoryStore (e.g. SQLiteStore) "
            "or a memory-store block such as SQLiteMemoryStore"
        )
    return redacting(store)


def _one(kind: Any, value: object, name: str) -> Any:
    try:
        return kind(value.lower() if isinstance(value, str) else value)
    except ValueError:
        choices = ", ".join(member.value for member in kind)
        raise InvalidRequest(f"{name} {value!r} is not one of {choices}") from None


def _content(content: object) -> str:
    if not isinstance(content, str) or not content.strip():
        raise InvalidRequest(f"content {content!r} must be non-empty text")
    return content


def _number(name: str, value: object, low: float, high: float) -> float:
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or math.isnan(value)
        or not low <= value <= high
    ):
        raise InvalidRequest(f"{name} {value!r} must be a number from {low} to {high}")
    return float(value)


def _id(memory_id: object) -> str:
    if not isinstance(memory_id, str) or not memory_id.strip():
        raise InvalidRequest(f"memory id {memory_id!r} must be a non-empty string (or prefix)")
    return memory_id.strip()


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


class AsyncMemoryLayer:
    """Seed 003's memory layer for one scope, on any memory store; every method is a coroutine.

    Args:
        store: a `MemoryStore`, or a memory-store Block (its `get_store()` is used).
        scope: the scope the memories live in; `Scope(project_id)` is the shared project scope,
            `Scope(project_id, agent_id=...)` an agent's own.
        entities: seed 003's `entities.enabled`: extract entities from content on every write,
            link memories to them, and let `recall` match them.
        tier_policy: idle times and the access threshold of temperature tiers.

    Raises:
        InvalidRequest: the scope's agent id is `shared`, the name the loader and the stored
            records give the project scope (`Scope(project_id)`): use that scope instead.

    Example:
        ```python
        from animus_flows.memory import AsyncMemoryLayer
        from animus_flows.protocol import Scope
        from animus_flows.stores import SQLiteStore

        memory = AsyncMemoryLayer(SQLiteStore(".animus/memory.db"), Scope("demo"))
        await memory.remember("User prefers dark mode", tags=["preference", "ui"])
        hits = await memory.recall("dark mode")
        ```
    """

    def __init__(
        self,
        store: object,
        scope: Scope,
        *,
        entities: bool = False,
        tier_policy: TierPolicy | None = None,
    ) -> None:
        self.store = resolve_store(store)
        self.scope = check_scope(scope)
        if scope.agent_id == SHARED_AGENT:
            raise InvalidRequest(
                f"agent_id {SHARED_AGENT!r} names the shared project scope, so the loader could "
                f"never load these memories; use Scope({scope.project_id!r}) for shared "
                "memories, or another agent id"
            )
        if tier_policy is not None and not isinstance(tier_policy, TierPolicy):
            raise InvalidRequest(
                f"tier_policy {tier_policy!r} is not a TierPolicy; pass TierPolicy(...) or None"
            )
        self.entities_enabled = bool(entities)
        self.tier_policy = tier_policy or TierPolicy()
        self._agent = scope.agent_id or SHARED_AGENT

    @property
    def _cap(self) -> int:
        return self.store.capabilities.max_query_top_k

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.scope} on {self.store!r}>"

    # -- writing -----------------------------------------------------------------------------

    async def remember(
        self,
        content: str,
        memory_type: MemoryType | str = MemoryType.SEMANTIC,
        metadata: dict[str, JSON] | None = None,
        tags: Sequence[str] | None = None,
        source: str = "stated",
        confidence: float = 1.0,
        subtype: str | None = None,
        provenance: str = "direct",
        sensitivity: Sensitivity | str = Sensitivity.PUBLIC,
        tier: MemoryTier | str = MemoryTier.WARM,
    ) -> Memory:
        """Store a new memory; secrets in it are redacted first.

        `content` is non-empty text; `source` is one of `SOURCES`, `provenance` one of
        `PROVENANCES`; `metadata` may not use the layer's reserved keys.

        Returns:
            The stored `Memory`, with its generated id and timestamps.
        """
        memory = Memory(
            content=_content(content),
            memory_type=memory_type,
            metadata=check_user_metadata(metadata),
            tags=normalize_tags(tags),
            source=check_choice("source", source, SOURCES),
            confidence=confidence,
            subtype=subtype,
            provenance=check_choice("provenance", provenance, PROVENANCES),
            sensitivity=sensitivity,
            tier=tier,
        )
        self._ingest(memory)
        await self._write([memory], expiring={})  # a new id: nothing to keep
        return memory

    async def remember_fact(
        self,
        subject: str,
        predicate: str,
        obj: str,
        *,
        category: str | None = None,
        tags: Sequence[str] | None = None,
        metadata: dict[str, JSON] | None = None,
        source: str = "stated",
        confidence: float = 1.0,
        provenance: str = "direct",
        sensitivity: Sensitivity | str = Sensitivity.PUBLIC,
        tier: MemoryTier | str = MemoryTier.WARM,
    ) -> Memory:
        """Store a subject-predicate-object fact as a SEMANTIC memory.

        The content reads "subject predicate obj"; the parts are kept in metadata (`subject`,
        `predicate`, `object`) and `category` becomes the subtype (default `fact`).

        Example:
            ```python
            from animus_flows.memory import MemoryLayer
            from animus_flows.protocol import Scope
            from animus_flows.stores import SQLiteStore

            memory = MemoryLayer(SQLiteStore(".animus/memory.db"), Scope("demo"))
            memory.remember_fact("User", "prefers", "dark mode", category="preference")
            ```
        """
        parts = {"subject": subject, "predicate": predicate, "object": obj}
        for name, part in parts.items():
            if not isinstance(part, str) or not part.strip():
                raise InvalidRequest(f"fact {name} {part!r} must be non-empty text")
        return await self.remember(
            f"{subject.strip()} {predicate.strip()} {obj.strip()}",
            MemoryType.SEMANTIC,
            {**check_user_metadata(metadata), **parts},
            tags,
            source,
            confidence,
            category or "fact",
            provenance,
            sensitivity,
            tier,
        )

    async def remember_procedure(
        self,
        name: str,
        trigger: str,
        steps: Sequence[str],
        *,
        tags: Sequence[str] | None = None,
        metadata: dict[str, JSON] | None = None,
        source: str = "stated",
        confidence: float = 1.0,
        provenance: str = "direct",
        sensitivity: Sensitivity | str = Sensitivity.PUBLIC,
        tier: MemoryTier | str = MemoryTier.WARM,
    ) -> Memory:
        """Store a workflow as a PROCEDURAL memory (subtype `workflow`).

        The content lists the name, the trigger and the numbered steps; the parts are kept in
        metadata (`procedure`, `trigger`, `steps`).

        Example:
            ```python
            from animus_flows.memory import MemoryLayer
            from animus_flows.protocol import Scope
            from animus_flows.stores import SQLiteStore

            memory = MemoryLayer(SQLiteStore(".animus/memory.db"), Scope("demo"))
            memory.remember_procedure("morning-routine", "waking up",
                                      ["check email", "review calendar", "plan day"])
            ```
        """
        if not isinstance(name, str) or not name.strip():
            raise InvalidRequest(f"procedure name {name!r} must be non-empty text")
        if not isinstance(trigger, str) or not trigger.strip():
            raise InvalidRequest(f"procedure trigger {trigger!r} must be non-empty text")
        if isinstance(steps, str) or not steps or not all(isinstance(s, str) for s in steps):
            raise InvalidRequest(f"procedure steps {steps!r} must be a non-empty list of text")
        numbered = "\n".join(f"{n}. {step.strip()}" for n, step in enumerate(steps, 1))
        return await self.remember(
            f"Procedure: {name.strip()}\nTrigger: {trigger.strip()}\nSteps:\n{numbered}",
            MemoryType.PROCEDURAL,
            {
                **check_user_metadata(metadata),
                "procedure": name,
                "trigger": trigger,
                "steps": list(steps),
            },
            tags,
            source,
            confidence,
            "workflow",
            provenance,
            sensitivity,
            tier,
        )

    async def update_memory(self, memory: Memory) -> bool:
        """Write `memory` over the stored memory with its id, in place; sets `updated_at`.

        Its fields are checked again first, as `remember` checks them (a `source` or
        `provenance` the stored memory already has is kept). The redaction record stays the
        layer's: `_redaction_count` and `_redaction_types` come from the stored memory. The
        passed object is updated too (timestamp, redacted text, entities). Returns False when
        no memory has that id.
        """
        if not isinstance(memory, Memory):
            raise InvalidRequest(f"update_memory takes a Memory, not {type(memory).__name__}")
        memory.validate()
        _content(memory.content)
        stored = await self._get(memory.id)
        if stored is None:
            return False
        for name, choices in (("source", SOURCES), ("provenance", PROVENANCES)):
            if getattr(memory, name) != getattr(stored, name):  # other tools' values stay
                check_choice(name, getattr(memory, name), choices)
        memory.metadata = {
            **check_user_metadata(
                {k: v for k, v in memory.metadata.items() if k not in REDACTION_KEYS}
            ),
            **redaction_record(stored.metadata),
        }
        _carry_link(stored, memory)  # the layer keeps the version links
        memory.updated_at = utcnow()
        self._ingest(memory)
        await self._write([memory])
        return True

    async def update_with_version(
        self,
        memory_id: str,
        content: str | None = None,
        tags: Sequence[str] | None = None,
        metadata: dict[str, JSON] | None = None,
        change_summary: str | None = None,
        provenance: str = "direct",
    ) -> Memory | None:
        """Store a new version of a memory instead of changing it; the old one is kept.

        The new memory gets a new id, `version` + 1, `parent_id` = the old id, and a generated
        `change_summary` when none is given. `None` keeps the parent's content, tags or
        metadata; new ones are checked as `remember` checks them. The parent moves to the COLD
        tier and its `superseded_by` names the new one: it is history now, and `recall` returns
        only the newest version. A new version of a memory that expires (stored with a TTL)
        expires when its parent does. Returns None when `memory_id` matches nothing.

        Both writes land or neither does (see `import_memories`): a failure raises a
        `StoreError` saying the update was rolled back.
        """
        if content is not None:
            _content(content)
        new_tags = None if tags is None else normalize_tags(tags)
        check_choice("provenance", provenance, PROVENANCES)
        if metadata is not None:
            check_user_metadata(metadata)
        parent = await self.get_memory(memory_id)
        if parent is None:
            return None
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
            tags=list(parent.tags if new_tags is None else new_tags),
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
        self._ingest(child)
        if child.change_summary is None:
            child.change_summary = describe_changes(parent, child)
        parent.tier = MemoryTier.COLD
        _set_successor(parent, child.id)
        before = await self._items([parent.id])  # the child's id is new: nothing under it
        expiring = _ttls(_expiry_times_of(before))
        if parent.id in expiring:  # an edit does not outlive the memory it edits
            expiring[child.id] = expiring[parent.id]
        # the parent first: should the child never land, its link to a missing child counts
        # for nothing, and the parent stays current
        await self._write_all_or_nothing(
            [parent, child], "update", before=before, expiring=expiring
        )
        return child

    async def forget(self, memory_id: str) -> bool:
        """Delete a memory by id or unique prefix; True when one was deleted.

        The protocol has no single-item delete, so the memory is overwritten at once by an
        empty, SECRET tombstone that expires after a second: its content is gone immediately
        and no read returns it. Forgetting the newest version makes the one before it current
        again: the tombstone and the parent's new link land together or not at all (a failure
        raises a `StoreError` saying the forget was rolled back). Forgetting a version in the
        middle of a chain joins the chain around it: its newer versions become newer versions
        of its parent, which stays history (v1 -> v3 once v2 is forgotten).
        """
        memory = await self.get_memory(memory_id)
        if memory is None:
            return False
        parent = None if memory.parent_id is None else await self._get(memory.parent_id)
        has_newer = memory.superseded_by is not None or _unlinked(memory)
        if parent is None or (parent.superseded_by != memory.id and not has_newer):
            await self._put_tombstone(memory.id)
            return True
        # the parent's other newer versions (versions can branch) and this one's, read from a
        # listing filtered on parent_id: only for versioned memories
        hits = await self.store.query(
            self.scope, "", top_k=self._cap, filters={"parent_id": [parent.id, memory.id]}
        )
        versions = [m for m, _ in await self._decode(hits) if m.id != memory.id]
        moved = [version for version in versions if version.parent_id == memory.id]
        for version in moved:
            version.parent_id = parent.id
        _link_to_newest([parent], newest_versions(versions))
        await self._write_all_or_nothing([parent, *moved], "forget", tombstones=[memory.id])
        return True

    # -- reading -----------------------------------------------------------------------------

    async def get_memory(self, memory_id: str) -> Memory | None:
        """The memory with this id or unique id prefix, or None.

        Raises:
            InvalidRequest: the prefix matches several memories (they are named).
        """
        memory_id = _id(memory_id)
        exact = await self._get(memory_id)
        if exact is not None:
            return exact
        prefix = memory_id.lower()
        hits = await self._with_id_prefix(memory_id)
        matches = [
            hit
            for hit in hits
            if hit.key.lower().startswith(prefix) and not is_tombstone(hit.metadata)
        ]
        if len(hits) >= self._cap and len(matches) != 1:
            raise StoreError(
                f"more than {self._cap} memories share the id prefix {memory_id!r} in "
                f"{self.scope}; pass more characters of the id"
            )
        if not matches:
            return None
        if len(matches) > 1:
            shown = _listed(sorted(hit.key for hit in matches))
            raise InvalidRequest(
                f"memory id prefix {memory_id!r} is ambiguous: it matches {shown}; "
                "pass more characters"
            )
        ((memory, _),) = await self._decode(matches)
        return memory

    async def recall(
        self,
        query: str,
        memory_type: MemoryType | str | None = None,
        tags: Sequence[str] | None = None,
        source: str | None = None,
        min_confidence: float = 0.0,
        limit: int = 10,
        allowed_tiers: Iterable[Sensitivity | str] | None = None,
        tier: MemoryTier | str | None = None,
    ) -> list[Memory]:
        """Memories relevant to `query`, best first; an empty query lists the most recently
        active (written or recalled) first.

        Args:
            query: search text (the store's ranking: full text on SQLite).
            memory_type: only this type.
            tags: only memories carrying all of these tags.
            source: only this source (`stated`, `inferred`, `learned`).
            min_confidence: only memories at least this confident.
            limit: at most this many.
            allowed_tiers: only these sensitivities (seed 003's name); None allows all. Pass
                `[Sensitivity.PUBLIC]`, or use `recall_for_egress`, for anything leaving the
                system.
            tier: only this temperature tier.

        Recalled memories count as accessed: `access_count` and `last_accessed` are updated and
        they move toward HOT. Older versions of a versioned memory are left out. With entity
        linking on, memories linked to an entity the query names are included too.
        """
        if not isinstance(query, str):
            raise InvalidRequest(f"query {query!r} must be a string")
        limit = check_count("limit", limit)
        filters, wanted = self._criteria(
            memory_type, tags, source, min_confidence, allowed_tiers, tier
        )
        found = await self._search(query, filters, limit, wanted)
        if self.entities_enabled and query.strip():
            keys = query_entity_keys(query)
            if keys:
                linked = await self._search("", {**filters, ENTITIES_KEY: keys}, limit, wanted)
                found = _merge(found, [(m, ENTITY_MATCH_SCORE) for m, _ in linked])
        return await self._touch([memory for memory, _ in found[:limit]])

    async def recall_by_tags(
        self,
        tags: Sequence[str],
        limit: int = 10,
        allowed_tiers: Iterable[Sensitivity | str] | None = None,
    ) -> list[Memory]:
        """Memories carrying all of `tags`, most recently active first (a recall: access counts)."""
        if not normalize_tags(tags):
            raise InvalidRequest("recall_by_tags needs at least one tag")
        return await self.recall("", tags=tags, limit=limit, allowed_tiers=allowed_tiers)

    async def recall_by_entity(
        self,
        name: str,
        limit: int = 10,
        allowed_tiers: Iterable[Sensitivity | str] | None = None,
    ) -> list[Memory]:
        """Memories linked to the entity `name` (any case), most recently active first."""
        if not isinstance(name, str) or not name.strip():
            raise InvalidRequest(f"entity name {name!r} must be non-empty text")
        filters, wanted = self._criteria(None, None, None, 0.0, allowed_tiers, None)
        found = await self._search(
            "", {**filters, ENTITIES_KEY: entity_key(name)}, check_count("limit", limit), wanted
        )
        return await self._touch([memory for memory, _ in found[:limit]])

    async def recall_for_egress(
        self,
        query: str,
        memory_type: MemoryType | str | None = None,
        tags: Sequence[str] | None = None,
        source: str | None = None,
        min_confidence: float = 0.0,
        limit: int = 10,
        tier: MemoryTier | str | None = None,
    ) -> list[Memory]:
        """`recall` pinned to PUBLIC memories: use it for anything that leaves the system."""
        return await self.recall(
            query, memory_type, tags, source, min_confidence, limit, [Sensitivity.PUBLIC], tier
        )

    async def recall_by_tags_for_egress(self, tags: Sequence[str], limit: int = 10) -> list[Memory]:
        """`recall_by_tags` pinned to PUBLIC memories."""
        return await self.recall_by_tags(tags, limit, [Sensitivity.PUBLIC])

    async def history(self, memory_id: str) -> list[Memory]:
        """Every version of a memory, oldest first, found from any version's id or prefix."""
        memory = await self.get_memory(memory_id)
        if memory is None:
            return []
        chain = [memory]
        seen = {memory.id}
        while chain[0].parent_id is not None and chain[0].parent_id not in seen:
            parent = await self._get(chain[0].parent_id)
            if parent is None:
                break
            seen.add(parent.id)
            chain.insert(0, parent)
        while True:
            await self._look_up_links([chain[-1]])
            if chain[-1].superseded_by is None or chain[-1].superseded_by in seen:
                return chain
            child = await self._get(chain[-1].superseded_by)
            if child is None or child.parent_id != chain[-1].id:
                return chain
            seen.add(child.id)
            chain.append(child)

    # -- tags and tiers ----------------------------------------------------------------------

    async def add_tag(self, memory_id: str, tag: str) -> bool:
        """Add a (lowercased) tag; True when added, False when the memory is missing or
        already has it."""
        return await self._retag(memory_id, tag, add=True)

    async def remove_tag(self, memory_id: str, tag: str) -> bool:
        """Remove a tag (any case); True when removed, False when the memory or the tag is
        missing."""
        return await self._retag(memory_id, tag, add=False)

    async def _retag(self, memory_id: str, tag: str, *, add: bool) -> bool:
        tag = normalize_tag(tag)
        memory = await self.get_memory(memory_id)
        if memory is None or (tag in memory.tags) == add:
            return False
        memory.tags = [*memory.tags, tag] if add else [t for t in memory.tags if t != tag]
        memory.updated_at = utcnow()
        self._ingest(memory)
        await self._write([memory])
        return True

    async def get_all_tags(self) -> dict[str, int]:
        """Every tag in use with how many current memories carry it, most used first."""
        counts: dict[str, int] = {}
        for memory in _current(await self._scan()):
            for tag in memory.tags:
                counts[tag] = counts.get(tag, 0) + 1
        return dict(sorted(counts.items(), key=lambda item: (-item[1], item[0])))

    async def promote_memory(self, memory_id: str) -> bool:
        """Move a memory one tier toward HOT; False when missing or already HOT.

        A manual move is a change: the memory's idle time for `run_tier_review` starts again.
        """
        return await self._shift(memory_id, +1)

    async def demote_memory(self, memory_id: str) -> bool:
        """Move a memory one tier toward COLD; False when missing or already COLD.

        A manual move is a change: the memory's idle time for `run_tier_review` starts again.
        """
        return await self._shift(memory_id, -1)

    async def _shift(self, memory_id: str, step: int) -> bool:
        memory = await self.get_memory(memory_id)
        tier = None if memory is None else shifted(memory.tier, step)
        if memory is None or tier is None:
            return False
        memory.tier = tier
        # else the next review undoes a promotion of a memory idle for long
        memory.updated_at = utcnow()
        await self._write([memory])
        return True

    async def run_tier_review(self, *, now: datetime | None = None) -> tuple[int, int]:
        """Demote stale memories and promote busy ones by `tier_policy`.

        The moves land together or not at all (see `import_memories`).

        Returns:
            `(demoted_count, promoted_count)`.
        """
        if now is None:
            now = utcnow()
        elif not isinstance(now, datetime):
            raise InvalidRequest(f"now {now!r} must be a datetime such as utcnow(), or None")
        elif now.tzinfo is None:  # records' times are aware: a naive time is taken as UTC
            now = now.replace(tzinfo=UTC)
        demoted: list[Memory] = []
        promoted: list[Memory] = []
        for memory in _current(await self._scan()):
            tier = reviewed(memory, self.tier_policy, now)
            if tier is not None:
                hotter = TIER_LADDER.index(tier) > TIER_LADDER.index(memory.tier)
                memory.tier = tier
                (promoted if hotter else demoted).append(memory)
        await self._write_all_or_nothing(demoted + promoted, "tier review")
        return len(demoted), len(promoted)

    # -- export, import, backup --------------------------------------------------------------

    async def export_memories(self) -> str:
        """Every memory of the scope (all versions) as one JSON document, oldest first; the
        records of memories that expire carry `expires_at`."""
        return dumps(await self._export_document())

    async def import_memories(self, data: str) -> ImportCount:
        """Import an export (or a JSON list of records) into this scope; returns the count.

        Every record is validated before anything is written; then all are written, with the
        parents they are newer versions of, all or nothing: in one `put_many` on a store whose
        `put_many` is one transaction (SQLite), else one at a time, undoing the written ones
        when a write fails. Ids are kept, so importing the same data again changes nothing.
        Records are redacted like any write; a record without `provenance` gets `import`.
        A record with `expires_at` is written with the time it has left; one whose
        `expires_at` has passed is not written, and the count's `skipped` says how many were
        not. A record without it is written to last, even over a memory that expires.

        Raises:
            InvalidRequest: the data is not JSON or a record is malformed; nothing is written.
            StoreError: a write failed; the message says the import was rolled back, or, when
                undoing it failed too, which keys may still hold imported records.
        """
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
            self._ingest(memory, extract=not memory.entities)
        stored = await self._stored_copies(live)
        relinked = self._link_versions(live, stored)
        # The records' own expiries, not those of the copies they overwrite: the record is what
        # is restored. A stored parent relinked to an imported version keeps its own.
        expiring = _ttls(
            _expiry_times_of({parent.id: stored[parent.id] for parent in relinked})
            | {m.id: expiries[m.id] for m in live if m.id in expiries}
        )
        await self._write_all_or_nothing(
            live + relinked, "import", before=stored, expiring=expiring
        )
        if len(live) >= OPTIMIZE_AFTER_IMPORT:
            await self._optimize_store()
        return ImportCount(len(live), skipped=len(memories) - len(live))

    async def _optimize_store(self) -> None:
        """Run the store's `optimize()`, when it has one, after a bulk import. The import stands
        whatever happens: a failure is logged, not raised."""
        optimize = getattr(self.store, "optimize", None)
        if not callable(optimize):
            return
        try:
            await optimize()
        except StoreError as exc:
            logger.warning("imported into %s, but could not optimize the store: %s", self, exc)

    async def _stored_copies(self, memories: Sequence[Memory]) -> dict[str, MemoryItem]:
        """The scope's items under the records' ids and their parents' ids: what an import
        links to and what it overwrites. An empty scope, as a restore's usually is, reads none."""
        keys = [memory.id for memory in memories]
        keys += [memory.parent_id for memory in memories if memory.parent_id is not None]
        if not keys or not await self.store.query(self.scope, "", top_k=1):
            return {}
        return await self._items(list(dict.fromkeys(keys)))

    def _link_versions(self, memories: list[Memory], stored: dict[str, MemoryItem]) -> list[Memory]:
        """Link imported records to their newer versions; returns stored parents to rewrite.

        A record's link is its newest version among the records (exports from before
        `superseded_by` lack links), else its stored copy's in `stored` (an older export
        restored over newer versions leaves them newer), else its own. A stored parent of an
        imported version gets a link when it has none.
        """
        newest = newest_versions(memories)
        imported = {memory.id: memory for memory in memories}
        for memory_id, child in newest.items():
            if memory_id in imported:
                _set_successor(imported[memory_id], child.id)
        # the stored copies that matter: of records that no record supersedes, and of parents
        wanted = [i for i in imported if i not in newest] + [i for i in newest if i not in imported]
        relinked = []
        for memory_id in wanted:
            item = stored.get(memory_id)
            if item is None or is_tombstone(item.metadata):
                continue
            record = imported.get(memory_id)
            if record is None:
                if not is_superseded(item.value):
                    parent = _memory_of(item)
                    _set_successor(parent, newest[memory_id].id)
                    relinked.append(parent)
            # decoded only when its link carries over: most records of a re-import have none
            elif is_superseded(item.value) or successor_unknown(item.value, item.metadata):
                _carry_link(_memory_of(item), record)
        return relinked

    async def backup(self, path: str | Path) -> Path:
        """Write a ZIP backup of the scope to `path`: `memories.json` (the export) and
        `manifest.json` (scope, count, checksum). The file is replaced atomically; a path that
        is not a regular file (a pipe, /dev/stdout) is written to directly."""
        if not isinstance(path, (str, os.PathLike)) or not str(path):
            raise InvalidRequest(f"backup path {path!r} must be a file path such as 'backup.zip'")
        document = await self._export_document()
        return await asyncio.to_thread(write_backup, path, dumps(document), document)

    async def _export_document(self) -> dict[str, JSON]:
        memories = await self._scan()
        expiries = await self._expiry_times([memory.id for memory in memories])
        return export_document(memories, self.scope, expiries=expiries)

    # -- internals ---------------------------------------------------------------------------

    def _ingest(self, memory: Memory, *, extract: bool = True) -> None:
        """Redact every text field of `memory` in place, adding to its redaction record, and
        relink its entities."""
        content, count, kinds = _redact_text(memory.content)
        memory.content = content
        for name in ("change_summary", "subtype"):
            text = getattr(memory, name)
            if text is not None:
                text, more, more_kinds = _redact_text(text)
                setattr(memory, name, text)
                count, kinds = count + more, kinds | more_kinds
        if not (self.entities_enabled and extract):  # an import's entities: a secret is no name
            named = [(entity, redact(entity.name)) for entity in memory.entities]
            memory.entities = [entity for entity, found in named if not found.count]
            count += sum(found.count for _, found in named)
            kinds |= {kind for _, found in named for kind in found.types}
        tags = redact_json(list(memory.tags))
        user = {k: v for k, v in memory.metadata.items() if k not in REDACTION_KEYS}
        meta = redact_json(user)
        count += tags.count + meta.count
        kinds |= {*tags.types, *meta.types}
        memory.tags = normalize_tags(tags.value)  # type: ignore[arg-type]
        kept = {k: memory.metadata[k] for k in REDACTION_KEYS if k in memory.metadata}
        memory.metadata = redaction_metadata(count, kinds, {**meta.value, **kept})  # type: ignore[dict-item]
        if self.entities_enabled and extract:
            memory.entities = extract_entities(memory.content)

    async def _write(
        self, memories: Sequence[Memory], *, expiring: dict[str, int] | None = None
    ) -> None:
        """Write `memories` over their keys. `expiring`: the remaining TTLs of the items they
        overwrite (see `_ttls`), read here when not given."""
        if not memories:
            return
        await self._look_up_links(memories)  # so the rewrite records them
        if expiring is None:
            expiring = await self._expiring([memory.id for memory in memories])
        put_many = getattr(self.store, "put_many", None)
        if len(memories) > 1 and callable(put_many):
            await put_many([self._entry(memory, expiring.get(memory.id)) for memory in memories])
            return
        for memory in memories:
            await self._put(memory, expiring.get(memory.id))

    async def _write_all_or_nothing(
        self,
        memories: Sequence[Memory],
        what: str,
        *,
        tombstones: Sequence[str] = (),
        before: dict[str, MemoryItem] | None = None,
        expiring: dict[str, int] | None = None,
    ) -> None:
        """Write `tombstones` (keys `forget` empties), then `memories`, so that a failure leaves
        the scope as it was, as far as the store allows. `what` names the operation in errors.

        The items under the keys are read first (`before`: the caller's copies, when it has
        them). `expiring`: the `ttl_seconds` to write memories with, by id; by default a rewrite
        keeps the remaining TTL of the item it overwrites (see `_ttls`). A store whose
        `put_many` is one transaction (`atomic_put_many`: SQLite) gets one. Otherwise they are
        written one put at a time, the protocol's only write: should one fail, the keys tried
        (the failed one too, it may have landed) get back what `before` holds, and keys it
        lacks get a tombstone; then the error is raised, saying so.
        """
        await self._look_up_links(memories)  # so the rewrite records them
        if getattr(self.store, "atomic_put_many", False) is True:
            if expiring is None:
                expiring = await self._expiring([memory.id for memory in memories])
            await self.store.put_many(  # type: ignore[attr-defined]
                [(*self._tombstone(key), TOMBSTONE_TTL) for key in tombstones]
                + [self._entry(memory, expiring.get(memory.id)) for memory in memories]
            )
            return
        if before is None:
            before = await self._items([*tombstones, *(memory.id for memory in memories)])
        if expiring is None:
            expiring = _ttls(_expiry_times_of(before))
        tried: list[str] = []
        try:
            for key in tombstones:
                tried.append(key)
                await self._put_tombstone(key)
            for memory in memories:
                tried.append(memory.id)
                await self._put(memory, expiring.get(memory.id))
        except Exception as exc:
            raise await self._undo(tried, before, exc, what) from exc

    async def _undo(
        self, keys: list[str], before: dict[str, MemoryItem], error: Exception, what: str
    ) -> Exception:
        """Put `keys` back as `before` holds them after `error` stopped the writes of `what` (a
        plugin that crashed restarts on the next call); returns the error to raise, which says
        whether the scope is as it was or which keys may still hold the new writes."""
        kind = type(error) if isinstance(error, AnimusError) else StoreError
        ttls = _ttls(_expiry_times_of(before))
        for done, key in enumerate(keys):
            item = before.get(key)
            try:
                if item is None:
                    await self._put_tombstone(key)
                else:
                    await self.store.put(
                        self.scope,
                        key,
                        item.value,
                        metadata=dict(item.metadata),
                        ttl_seconds=ttls.get(key),
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
                    f"still hold {written} under {len(left)} key(s): {_listed(left)}; "
                    f"once the store works, {retry}"
                )
        return kind(f"{error}; the {what} was rolled back: {self.scope} holds what it held before")

    def _entry(self, memory: Memory, ttl_seconds: int | None) -> PutEntry:
        """`memory`'s `put_many` entry; the TTL field only where it expires."""
        entry = (self.scope, memory.id, *to_store(memory, agent=self._agent))
        return entry if ttl_seconds is None else (*entry, ttl_seconds)  # type: ignore[return-value]

    async def _put(self, memory: Memory, ttl_seconds: int | None) -> None:
        value, metadata = to_store(memory, agent=self._agent)
        await self.store.put(
            self.scope, memory.id, value, metadata=metadata, ttl_seconds=ttl_seconds
        )

    def _tombstone(self, memory_id: str) -> tuple[Scope, str, JSON, dict[str, JSON]]:
        """The scope, key, value and metadata of `memory_id`'s tombstone: empty, SECRET and
        COLD, written with `TOMBSTONE_TTL`, so no read returns it and the store stops holding
        it within a second."""
        metadata: dict[str, JSON] = {
            DELETED_KEY: True,
            "sensitivity": Sensitivity.SECRET.value,
            "tier": MemoryTier.COLD.value,
            **bucket_metadata(memory_id),
        }
        return self.scope, memory_id, {"content": ""}, metadata

    async def _put_tombstone(self, memory_id: str) -> None:
        """Overwrite `memory_id` with its tombstone (`_tombstone`)."""
        scope, key, value, metadata = self._tombstone(memory_id)
        await self.store.put(scope, key, value, metadata=metadata, ttl_seconds=TOMBSTONE_TTL)

    async def _get(self, memory_id: str) -> Memory | None:
        item = await self.store.get(self.scope, memory_id)
        if item is None or is_tombstone(item.metadata):
            return None
        return _memory_of(item)

    async def _expiring(self, keys: Sequence[str]) -> dict[str, int]:
        """The remaining `ttl_seconds` of the items under `keys` that expire, by key."""
        return _ttls(await self._expiry_times(keys))

    async def _expiry_times(self, keys: Sequence[str]) -> dict[str, datetime]:
        """When the items under `keys` that expire do, by key: from the store's key index when
        it offers one (`KeyExpiries`), else from the items."""
        if isinstance(self.store, KeyExpiries):
            return await self.store.expiries(self.scope, keys)
        return _expiry_times_of(await self._items(keys))

    async def _items(self, keys: Sequence[str]) -> dict[str, MemoryItem]:
        """The scope's live items among `keys`, by key: in batches from a store that reads
        many keys at once, with a `get` per key from any other."""
        if isinstance(self.store, BatchedKeyReads):
            return await self.store.get_many(self.scope, keys)
        unique = list(dict.fromkeys(keys))
        items = await asyncio.gather(*(self.store.get(self.scope, key) for key in unique))
        return {key: item for key, item in zip(unique, items, strict=True) if item is not None}

    async def _with_id_prefix(self, memory_id: str) -> list[QueryHit]:
        """At most `_cap` items whose ids may start with `memory_id` in any case, tombstones
        included."""
        prefix = memory_id.lower()
        if isinstance(self.store, KeyPrefixReads):
            # Ranges of the store's key index, so the lookup costs the same in any scope: the
            # layer's ids are lowercase, other tools' keys are matched as typed.
            found = {
                item.key: QueryHit(item.key, item.value, 1.0, item.metadata)
                for form in dict.fromkeys([prefix, memory_id])
                for item in await self.store.items_with_key_prefix(
                    self.scope, form, limit=self._cap
                )
            }
            return list(found.values())[: self._cap]
        # any store: list the ids' buckets (and items from before buckets), filtered
        buckets: list[str | None] = [prefix[:2]] if len(prefix) >= 2 else [prefix + c for c in _HEX]
        return await self.store.query(
            self.scope, "", top_k=self._cap, filters={BUCKET_KEY: [*buckets, None]}
        )

    async def _decode(
        self, hits: Sequence[QueryHit], *, whole_scope: bool = False
    ) -> list[tuple[Memory, float]]:
        """Hits as memories with their scores; tombstones dropped. Items written by other
        tools carry no record times, so those are read from the store's item. `whole_scope`:
        the hits are every item of the scope, so they hold every newer version there is."""
        live = [hit for hit in hits if not is_tombstone(hit.metadata)]
        missing = [hit.key for hit in live if stored_time(hit.value, "created_at") is None]
        times = await self._items(missing) if missing else {}
        decoded = []
        for hit in live:
            item = times.get(hit.key)
            memory = _read(
                hit.key,
                hit.value,
                hit.metadata,
                item.created_at if item else None,
                item.updated_at if item else None,
            )
            decoded.append((memory, hit.score))
        if whole_scope:
            _link_whole_scope([memory for memory, _ in decoded])
        return decoded

    def _criteria(
        self,
        memory_type: MemoryType | str | None,
        tags: Sequence[str] | None,
        source: str | None,
        min_confidence: float,
        allowed_tiers: Iterable[Sensitivity | str] | None,
        tier: MemoryTier | str | None,
    ) -> tuple[dict[str, JSON], Callable[[Memory], bool]]:
        """Store filters for what a store can filter, and a predicate rechecking everything
        (stores may filter loosely; the predicate is the rule)."""
        filters: dict[str, JSON] = {}
        kind = None if memory_type is None else _one(MemoryType, memory_type, "memory_type")
        wanted_tier = None if tier is None else _one(MemoryTier, tier, "tier")
        required = normalize_tags(tags)
        _number("min_confidence", min_confidence, 0.0, 1.0)
        if source is not None and (not isinstance(source, str) or not source):
            raise InvalidRequest(f"source {source!r} must be a non-empty string such as 'stated'")
        sensitivities = None
        if allowed_tiers is not None:
            if isinstance(allowed_tiers, str):
                allowed_tiers = [allowed_tiers]
            sensitivities = {_one(Sensitivity, s, "allowed_tiers") for s in allowed_tiers}
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

    async def _search(
        self, text: str, filters: dict[str, JSON], want: int, wanted: Callable[[Memory], bool]
    ) -> list[tuple[Memory, float]]:
        """Up to `want` current memories matching, best first, asking the store for more while
        filtering drops hits (up to its `max_query_top_k`)."""
        top_k = min(self._cap, max(2 * want, 20))
        while True:
            hits = await self.store.query(self.scope, text, top_k=top_k, filters=filters)
            found = [(m, s) for m, s in await self._decode(hits) if wanted(m)]
            found = await self._drop_superseded(found)
            if len(found) >= want or len(hits) < top_k or top_k >= self._cap:
                return found[:want]
            top_k = min(self._cap, top_k * 4)

    async def _drop_superseded(
        self, found: list[tuple[Memory, float]]
    ) -> list[tuple[Memory, float]]:
        """`found` less the memories a newer version replaced; a link counts only while the
        newer version is there (the few linked ones are read at once where the store allows)."""
        await self._look_up_links([memory for memory, _ in found])
        linked = [(m, m.superseded_by) for m, _ in found if m.superseded_by is not None]
        newer = await self._items([key for _, key in linked]) if linked else {}
        superseded = {
            memory.id
            for memory, key in linked
            if (item := newer.get(key)) is not None
            and not is_tombstone(item.metadata)
            and item.metadata.get("parent_id") == memory.id
        }
        return [(memory, score) for memory, score in found if memory.id not in superseded]

    async def _look_up_links(self, memories: Sequence[Memory]) -> None:
        """Find the newer versions of the memories read from records without links."""
        unlinked = [memory for memory in memories if _unlinked(memory)]
        if unlinked:
            await self._link_successors(unlinked)

    async def _link_successors(self, memories: list[Memory]) -> None:
        """Set `superseded_by` on `memories` from the newer versions in the scope.

        A listing filtered on `parent_id`, which stores without metadata indexes (SQLite)
        answer by reading the scope: only for records stored before the layer kept links
        (`forget` lists a versioned memory's relatives the same way). A listing that comes back
        full (the store's `max_query_top_k`) may have missed some: the memories are then split
        in two.
        """
        hits = await self.store.query(
            self.scope, "", top_k=self._cap, filters={"parent_id": [m.id for m in memories]}
        )
        if len(hits) >= self._cap and len(memories) > 1:
            half = len(memories) // 2
            await self._link_successors(memories[:half])
            await self._link_successors(memories[half:])
            return
        children = (
            from_store(hit.key, hit.value, hit.metadata)
            for hit in hits
            if not is_tombstone(hit.metadata)
        )
        _link_to_newest(memories, newest_versions(children))

    async def _touch(self, memories: list[Memory]) -> list[Memory]:
        """Count a recall: bump `access_count`, set `last_accessed`, move toward HOT."""
        now = utcnow()
        for memory in memories:
            after_access(memory, self.tier_policy, now)
        await self._write(memories)
        return memories

    async def _scan(self) -> list[Memory]:
        """Every live memory in the scope.

        One listing query when the scope fits under the store's `max_query_top_k`; otherwise
        slices by `_bucket` (16, then 256 of them, plus items without one) so each fits.
        """
        if isinstance(self.store, ScopeReads):
            return await self._scan_items(self.store)
        cap = self._cap
        hits = await self.store.query(self.scope, "", top_k=cap)
        if len(hits) < cap:
            return [memory for memory, _ in await self._decode(hits, whole_scope=True)]
        collected: list[QueryHit] = []
        for first in _HEX:
            group = [first + second for second in _HEX]
            part = await self._listing({BUCKET_KEY: group})
            if len(part) < cap:
                collected += part
                continue
            for bucket in group:
                part = await self._listing({BUCKET_KEY: bucket})
                if len(part) >= cap:
                    raise self._too_many(f"whose ids start with {bucket!r}")
                collected += part
        foreign = await self._listing({BUCKET_KEY: None})
        if len(foreign) >= cap:
            raise self._too_many("written by other tools (without a _bucket key)")
        collected += foreign
        return [memory for memory, _ in await self._decode(collected, whole_scope=True)]

    async def _scan_items(self, store: ScopeReads) -> list[Memory]:
        """`_scan` through a store that walks a scope in key order, a page per read."""
        items: list[MemoryItem] = []
        while True:
            after = items[-1].key if items else None
            page = await store.scope_items(self.scope, after=after, limit=SCAN_PAGE)
            items += page
            if len(page) < SCAN_PAGE:
                break
        memories = [_memory_of(item) for item in items if not is_tombstone(item.metadata)]
        _link_whole_scope(memories)
        return memories

    async def _listing(self, filters: dict[str, JSON]) -> list[QueryHit]:
        return await self.store.query(self.scope, "", top_k=self._cap, filters=filters)

    def _too_many(self, which: str) -> StoreError:
        return StoreError(
            f"{self.scope} holds {self._cap} or more memories {which}, more than this store "
            f"returns per query (max_query_top_k {self._cap}); the layer cannot enumerate "
            "them all: split them over more scopes or use a store with a larger max_query_top_k"
        )


def _redact_text(text: str) -> tuple[str, int, set[str]]:
    result = redact(text)
    return result.text, result.count, set(result.types)


def _merge(
    first: list[tuple[Memory, float]], second: list[tuple[Memory, float]]
) -> list[tuple[Memory, float]]:
    best: dict[str, tuple[Memory, float]] = {}
    for memory, score in [*first, *second]:
        if memory.id not in best or score > best[memory.id][1]:
            best[memory.id] = (memory, score)
    order = {memory.id: n for n, (memory, _) in enumerate([*first, *second])}
    return sorted(best.values(), key=lambda pair: (-pair[1], order[pair[0].id]))


# A record stored before the layer kept `superseded_by` does not say whether newer versions
# exist. A memory read from one carries this attribute until the layer looks them up: when a
# read needs to know (recall, history) and before the memory is written back, which links it.
_UNLINKED = "_unlinked_record"


def _read(
    key: str,
    value: JSON,
    metadata: dict[str, JSON],
    created_at: datetime | None,
    updated_at: datetime | None,
) -> Memory:
    memory = from_store(key, value, metadata, created_at=created_at, updated_at=updated_at)
    if successor_unknown(value, metadata):
        setattr(memory, _UNLINKED, True)
    return memory


def _listed(keys: Sequence[str]) -> str:
    """Up to ten keys, then how many more, for a one-line message."""
    return ", ".join(keys[:10]) + (f" and {len(keys) - 10} more" if len(keys) > 10 else "")


def _expiry_times_of(items: Mapping[str, MemoryItem]) -> dict[str, datetime]:
    """When the items in `items` that expire do, by key."""
    return {key: item.expires_at for key, item in items.items() if item.expires_at is not None}


def _ttls(expiry_times: Mapping[str, datetime]) -> dict[str, int]:
    """The `ttl_seconds` (at least one) that make rewrites expire when `expiry_times` say, by
    key: a rewrite of a memory keeps its expiry (another tool may have stored it with a TTL),
    or a recall would make it permanent."""
    now = utcnow()
    return {key: max(1, math.ceil((at - now).total_seconds())) for key, at in expiry_times.items()}


def _link_whole_scope(memories: list[Memory]) -> None:
    """Link `memories` stored without `superseded_by` to their newest versions: they are every
    memory of the scope, so every newer version there is is among them."""
    unlinked = [memory for memory in memories if _unlinked(memory)]
    _link_to_newest(unlinked, newest_versions(memories))


def _memory_of(item: MemoryItem) -> Memory:
    return _read(item.key, item.value, item.metadata, item.created_at, item.updated_at)


def _unlinked(memory: Memory) -> bool:
    return getattr(memory, _UNLINKED, False)


def _set_successor(memory: Memory, successor: str | None) -> None:
    memory.superseded_by = successor
    if _unlinked(memory):
        delattr(memory, _UNLINKED)


def _link_to_newest(memories: Iterable[Memory], newest: dict[str, Memory]) -> None:
    """Link each memory to its newest version in `newest` (see `newest_versions`), or to none."""
    for memory in memories:
        child = newest.get(memory.id)
        _set_successor(memory, None if child is None else child.id)


def _carry_link(stored: Memory, memory: Memory) -> None:
    """Give `memory` (a caller's copy) the version link of the record it overwrites."""
    memory.superseded_by = stored.superseded_by
    if _unlinked(stored):
        setattr(memory, _UNLINKED, True)
    elif _unlinked(memory):
        delattr(memory, _UNLINKED)


def _current(memories: list[Memory]) -> list[Memory]:
    """Memories no newer version points to."""
    superseded = {memory.parent_id for memory in memories if memory.parent_id}
    return [memory for memory in memories if memory.id not in superseded]


def _blocking(name: str) -> Any:
    return blocking_method(
        name,
        getattr(AsyncMemoryLayer, name),
        await_form=f"await AsyncMemoryLayer(store, scope).{name}(...)",
    )


class MemoryLayer:
    """The blocking memory layer: `AsyncMemoryLayer`'s methods, run to completion.

    For scripts and the CLI. Inside a running event loop (a notebook, an async flow) it refuses
    and names the `await` form; use `AsyncMemoryLayer` there. Arguments are those of
    `AsyncMemoryLayer`.

    Example:
        ```python
        from animus_flows.memory import MemoryLayer
        from animus_flows.protocol import Scope
        from animus_flows.stores import SQLiteStore

        memory = MemoryLayer(SQLiteStore(".animus/memory.db"), Scope("demo"))
        memory.remember("User prefers dark mode", tags=["preference", "ui"])
        print([m.content for m in memory.recall("dark mode")])
        ```
    """

    def __init__(
        self,
        store: object,
        scope: Scope,
        *,
        entities: bool = False,
        tier_policy: TierPolicy | None = None,
    ) -> None:
        self._async = AsyncMemoryLayer(store, scope, entities=entities, tier_policy=tier_policy)
        self._loop = LoopRunner("MemoryLayer")

    remember = _blocking("remember")
    remember_fact = _blocking("remember_fact")
    remember_procedure = _blocking("remember_procedure")
    update_memory = _blocking("update_memory")
    update_with_version = _blocking("update_with_version")
    forget = _blocking("forget")
    get_memory = _blocking("get_memory")
    recall = _blocking("recall")
    recall_by_tags = _blocking("recall_by_tags")
    recall_by_entity = _blocking("recall_by_entity")
    recall_for_egress = _blocking("recall_for_egress")
    recall_by_tags_for_egress = _blocking("recall_by_tags_for_egress")
    history = _blocking("history")
    add_tag = _blocking("add_tag")
    remove_tag = _blocking("remove_tag")
    get_all_tags = _blocking("get_all_tags")
    promote_memory = _blocking("promote_memory")
    demote_memory = _blocking("demote_memory")
    run_tier_review = _blocking("run_tier_review")
    export_memories = _blocking("export_memories")
    import_memories = _blocking("import_memories")
    backup = _blocking("backup")

    @property
    def store(self) -> MemoryStore:
        return self._async.store

    @property
    def scope(self) -> Scope:
        return self._async.scope

    @property
    def entities_enabled(self) -> bool:
        return self._async.entities_enabled

    @property
    def tier_policy(self) -> TierPolicy:
        return self._async.tier_policy

    def close(self, *, close_store: bool = False) -> None:
        """Release the facade's event loop; with `close_store`, close the store first.

        Any later call raises RuntimeError saying the layer is closed; closing again does
        nothing.
        """
        if self._loop.closed:
            return
        aclose = getattr(self.store, "aclose", None)
        if close_store and aclose is not None:
            self._loop.run(aclose(), await_form="await store.aclose()")
        self._loop.close()

    def __enter__(self) -> MemoryLayer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<MemoryLayer {self.scope} on {self.store!r}>"
