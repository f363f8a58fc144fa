"""The SQLite store's ledger: every change of every item, recorded in the change's transaction.

A file keeps a ledger once a `SQLiteLedgerStore` has opened it (`turn_on`, recorded in
`animus_meta` as `ledger_since`): from then on every store that writes to the file records its
changes here, whatever it was opened as, because each write transaction reads the flag. A
writer can only skip the ledger by being older than schema 5, and such a writer refuses the
file. Events follow `animus_flows.ledger`: per key a version counting its changes, valid time
(a state holds from its change until the next one, or its expiry) and transaction time (never
earlier than the key's previous event, whatever the clocks do).
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from animus_flows.errors import StoreUnavailable
from animus_flows.ledger import LedgerEvent, conflict
from animus_flows.protocol import Scope
from animus_flows.stores.sqlite.connection import transaction
from animus_flows.stores.sqlite.index import Row
from animus_flows.stores.sqlite.reads import LIVE, moment, scope_ids
from animus_flows.stores.sqlite.schema import id_range, meta, set_meta

#: The `animus_meta` entry of a file that keeps a ledger: when it began (ISO 8601, UTC).
LEDGER_SINCE = "ledger_since"

_IN_SCOPE = "project_id = ? AND agent_id = ? AND task_id = ?"
# The newest event of each key of a JSON list (a probe of the unique index per key).
_LATEST = (
    "SELECT key, seq, version, op, valid_to, recorded_at FROM ledger WHERE seq IN"
    f" (SELECT (SELECT seq FROM ledger WHERE {_IN_SCOPE} AND key = j.value"
    " ORDER BY version DESC LIMIT 1) FROM json_each(?) j)"
)
_RECORD = (
    "INSERT INTO ledger (project_id, agent_id, task_id, key, version, op, value, metadata,"
    " valid_from, valid_to, recorded_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)
_CLOSE = "UPDATE ledger SET valid_to = ? WHERE seq = ?"


@dataclass(frozen=True, slots=True)
class Latest:
    """A key's newest event, as much of it as a change needs."""

    seq: int
    version: int
    op: str
    valid_to: float | None
    recorded_at: float

    def live_version(self, now: float) -> int:
        """The version of the key's live item, 0 when it has none (deleted or expired)."""
        ended = self.op == "delete" or (self.valid_to is not None and self.valid_to <= now)
        return 0 if ended else self.version


def keeps_ledger(conn: sqlite3.Connection) -> bool:
    """Whether the file keeps a ledger (read in every write transaction)."""
    return meta(conn, LEDGER_SINCE) is not None


def turn_on(conn: sqlite3.Connection, now: float) -> int | None:
    """Make the file keep a ledger, each live item starting its history at version 1 (valid
    from its last write; recorded now). Returns the items, None when it kept one already."""
    if keeps_ledger(conn):
        return None
    with transaction(conn):
        if keeps_ledger(conn):  # another process turned it on meanwhile
            return None
        started = conn.execute(
            "INSERT INTO ledger (project_id, agent_id, task_id, key, version, op, value,"
            " metadata, valid_from, valid_to, recorded_at) SELECT s.project_id, s.agent_id,"
            " s.task_id, i.key, 1, 'create', i.value, i.metadata, i.updated_at, i.expires_at, ?"
            f" FROM items i JOIN scopes s ON s.id = i.scope_id WHERE {LIVE}",
            (now, now),
        ).rowcount
        set_meta(conn, LEDGER_SINCE, datetime.fromtimestamp(now, UTC).isoformat())
    return started


def _latest(conn: sqlite3.Connection, scope: Scope, keys: Iterable[str]) -> dict[str, Latest]:
    rows = conn.execute(_LATEST, (*scope_ids(scope), json.dumps(list(keys))))
    return {key: Latest(*fields) for key, *fields in rows}


