"""Seed 003's durable backend: the store a layer opens from a backend name and a database URL,
and the memory layer's reads of a store's ledger (`animus_flows.ledger`).

`MemoryLayer(backend="durable", database_url=..., workspace_id=...)` opens a store that keeps
a ledger: `SQLiteLedgerStore` for `sqlite:///PATH` or a plain path, the PostgreSQL store for
`postgresql://...`. `backend="sqlite"` opens the plain embedded store. Without a `store`
argument the environment decides (`ANIMUS_MEMORY_BACKEND`, `ANIMUS_DATABASE_URL`); arguments
win over it. `workspace_id` is the project id of the layer's scope.
"""

from __future__ import annotations

import os
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from animus_flows.errors import ConfigError, InvalidRequest
from animus_flows.ledger import LedgerEvent, LedgerStore, check_expected_version, require_ledger
from animus_flows.memory.records import Memory
from animus_flows.memory.store_form import from_store, is_legacy_tombstone, memory_of
from animus_flows.memory.writes import ScopedStore
from animus_flows.protocol import JSON, MemoryStore, Scope, check_id, shown_head
from animus_flows.stores.sqlite import SQLiteLedgerStore, SQLiteStore

BACKEND_ENV = "ANIMUS_MEMORY_BACKEND"
DATABASE_URL_ENV = "ANIMUS_DATABASE_URL"
#: The backends a layer opens by name: the embedded store, or one that keeps a ledger.
BACKENDS = ("sqlite", "durable")
#: Where `backend="sqlite"` keeps its file when no database URL is given.
DEFAULT_SQLITE_PATH = ".animus/memory.db"

_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")
_URL_FORMS = "sqlite:///PATH (or a file path) or postgresql://USER@HOST/DB"


def open_backend(
    store: object,
    scope: Scope | None,
    *,
    backend: str | None,
    database_url: str | Path | None,
    workspace_id: str | None,
) -> tuple[object, Scope | None, bool]:
    """The store and scope a layer runs on, and whether the layer opened the store (and so
    closes it): a `store` passed is used as it is; without one, the backend named by
    `backend`, else `ANIMUS_MEMORY_BACKEND`, else `sqlite` is opened.

    Raises:
        ConfigError: a backend, URL or workspace that cannot be used, naming it and the fix.
    """
    if store is not None:
        extra = [
            f"{name}="
            for name, value in (
                ("backend", backend),
                ("database_url", database_url),
                ("workspace_id", workspace_id),
            )
            if value is not None
        ]
        if extra:
            raise ConfigError(
                f"pass either a store or {', '.join(extra)}, not both: a store passed is used "
                "as it is"
            )
        return store, scope, False
    name, source = _setting("backend", backend, BACKEND_ENV)
    name = name or "sqlite"
    if name not in BACKENDS:
        raise ConfigError(
            f"{source} {shown_head(name)} is not a memory backend; use 'sqlite' (a local file) "
            f"or 'durable' (a ledger of every change, with database_url)"
        )
    url, url_source = _setting("database_url", database_url, DATABASE_URL_ENV)
    if name == "durable":
        if not url:
            raise ConfigError(
                f"backend 'durable' needs database_url= (or {DATABASE_URL_ENV}): {_URL_FORMS}"
            )
        opened: MemoryStore = durable_store(url, url_source)
    elif url and _scheme(url) not in (None, "sqlite"):
        # a PostgreSQL URL is a DSN, never shown
        what = "names a PostgreSQL database, not a" if _is_postgres(url) else "is no"
        shown = "" if _is_postgres(url) else f" {shown_head(url, 80)}"
        raise ConfigError(
            f"{url_source}{shown} {what} SQLite file, and backend 'sqlite' keeps one; pass "
            "backend='durable' (or set ANIMUS_MEMORY_BACKEND=durable) for that database"
        )
    else:
        opened = SQLiteStore(sqlite_path(url, url_source) if url else DEFAULT_SQLITE_PATH)
    return opened, _scope(scope, workspace_id), True


def durable_store(url: str, source: str = "database_url") -> MemoryStore:
    """The store that keeps a ledger at `url`: SQLite for `sqlite:///PATH` or a plain path,
    PostgreSQL for `postgresql://` and `postgres://` URLs."""
    scheme = _scheme(url)
    if _is_postgres(url):
        return postgres_store(url, source)
    if scheme not in (None, "sqlite"):
        raise ConfigError(
            f"{source} {shown_head(url, 80)} has the scheme {scheme!r}, which no memory store "
            f"speaks; use {_URL_FORMS}"
        )
    return SQLiteLedgerStore(sqlite_path(url, source))


def postgres_store(url: str, source: str = "database_url") -> MemoryStore:
    """The PostgreSQL store at `url` (in its default schema, `animus`): every PostgreSQL store
    keeps a ledger. Its module is imported only here, and psycopg (the `postgres` extra) only
    as it opens, so the layer imports without them. The URL is a DSN: no error shows it."""
    from animus_flows.stores.postgres import PostgresStore  # psycopg is imported when it opens

    try:
        return PostgresStore(url)
    except ConfigError as exc:  # the postgres extra missing, or a URL libpq cannot read
        raise ConfigError(f"{source}: {exc}") from None


def _is_postgres(url: str) -> bool:
    return _scheme(url) in ("postgresql", "postgres")


