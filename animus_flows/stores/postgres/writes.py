"""Writing the PostgreSQL store: scopes locked first, in one order, then items in one statement.

Every write transaction starts by locking the rows of the scopes it touches (`lock_scopes`,
creating the missing ones), in the order of their ids as text (`project_id`, `agent_id`,
`task_id`, by code point). Writes to one scope therefore take turns, which keeps its statistics
exact (the triggers of `schema` update them), and writes to several scopes cannot deadlock.
Locking a scope also bumps its `version`, which tells a process keeping the scope's vectors in
memory to read them again; this process's own copy follows the change instead
(`SemanticLeg.changed`, with the version before and after).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from animus_flows.protocol import Scope, indexed_text, is_valid_unicode
from animus_flows.stores.postgres import ledger
from animus_flows.stores.postgres.ledger import RECORD_WRITES
from animus_flows.stores.postgres.reads import scope_ids
from animus_flows.stores.postgres.schema import SKIP_STATS

#: The most characters of an item's text indexed: PostgreSQL refuses a tsvector over 1 MiB,
#: which a text of a few hundred thousand words could reach. The rest is stored, not indexed.
MAX_INDEXED_CHARS = 262_144
#: Items written per statement of a batch (all of a batch in one transaction). Not fewer: the
#: statistics trigger upserts each (scope, lexeme) once per statement, so statements of 500
#: cost a quarter more than one of 2,000 (pipelining statements gained 3%, noise: not kept).
BATCH_ROWS = 2000

#: An item's postings (`schema`): its lexemes, each prefixed with its scope's id.
POSTINGS = "ARRAY(SELECT {scope} || 'x' || lexeme FROM unnest(tsvector_to_array({tsv})) lexeme)"

LOCK_SCOPES = """
INSERT INTO {s}.scopes AS s (project_id, agent_id, task_id, version)
SELECT x.p, x.a, x.t, nextval('{s}.scope_versions')
FROM unnest(%s::text[], %s::text[], %s::text[]) AS x (p, a, t)
ORDER BY x.p COLLATE "C", x.a COLLATE "C", x.t COLLATE "C"
ON CONFLICT (project_id, agent_id, task_id)
DO UPDATE SET previous_version = s.version, version = excluded.version
RETURNING s.id, s.project_id, s.agent_id, s.task_id, s.previous_version, s.version
"""

#: Lock an existing scope without creating it (deletes): its id, or no row.
LOCK_SCOPE = """
SELECT id FROM {s}.scopes
WHERE project_id = %s AND agent_id = %s AND task_id = %s FOR UPDATE
"""

BUMP_VERSION = """
UPDATE {s}.scopes SET previous_version = version, version = nextval('{s}.scope_versions')
WHERE id = %s RETURNING previous_version, version
"""

#: A batch's texts analysed ahead of its write (`analyse`): each text's tsvector as text, in order.
ANALYSE = """
SELECT to_tsvector(%s::regconfig, x.body)::text
FROM unnest(%b::text[]) WITH ORDINALITY AS x (body, n) ORDER BY x.n
"""
#: `put_many` batches from this many items are analysed ahead of their write (`analyse`).
ANALYSE_APART_ROWS = 500

#: Upsert items given as parallel arrays; an overwritten item keeps its id and creation time
#: (unless it had expired) and loses its vector, which was of its old text. Each write is
#: recorded in the ledger by the same statement (`ledger.RECORD_WRITES`), which gives each key's
#: new version.
#: `analysed` is MATERIALIZED so that `to_tsvector` (a third of a write's server time) runs once per
#: item: inlined, the planner would evaluate it for each of `tsv`, `postings` and `length`. An
#: item whose tsvector was computed ahead (`analyse`) brings it as text (`tsvs`; '' when not).
#: The arrays go in binary (`%b`): psycopg escapes each element of a text-format array with a
#: regular expression, 50 µs an item, ten times the binary form (`expires`, mostly NULLs,
#: stays text: psycopg cannot type a binary array of NULLs).
UPSERT = f"""
WITH analysed AS MATERIALIZED (
    SELECT x.*, coalesce(nullif(x.given, '')::tsvector,
                         to_tsvector(%(language)s::regconfig, x.body)) AS tsv
    FROM unnest(%(scope_ids)b::bigint[], %(keys)b::text[], %(values)b::text[],
                %(metadata)b::text[], %(expires)s::timestamptz[], %(texts)b::text[],
                %(tsvs)b::text[])
         AS x (scope_id, key, value, metadata, expires_at, body, given)
), written AS (
    INSERT INTO {{s}}.items AS i
        (scope_id, key, value, metadata, created_at, updated_at, expires_at, tsv, postings, length)
    SELECT a.scope_id, a.key, a.value, a.metadata, %(now)s, %(now)s, a.expires_at, a.tsv,
           {POSTINGS.format(scope="a.scope_id", tsv="a.tsv")},
           length(a.tsv)
    FROM analysed a
    ON CONFLICT (scope_id, key) DO UPDATE SET
        value = excluded.value,
        metadata = excluded.metadata,
        updated_at = excluded.updated_at,
        expires_at = excluded.expires_at,
        tsv = excluded.tsv,
        postings = excluded.postings,
        length = excluded.length,
        created_at = CASE WHEN i.expires_at <= excluded.updated_at
                          THEN excluded.created_at ELSE i.created_at END
    RETURNING i.id, i.scope_id, i.key, i.created_at, i.value, i.metadata, i.expires_at
), unvectored AS (
    DELETE FROM {{s}}.item_vectors v USING written w WHERE v.item_id = w.id RETURNING v.item_id
), {RECORD_WRITES}
SELECT w.id, w.scope_id, w.key, w.created_at, u.item_id IS NOT NULL, r.version
FROM written w LEFT JOIN unvectored u ON u.item_id = w.id
JOIN recorded r ON r.scope_id = w.scope_id AND r.key = w.key
"""

#: Items' vectors, written: the items leave the embedding queue, if they were in it.
PUT_VECTORS = """
WITH dequeued AS (DELETE FROM {s}.embedding_queue WHERE item_id = ANY(%(ids)s))
INSERT INTO {s}.item_vectors (item_id, scope_id, vector)
SELECT * FROM unnest(%(ids)s::bigint[], %(scope_ids)s::bigint[], %(vectors)s::bytea[])
ON CONFLICT (item_id) DO UPDATE SET vector = excluded.vector
"""

#: Items written without their vectors wait for them, newest first; one queued already goes
#: to the front, free to be claimed again (a process embedding its old text stores nothing).
QUEUE = """
INSERT INTO {s}.embedding_queue (item_id, queued_at) SELECT unnest(%s::bigint[]), %s
ON CONFLICT (item_id)
DO UPDATE SET queued_at = excluded.queued_at, claimed_until = NULL, claimed_by = NULL
"""

#: Delete one key of a locked scope: its id and whether it was live.
DELETE_KEY = """
DELETE FROM {s}.items WHERE scope_id = %s AND key = %s
RETURNING id, expires_at IS NULL OR expires_at > %s
"""

#: Empty a locked scope; its statistics go whole rather than item by item. Its row stays: its
#: id names its history in the ledger, and its version tells readers its vectors went.
DELETE_SCOPE_ITEMS = """
WITH gone AS (DELETE FROM {s}.items WHERE scope_id = %(id)s RETURNING expires_at)
SELECT count(*) FILTER (WHERE expires_at IS NULL OR expires_at > %(now)s) FROM gone
"""
DELETE_SCOPE_REST = [
    "DELETE FROM {s}.term_df WHERE scope_id = %(id)s",
    "UPDATE {s}.scopes SET items = 0, terms = 0 WHERE id = %(id)s",
]
SKIP_STATISTICS = f"SELECT set_config('{SKIP_STATS}', 'on', true)"

#: The scopes holding expired items, locked in the writers' order.
LOCK_EXPIRED_SCOPES = """
SELECT id FROM {s}.scopes WHERE id IN (
    SELECT DISTINCT scope_id FROM {s}.items WHERE expires_at IS NOT NULL AND expires_at <= %s
)
ORDER BY project_id, agent_id, task_id FOR UPDATE
"""

PURGE_EXPIRED = """
DELETE FROM {s}.items WHERE scope_id = ANY(%s) AND expires_at IS NOT NULL AND expires_at <= %s
RETURNING id, scope_id
"""


async def analyse(db: Any, language: str, texts: list[str]) -> list[str]:
    """The tsvectors (as text) of `texts` under the text search configuration `language`, in
    order, analysed in two halves on two pooled connections at once.

    A large `put_many` analyses its texts this way while it checks and encodes its entries,
    then writes them with their tsvectors given: the server's analysis (a third of a write's
    time) runs beside the client's work and on both cores, not inside the write. One writer
    ingests 1.2x as fast (benchmarks/bench_postgres.py, six runs side by side).
    """

    async def part(bodies: list[str]) -> list[str]:
        async with db.connection() as conn:
            cursor = await conn.execute(ANALYSE, (language, bodies))
            return [tsv for (tsv,) in await cursor.fetchall()]

    bodies = [indexed_body(text) for text in texts]
    half = len(bodies) // 2
    first, second = await asyncio.gather(part(bodies[:half]), part(bodies[half:]))
    return first + second


def analysable_text(entry: Any) -> str:
    """The text a `put_many` entry is indexed by, for `analyse` before the entry is checked:
    '' for an entry the checks will refuse (and say why)."""
    try:
        text = indexed_text(entry[2])
    except (TypeError, ValueError, LookupError, RecursionError):
        return ""
    return text if is_valid_unicode(text) else ""


def indexed_body(text: str) -> str:
    """What `to_tsvector` is given for an item's text: NUL characters (which PostgreSQL text
    cannot hold) become spaces, and at most `MAX_INDEXED_CHARS` are kept."""
    return text[:MAX_INDEXED_CHARS].replace("\x00", " ")


@dataclass
class ScopeLock:
    """A scope locked by a write: its id and its version before and after the write."""

    id: int
    before: int
    after: int


@dataclass
class Row:
    """One item to write, its JSON already encoded and its text extracted."""

    scope: Scope
    key: str
    value: str
    metadata: str
    expires_at: datetime | None
    text: str
    vector: bytes | None = None
    tsv: str = ""  # its tsvector as text, when analysed ahead of the write


@dataclass
class Written:
    """What a write did: the scopes it changed, by id, with their versions before and after;
    each item's creation time and ledger version; the vectors written, the items whose
    vectors went (for the process's copy of the vectors, `SemanticLeg.changed`) and those
    queued for vectors."""

    versions: dict[int, tuple[int, int]] = field(default_factory=dict)
    scope_ids: dict[Scope, int] = field(default_factory=dict)
    # by (scope id, key): a batch's rows are noted without hashing a Scope or converting a
    # time each (`moment`), which only a single put's caller needs
    created: dict[tuple[int, str], datetime] = field(default_factory=dict)
    ledger: dict[tuple[int, str], int] = field(default_factory=dict)  # each key's new version
    queued: list[int] = field(default_factory=list)  # items now waiting for their vectors
    vectors: dict[int, list[tuple[int, bytes]]] = field(default_factory=dict)
    removed: dict[int, list[int]] = field(default_factory=dict)


async def lock_scopes(conn: Any, sql: Any, scopes: list[Scope]) -> dict[Scope, ScopeLock]:
    """Create the missing scopes of `scopes` and lock them all (see the module)."""
    columns = list(zip(*(scope_ids(scope) for scope in scopes), strict=True))
    cursor = await conn.execute(sql(LOCK_SCOPES), [list(column) for column in columns])
    locks: dict[Scope, ScopeLock] = {}
    for scope_id, project, agent, task, before, after in await cursor.fetchall():
        locks[Scope(project, agent or None, task or None)] = ScopeLock(scope_id, before, after)
    return locks


async def _lock_existing(conn: Any, sql: Any, scope: Scope) -> int | None:
    cursor = await conn.execute(sql(LOCK_SCOPE), scope_ids(scope))
    locked = await cursor.fetchone()
    return None if locked is None else int(locked[0])


async def _bump(conn: Any, sql: Any, scope_id: int, written: Written) -> None:
    cursor = await conn.execute(sql(BUMP_VERSION), (scope_id,))
    before, after = await cursor.fetchone()
    written.versions[scope_id] = (before, after)


async def upsert(
    conn: Any,
    sql: Any,
    rows: list[Row],
    *,
    language: str,
    now: datetime,
    expected_version: int | None = None,
    queue: bool = False,
) -> Written:
    """Write `rows` (one per scope and key) in the caller's transaction: their scopes locked
    first, all of them, then `BATCH_ROWS` items per statement, each recorded in the ledger.
    With `expected_version` (one row), only when that is the key's live version: else
    `ConflictError`, and the caller's transaction writes nothing. With `queue` (a store with
    an embedder), rows without a vector are queued for one."""
    written = Written()
    locks = await lock_scopes(conn, sql, list(dict.fromkeys(row.scope for row in rows)))
    written.versions = {lock.id: (lock.before, lock.after) for lock in locks.values()}
    written.scope_ids = {scope: lock.id for scope, lock in locks.items()}
    if expected_version is not None:
        (row,) = rows
        scope_id = locks[row.scope].id
        await ledger.check_version(conn, sql, row.scope, scope_id, row.key, expected_version, now)
    for start in range(0, len(rows), BATCH_ROWS):
        batch = rows[start : start + BATCH_ROWS]
        params = {
            "now": now,
            "language": language,
            "scope_ids": [locks[row.scope].id for row in batch],
            "keys": [row.key for row in batch],
            "values": [row.value for row in batch],
            "metadata": [row.metadata for row in batch],
            "expires": [row.expires_at for row in batch],
            "texts": [indexed_body(row.text) if not row.tsv else "" for row in batch],
            "tsvs": [row.tsv for row in batch],
        }
        cursor = await conn.execute(sql(UPSERT), params)
        ids: dict[tuple[int, str], int] = {}
        for item_id, scope_id, key, created_at, unvectored, version in await cursor.fetchall():
            ids[scope_id, key] = item_id
            written.created[scope_id, key] = created_at
            written.ledger[scope_id, key] = version
            if unvectored:
                written.removed.setdefault(scope_id, []).append(item_id)
        vectors = [
            (ids[locks[row.scope].id, row.key], locks[row.scope].id, row.vector)
            for row in batch
            if row.vector is not None
        ]
        if vectors:
            await put_vectors(conn, sql, vectors, written)
        if queue:
            waiting = [ids[locks[row.scope].id, row.key] for row in batch if row.vector is None]
            if waiting:
                await conn.execute(sql(QUEUE), (waiting, now))
                written.queued += waiting
    return written


async def put_vectors(
    conn: Any, sql: Any, vectors: list[tuple[int, int, bytes]], written: Written
) -> None:
    """Write `(item id, scope id, vector)` triples in the caller's transaction (the items'
    scopes locked), noted in `written`."""
    ids, scopes, blobs = (list(column) for column in zip(*vectors, strict=True))
    await conn.execute(sql(PUT_VECTORS), {"ids": ids, "scope_ids": scopes, "vectors": blobs})
    for item_id, scope_id, blob in vectors:
        written.vectors.setdefault(scope_id, []).append((item_id, blob))


async def delete_key(
    conn: Any, sql: Any, scope: Scope, key: str, now: datetime
) -> tuple[bool, Written]:
    """Delete one item in the caller's transaction; True when it was there and live."""
    written = Written()
    scope_id = await _lock_existing(conn, sql, scope)
    if scope_id is None:
        return False, written
    cursor = await conn.execute(sql(DELETE_KEY), (scope_id, key, now))
    gone = await cursor.fetchone()
    if gone is None:
        return False, written
    await ledger.record_deletes(conn, sql, scope_id, now, [key])
    await _bump(conn, sql, scope_id, written)
    written.removed[scope_id] = [gone[0]]
    return bool(gone[1]), written


