"""Writing items into the SQLite store: rows, the full-text index and the scope statistics.

Every write keeps three things in step inside its transaction: the item row (with its terms),
its postings in the contentless full-text index, and its scope's statistics (item count, term
count, each term's document frequency). Removing an item hands FTS5 the body it indexed, which
the item's stored terms give back, so nothing is analyzed twice.
"""

from __future__ import annotations

import json
import sqlite3
from collections import Counter
from dataclasses import dataclass, field
from itertools import chain

from animus_flows.errors import StoreUnavailable
from animus_flows.protocol import JSON, indexed_text
from animus_flows.stores.analysis import Analyzer
from animus_flows.stores.sqlite.schema import SCOPE_BITS, id_range, scoped_body

# Items re-indexed per statement batch by `reindex`.
REINDEX_BATCH = 2000


@dataclass(frozen=True, slots=True)
class Row:
    """An item as it is written: value and metadata JSON, its terms, its expiry (epoch), and
    with an embedder its vector (None: it waits in `vector_pending` for one)."""

    value: str
    metadata: str
    terms: list[str]
    expires_at: float | None
    vector: bytes | None = None


@dataclass
class VectorChanges:
    """What a transaction did to scopes' vectors, for the process's copy of them (`semantic`):
    per scope, its version before and after, the vectors written and the items whose vectors
    went. Versions come from one sequence for the whole file, so a scope deleted and made
    again (its id reused) never shows a version an old copy of it had."""

    versions: dict[int, tuple[int, int]] = field(default_factory=dict)
    written: dict[int, list[tuple[int, bytes]]] = field(default_factory=dict)
    removed: dict[int, list[int]] = field(default_factory=dict)
    queued: list[int] = field(default_factory=list)  # items now waiting for a vector

    def bump(self, conn: sqlite3.Connection, scope_id: int) -> None:
        if scope_id in self.versions:
            return
        (before,) = conn.execute("SELECT vectors FROM scopes WHERE id = ?", (scope_id,)).fetchone()
        (after,) = conn.execute(
            "INSERT INTO animus_meta (name, value) VALUES ('vector_version', 1) ON CONFLICT (name)"
            " DO UPDATE SET value = value + 1 RETURNING CAST(value AS INTEGER)"
        ).fetchone()
        conn.execute("UPDATE scopes SET vectors = ? WHERE id = ?", (after, scope_id))
        self.versions[scope_id] = (before, after)


class ScopeStats:
    """Changes to scopes' statistics, gathered while a transaction writes and applied once:
    a batch of a thousand items touches each of its terms' rows once, not once per item."""

    def __init__(self) -> None:
        self.items: Counter[int] = Counter()
        self.terms: Counter[int] = Counter()
        self.df: dict[int, Counter[str]] = {}  # per scope: each term's change of frequency
        self.removed = False

    def add(self, scope_id: int, items: list[list[str]], sign: int = 1) -> None:
        """Count (sign 1) or discount (-1) items of one scope, each given by its terms."""
        self.items[scope_id] += sign * len(items)
        self.terms[scope_id] += sign * sum(map(len, items))
        # Counter counts an iterable in C: a batch's million terms in ~0.1 s, where a Python
        # loop over them took 0.8 s (a third of a 10,000-item put_many's writer time)
        counted = Counter(chain.from_iterable(map(set, items)))
        df = self.df.setdefault(scope_id, Counter())
        if sign > 0:
            df.update(counted)
        else:
            df.subtract(counted)
            self.removed = True

    def apply(self, conn: sqlite3.Connection) -> None:
        conn.executemany(
            "UPDATE scopes SET items = items + ?, terms = terms + ? WHERE id = ?",
            [(self.items[s], self.terms[s], s) for s in self.items],
        )
        changes = [
            (s, term, delta) for s, df in self.df.items() for term, delta in df.items() if delta
        ]
        conn.executemany(
            "INSERT INTO term_df (scope_id, term, df) VALUES (?, ?, ?)"
            " ON CONFLICT (scope_id, term) DO UPDATE SET df = df + excluded.df",
            sorted(changes),  # in key order: each page of the index is visited once
        )
        if self.removed:  # terms no item of the scope holds any more
            conn.executemany(
                "DELETE FROM term_df WHERE scope_id = ? AND term = ? AND df <= 0",
                [(s, term) for s, term, delta in changes if delta < 0],
            )


