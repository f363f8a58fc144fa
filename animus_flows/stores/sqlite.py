"""The embedded default store: one SQLite file, full-text search with FTS5 and BM25.

Every scope gets an integer id. Each indexed word is stored prefixed with its scope's id
(`7xmarket`), so a word's posting list only ever holds that scope's items: a scoped query
reads nothing from other scopes, the scope is filtered inside the index, and no character in
an id can leak items across scopes (the id is a number; the words come from `stores.text`,
indexed with FTS5's `ascii` tokenizer, which cannot split them). Items also own a contiguous
row-id range per scope (`scope_id << 32 | n`) for fast counts and deletes. The index is
contentless: the text lives once, in the items' values, and `indexed_body` derives what was
indexed again when a row leaves the index. Terms found in more than half of a scope's items
carry no signal there and are left out of the ranking (stopwords, learned per scope), and
only the rarest terms are ranked, so a query scores a bounded number of candidates however
large the scope; common terms only fill up a short result with their newest matches. WAL and
a busy timeout let several processes write. Writes run on the store's own thread; reads run
inline on a read-only connection (a WAL read never waits for a writer).
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager, suppress
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

from animus_flows.errors import InvalidRequest, StoreTimeout, StoreUnavailable
from animus_flows.protocol import (
    JSON,
    Capabilities,
    ItemPage,
    MemoryItem,
    QueryHit,
    Scope,
    ScopePage,
    indexed_text,
    matches_filters,
    utcnow,
)
from animus_flows.stores.base import (
    BaseStore,
    PutEntry,
    check_key,
    check_scope,
    cursor_key,
    encode_json,
    entry_fields,
    item_page,
    metadata_object,
    numeric_cursor,
)
from animus_flows.stores.term_counts import (
    MAX_CANDIDATES,
    RENEW_WRITE_TOKEN,
    Kept,
    TermCounts,
    count_terms,
    match_expression,
)
from animus_flows.stores.text import query_groups, spaced_words

T = TypeVar("T")
#: An item's columns as written: value JSON, metadata JSON, spaced words, expiry epoch or None.
Row = tuple[str, str, str, float | None]

SCHEMA_VERSION = 3
MAX_QUERY_TOP_K = 1000
MAX_QUERY_TERMS = 32
INLINE_SCAN_ITEMS = 5_000  # a filtered listing of a larger scope leaves the event loop
# FTS5 merges index segments as it commits (each time AUTOMERGE segments share a level). A
# put_many of BULK_ITEMS or more commits with merging deferred to BULK_AUTOMERGE segments,
# which makes bulk ingest about 7% faster; later writes and optimize() catch up.
AUTOMERGE = 4
BULK_AUTOMERGE = 16
BULK_ITEMS = 1000
_SET_AUTOMERGE = "INSERT INTO items_fts (items_fts, rank) VALUES ('automerge', ?)"
CACHE_KIB = 65536  # page cache per connection; the default 2 MiB rereads hot index pages
MMAP_BYTES = 1 << 30  # read through the OS page cache without copying
SCOPE_BITS = 32

_SCHEMA = """
CREATE TABLE IF NOT EXISTS animus_meta (name TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS scopes (
    id INTEGER PRIMARY KEY,
    project_id TEXT NOT NULL,
    agent_id TEXT NOT NULL DEFAULT '',   -- '' stands for None: real ids are never empty
    task_id TEXT NOT NULL DEFAULT '',
    next_item INTEGER NOT NULL DEFAULT 0,
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
    UNIQUE (scope_id, key)
);
CREATE INDEX IF NOT EXISTS items_by_expiry ON items (expires_at) WHERE expires_at IS NOT NULL;
CREATE INDEX IF NOT EXISTS items_by_recency ON items (scope_id, updated_at, id);
CREATE VIRTUAL TABLE IF NOT EXISTS items_fts USING fts5(body, tokenize = 'ascii', content = '');
-- the index's terms with their item counts, to inspect it (queries never read it)
CREATE VIRTUAL TABLE IF NOT EXISTS items_vocab USING fts5vocab(items_fts, 'row');
"""
# A contentless index forgets its text: removing a row means handing FTS5 the text it
# indexed, which `animus_body` derives again from the stored value.
_UNINDEX = (
    "INSERT INTO items_fts (items_fts, rowid, body) SELECT 'delete', id, animus_body(id, value)"
)


# Each entry upgrades the schema from version N-1 to N; later issues append here.
_MIGRATIONS: dict[int, str] = {
    # Listing a scope newest first (empty query text) walks this index and stops at top_k
    # matches, instead of sorting the whole scope: the memory loader lists scopes per load.
    2: "CREATE INDEX IF NOT EXISTS items_by_recency ON items (scope_id, updated_at, id)",
    # The index becomes contentless (version 2 kept a second copy of every text) and
    # plurals fold at query time (version 2 indexed "markets" as "market"): rebuild it.
    3: """
        DROP TABLE IF EXISTS items_vocab;
        DROP TABLE IF EXISTS items_fts;
        CREATE VIRTUAL TABLE items_fts USING fts5(body, tokenize = 'ascii', content = '');
        CREATE VIRTUAL TABLE items_vocab USING fts5vocab(items_fts, 'row');
        INSERT INTO items_fts (rowid, body) SELECT id, animus_body(id, value) FROM items
    """,
}

_LIVE = "(i.expires_at IS NULL OR i.expires_at > ?)"


def _nothing(conn: sqlite3.Connection) -> None:
    return None


def _file_at(path: str) -> tuple[int, int] | None:
    """(st_dev, st_ino) of the file now at `path`, or None when there is none."""
    try:
        found = os.stat(path)
    except OSError:
        return None
    return found.st_dev, found.st_ino


def _waits_on_lock(exc: sqlite3.OperationalError) -> bool:
    """Whether SQLite gave up because another connection holds a lock."""
    return "locked" in str(exc) or "busy" in str(exc)


def _size_caches(conn: sqlite3.Connection) -> None:
    conn.execute(f"PRAGMA cache_size = -{CACHE_KIB}")
    conn.execute(f"PRAGMA mmap_size = {MMAP_BYTES}")


def _schema_version(conn: sqlite3.Connection) -> int:
    """The file's schema version; 0 for a new file."""
    try:
        row = conn.execute("SELECT value FROM animus_meta WHERE name = 'schema_version'").fetchone()
    except sqlite3.OperationalError as exc:
        if "no such table" in str(exc):
            return 0
        raise
    return int(row[0]) if row else 0


def prefix_end(prefix: str) -> str | None:
    """The least string after every string starting with `prefix` (None: there is none)."""
    stem = prefix.rstrip(chr(0x10FFFF))
    if not stem:
        return None
    following = ord(stem[-1]) + 1
    if 0xD800 <= following <= 0xDFFF:  # surrogates are no characters (and SQLite cannot hold them)
        following = 0xE000
    return stem[:-1] + chr(following)


def _item(
    scope: Scope,
    key: str,
    value: str,
    metadata: str,
    created_at: float,
    updated_at: float,
    expires_at: float | None,
) -> MemoryItem:
    return MemoryItem(
        scope,
        key,
        json.loads(value),
        json.loads(metadata),
        _moment(created_at),  # type: ignore[arg-type]
        _moment(updated_at),  # type: ignore[arg-type]
        _moment(expires_at),
    )


def _checked_keys(keys: Sequence[str]) -> list[str]:
    """`keys` once each, every one checked as `get` checks a key."""
    if isinstance(keys, str) or not isinstance(keys, Sequence):
        raise InvalidRequest(f"keys {keys!r} must be a list of keys, not a {type(keys).__name__}")
    return list(dict.fromkeys(check_key(key) for key in keys))


def _scope_ids(scope: Scope) -> tuple[str, str, str]:
    """The `scopes` table's columns for `scope`: absent agent and task ids are ''."""
    return (scope.project_id, scope.agent_id or "", scope.task_id or "")


# The start of every read of a scope's items as `_item` takes them; `_scope_ids` fills it.
_SCOPE_ITEMS = (
    "SELECT i.key, i.value, i.metadata, i.created_at, i.updated_at, i.expires_at"
    " FROM items i JOIN scopes s ON s.id = i.scope_id"
    " WHERE s.project_id = ? AND s.agent_id = ? AND s.task_id = ?"
)


def _epoch(moment: datetime | None) -> float | None:
    return None if moment is None else moment.timestamp()


def _moment(epoch: float | None) -> datetime | None:
    return None if epoch is None else datetime.fromtimestamp(epoch, tz=UTC)


def id_range(scope_id: int) -> tuple[int, int]:
    """The first and last row id a scope can own."""
    return scope_id << SCOPE_BITS, ((scope_id + 1) << SCOPE_BITS) - 1


def scoped_body(scope_id: int, spaced: str) -> str:
    """Words separated by single spaces as one scope indexes them: each prefixed with
    `<scope_id>x` ("a b" -> "7xa 7xb", in C: no Python loop over the words).

    Digits then `x` make the prefix self-delimiting: no (scope, word) pair spells another's.
    """
    prefix = f"{scope_id}x"
    return prefix + spaced.replace(" ", " " + prefix) if spaced else ""


def indexed_body(item_id: int, value_json: str) -> str:
    """What the index holds for a stored item: its scope's words of the value, as `_write`
    indexed them."""
    return scoped_body(item_id >> SCOPE_BITS, spaced_words(indexed_text(json.loads(value_json))))


# Keys per statement of `get_many`: a batch of layer records reads and decodes in about 4 ms,
# short enough for the event loop to run between batches (and far below SQLite's limit on a
# statement's parameters, 32,766).
GET_MANY_BATCH = 100


def choose_terms(present: list[str], frequency: dict[str, int], scope_size: int) -> list[str]:
    """The query terms to rank by BM25: the rarest ones, within `MAX_CANDIDATES` items.

    `present` is ordered rarest first. Terms in more than half of the scope's items carry no
    signal there (BM25's IDF is zero or below) and never rank. Rare terms join while the items
    they match stay within `MAX_CANDIDATES`, so ranking never scores most of a large scope; the
    items a query's rare terms find are the ones BM25 ranks first anyway. Empty when even the
    rarest term is too common: the caller then takes the newest matches instead.
    """
    chosen: list[str] = []
    candidates = 0
    for term in present:
        if frequency[term] * 2 > scope_size or candidates + frequency[term] > MAX_CANDIDATES:
            break
        chosen.append(term)
        candidates += frequency[term]
    return chosen


def filter_clause(filters: dict[str, JSON] | None) -> tuple[str, list[Any]]:
    """SQL conditions on `i.metadata` with the semantics of `protocol.matches_filters`.

    Keys travel as parameters through `json_each`, so no metadata key can inject SQL or JSON
    path syntax.
    """
    if not filters:
        return "", []
    clauses: list[str] = []
    params: list[Any] = []
    for name, wanted in filters.items():
        options = wanted if isinstance(wanted, list) else [wanted]
        values = [option for option in options if option is not None]
        alternatives: list[str] = []
        if values:
            marks = ", ".join("?" * len(values))
            # json_each gives an object or array as its JSON text: compare scalars only
            alternatives.append(
                "EXISTS (SELECT 1 FROM json_each(i.metadata) m WHERE m.key = ? AND "
                f"((m.type NOT IN ('object', 'array') AND m.value IN ({marks})) OR "
                "(m.type = 'array' AND EXISTS (SELECT 1 FROM json_each(m.value) e WHERE "
                f"e.type NOT IN ('object', 'array') AND e.value IN ({marks})))))"
            )
            params += [name, *values, *values]
        if None in options:
            alternatives.append(
                "NOT EXISTS (SELECT 1 FROM json_each(i.metadata) m "
                "WHERE m.key = ? AND m.type != 'null')"
            )
            params.append(name)
        clauses.append("(" + " OR ".join(alternatives) + ")")
    return " AND " + " AND ".join(clauses), params


#: A query's row: key, value JSON, metadata (decoded) and FTS5 rank (None in a listing).
Hit = tuple[str, str, dict[str, JSON], float | None]


def passing(
    rows: Iterable[tuple[Any, ...]], filters: dict[str, JSON] | None, limit: int
) -> list[Hit]:
    """The first `limit` of `rows` whose metadata passes `filters`, with it decoded.

    Ranked reads filter here rather than in SQL: a query examines a dozen rows or so, and
    decoding their metadata once in Python (it is decoded for the hits anyway) costs a phase
    less than `filter_clause`'s `json_each` lookups, whose semantics `matches_filters` defines.
    """
    kept: list[Hit] = []
    for key, value, metadata_json, rank in rows:
        metadata = json.loads(metadata_json)
        if matches_filters(metadata, filters):
            kept.append((key, value, metadata, rank))
            if len(kept) == limit:
                break
    return kept


def listing_statement(where: str) -> str:
    """The SQL that lists one scope newest first (empty query text), with `where` conditions.

    Parameters: scope id, now, the filter parameters, top_k. SQLite walks `items_by_recency`
    in order and stops at top_k matches; the index is named because, with the statistics
    `optimize()` gathers for a large scope, the planner would rather sort the whole scope.
    """
    return (
        "SELECT i.key, i.value, i.metadata, NULL FROM items i INDEXED BY items_by_recency"
        f" WHERE i.scope_id = ? AND {_LIVE}{where}"
        " ORDER BY i.updated_at DESC, i.id DESC LIMIT ?"
    )


def bm25_score(rank: float) -> float:
    """Map FTS5's BM25 rank (negative, lower is better) onto [0, 1), higher is better.

    1 - exp(-relevance / 10): a strong single-term match (relevance ~10) scores ~0.63, several
    rare terms approach 1. The same rank always gives the same score, across queries.
    """
    return 1.0 - math.exp(-max(0.0, -rank) / 10.0)


class SQLiteStore(BaseStore):
    """The embedded default memory store: a single SQLite file.

    Args:
        path: the database file; created with its parent folders when missing.
        busy_timeout_ms: how long a write waits for another process's lock.

    Example:
        ```python
        from animus_flows.protocol import Scope
        from animus_flows.stores import SQLiteStore

        store = SQLiteStore(".animus/memory.db")
        await store.put(Scope("trade-desk"), "fx", "EUR/USD trades near 1.09")
        hits = await store.query(Scope("trade-desk"), "EUR/USD", top_k=3)
        ```
    """

    capabilities = Capabilities(
        native_ttl=True,
        native_key_get=True,
        strong_consistency=True,
        max_query_top_k=MAX_QUERY_TOP_K,
    )
    atomic_put_many = True  # one transaction

    def __init__(self, path: str | Path, *, busy_timeout_ms: int = 5000) -> None:
        self.path = Path(path)
        self.busy_timeout_ms = busy_timeout_ms
        self._conn: sqlite3.Connection | None = None
        self._executor: ThreadPoolExecutor | None = None
        self._executor_lock = threading.Lock()
        self._reader: sqlite3.Connection | None = None
        self._reader_lock = threading.Lock()
        self._term_counts = TermCounts()
        # the writer's file, by absolute path as SQLite holds it, and its identity: `_writing`
        self._opened: tuple[str, tuple[int, int] | None] = ("", None)
        self._schema_current = False  # the file exists with the current schema, in WAL mode
        self._writer_wanted = False  # the file must be created or migrated first

    def describe(self) -> str:
        return f"SQLiteStore({str(self.path)!r})"

    # -- connection and threading -----------------------------------------------------------

    async def _run(self, fn: Callable[..., T], *args: Any) -> T:
        # One thread owns the connection; SQLite calls never block the event loop, so a
        # caller's timeout can give up on a store stuck behind another process's lock.
        with self._executor_lock:
            if self._executor is None:
                self._executor = ThreadPoolExecutor(1, thread_name_prefix="animus-sqlite")
        return await asyncio.get_running_loop().run_in_executor(
            self._executor, self._call, fn, args
        )

    async def _read(self, fn: Callable[..., T], *args: Any) -> T:
        """Run the read-only `fn` inline, on a connection that never waits for a lock.

        In WAL mode a read takes no lock that another process's write holds, and a scoped read
        takes about a millisecond: less than `_run`'s two thread hand-offs cost on a busy
        machine. Should the reader meet a lock anyway (the file is not in WAL mode), or another
        thread be using it, the read goes through `_run`, whose wait a caller's timeout can
        abandon.
        """
        if not self._schema_current and not self._reader_finds_current_schema():
            await self._run(_nothing)  # the writer's thread creates or migrates the file first
        if self._reader_lock.acquire(blocking=False):
            try:
                return fn(self._reader or self._open_reader(), *args)
            except sqlite3.OperationalError as exc:
                if not _waits_on_lock(exc):
                    raise self._unavailable(exc) from None
            except sqlite3.DatabaseError as exc:
                self._drop_reader()
                raise self._unavailable(exc) from None
            finally:
                self._reader_lock.release()
        return await self._run(fn, *args)

    def _reader_finds_current_schema(self) -> bool:
        """Whether the file already is a WAL store of the current schema, checked through the
        reader. Then reads need no writer: no thread, and no wait for another process's write,
        as switching a file to WAL mode or migrating it would."""
        if self._writer_wanted or not self._reader_lock.acquire(blocking=False):
            return False
        try:
            if self.path.is_file():
                reader = self._reader or self._open_reader()
                wal = reader.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
                self._schema_current = wal and _schema_version(reader) == SCHEMA_VERSION
        except sqlite3.Error:
            pass  # the writer's open waits out a lock, or reports what is wrong with the file
        finally:
            self._reader_lock.release()
        # reads started meanwhile (a gather of many) wait for the writer without checking again
        self._writer_wanted = not self._schema_current
        return self._schema_current

    def _open_reader(self) -> sqlite3.Connection:
        # sqlite3's errors pass through: `_read` tells a lock to wait out from a broken file
        # mode=rw: a reader never creates the file (the writer does, with the schema); one
        # deleted while the store is open is then reported, not replaced by an empty file
        reader = sqlite3.connect(
            f"{self.path.absolute().as_uri()}?mode=rw",
            uri=True,
            timeout=0,
            isolation_level=None,
            check_same_thread=False,
        )
        try:
            reader.execute("PRAGMA query_only = ON")
            _size_caches(reader)
        except sqlite3.Error:
            reader.close()
            raise
        self._reader = reader
        return reader

    def _drop_reader(self) -> None:
        if self._reader is not None:
            self._reader.close()
            self._reader = None

    def _call(self, fn: Callable[..., T], args: tuple[Any, ...]) -> T:
        try:
            return fn(self._connection(), *args)
        except sqlite3.OperationalError as exc:
            if _waits_on_lock(exc):
                raise StoreTimeout(
                    f"SQLite store {self.path} stayed locked for {self.busy_timeout_ms} ms; "
                    "another process holds a long write, retry or raise busy_timeout_ms"
                ) from None
            raise self._unavailable(exc) from None
        except sqlite3.DatabaseError as exc:
            self._drop_connection()
            raise self._unavailable(exc) from None

    def _unavailable(self, exc: Exception) -> StoreUnavailable:
        if not self.path.exists():
            return StoreUnavailable(
                f"SQLite store {self.path} was deleted while open; reopen the store (restart "
                "the run) to start a new file at that path"
            )
        return StoreUnavailable(
            f"SQLite store {self.path} failed: {exc}; check the file is an animus store "
            "(move a damaged file aside to start a new one)"
        )

    def _connection(self) -> sqlite3.Connection:
        if self._conn is None:
            self._conn = self._open()
        return self._conn

    def _drop_connection(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def _open(self) -> sqlite3.Connection:
        if self.path.is_dir():
            raise StoreUnavailable(
                f"SQLite store path {self.path} is a folder; point `path` to a file inside it"
            )
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StoreUnavailable(
                f"cannot create the folder of SQLite store {self.path} ({exc.strerror}); "
                "choose a writable `path`"
            ) from None
        try:
            conn = sqlite3.connect(
                self.path,
                timeout=self.busy_timeout_ms / 1000,
                isolation_level=None,
                check_same_thread=False,
            )
        except sqlite3.Error as exc:
            raise StoreUnavailable(
                f"cannot open SQLite store {self.path} ({exc}); choose a writable `path`"
            ) from None
        try:
            conn.execute(f"PRAGMA busy_timeout = {int(self.busy_timeout_ms)}")
            self._refuse_foreign(conn)  # before WAL mode or tables change the file
            self._enable_wal(conn)
            conn.execute("PRAGMA synchronous = NORMAL")
            _size_caches(conn)
            conn.execute("PRAGMA foreign_keys = ON")
            conn.create_function("animus_body", 2, indexed_body, deterministic=True)
            if _schema_version(conn) != SCHEMA_VERSION:
                self._migrate(conn)
        except StoreUnavailable:
            conn.close()
            raise
        except sqlite3.DatabaseError as exc:
            conn.close()
            if isinstance(exc, sqlite3.OperationalError) and "locked" in str(exc):
                raise
            raise StoreUnavailable(
                f"{self.path} is not a usable animus SQLite store ({exc}); "
                "move it aside or point `path` to a new file"
            ) from None
        path = os.path.abspath(self.path)  # a later chdir does not move SQLite's file either
        self._opened = (path, _file_at(path))
        self._schema_current = True
        return conn

    @contextmanager
    def _writing(self, conn: sqlite3.Connection) -> Iterator[None]:
        """`_transaction` on the writer, refused when `path` no longer is the file it opened.

        An open connection keeps writing into a deleted file, or into the old file after another
        was moved over it, and every write looks fine: the data would silently go nowhere. One
        stat per write (a few µs of a put's ~0.7 ms); reads are not checked, a get costs 0.06 ms.
        """
        path, opened = self._opened
        with _transaction(conn):
            if _file_at(path) != opened:
                raise StoreUnavailable(
                    f"SQLite store {self.path} was deleted or replaced while open, so nothing "
                    "was written; reopen the store (restart the run) to use the file at that path"
                )
            yield

    def _refuse_foreign(self, conn: sqlite3.Connection) -> None:
        """Refuse a file that is neither an animus store nor empty, leaving it as it was.

        An animus store carries `animus_meta` from its first version on; an empty database
        (a new or zero-length file) becomes one. Anything else belongs to another program.
        """
        tables = [
            name
            for (name,) in conn.execute(
                "SELECT name FROM sqlite_master WHERE type IN ('table', 'view')"
                " AND name NOT GLOB 'sqlite_*' ORDER BY name"
            )
        ]
        if "animus_meta" in tables:
            return
        user_version = conn.execute("PRAGMA user_version").fetchone()[0]
        application_id = conn.execute("PRAGMA application_id").fetchone()[0]
        if not tables and not user_version and not application_id:
            return
        if tables:
            shown = ", ".join(tables[:5]) + (", ..." if len(tables) > 5 else "")
            found = f"it holds tables of another program: {shown}"
        else:
            found = f"user_version {user_version}, application_id {application_id}"
        raise StoreUnavailable(
            f"{self.path} is not an animus SQLite store ({found}); left untouched: point "
            "`path` to a new file, or move that file aside"
        )

    def _enable_wal(self, conn: sqlite3.Connection) -> None:
        # Switching a new file to WAL needs a moment alone with it; when several processes
        # create the store at once, the busy handler does not cover this, so retry here.
        deadline = time.monotonic() + self.busy_timeout_ms / 1000
        while True:
            try:
                conn.execute("PRAGMA journal_mode = WAL")
                return
            except sqlite3.OperationalError as exc:
                if "locked" not in str(exc) or time.monotonic() > deadline:
                    raise
                time.sleep(0.01)

    def _migrate(self, conn: sqlite3.Connection) -> None:
        with _transaction(conn):
            for statement in _SCHEMA.split(";"):
                if statement.strip():
                    conn.execute(statement)
            version = _schema_version(conn)
            if version > SCHEMA_VERSION:
                raise StoreUnavailable(
                    f"SQLite store {self.path} has schema version {version}, newer than this "
                    f"animus-flows ({SCHEMA_VERSION}); upgrade animus-flows"
                )
            if version == 0:
                version = SCHEMA_VERSION
            for target in range(version + 1, SCHEMA_VERSION + 1):
                for statement in _MIGRATIONS[target].split(";"):
                    if statement.strip():
                        conn.execute(statement)
            conn.execute(
                "INSERT OR REPLACE INTO animus_meta (name, value) VALUES ('schema_version', ?)",
                (str(SCHEMA_VERSION),),
            )

    async def aclose(self) -> None:
        with self._reader_lock:
            self._drop_reader()
        if self._executor is not None:
            loop = asyncio.get_running_loop()
            await loop.run_in_executor(self._executor, self._drop_connection)
            self._executor.shutdown(wait=True)
            self._executor = None

    # -- backend operations -----------------------------------------------------------------

    @staticmethod
    def _scope_id(conn: sqlite3.Connection, scope: Scope, *, create: bool) -> int | None:
        ids = _scope_ids(scope)
        if create:
            conn.execute(
                "INSERT OR IGNORE INTO scopes (project_id, agent_id, task_id) VALUES (?, ?, ?)", ids
            )
        row = conn.execute(
            "SELECT id FROM scopes WHERE project_id = ? AND agent_id = ? AND task_id = ?", ids
        ).fetchone()
        return None if row is None else row[0]

    @staticmethod
    def _write(
        conn: sqlite3.Connection, scope_id: int, rows: dict[str, Row], now: float
    ) -> dict[str, float]:
        """Upsert `key -> (value json, metadata json, spaced words, expires_at)` into one scope.

        Returns each key's created_at. Existing keys keep their row id (and creation time,
        unless they had expired); new keys take the next ids of the scope's range.
        """
        keys = json.dumps(list(rows))
        existing = {
            key: (item_id, created, expired)
            for key, item_id, created, expired in conn.execute(
                # CROSS JOIN keeps the keys the outer loop: one index probe per key, where
                # the planner's own choice scanned the whole scope once per key
                "SELECT i.key, i.id, i.created_at, i.expires_at <= ? FROM json_each(?) j"
                " CROSS JOIN items i ON i.scope_id = ? AND i.key = j.value",
                (now, keys, scope_id),
            )
        }
        fresh = [key for key in rows if key not in existing]
        ids = {key: item_id for key, (item_id, _, _) in existing.items()}
        if fresh:
            (end,) = conn.execute(
                "UPDATE scopes SET next_item = next_item + ? WHERE id = ? RETURNING next_item",
                (len(fresh), scope_id),
            ).fetchone()
            if end >= 1 << SCOPE_BITS:
                raise StoreUnavailable(f"scope {scope_id} has used all {1 << SCOPE_BITS} item ids")
            start = id_range(scope_id)[0] + end - len(fresh)
            ids.update((key, start + n) for n, key in enumerate(fresh))
            conn.executemany(
                "INSERT INTO items (id, scope_id, key, value, metadata, created_at, updated_at,"
                " expires_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                [
                    (ids[key], scope_id, key, rows[key][0], rows[key][1], now, now, rows[key][3])
                    for key in fresh
                ],
            )
        if existing:
            conn.executemany(
                f"{_UNINDEX} FROM items WHERE id = ?", [(v[0],) for v in existing.values()]
            )
            conn.executemany(
                "UPDATE items SET value = ?, metadata = ?, updated_at = ?, expires_at = ?,"
                " created_at = CASE WHEN ? THEN ? ELSE created_at END WHERE id = ?",
                [
                    (rows[key][0], rows[key][1], now, rows[key][3], bool(expired), now, item_id)
                    for key, (item_id, _, expired) in existing.items()
                ],
            )
        conn.executemany(
            "INSERT INTO items_fts (rowid, body) VALUES (?, ?)",
            [(ids[key], scoped_body(scope_id, row[2])) for key, row in rows.items()],
        )
        return {
            key: (now if expired else created) for key, (_, created, expired) in existing.items()
        } | dict.fromkeys(fresh, now)

    @staticmethod
    def _row(value: JSON, metadata: object, expires_at: datetime | None) -> Row:
        """(value JSON, metadata JSON, the value's words, expiry epoch); words get their scope
        prefix later.

        Encoding is the JSON check: what does not encode is refused here, and nothing is
        encoded twice.
        """
        metadata = metadata_object(metadata)
        return (
            encode_json("value", value),
            encode_json("metadata", metadata),
            spaced_words(indexed_text(value)),
            _epoch(expires_at),
        )

    async def _put(
        self,
        scope: Scope,
        key: str,
        value: JSON,
        metadata: dict[str, JSON],
        expires_at: datetime | None,
    ) -> MemoryItem:
        now = utcnow()
        row = {key: self._row(value, metadata, expires_at)}

        def put(conn: sqlite3.Connection) -> float:
            with self._writing(conn):
                scope_id = self._scope_id(conn, scope, create=True)
                created = self._write(conn, scope_id, row, now.timestamp())  # type: ignore[arg-type]
            return created[key]

        created_at = await self._run(put)
        return MemoryItem(scope, key, value, metadata, _moment(created_at), now, expires_at)  # type: ignore[arg-type]

    async def put_many(self, entries: Iterable[PutEntry]) -> int:
        """Store many `(scope, key, value, metadata[, ttl_seconds])` entries in one
        transaction.

        Every entry is checked before anything is written: one bad entry writes nothing.
        """
        by_scope: dict[Scope, dict[str, Row]] = {}
        for entry in entries:
            scope, key, value, metadata, ttl_seconds = entry_fields(entry)
            check_scope(scope)
            check_key(key)
            # a later entry for the same key wins, as with successive puts
            by_scope.setdefault(scope, {})[key] = self._row(
                value, metadata, self._expiry(ttl_seconds)
            )
        now = utcnow().timestamp()

        def put_all(conn: sqlite3.Connection) -> int:
            written = sum(len(rows) for rows in by_scope.values())
            bulk = written >= BULK_ITEMS
            with self._writing(conn):
                if bulk:
                    conn.execute(_SET_AUTOMERGE, (BULK_AUTOMERGE,))
                for scope, rows in by_scope.items():
                    self._write(conn, self._scope_id(conn, scope, create=True), rows, now)  # type: ignore[arg-type]
            if bulk:  # the items are committed: a busy store only leaves merging deferred
                with suppress(sqlite3.OperationalError), _transaction(conn):
                    conn.execute(_SET_AUTOMERGE, (AUTOMERGE,))
            return written

        return await self._run(put_all)

    async def _get(self, scope: Scope, key: str) -> MemoryItem | None:
        def get(conn: sqlite3.Connection) -> tuple[Any, ...] | None:
            return conn.execute(
                f"{_SCOPE_ITEMS} AND i.key = ? AND {_LIVE}",
                (*_scope_ids(scope), key, utcnow().timestamp()),
            ).fetchone()

        row = await self._read(get)
        return None if row is None else _item(scope, *row)

    async def get_many(self, scope: Scope, keys: Sequence[str]) -> dict[str, MemoryItem]:
        """The live items of `scope` among `keys`, by key (a key without one is absent): what
        `get` returns key by key, in one read of the key index per `GET_MANY_BATCH` keys."""
        check_scope(scope)
        wanted = _checked_keys(keys)
        found: dict[str, MemoryItem] = {}
        for start in range(0, len(wanted), GET_MANY_BATCH):
            batch = wanted[start : start + GET_MANY_BATCH]

            def read(conn: sqlite3.Connection, batch: list[str]) -> list[tuple[Any, ...]]:
                return conn.execute(
                    f"{_SCOPE_ITEMS} AND i.key IN ({', '.join('?' * len(batch))}) AND {_LIVE}",
                    (*_scope_ids(scope), *batch, utcnow().timestamp()),
                ).fetchall()

            # a read per batch, so the event loop runs between them
            found.update((row[0], _item(scope, *row)) for row in await self._read(read, batch))
        return found

    async def _query(
        self, scope: Scope, text: str, top_k: int, filters: dict[str, JSON] | None
    ) -> list[QueryHit]:
        groups = query_groups(text, MAX_QUERY_TERMS)
        now = utcnow().timestamp()

        def ranked(conn: sqlite3.Connection, terms: list[str]) -> list[Hit]:
            # FTS5 ranks every candidate before the first row comes back; the rows are then
            # read best first until top_k pass the filters
            return passing(
                conn.execute(
                    "SELECT i.key, i.value, i.metadata, f.rank FROM items_fts f"
                    f" JOIN items i ON i.id = f.rowid WHERE items_fts MATCH ? AND {_LIVE}"
                    " ORDER BY f.rank",
                    (match_expression(terms), now),
                ),
                filters,
                top_k,
            )

        def newest(conn: sqlite3.Connection, terms: list[str], limit: int) -> list[Hit]:
            # Items that match only words too common to rank score 0, unranked: BM25 would
            # count each word's items over its whole posting list, milliseconds for a common
            # word of a large scope. Matches are read newest first as the filters take them,
            # MAX_CANDIDATES (or `limit`, if more) at most, however many the filters reject.
            return passing(
                conn.execute(
                    "SELECT i.key, i.value, i.metadata, 0.0 FROM items_fts f"
                    f" JOIN items i ON i.id = f.rowid WHERE items_fts MATCH ? AND {_LIVE}"
                    " ORDER BY f.rowid DESC LIMIT ?",
                    (match_expression(terms), now, max(MAX_CANDIDATES, limit)),
                ),
                filters,
                limit,
            )

        def scope_row(conn: sqlite3.Connection, kept: Kept | None) -> tuple[int, int] | None:
            # next_item counts the ids the scope ever handed out: its size, give or take the
            # expired items not yet purged, which is all the thresholds below need
            ids = _scope_ids(scope)
            if kept is not None and ids in kept.scopes:
                return kept.scopes[ids]
            row = conn.execute(
                "SELECT id, next_item FROM scopes"
                " WHERE project_id = ? AND agent_id = ? AND task_id = ?",
                ids,
            ).fetchone()
            if kept is not None:
                kept.scopes[ids] = row
            return row

        def query(
            conn: sqlite3.Connection, scope_id: int, size: int, kept: Kept | None
        ) -> list[Hit]:
            if not text.strip():
                where, params = filter_clause(filters)
                rows = conn.execute(
                    listing_statement(where), (scope_id, now, *params, top_k)
                ).fetchall()
                return [
                    (key, value, json.loads(metadata), None) for key, value, metadata, _ in rows
                ]
            # each query word with its plural forms, as this scope's terms
            scoped = [[f"{scope_id}x{form}" for form in group] for group in groups]
            terms = [term for group in scoped for term in group]
            if not terms:
                return []
            counts = count_terms(conn, terms, kept)
            # the forms the scope holds of each word, and how many items hold one of them
            found = {group[0]: [t for t in group if counts[t]] for group in scoped}
            frequency = {word: sum(counts[t] for t in forms) for word, forms in found.items()}
            present = sorted((w for w in found if frequency[w]), key=frequency.__getitem__)
            if not present:
                return []
            chosen = choose_terms(present, frequency, size)
            rows = ranked(conn, [t for word in chosen for t in found[word]]) if chosen else []
            rest = [t for word in present[len(chosen) :] for t in found[word]]
            if len(rows) < top_k and rest:
                # Too few from the rare terms: fill with the newest items matching the common
                # ones (ranking all of them would score most of the scope for little signal).
                seen = {row[0] for row in rows}
                fill = newest(conn, rest, top_k + len(rows))
                rows += [row for row in fill if row[0] not in seen][: top_k - len(rows)]
            return rows

        listing_filtered = bool(filters) and not text.strip()

        def find(conn: sqlite3.Connection) -> list[Hit] | None:
            # what the read-only connection reads is kept for the file's state; the writer's
            # own commits go unseen by its data_version, so it keeps nothing
            kept = self._term_counts.current(conn) if conn is self._reader else None
            row = scope_row(conn, kept)
            if row is None:
                return []
            scope_id, size = row
            # A filtered listing reads the scope until top_k items pass its filters: all of it
            # when few pass (165 to 230 ms in a 100k-item scope). In a large scope it runs on
            # the store's thread, where a caller's timeout can abandon it, instead of holding
            # the event loop: None sends it there.
            if listing_filtered and size > INLINE_SCAN_ITEMS and conn is self._reader:
                return None
            return query(conn, scope_id, size, kept)

        rows = await self._read(find)
        if rows is None:
            rows = await self._run(find)
        # an empty text lists the scope, newest first: every item matches it fully
        return [
            QueryHit(k, json.loads(v), 1.0 if rank is None else bm25_score(rank), m)
            for k, v, m, rank in rows
        ]

    async def _list_scopes(
        self, project_id: str | None, cursor: str | None, limit: int
    ) -> ScopePage:
        after = numeric_cursor(cursor)

        def list_scopes(conn: sqlite3.Connection) -> list[tuple[Any, ...]]:
            project_clause = "" if project_id is None else " AND s.project_id = ?"
            return conn.execute(
                "SELECT s.id, s.project_id, s.agent_id, s.task_id FROM scopes s"
                f" WHERE s.id > ?{project_clause} AND EXISTS (SELECT 1 FROM items i"
                f" WHERE i.scope_id = s.id AND {_LIVE}) ORDER BY s.id LIMIT ?",
                (
                    after,
                    *([project_id] if project_id is not None else []),
                    utcnow().timestamp(),
                    limit + 1,
                ),
            ).fetchall()

        rows = await self._run(list_scopes)
        page = rows[:limit]
        scopes = [Scope(p, a or None, t or None) for _, p, a, t in page]
        next_cursor = str(page[-1][0]) if len(rows) > limit else None
        return ScopePage(scopes, next_cursor)

    @staticmethod
    def _count(conn: sqlite3.Connection, scope_id: int) -> int:
        return conn.execute(
            f"SELECT count(*) FROM items i WHERE i.id BETWEEN ? AND ? AND {_LIVE}",
            (*id_range(scope_id), utcnow().timestamp()),
        ).fetchone()[0]

    async def _delete_scope(self, scope: Scope) -> int:
        def delete(conn: sqlite3.Connection) -> int:
            with self._writing(conn):
                scope_id = self._scope_id(conn, scope, create=False)
                if scope_id is None:
                    return 0
                live = self._count(conn, scope_id)
                conn.execute(f"{_UNINDEX} FROM items WHERE id BETWEEN ? AND ?", id_range(scope_id))
                conn.execute("DELETE FROM items WHERE id BETWEEN ? AND ?", id_range(scope_id))
                conn.execute("DELETE FROM scopes WHERE id = ?", (scope_id,))
                return live

        return await self._run(delete)

    async def _delete(self, scope: Scope, key: str) -> bool:
        def find(conn: sqlite3.Connection) -> tuple[Any, ...] | None:
            return conn.execute(
                f"{_SCOPE_ITEMS} AND i.key = ?", (*_scope_ids(scope), key)
            ).fetchone()

        def delete(conn: sqlite3.Connection) -> bool:
            with self._writing(conn):
                row = conn.execute(
                    "SELECT i.id, i.expires_at FROM items i JOIN scopes s ON s.id = i.scope_id"
                    " WHERE s.project_id = ? AND s.agent_id = ? AND s.task_id = ? AND i.key = ?",
                    (*_scope_ids(scope), key),
                ).fetchone()
                if row is None:  # deleted meanwhile
                    return False
                conn.execute(f"{_UNINDEX} FROM items WHERE id = ?", (row[0],))
                conn.execute("DELETE FROM items WHERE id = ?", (row[0],))
                return row[1] is None or row[1] > utcnow().timestamp()

        # a key that is not there is not written for: a write renews the file's write token,
        # which makes the next queries count their words again
        if await self._read(find) is None:
            return False
        return await self._run(delete)

    async def _list_items(
        self, scope: Scope, prefix: str | None, cursor: str | None, limit: int
    ) -> ItemPage:
        after = cursor_key(cursor)
        end = None if prefix is None else prefix_end(prefix)
        # key ranges of the (scope, key) index: no character of a prefix is a wildcard
        bounds = [(" AND i.key >= ?", prefix or None), (" AND i.key < ?", end)]
        bounds.append((" AND i.key > ?", after))
        kept = [(clause, value) for clause, value in bounds if value is not None]

        def read(conn: sqlite3.Connection) -> list[tuple[Any, ...]]:
            return conn.execute(
                f"{_SCOPE_ITEMS}{''.join(c for c, _ in kept)} AND {_LIVE} ORDER BY i.key LIMIT ?",
                (*_scope_ids(scope), *(v for _, v in kept), utcnow().timestamp(), limit + 1),
            ).fetchall()

        return item_page([_item(scope, *row) for row in await self._read(read)], limit)

    async def count(self, scope: Scope) -> int:
        """Live items in `scope`: what `delete_scope` would remove."""

        def count(conn: sqlite3.Connection) -> int:
            scope_id = self._scope_id(conn, scope, create=False)
            return 0 if scope_id is None else self._count(conn, scope_id)

        return await self._run(count)

    async def optimize(self) -> None:
        """Merge the full-text index into one segment and refresh the planner's statistics.

        Worth running after a bulk load (a few seconds per million items): queries then read one
        segment instead of several. Safe at any time; other processes keep reading meanwhile.
        """

        def optimize(conn: sqlite3.Connection) -> None:
            with self._writing(conn):
                conn.execute("INSERT INTO items_fts (items_fts) VALUES ('optimize')")
            conn.execute("PRAGMA optimize")

        await self._run(optimize)

    async def purge_expired(self) -> int:
        """Delete expired items for good; queries skip them either way."""

        def purge(conn: sqlite3.Connection) -> int:
            now = utcnow().timestamp()
            with self._writing(conn):
                expired = "FROM items WHERE expires_at IS NOT NULL AND expires_at <= ?"
                conn.execute(f"{_UNINDEX} {expired}", (now,))
                return conn.execute(f"DELETE {expired}", (now,)).rowcount

        return await self._run(purge)


@contextmanager
def _transaction(conn: sqlite3.Connection) -> Iterator[None]:
    """`BEGIN IMMEDIATE` ... `COMMIT`, rolled back on any error: a write is whole or absent.

    The commit gives the file a new write token (`term_counts.TermCounts` keeps query words'
    counts per token).
    """
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield
        conn.execute(RENEW_WRITE_TOKEN)
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")
