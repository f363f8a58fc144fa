"""How many items of a scope match each query word, counted through FTS5 and kept.

`SQLiteStore.query` ranks only a query's rarest words (`choose_terms`), so it first counts each
word's matches in the scope. Counting opens an FTS5 cursor per word, about 10 microseconds, and
a prompt has some 25 word forms; an agent's prompts share most of them, from phase to phase and
from one flow run to the next. `TermCounts` keeps the counts for as long as the file is
unchanged, and shares them between the connections of a process that read the same state,
with each scope's row, which every query looks up first.
"""

from __future__ import annotations

import sqlite3
import threading
from collections import OrderedDict
from dataclasses import dataclass, field

MAX_CANDIDATES = 200  # items a query may score; see sqlite.choose_terms

# Terms counted per statement: a connection compiles a statement for each number of terms up to
# this (0.1 to 0.4 ms each, more than running one) and reuses them; longer lists run in batches.
COUNT_BATCH = 8

# Run by every write transaction before it commits (sqlite._transaction): a new random token
# names the file's new state, so counts made under the old one are never read against it.
RENEW_WRITE_TOKEN = (
    "INSERT OR REPLACE INTO animus_meta (name, value) VALUES ('write_token', hex(randomblob(16)))"
)


def match_expression(forms: list[str]) -> str:
    """An FTS5 query matching any of the given words; quoting makes them literal."""
    return " OR ".join(f'"{form}"' for form in forms)


def frequency_statement(terms: int) -> str:
    """One row: for each of `terms` match expressions, the items matching it, counted up to
    `MAX_CANDIDATES` + 1.

    That bound is all `choose_terms` needs (past it a term never ranks; below it the count is
    exact), and counting stops there: a common word's postings are never all read, as FTS5's
    vocabulary table would read them to count them.
    """
    count = (
        "(SELECT count(*) FROM (SELECT 1 FROM items_fts WHERE items_fts MATCH ?"
        f" LIMIT {MAX_CANDIDATES + 1}))"
    )
    return "SELECT " + ", ".join([count] * terms)


def count_matches(conn: sqlite3.Connection, terms: list[str]) -> dict[str, int]:
    """Each scoped term's match count, as `frequency_statement` bounds it."""
    counts: dict[str, int] = {}
    for start in range(0, len(terms), COUNT_BATCH):
        batch = terms[start : start + COUNT_BATCH]
        quoted = [match_expression([term]) for term in batch]
        row = conn.execute(frequency_statement(len(batch)), quoted).fetchone()
        counts.update(zip(batch, row, strict=True))
    return counts


def write_token(conn: sqlite3.Connection) -> str | None:
    """The token of the file's last write; None before a write of a version that sets one."""
    row = conn.execute("SELECT value FROM animus_meta WHERE name = 'write_token'").fetchone()
    return None if row is None else row[0]


@dataclass
class Kept:
    """What reads learned of one committed state of a file: each scoped term's match count (as
    `frequency_statement` bounds it) and each scope's row (id and `next_item`, None when the
    scope does not exist), both fixed by that state."""

    counts: dict[str, int] = field(default_factory=dict)
    scopes: dict[tuple[str, str, str], tuple[int, int] | None] = field(default_factory=dict)

    @property
    def entries(self) -> int:
        return len(self.counts) + len(self.scopes)


class _KeptByToken:
    """The process's kept reads, one `Kept` per write token, for the most recent tokens.

    Entries are replaced, never emptied: a store counting in one thread never sees entries
    vanish under it while another thread drops the table.
    """

    LIMIT = 32

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._tables: OrderedDict[str, Kept] = OrderedDict()

    def table(self, token: str) -> Kept:
        with self._lock:
            table = self._tables.pop(token, None)
            self._tables[token] = table = Kept() if table is None else table
            while len(self._tables) > self.LIMIT:
                self._tables.popitem(last=False)
            return table

    def drop(self, token: str) -> None:
        with self._lock:
            self._tables.pop(token, None)


_SHARED = _KeptByToken()


def count_terms(conn: sqlite3.Connection, terms: list[str], kept: Kept | None) -> dict[str, int]:
    """`terms` with their counts, counting only those `kept` (None: nothing) lacks, and
    keeping what was counted there."""
    known = {} if kept is None else kept.counts
    missing = [term for term in dict.fromkeys(terms) if term not in known]
    counted = count_matches(conn, missing) if missing else {}
    known.update(counted)
    return {term: counted[term] if term in counted else known[term] for term in terms}


class TermCounts:
    """One store's view of the kept reads (`Kept`), kept while the file is unchanged.

    Every write transaction gives the file a new random `write_token`, so a token names one
    committed state of its contents, and what was read under it holds for any connection that
    reads that state: a store opened by the next flow run in the process starts with what
    earlier ones counted. A connection reads the token again only when its `PRAGMA data_version`
    moved, which happens when another connection commits, the store's own writer included. A
    commit that left the token as it was (an animus-flows from before tokens, or SQLite
    refreshing its statistics) drops what was kept under it. A file never written by a version
    that sets tokens keeps its reads per connection, while its data_version holds. A
    connection's own commits do not change its data_version: only the read-only connection's
    reads are kept.
    """

    MAX_ENTRIES = 100_000

    def __init__(self) -> None:
        self._kept = Kept()
        self._seen: tuple[sqlite3.Connection, int, str | None] | None = None

    def current(self, conn: sqlite3.Connection) -> Kept:
        """What is kept for the state `conn` reads now (one `PRAGMA data_version`)."""
        version = conn.execute("PRAGMA data_version").fetchone()[0]
        seen = self._seen
        same_conn = seen is not None and seen[0] is conn
        if same_conn and seen[1] == version and self._kept.entries <= self.MAX_ENTRIES:
            return self._kept
        token = write_token(conn)
        if token is not None and same_conn and seen[2] == token:
            # the file changed without a new token, or the kept reads grew past the bound
            _SHARED.drop(token)
        self._kept = Kept() if token is None else _SHARED.table(token)
        self._seen = (conn, version, token)
        return self._kept
