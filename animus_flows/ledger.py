"""The ledger extension of the memory-store protocol: every change of an item, kept for good.

A store that keeps a ledger (`LedgerStore`, an optional in-process extension like
`BatchedKeyReads`: no JSON-RPC method) records, in the transaction of each change, one
`LedgerEvent` per put and delete of an item. Each key has its own version: 1 on its first
create, + 1 on every change after (an update, a delete, a create after a delete), so a key's
events are numbered 1, 2, 3, ... for as long as the store lives. Events are bitemporal:
`valid_from`/`valid_to` say when that state of the item held (valid time: a state ends when a
later change supersedes it, or when the item expires), `recorded_at` when the store recorded it
(transaction time). A versioned write (`put_versioned(..., expected_version=N)`) is a
compare-and-set: it writes only when the key's live version is N, else raises `ConflictError`
and writes nothing. Pure definitions, no I/O; the stores implement them.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Literal, Protocol, runtime_checkable

from animus_flows.errors import ConflictError, InvalidRequest
from animus_flows.protocol import JSON, MemoryItem, Scope, shown_head

LedgerOp = Literal["create", "update", "delete"]
#: The ops of ledger events: `create` (the key had no live item), `update` (it had one),
#: `delete` (it is gone: the event's value is None, and its state, absence, holds until a create).
LEDGER_OPS: tuple[LedgerOp, ...] = ("create", "update", "delete")


@dataclass(frozen=True, slots=True)
class LedgerEvent:
    """One change of an item, as the ledger keeps it.

    Attributes:
        scope: the item's scope.
        key: the item's key.
        version: the key's version after this change: 1 for its first create, then + 1 per
            change.
        op: `create`, `update` or `delete`.
        value: the item's value after the change (None for a delete).
        metadata: the item's metadata after the change (`{}` for a delete).
        valid_from: when this state of the item began to hold (UTC).
        valid_to: when it stopped: the next change of the key, or the item's expiry; None while
            it holds.
        recorded_at: when the store recorded the change (transaction time, UTC); a key's events
            never go back in time.
    """

    scope: Scope
    key: str
    version: int
    op: LedgerOp
    value: JSON
    metadata: dict[str, JSON]
    valid_from: datetime
    valid_to: datetime | None
    recorded_at: datetime

    def to_json(self) -> dict[str, JSON]:
        return {
            "scope": self.scope.to_json(),
            "key": self.key,
            "version": self.version,
            "op": self.op,
            "value": self.value,
            "metadata": self.metadata,
            "valid_from": _iso(self.valid_from),
            "valid_to": _iso(self.valid_to),
            "recorded_at": _iso(self.recorded_at),
        }


@dataclass(frozen=True, slots=True)
class VersionedItem:
    """A live item with its key's version, read or written in one transaction."""

    item: MemoryItem
    version: int


@runtime_checkable
class LedgerStore(Protocol):
    """An optional, in-process extension of a `MemoryStore`: a ledger of every change, and
    writes that check the version they expect (see the module).

    Every change the store makes (`put`, `put_many`, `delete`, `delete_scope` (a `delete`
    per live item), and `put_versioned`) is recorded in the transaction that makes it, and
    the history of a key outlives its scope's deletion. An item that expires ends its state at
    its expiry (its event's `valid_to`; purging it records nothing); a write after that is a
    `create`. A key's `recorded_at` never goes back, whatever the clocks do.
    `animus_flows.testing.ledger.LedgerConformance` checks all of it.

    - `get_versioned` returns the live item under `key` with its version, or None.
    - `put_versioned` writes like `put` and returns the item with its new version. With
      `expected_version=N` it writes only when the key's live version is N (0: the key has no
      live item: never written, deleted or expired), checked in the write's own transaction;
      otherwise it raises `ConflictError` (see `conflict`) and writes nothing. None writes
      whatever the version.
    - `ledger_events` returns every event of the key, oldest first (`[]` for a key never
      written), deleted keys included.

    Arguments are checked as `put` and `get` check them (`check_expected_version` for
    `expected_version`).
    """

    async def get_versioned(self, scope: Scope, key: str) -> VersionedItem | None: ...

    async def put_versioned(
        self,
        scope: Scope,
        key: str,
        value: JSON,
        *,
        expected_version: int | None = None,
        metadata: dict[str, JSON] | None = None,
        ttl_seconds: int | None = None,
    ) -> VersionedItem: ...

    async def ledger_events(self, scope: Scope, key: str) -> list[LedgerEvent]: ...


def check_expected_version(expected_version: object) -> int | None:
    """`expected_version` when it is None or an integer >= 0 (not a bool); else InvalidRequest."""
    if expected_version is None:
        return None
    if (
        isinstance(expected_version, bool)
        or not isinstance(expected_version, int)
        or expected_version < 0
    ):
        raise InvalidRequest(
            f"expected_version {expected_version!r} must be an integer >= 0 (the version "
            "get_versioned returned; 0: the key has no item), or None to write whatever it is"
        )
    return expected_version


def conflict(scope: Scope, key: str, expected: int, stored: int) -> ConflictError:
    """The one error every store raises for a versioned write that found another version."""
    found = "has no live item (version 0)" if stored == 0 else f"is at version {stored}"
    return ConflictError(
        f"key {shown_head(key)} in {scope} {found}, not the expected version {expected}: "
        "another writer changed it since it was read, and nothing was written; read it again "
        "and retry with its current version"
    )


def require_ledger(store: object, what: str) -> LedgerStore:
    """`store` when it keeps a ledger; else InvalidRequest saying `what` needs one."""
    if isinstance(store, LedgerStore):
        return store
    raise InvalidRequest(
        f"{what} needs a store that keeps a ledger: MemoryLayer(backend='durable', "
        f"database_url=...), a SQLiteLedgerStore or the PostgreSQL store; {store!r} keeps none"
    )


def _iso(moment: datetime | None) -> str | None:
    return None if moment is None else moment.astimezone(UTC).isoformat()