def sqlite_path(url: str, source: str = "database_url") -> str:
    """The file a SQLite URL names: `sqlite:///relative/path`, `sqlite:////absolute/path` (as
    SQLAlchemy spells them) or the path itself."""
    plain = _scheme(url) is None
    path = url if plain else url[len("sqlite://") :]
    if plain and path != ":memory:":
        return path
    if not path.startswith("/") or path in ("/", "/:memory:") or "?" in path:
        raise ConfigError(
            f"{source} {shown_head(url, 80)} names no SQLite file; write sqlite:///relative/path "
            "or sqlite:////absolute/path (the store needs a file, shared by every process)"
        )
    return path[1:]


def _scheme(url: str) -> str | None:
    found = _SCHEME.match(url)
    return None if found is None else found.group(1).lower()


def _setting(name: str, value: object, variable: str) -> tuple[str, str]:
    """An argument, else its environment variable (unset or empty: ''), with where it came
    from for messages."""
    if value is None:
        return os.environ.get(variable, "").strip(), variable
    if isinstance(value, Path) and name == "database_url":
        return str(value), name
    if not isinstance(value, str) or not value.strip():
        raise ConfigError(f"{name} {value!r} must be a non-empty string, or None")
    return value.strip(), name


def _scope(scope: Scope | None, workspace_id: object) -> Scope:
    if scope is not None and workspace_id is not None:
        raise ConfigError(
            "pass workspace_id= or scope=, not both: workspace_id names the scope "
            "Scope(workspace_id)"
        )
    if scope is not None:
        return scope
    if workspace_id is None:
        raise ConfigError(
            "a layer that opens its backend needs workspace_id= (its memories' project), or "
            "scope=Scope(project_id, agent_id=...)"
        )
    check_id("workspace_id", workspace_id, required=True)
    return Scope(workspace_id)  # type: ignore[arg-type]


# -- the ledger, through the layer ---------------------------------------------------------------


@dataclass(frozen=True)
class LedgerRecord:
    """One change of a memory's record, as the store's ledger keeps it.

    Attributes:
        memory_id: the memory's id.
        version: the record's version after this change (1 when it was first stored, + 1
            per change since: `update_memory`, a tag, a tier move, a recall's access count,
            `forget`); what `update_memory(..., expected_version=)` compares.
        op: `create`, `update` or `delete`.
        valid_from: when this state of the memory began to hold (UTC).
        valid_to: when it stopped (the next change, or its expiry); None while it holds.
        recorded_at: when the store recorded the change (UTC).
        memory: the memory as this change left it, None for a deletion.
    """

    memory_id: str
    version: int
    op: str
    valid_from: datetime
    valid_to: datetime | None
    recorded_at: datetime
    memory: Memory | None

    def to_json(self) -> dict[str, JSON]:
        return {
            "memory_id": self.memory_id,
            "version": self.version,
            "op": self.op,
            "valid_from": self.valid_from.isoformat(),
            "valid_to": None if self.valid_to is None else self.valid_to.isoformat(),
            "recorded_at": self.recorded_at.isoformat(),
            "memory": None if self.memory is None else self.memory.to_json(),
        }


def record_of(event: LedgerEvent) -> LedgerRecord:
    memory = None
    if event.op != "delete":
        memory = from_store(event.key, event.value, event.metadata, updated_at=event.valid_from)
        memory.ledger_version = event.version
    return LedgerRecord(
        event.key,
        event.version,
        event.op,
        event.valid_from,
        event.valid_to,
        event.recorded_at,
        memory,
    )


def check_expected(store: MemoryStore, expected_version: object) -> int:
    """`update_memory`'s `expected_version`, checked before anything is read or written."""
    require_ledger(store, "update_memory(..., expected_version=...)")
    checked = check_expected_version(expected_version)
    if not checked:  # a memory that is there has a version
        raise InvalidRequest(
            f"expected_version {expected_version!r} must be an integer >= 1: the memory's "
            "ledger_version as get_memory read it"
        )
    return checked


async def read(scoped: ScopedStore, memory_id: str) -> Memory | None:
    """The memory under this exact id, with its `ledger_version` when the store keeps a
    ledger (read with the memory, in one read)."""
    store = scoped.store
    if not isinstance(store, LedgerStore):
        return await scoped.get(memory_id)
    found = await store.get_versioned(scoped.scope, memory_id)
    if found is None or is_legacy_tombstone(found.item.metadata):
        return None
    memory = memory_of(found.item)
    memory.ledger_version = found.version
    return memory


async def with_ledger_version(scoped: ScopedStore, memory: Memory | None) -> Memory | None:
    """`memory` (found by a listing) read again with its `ledger_version`, where the store
    keeps a ledger."""
    if memory is None or not isinstance(scoped.store, LedgerStore):
        return memory
    return await read(scoped, memory.id)


async def ledger_records(
    scoped: ScopedStore,
    memory_id: str,
    resolve: Callable[[str], Awaitable[Memory | None]],
) -> list[LedgerRecord]:
    """Every change of the memory `memory_id` names, oldest first: a full id (of a memory
    forgotten since, too) or a unique prefix of a memory's id, which `resolve` looks up."""
    store = require_ledger(scoped.store, "get_ledger_events")
    events = await store.ledger_events(scoped.scope, memory_id)
    if not events:
        memory = await resolve(memory_id)
        if memory is not None and memory.id != memory_id:
            events = await store.ledger_events(scoped.scope, memory.id)
    return [record_of(event) for event in events]
