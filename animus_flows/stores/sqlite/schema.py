"""The SQLite store's tables, and what the file records about how it was indexed.

Every scope gets an integer id, and its items a contiguous row-id range (`scope_id << 32 | n`),
so counting or deleting a scope is a range of the primary key. An item keeps its index terms
(`items.terms`: the analyzer's stems, in order) so that ranking reads a document's term
frequencies and length without analyzing it again. Statistics are kept per scope: its item
count and term count (`scopes`), and each term's document frequency (`term_df`), so a word's
rarity is measured in the scope searched. The full-text index (`items_fts`, contentless) holds
each item's distinct terms prefixed with its scope's id (`7xexplor`): a scoped lookup reads only
that scope's postings, and no character in an id can leak items across scopes. With an
embedder, each item's vector sits in `item_vectors` (a scope's items are its id range), items
written one at a time wait in `vector_pending` for theirs, and `scopes.vectors` counts the
changes to a scope's vectors, so a process keeping them in memory knows when to read them again.
The analyzer's language and the embedder's model are recorded in `animus_meta`: a file indexed
one way is never read another way. A file may keep a ledger of every change (`ledger`, from
schema 5; filled once a `SQLiteLedgerStore` opens the file, see `ledger.py`), which names scopes
by their ids rather than `scopes.id`: a scope deleted and made again keeps its history.
"""

from __future__ import annotations

import sqlite3

SCHEMA_VERSION = 5
#: Files of this schema and later hold the index this version reads: upgrading one adds tables
#: (schema 5: the ledger) without indexing its items again.
INDEXED_SINCE = 4
SCOPE_BITS = 32

SCHEMA = """
CREATE TABLE IF NOT EXISTS animus_meta (name TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS scopes (
    id INTEGER PRIMARY KEY,
    project_id TEXT NOT NULL,
    agent_id TEXT NOT NULL DEFAULT '',   -- '' stands for None: real ids are never empty
    task_id TEXT NOT NULL DEFAULT '',
    next_item INTEGER NOT NULL DEFAULT 0,
    items INTEGER NOT NULL DEFAULT 0,    -- statistics: items indexed in the scope
    terms INTEGER NOT NULL DEFAULT 0,    -- and their terms, for the average length
    vectors INTEGER NOT NULL DEFAULT 0,  -- bumped by every change to the scope's vectors
    UNIQUE (project_id, agent_id, task_id)
);
CREATE TABLE IF NOT EXISTS items (
    id INTEGER PRIMARY KEY,              -- scope_id << 32 | n: a scope is one id range
    scope_id INTEGER NOT NULL,
    key TEXT NOT NULL,
    value TEXT NOT NULL,
    metadata TEXT NOT NULL,
    created_at REAL NOT NULL,
    updated_at REAL NOT NULL,
    expires_at REAL,
    terms TEXT NOT NULL DEFAULT '',      -- the analyzer's terms, space-separated, in order
    UNIQUE (scope_id, key)
);
CREATE INDEX IF NOT EXISTS items_by_expiry ON items (expires_at) WHERE expires_at IS NOT NULL;
CREATE INDEX IF NOT EXISTS items_by_recency ON items (scope_id, updated_at, id);
CREATE TABLE IF NOT EXISTS term_df (
    scope_id INTEGER NOT NULL,
    term TEXT NOT NULL,
    df INTEGER NOT NULL,                 -- items of the scope holding the term
    PRIMARY KEY (scope_id, term)
) WITHOUT ROWID;
CREATE VIRTUAL TABLE IF NOT EXISTS items_fts USING fts5(body, tokenize = 'ascii', content = '');
-- with an embedder: each item's vector (float32, little-endian), and the items waiting for one
CREATE TABLE IF NOT EXISTS item_vectors (item_id INTEGER PRIMARY KEY, vector BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS vector_pending (item_id INTEGER PRIMARY KEY);
-- schema 5: every change of every item, once the file keeps a ledger (animus_meta ledger_since)
CREATE TABLE IF NOT EXISTS ledger (
    seq INTEGER PRIMARY KEY,             -- the order changes were recorded in
    project_id TEXT NOT NULL,            -- the scope's ids, as in `scopes`
    agent_id TEXT NOT NULL,
    task_id TEXT NOT NULL,
    key TEXT NOT NULL,
    version INTEGER NOT NULL,            -- the key's: 1, 2, 3, ... over its whole life
    op TEXT NOT NULL,                    -- create, update or delete
    value TEXT,                          -- JSON after the change, NULL for a delete
    metadata TEXT,
    valid_from REAL NOT NULL,            -- valid time (epoch seconds): when this state held
    valid_to REAL,                       -- NULL while it holds
    recorded_at REAL NOT NULL,           -- transaction time
    UNIQUE (project_id, agent_id, task_id, key, version)
);
"""

#: Statements that upgrade a file of an older schema; its items are indexed again afterwards
#: (`Indexer.reindex`), which fills the new columns and tables.
UPGRADE_TO_4 = """
DROP TABLE IF EXISTS items_vocab;
DROP TABLE IF EXISTS items_fts;
DELETE FROM animus_meta WHERE name = 'write_token';
ALTER TABLE scopes ADD COLUMN items INTEGER NOT NULL DEFAULT 0;
ALTER TABLE scopes ADD COLUMN terms INTEGER NOT NULL DEFAULT 0;
ALTER TABLE scopes ADD COLUMN vectors INTEGER NOT NULL DEFAULT 0;
ALTER TABLE items ADD COLUMN terms TEXT NOT NULL DEFAULT '';
CREATE INDEX IF NOT EXISTS items_by_recency ON items (scope_id, updated_at, id);
"""


def meta(conn: sqlite3.Connection, name: str) -> str | None:
    """A value `animus_meta` records, or None (a new file has no table yet)."""
    try:
        row = conn.execute("SELECT value FROM animus_meta WHERE name = ?", (name,)).fetchone()
    except sqlite3.OperationalError as exc:
        if "no such table" in str(exc):
            return None
        raise
    return None if row is None else row[0]


def set_meta(conn: sqlite3.Connection, name: str, value: str) -> None:
    conn.execute("INSERT OR REPLACE INTO animus_meta (name, value) VALUES (?, ?)", (name, value))


def schema_version(conn: sqlite3.Connection) -> int:
    """The file's schema version; 0 for a new file."""
    value = meta(conn, "schema_version")
    return int(value) if value else 0


def create(conn: sqlite3.Connection) -> None:
    """The tables of the current schema (those missing)."""
    for statement in SCHEMA.split(";"):
        if statement.strip():
            conn.execute(statement)


def upgrade(conn: sqlite3.Connection) -> None:
    """Bring a file of an older schema to this one's tables (still to be indexed again)."""
    for statement in UPGRADE_TO_4.split(";"):
        if statement.strip():
            try:
                conn.execute(statement)
            except sqlite3.OperationalError as exc:  # a column a half-done upgrade added
                if "duplicate column" not in str(exc):
                    raise
    create(conn)


def id_range(scope_id: int) -> tuple[int, int]:
    """The first and last row id a scope can own."""
    return scope_id << SCOPE_BITS, ((scope_id + 1) << SCOPE_BITS) - 1


def scoped_body(scope_id: int, terms: list[str]) -> str:
    """What the full-text index holds for an item: its distinct terms prefixed with its
    scope's id ("7xexplor 7xhike"). Digits then `x` make the prefix self-delimiting: no
    (scope, term) pair spells another's."""
    if not terms:
        return ""
    prefix = f"{scope_id}x"
    return prefix + f" {prefix}".join(dict.fromkeys(terms))  # one join: no string per term