class Indexer:
    """Writes rows of one analyzer's terms (see the module); `semantic` keeps items' vectors,
    or queues those written without one."""

    def __init__(self, analyzer: Analyzer, *, semantic: bool = False) -> None:
        self.analyzer = analyzer
        self.semantic = semantic

    def terms(self, value: JSON) -> list[str]:
        """The index terms of a value: the analyzer's, of the text a store indexes for it."""
        return self.analyzer.terms(indexed_text(value))

    def write(
        self,
        conn: sqlite3.Connection,
        scope_id: int,
        rows: dict[str, Row],
        now: float,
        changes: VectorChanges | None = None,
    ) -> dict[str, float]:
        """Upsert `key -> Row` into one scope; returns each key's created_at.

        Existing keys keep their row id (and creation time, unless they had expired); new keys
        take the next ids of the scope's range.
        """
        stats = ScopeStats()
        existing = {
            key: (item_id, created, expired, old_terms)
            for key, item_id, created, expired, old_terms in conn.execute(
                # CROSS JOIN keeps the keys the outer loop: one index probe per key
                "SELECT i.key, i.id, i.created_at, i.expires_at <= ?, i.terms FROM json_each(?) j"
                " CROSS JOIN items i ON i.scope_id = ? AND i.key = j.value",
                (now, json.dumps(list(rows)), scope_id),
            )
        }
        fresh = [key for key in rows if key not in existing]
        ids = {key: found[0] for key, found in existing.items()}
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
                " expires_at, terms) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [
                    (ids[key], scope_id, key, row.value, row.metadata, now, now, row.expires_at,
                     " ".join(row.terms))
                    for key, row in ((key, rows[key]) for key in fresh)
                ],
            )  # fmt: skip
        if existing:
            old = [(item_id, old_terms.split()) for item_id, _, _, old_terms in existing.values()]
            self._unindex(conn, scope_id, old, stats)
            conn.executemany(
                "UPDATE items SET value = ?, metadata = ?, updated_at = ?, expires_at = ?,"
                " terms = ?, created_at = CASE WHEN ? THEN ? ELSE created_at END WHERE id = ?",
                [
                    (row.value, row.metadata, now, row.expires_at, " ".join(row.terms),
                     bool(expired), now, item_id)
                    for (item_id, _, expired, _), row in (
                        (existing[key], rows[key]) for key in existing
                    )
                ],
            )  # fmt: skip
        conn.executemany(
            "INSERT INTO items_fts (rowid, body) VALUES (?, ?)",
            [(ids[key], scoped_body(scope_id, row.terms)) for key, row in rows.items()],
        )
        stats.add(scope_id, [row.terms for row in rows.values()])
        stats.apply(conn)
        if self.semantic:
            self._write_vectors(conn, scope_id, {ids[key]: row.vector for key, row in rows.items()},
                                changes or VectorChanges())  # fmt: skip
        return {
            key: (now if expired else created) for key, (_, created, expired, _) in existing.items()
        } | dict.fromkeys(fresh, now)

    @staticmethod
    def _write_vectors(
        conn: sqlite3.Connection,
        scope_id: int,
        vectors: dict[int, bytes | None],
        changes: VectorChanges,
    ) -> None:
        """Items' new vectors, or (None) their place in the queue: a rewritten item's old
        vector describes its old text and goes."""
        ready = [(item_id, blob) for item_id, blob in vectors.items() if blob is not None]
        waiting = [(item_id,) for item_id, blob in vectors.items() if blob is None]
        conn.executemany("INSERT OR REPLACE INTO item_vectors VALUES (?, ?)", ready)
        conn.executemany("DELETE FROM vector_pending WHERE item_id = ?", [(i,) for i, _ in ready])
        if waiting:
            conn.executemany("DELETE FROM item_vectors WHERE item_id = ?", waiting)
            conn.executemany("INSERT OR IGNORE INTO vector_pending VALUES (?)", waiting)
            changes.queued.extend(i for (i,) in waiting)
            changes.removed.setdefault(scope_id, []).extend(i for (i,) in waiting)
        changes.written.setdefault(scope_id, []).extend(ready)
        changes.bump(conn, scope_id)

    def store_vectors(
        self,
        conn: sqlite3.Connection,
        vectors: dict[int, tuple[str, bytes]],
        changes: VectorChanges,
    ) -> list[int]:
        """Vectors computed for queued items, by id, with the value JSON each was computed
        from: stored for the items still queued that still hold that value (one rewritten
        meanwhile stays queued for its new text). Returns the ids stored."""
        live = [
            (item_id, scope_id)
            for item_id, scope_id, value in conn.execute(
                f"SELECT p.item_id, i.scope_id, i.value FROM vector_pending p JOIN items i ON"
                f" i.id = p.item_id WHERE p.item_id IN ({', '.join('?' * len(vectors))})",
                list(vectors),
            )
            if value == vectors[item_id][0]
        ]
        by_scope: dict[int, dict[int, bytes | None]] = {}
        for item_id, scope_id in live:
            by_scope.setdefault(scope_id, {})[item_id] = vectors[item_id][1]
        for scope_id, ready in by_scope.items():
            self._write_vectors(conn, scope_id, ready, changes)
        return [item_id for item_id, _ in live]

    def remove(
        self,
        conn: sqlite3.Connection,
        where: str,
        params: tuple[object, ...],
        changes: VectorChanges | None = None,
    ) -> int:
        """Delete the items `where` selects (an SQL condition on `items`), with their postings,
        statistics and vectors; returns how many were deleted."""
        found = conn.execute(f"SELECT id, scope_id, terms FROM items WHERE {where}", params)
        by_scope: dict[int, list[tuple[int, list[str]]]] = {}
        for item_id, scope_id, terms in found.fetchall():
            by_scope.setdefault(scope_id, []).append((item_id, terms.split()))
        stats = ScopeStats()
        for scope_id, items in by_scope.items():
            self._unindex(conn, scope_id, items, stats)
            if self.semantic:
                gone = [(item_id,) for item_id, _ in items]
                conn.executemany("DELETE FROM item_vectors WHERE item_id = ?", gone)
                conn.executemany("DELETE FROM vector_pending WHERE item_id = ?", gone)
                if changes is not None:
                    changes.removed.setdefault(scope_id, []).extend(i for (i,) in gone)
                    changes.bump(conn, scope_id)
        stats.apply(conn)
        return conn.execute(f"DELETE FROM items WHERE {where}", params).rowcount

    @staticmethod
    def _unindex(
        conn: sqlite3.Connection,
        scope_id: int,
        items: list[tuple[int, list[str]]],
        stats: ScopeStats,
    ) -> None:
        # A contentless index forgets its text: removing a row means handing FTS5 the body it
        # indexed, which the item's stored terms give back.
        conn.executemany(
            "INSERT INTO items_fts (items_fts, rowid, body) VALUES ('delete', ?, ?)",
            [(item_id, scoped_body(scope_id, terms)) for item_id, terms in items],
        )
        stats.add(scope_id, [terms for _, terms in items], -1)

    def reindex(self, conn: sqlite3.Connection) -> int:
        """Index every item again with this analyzer (a new schema, a new language): its terms,
        the full-text index and every scope's statistics are rebuilt, and with an embedder
        every item is queued for a new vector. Returns the items."""
        conn.execute("INSERT INTO items_fts (items_fts) VALUES ('delete-all')")
        conn.execute("DELETE FROM term_df")
        conn.execute("UPDATE scopes SET items = 0, terms = 0, vectors = -1")  # none kept fits
        conn.execute("DELETE FROM item_vectors")
        conn.execute("DELETE FROM vector_pending")
        if self.semantic:
            conn.execute("INSERT INTO vector_pending SELECT id FROM items")
        stats, done, after = ScopeStats(), 0, -1
        while True:
            batch = conn.execute(
                "SELECT id, scope_id, value FROM items WHERE id > ? ORDER BY id LIMIT ?",
                (after, REINDEX_BATCH),
            ).fetchall()
            if not batch:
                break
            analyzed = [(i, s, self.terms(json.loads(v))) for i, s, v in batch]
            conn.executemany(
                "UPDATE items SET terms = ? WHERE id = ?",
                [(" ".join(t), i) for i, _, t in analyzed],
            )
            conn.executemany(
                "INSERT INTO items_fts (rowid, body) VALUES (?, ?)",
                [(i, scoped_body(s, t)) for i, s, t in analyzed],
            )
            by_scope: dict[int, list[list[str]]] = {}
            for _, scope_id, terms in analyzed:
                by_scope.setdefault(scope_id, []).append(terms)
            for scope_id, items in by_scope.items():
                stats.add(scope_id, items)
            done, after = done + len(batch), batch[-1][0]
        stats.apply(conn)
        return done