async def delete_scope(conn: Any, sql: Any, scope: Scope, now: datetime) -> tuple[int, int | None]:
    """Delete a scope's items in the caller's transaction, a `delete` in the ledger for each
    live one: they are counted, and the scope's id returned (None when there was no such
    scope)."""
    scope_id = await _lock_existing(conn, sql, scope)
    if scope_id is None:
        return 0, None
    params = {"id": scope_id, "now": now}
    await ledger.record_deletes(conn, sql, scope_id, now)
    await _bump(conn, sql, scope_id, Written())
    await conn.execute(SKIP_STATISTICS)
    await conn.execute(sql("DELETE FROM {s}.item_vectors WHERE scope_id = %(id)s"), params)
    cursor = await conn.execute(sql(DELETE_SCOPE_ITEMS), params)
    (live,) = await cursor.fetchone()
    for statement in DELETE_SCOPE_REST:
        await conn.execute(sql(statement), params)
    return int(live), scope_id


async def purge_expired(conn: Any, sql: Any, now: datetime) -> tuple[int, Written]:
    """Delete the expired items in the caller's transaction, their scopes locked first."""
    written = Written()
    cursor = await conn.execute(sql(LOCK_EXPIRED_SCOPES), (now,))
    locked = [scope_id for (scope_id,) in await cursor.fetchall()]
    if not locked:
        return 0, written
    cursor = await conn.execute(sql(PURGE_EXPIRED), (locked, now))
    gone = await cursor.fetchall()
    for scope_id in locked:
        await _bump(conn, sql, scope_id, written)
    for item_id, scope_id in gone:
        written.removed.setdefault(scope_id, []).append(item_id)
    return len(gone), written