def record_puts(
    conn: sqlite3.Connection,
    scope: Scope,
    rows: Mapping[str, Row],
    now: float,
    expected_version: int | None = None,
) -> dict[str, int]:
    """Record the writes of `rows` into `scope` (before the items are written, in their
    transaction); returns each key's new version, `{}` when the file keeps no ledger.

    With `expected_version`, a key whose live version is another raises `ConflictError`: the
    caller's transaction rolls back, and nothing is written.
    """
    if not keeps_ledger(conn):
        if expected_version is not None:  # only a SQLiteLedgerStore asks, which turned it on
            raise StoreUnavailable(
                "this SQLite store file keeps no ledger, so the expected version cannot be "
                "checked and nothing was written; open the file with SQLiteLedgerStore"
            )
        return {}
    latest = _latest(conn, scope, rows)
    if expected_version is not None:
        for key in rows:
            last = latest.get(key)
            stored = 0 if last is None else last.live_version(now)
            if stored != expected_version:
                raise conflict(scope, key, expected_version, stored)
    closes, events, versions = [], [], {}
    for key, row in rows.items():
        last = latest.get(key)
        at = now if last is None else max(now, last.recorded_at)
        op = "create" if last is None or not last.live_version(now) else "update"
        if last is not None and (last.valid_to is None or last.valid_to > at):
            closes.append((at, last.seq))
        versions[key] = 1 if last is None else last.version + 1
        events.append(
            (*scope_ids(scope), key, versions[key], op, row.value, row.metadata, at,
             row.expires_at, at)
        )  # fmt: skip
    conn.executemany(_CLOSE, closes)
    conn.executemany(_RECORD, events)
    return versions


def record_deletes(conn: sqlite3.Connection, scope: Scope, keys: Iterable[str], now: float) -> None:
    """Record the deletes of `keys` in `scope` (in their transaction): each key with a live
    item ends its state and gets a `delete` event; keys with none change nothing."""
    if not keeps_ledger(conn):
        return
    closes, events = [], []
    for key, last in _latest(conn, scope, keys).items():
        if not last.live_version(now):
            continue
        at = max(now, last.recorded_at)
        closes.append((at, last.seq))
        events.append(
            (*scope_ids(scope), key, last.version + 1, "delete", None, None, at, None, at)
        )
    conn.executemany(_CLOSE, closes)
    conn.executemany(_RECORD, events)


def record_scope_delete(conn: sqlite3.Connection, scope: Scope, scope_id: int, now: float) -> None:
    """Record the deletes of every live item of `scope` (its row id is `scope_id`)."""
    if not keeps_ledger(conn):
        return
    live = conn.execute(
        f"SELECT i.key FROM items i WHERE i.id BETWEEN ? AND ? AND {LIVE}",
        (*id_range(scope_id), now),
    )
    record_deletes(conn, scope, [key for (key,) in live], now)


def versioned_row(conn: sqlite3.Connection, scope: Scope, key: str, now: float) -> Any:
    """The live item under `key` as `reads.item_of` takes it, then its version; None when
    there is none. One statement: the item and its version are of one moment."""
    return conn.execute(
        "SELECT i.key, i.value, i.metadata, i.created_at, i.updated_at, i.expires_at,"
        " (SELECT max(l.version) FROM ledger l WHERE l.project_id = s.project_id"
        " AND l.agent_id = s.agent_id AND l.task_id = s.task_id AND l.key = i.key)"
        " FROM items i JOIN scopes s ON s.id = i.scope_id"
        " WHERE s.project_id = ? AND s.agent_id = ? AND s.task_id = ? AND i.key = ?"
        f" AND {LIVE}",
        (*scope_ids(scope), key, now),
    ).fetchone()


def events(conn: sqlite3.Connection, scope: Scope, key: str) -> list[LedgerEvent]:
    """Every event of `key` in `scope`, oldest first."""
    rows = conn.execute(
        "SELECT version, op, value, metadata, valid_from, valid_to, recorded_at FROM ledger"
        f" WHERE {_IN_SCOPE} AND key = ? ORDER BY version",
        (*scope_ids(scope), key),
    )
    return [
        LedgerEvent(
            scope,
            key,
            version,
            op,
            None if value is None else json.loads(value),
            {} if metadata is None else json.loads(metadata),
            moment(valid_from),  # type: ignore[arg-type]
            moment(valid_to),
            moment(recorded_at),  # type: ignore[arg-type]
        )
        for version, op, value, metadata, valid_from, valid_to, recorded_at in rows
    ]
