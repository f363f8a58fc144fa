"""The memory layer of seed 003 over any `MemoryStore`: one scope's memories as records.

`AsyncMemoryLayer` is the implementation; `MemoryLayer` is its blocking facade. Everything goes
through the protocol's methods, so the layer runs on every store; docs/memory.md says what
the protocol leaves to the layer. The work is split by concern: `records` and `store_form`
(a memory and its store item), `writes` (one scope's reads and all-or-nothing writes),
`versions`, `recall`, `scan` (enumeration with `list_items`) and `transfer` (export, import,
backup). This module is the public facade over them: longer than the ~500 lines the others keep
to because it is the documented API, seed 003's methods with their parameters and docstrings,
and its blocking twin; each method's logic lives in the modules it calls.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from animus_flows.errors import InvalidRequest
from animus_flows.memory import durable, scan, transfer, versions
from animus_flows.memory import recall as recalling
from animus_flows.memory.durable import LedgerRecord
from animus_flows.memory.entities import query_entity_keys
from animus_flows.memory.export import ImportCount
from animus_flows.memory.records import (
    ENTITIES_KEY,
    PROVENANCES,
    REDACTION_KEYS,
    SOURCES,
    Memory,
    MemoryTier,
    MemoryType,
    Sensitivity,
    check_choice,
    check_user_metadata,
    entity_key,
    normalize_tag,
    normalize_tags,
    redaction_record,
)
from animus_flows.memory.tiers import TierPolicy, shifted
from animus_flows.memory.writes import ScopedStore, ingest
from animus_flows.protocol import JSON, MemoryStore, Scope, check_count, utcnow
from animus_flows.stores.checks import check_scope
from animus_flows.stores.redacting import redacting
from animus_flows.stores.sync import LoopRunner, SyncStore, blocking_method

#: The agent the project scope's memories are recorded under (and the loader reports).
SHARED_AGENT = "shared"


def resolve_store(store: object) -> MemoryStore:
    """The async store behind `store` (a `MemoryStore`, a memory-store Block's `get_store()`,
    or a `SyncStore` facade's store), behind the redaction wrapper: every write is redacted."""
    if isinstance(store, SyncStore):
        store = store.store
    get_store = getattr(store, "get_store", None)
    if callable(get_store):
        store = get_store()
    if not isinstance(store, MemoryStore):
        raise InvalidRequest(
            f"store {store!r} is not a memory store; pass a MemoryStore (e.g. SQLiteStore) "
            "or a memory-store block such as SQLiteMemoryStore"
        )
    return redacting(store)


def _content(content: object) -> str:
    if not isinstance(content, str) or not content.strip():
        raise InvalidRequest(f"content {content!r} must be non-empty text")
    return content


def _id(memory_id: object) -> str:
    if not isinstance(memory_id, str) or not memory_id.strip():
        raise InvalidRequest(f"memory id {memory_id!r} must be a non-empty string (or prefix)")
    return memory_id.strip()


class AsyncMemoryLayer:
    """Seed 003's memory layer for one scope, on any memory store; every method is a coroutine.

    Args:
        store: a `MemoryStore`, or a memory-store Block (its `get_store()` is used). Without
            one, the layer opens the store its backend names (and closes it with the layer).
        scope: the scope the memories live in; `Scope(project_id)` is the shared project scope,
            `Scope(project_id, agent_id=...)` an agent's own.
        entities: seed 003's `entities.enabled`: extract entities from content on every write,
            link memories to them, and let `recall` match them.
        tier_policy: idle times and the access threshold of temperature tiers.
        backend: without a `store`: `durable` (a store that keeps a ledger of every change, at
            `database_url`) or `sqlite` (the embedded store); default `ANIMUS_MEMORY_BACKEND`,
            else `sqlite`.
        database_url: `sqlite:///PATH` (or a file path) or `postgresql://...`; default
            `ANIMUS_DATABASE_URL`, else `.animus/memory.db` for `sqlite`.
        workspace_id: with a backend, the project the memories live in: the scope is
            `Scope(workspace_id)` (or pass `scope`).

    Raises:
        InvalidRequest: the scope's agent id is `shared`, the name the loader and the stored
            records give the project scope (`Scope(project_id)`): use that scope instead.
        ConfigError: a backend, database URL or workspace that cannot be used (docs/memory.md,
            "The durable backend").

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
        store: object = None,
        scope: Scope | None = None,
        *,
        entities: bool = False,
        tier_policy: TierPolicy | None = None,
        backend: str | None = None,
        database_url: str | Path | None = None,
        workspace_id: str | None = None,
    ) -> None:
        store, scope, self.owns_store = durable.open_backend(
            store, scope, backend=backend, database_url=database_url, workspace_id=workspace_id
        )
        self.store = resolve_store(store)
        self.scope = scope = check_scope(scope)
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
        self._scoped = ScopedStore(self.store, scope, scope.agent_id or SHARED_AGENT)

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
        ingest(memory, entities=self.entities_enabled)
        await self._scoped.write([memory], expiring={})  # a new id: no expiry to keep
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

    async def update_memory(self, memory: Memory, *, expected_version: int | None = None) -> bool:
        """Write `memory` over the stored memory with its id, in place; sets `updated_at`.

        Its fields are checked again first, as `remember` checks them (a `source` or
        `provenance` the stored memory already has is kept). The redaction record stays the
        layer's: `_redaction_count` and `_redaction_types` come from the stored memory. The
        passed object is updated too (timestamp, redacted text, entities, and on a store with
        a ledger its new `ledger_version`). Returns False when no memory has that id.

        `expected_version` (a store that keeps a ledger: the durable backend) makes the write
        optimistic: it lands only when the memory's record is still at that ledger version
        (the `ledger_version` `get_memory` read), checked in the write's own transaction.

        Raises:
            ConflictError: the record is at another version (another writer changed it since
                it was read); nothing was written. Read it again and retry.
            InvalidRequest: `expected_version` on a store without a ledger, or not an integer
                >= 1.
        """
        if not isinstance(memory, Memory):
            raise InvalidRequest(f"update_memory takes a Memory, not {type(memory).__name__}")
        if expected_version is not None:
            durable.check_expected(self.store, expected_version)
        memory.validate()
        _content(memory.content)
        stored = await self._scoped.get(memory.id)
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
        versions.carry_link(stored, memory)  # the layer keeps the version links
        memory.updated_at = utcnow()
        ingest(memory, entities=self.entities_enabled)
        await self._scoped.write([memory], expected_version=expected_version)
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
        return await versions.new_version(
            self._scoped,
            parent,
            content=content,
            tags=new_tags,
            metadata=metadata,
            change_summary=change_summary,
            provenance=provenance,
            entities=self.entities_enabled,
        )

    async def forget(self, memory_id: str) -> bool:
        """Delete a memory by id or unique prefix; True when one was deleted.

        The memory's item is deleted from the store (the protocol's `delete`): no read returns
        it, and its content is gone. Forgetting the newest version makes the one before it
        current again: the delete and the parent's new link land together or not at all (a
        failure raises a `StoreError` saying the forget was rolled back). Forgetting a version
        in the middle of a chain joins the chain around it: its newer versions become newer
        versions of its parent, which stays history (v1 -> v3 once v2 is forgotten).
        """
        memory = await self.get_memory(memory_id)
        if memory is None:
            return False
        await versions.forget(self._scoped, memory)
        return True

    # -- reading -----------------------------------------------------------------------------

    async def get_memory(self, memory_id: str) -> Memory | None:
        """The memory with this id or unique id prefix, or None.

        Raises:
            InvalidRequest: the prefix matches several memories (they are named).
        """
        memory_id = _id(memory_id)
        exact = await durable.read(self._scoped, memory_id)  # with its ledger_version
        if exact is not None:
            return exact
        found = await scan.with_id_prefix(self._scoped, memory_id)
        return await durable.with_ledger_version(self._scoped, found)

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
        filters, wanted = recalling.criteria(
            memory_type, tags, source, min_confidence, allowed_tiers, tier
        )
        found = await recalling.search(self._scoped, query, filters, limit, wanted)
        if self.entities_enabled and query.strip():
            keys = query_entity_keys(query)
            if keys:
                linked = await recalling.search(
                    self._scoped, "", {**filters, ENTITIES_KEY: keys}, limit, wanted
                )
                scored = [(m, recalling.ENTITY_MATCH_SCORE) for m, _ in linked]
                found = recalling.merge(found, scored)
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
        filters, wanted = recalling.criteria(None, None, None, 0.0, allowed_tiers, None)
        filters[ENTITIES_KEY] = entity_key(name)
        found = await recalling.search(
            self._scoped, "", filters, check_count("limit", limit), wanted
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
        return [] if memory is None else await versions.history(self._scoped, memory)

    async def get_ledger_events(self, memory_id: str) -> list[LedgerRecord]:
        """Every change of one memory's record, oldest first, from the store's ledger (the
        durable backend): creates, updates (tags, tiers and recalls' access counts too) and the
        deletion, each with its `op`, `version`, `valid_from`, `valid_to`, `recorded_at` and the
        memory as it left it. `memory_id` is a full id (a forgotten memory's too) or a unique
        prefix of a current memory's. `history` is another thing: the memories
        `update_with_version` made.

        Raises:
            InvalidRequest: the store keeps no ledger (it names the backend that does), or the
                prefix matches several memories.
        """
        return await durable.ledger_records(self._scoped, _id(memory_id), self.get_memory)

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
        ingest(memory, entities=self.entities_enabled)
        await self._scoped.write([memory])
        return True

    async def get_all_tags(self) -> dict[str, int]:
        """Every tag in use with how many current memories carry it, most used first."""
        return await scan.tag_counts(self._scoped)

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
        await self._scoped.write([memory])
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
        demoted, promoted = await scan.review_tiers(self._scoped, self.tier_policy, now)
        await self._scoped.write_all_or_nothing(demoted + promoted, "tier review")
        return len(demoted), len(promoted)

    # -- export, import, backup --------------------------------------------------------------

    async def export_memories(self) -> str:
        """Every memory of the scope (all versions) as one JSON document, oldest first; the
        records of memories that expire carry `expires_at`."""
        return await transfer.export_text(self._scoped)

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
        return await transfer.import_records(self._scoped, data, entities=self.entities_enabled)

    async def backup(self, path: str | Path) -> Path:
        """Write a ZIP backup of the scope to `path`: `memories.json` (the export) and
        `manifest.json` (scope, count, checksum). The file is replaced atomically; a path that
        is not a regular file (a pipe, /dev/stdout) is written to directly."""
        return await transfer.backup(self._scoped, path)

    # -- internals ---------------------------------------------------------------------------

    async def _touch(self, memories: list[Memory]) -> list[Memory]:
        return await recalling.touch(self._scoped, memories, self.tier_policy, utcnow())


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

        Seed 003's durable backend, with a ledger of every change (PostgreSQL, or SQLite):
        ```python
        from animus_flows.memory import MemoryLayer

        with MemoryLayer(backend="durable", database_url="sqlite:///.animus/durable.db",
                         workspace_id="demo") as memory:
            note = memory.remember("Releases go out on Fridays")
            note.content = "Releases go out on Thursdays"
            memory.update_memory(note, expected_version=note.ledger_version)
            print([(e.op, e.version) for e in memory.get_ledger_events(note.id)])
        ```
    """

    def __init__(
        self,
        store: object = None,
        scope: Scope | None = None,
        *,
        entities: bool = False,
        tier_policy: TierPolicy | None = None,
        backend: str | None = None,
        database_url: str | Path | None = None,
        workspace_id: str | None = None,
    ) -> None:
        self._async = AsyncMemoryLayer(
            store,
            scope,
            entities=entities,
            tier_policy=tier_policy,
            backend=backend,
            database_url=database_url,
            workspace_id=workspace_id,
        )
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
    get_ledger_events = _blocking("get_ledger_events")
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
        """Release the facade's event loop; with `close_store`, or when the layer opened its
        store (from a backend), close the store first.

        Any later call raises RuntimeError saying the layer is closed; closing again does
        nothing.
        """
        if self._loop.closed:
            return
        aclose = getattr(self.store, "aclose", None)
        if (close_store or self._async.owns_store) and aclose is not None:
            self._loop.run(aclose(), await_form="await store.aclose()")
        self._loop.close()

    def __enter__(self) -> MemoryLayer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<MemoryLayer {self.scope} on {self.store!r}>"
