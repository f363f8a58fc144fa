"""The PostgreSQL store's ledger: every change of every item, recorded in the change's transaction.

Every PostgreSQL store keeps it, from the schema's first migration on: a database that many
workers share is written by the hook, the CLI and the layer alike, and a history that began
only when one of them asked for it would hold nothing of what came before (the SQLite store,
a file on one machine, turns it on per file instead). Events follow `animus_flows.ledger`:
per key a version counting its changes, valid time (a state holds from its change until the
next one, or its expiry) and transaction time (never earlier than the key's previous event,
whatever the clocks of the writers' machines do).

Every write locks its scopes' rows first (`writes.lock_scopes`), so a key's newest event read
in the write's transaction stays the newest until it commits: two writers never record one
version, and a versioned write's check holds when it writes. Should a writer that took no lock
record the same version, the ledger's key refuses the second, which leaves as a
`ConflictError` (`connection.Database.error`).
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from animus_flows.ledger import LedgerEvent, conflict
from animus_flows.protocol import Scope
from animus_flows.stores.postgres.reads import LIVE, moment

#: CTEs recording the items a statement wrote (a CTE `written`: scope_id, key, value,
#: metadata, expires_at), for `%(now)s`: `recorded` gives each key's new version.
#: `closed` fetches the events it ends by the rows `latest` read (their `ctid`, stable while
#: the scopes are locked), a TID scan of those only: joined on the ledger's key, the planner
#: hashed the whole ledger for each batch, a cost growing with it (18 ms at 40,000 events).
RECORD_WRITES = """latest AS (
    SELECT w.scope_id, w.key, w.value, w.metadata, w.expires_at, l.version, l.op, l.valid_to,
           l.ctid AS event, greatest(%(now)s::timestamptz, l.recorded_at) AS at
    FROM written w LEFT JOIN LATERAL (
        SELECT ctid, version, op, valid_to, recorded_at FROM {s}.ledger l
        WHERE l.scope_id = w.scope_id AND l.key = w.key ORDER BY l.version DESC LIMIT 1
    ) l ON true
), closed AS (
    UPDATE {s}.ledger l SET valid_to = t.at FROM latest t
    WHERE l.ctid = ANY(ARRAY(SELECT event FROM latest WHERE event IS NOT NULL))
      AND l.ctid = t.event AND (l.valid_to IS NULL OR l.valid_to > t.at)
), recorded AS (
    INSERT INTO {s}.ledger
        (scope_id, key, version, op, value, metadata, valid_from, valid_to, recorded_at)
    SELECT scope_id, key, coalesce(version, 0) + 1,
           CASE WHEN version IS NULL OR op = 'delete' OR valid_to <= %(now)s THEN 'create'
                ELSE 'update' END,
           value, metadata, at, expires_at, at
    FROM latest
    RETURNING scope_id, key, version
)"""

#: Record the deletes of `{keys}` (a `key` column) in scope `%(scope_id)s`: each key whose
#: newest event is a live state ends it and gets a `delete` event; the others change nothing.
_RECORD_DELETES = """
WITH latest AS (
    SELECT k.key, l.version, l.valid_to, greatest(%(now)s::timestamptz, l.recorded_at) AS at
    FROM {keys} AS k (key) CROSS JOIN LATERAL (
        SELECT version, op, valid_to, recorded_at FROM {s}.ledger l
        WHERE l.scope_id = %(scope_id)s AND l.key = k.key ORDER BY l.version DESC LIMIT 1
    ) l
    WHERE l.op <> 'delete' AND (l.valid_to IS NULL OR l.valid_to > %(now)s)
), closed AS (
    UPDATE {s}.ledger l SET valid_to = t.at FROM latest t
    WHERE l.scope_id = %(scope_id)s AND l.key = t.key AND l.version = t.version
      AND (l.valid_to IS NULL OR l.valid_to > t.at)
)
INSERT INTO {s}.ledger
    (scope_id, key, version, op, value, metadata, valid_from, valid_to, recorded_at)
SELECT %(scope_id)s, key, version + 1, 'delete', NULL, NULL, at, NULL, at FROM latest
"""
RECORD_DELETES = _RECORD_DELETES.replace("{keys}", "unnest(%(keys)s::text[])")
#: The deletes of every live item of a scope (`delete_scope`).
RECORD_SCOPE_DELETE = _RECORD_DELETES.replace(
    "{keys}",
    f"(SELECT i.key FROM {{s}}.items i WHERE i.scope_id = %(scope_id)s"
    f" AND {LIVE.replace('%s', '%(now)s')})",
)

#: A key's newest event, as much as a versioned write's check needs.
LATEST = """
SELECT version, op, valid_to FROM {s}.ledger WHERE scope_id = %s AND key = %s
ORDER BY version DESC LIMIT 1
"""

#: The live item under a key (as `reads.item_of` takes it) and its version, in one read.
VERSIONED_ITEM = f"""
SELECT i.key, i.value, i.metadata, i.created_at, i.updated_at, i.expires_at,
       (SELECT max(l.version) FROM {{s}}.ledger l WHERE l.scope_id = i.scope_id AND l.key = i.key)
FROM {{s}}.items i JOIN {{s}}.scopes s ON s.id = i.scope_id
WHERE s.project_id = %s AND s.agent_id = %s AND s.task_id = %s AND i.key = %s AND {LIVE}
"""

EVENTS = """
SELECT l.version, l.op, l.value, l.metadata, l.valid_from, l.valid_to, l.recorded_at
FROM {s}.ledger l JOIN {s}.scopes s ON s.id = l.scope_id
WHERE s.project_id = %s AND s.agent_id = %s AND s.task_id = %s AND l.key = %s
ORDER BY l.version
"""


async def check_version(
    conn: Any, sql: Any, scope: Scope, scope_id: int, key: str, expected: int, now: datetime
) -> None:
    """Raise `ConflictError` unless `key`'s live version is `expected` (0: no live item); the
    caller holds the scope's lock, so the answer holds until its transaction ends."""
    cursor = await conn.execute(sql(LATEST), (scope_id, key))
    last = await cursor.fetchone()
    stored = 0
    if last is not None:
        version, op, valid_to = last
        ended = op == "delete" or (valid_to is not None and valid_to <= now)
        stored = 0 if ended else int(version)
    if stored != expected:
        raise conflict(scope, key, expected, stored)


async def record_deletes(
    conn: Any, sql: Any, scope_id: int, now: datetime, keys: list[str] | None = None
) -> None:
    """Record the deletes of `keys` in a locked scope (None: of every live item), in the
    caller's transaction, before the items go."""
    params: dict[str, Any] = {"scope_id": scope_id, "now": now}
    if keys is None:
        await conn.execute(sql(RECORD_SCOPE_DELETE), params)
    else:
        await conn.execute(sql(RECORD_DELETES), {**params, "keys": keys})


def event_of(scope: Scope, key: str, row: tuple[Any, ...]) -> LedgerEvent:
    """An `EVENTS` row as an event."""
    version, op, value, metadata, valid_from, valid_to, recorded_at = row
    return LedgerEvent(
        scope,
        key,
        int(version),
        op,
        None if value is None else json.loads(value),
        {} if metadata is None else json.loads(metadata),
        moment(valid_from),
        None if valid_to is None else moment(valid_to),
        moment(recorded_at),
    )
