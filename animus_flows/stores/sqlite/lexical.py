"""Lexical ranking in the SQLite store: BM25 with the statistics of the scope searched.

A query's terms (the analyzer's: stems, no stop words) are weighted by their rarity in the scope
(`idf`, from `term_df` and the scope's item count), and each item's score is BM25's sum over the
terms it holds, its length normalized by the scope's average (k1 1.2, b 0.75, Lucene's idf, which
is never negative). Items are found through the full-text index one term at a time, rarest
first, and a term stops adding new items once no item holding only it and the terms after it
could enter the best `top_k` (MaxScore): a word in most of a large scope only adds weight to
the items rarer words found, so a query reads a bounded part of the scope (at most
`MAX_SCORED` items, or twice its `top_k`).
"""

from __future__ import annotations

import json
import math
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from animus_flows.protocol import JSON, matches_filters

K1 = 1.2
B = 0.75
#: The most query terms ranked: a prompt's first distinct terms.
MAX_QUERY_TERMS = 64
#: The most items one query scores (or twice its top_k, if more). Past it, the terms not yet
#: read only add weight to the items found so far, which rarer terms found first: it bounds a
#: query of words found in much of a large scope, which MaxScore alone would score whole
#: (each item costs a few microseconds in Python).
MAX_SCORED = 300
# Items read per statement: short reads, far below SQLite's limit of parameters.
BATCH = 500

#: A ranked row: item id, key, value JSON, metadata (decoded) and the score.
Ranked = tuple[int, str, str, dict[str, JSON], float]
#: An item's row as a result needs it: key, value JSON, metadata; None when it fails the filters.
Verdict = tuple[str, str, dict[str, JSON]] | None


def idf(df: int, items: int) -> float:
    """Lucene's BM25 idf: high for a term few items hold, small but positive for a common one."""
    return math.log(1 + (items - df + 0.5) / (df + 0.5))


def term_score(weight: float, tf: int, length: int, average: float) -> float:
    """One term's BM25 contribution to an item of `length` terms holding it `tf` times."""
    return weight * tf * (K1 + 1) / (tf + K1 * (1 - B + B * length / average))


@dataclass
class _Query:
    conn: sqlite3.Connection
    scope_id: int
    weights: dict[str, float]
    average: float
    top_k: int
    now: float
    accept: Callable[[dict[str, JSON]], bool]
    scores: dict[int, float] = field(default_factory=dict)
    seen: set[int] = field(default_factory=set)  # found through a term: scored, or expired
    #: items whose row was read: (key, value, metadata) when it passes the filters, else None
    verdicts: dict[int, Verdict] = field(default_factory=dict)

    def score_items(self, ids: list[int]) -> None:
        for start in range(0, len(ids), BATCH):
            batch = ids[start : start + BATCH]
            rows = self.conn.execute(
                f"SELECT id, terms FROM items WHERE id IN ({', '.join('?' * len(batch))})"
                " AND (expires_at IS NULL OR expires_at > ?)",
                (*batch, self.now),
            )
            weights, average = self.weights, self.average
            for item_id, terms in rows:
                words = terms.split()
                # the query terms the item holds, found in C (a set against the words): an
                # item holds two or three of a prompt's dozen, so only those are counted
                # fsum: exact, so the set's order cannot change a score
                self.scores[item_id] = math.fsum(
                    term_score(weights[term], words.count(term), len(words), average)
                    for term in weights.keys() & words
                )

    def best(self, wanted: int) -> list[tuple[int, float]]:
        """The best `wanted` scored items that pass the filters, best first, reading the rows
        of those not judged yet as it goes."""
        ranked = sorted(self.scores.items(), key=lambda pair: (-pair[1], -pair[0]))
        kept: list[tuple[int, float]] = []
        step = max(2 * wanted, 16)  # rows are read for the best only: most pass the filters
        for start in range(0, len(ranked), step):
            window = ranked[start : start + step]
            unread = [item_id for item_id, _ in window if item_id not in self.verdicts]
            if unread:
                self._judge(unread)
            for item_id, score in window:
                if self.verdicts[item_id] is not None:
                    kept.append((item_id, score))
                    if len(kept) == wanted:
                        return kept
        return kept

    def threshold(self) -> float:
        """The score an item must beat to enter the best `top_k`; 0 while fewer are found."""
        best = self.best(self.top_k)
        return best[-1][1] if len(best) == self.top_k else 0.0

    def _judge(self, ids: list[int]) -> None:
        self.verdicts.update(judge(self.conn, ids, self.now, self.accept))


def judge(
    conn: sqlite3.Connection,
    ids: list[int],
    now: float,
    accept: Callable[[dict[str, JSON]], bool],
) -> dict[int, Verdict]:
    """Each item's row, or None when it is gone, expired or fails `accept` (the filters)."""
    verdicts: dict[int, Verdict] = dict.fromkeys(ids)
    for start in range(0, len(ids), BATCH):
        batch = ids[start : start + BATCH]
        marks = ", ".join("?" * len(batch))
        rows = conn.execute(
            f"SELECT id, key, value, metadata FROM items WHERE id IN ({marks})"
            " AND (expires_at IS NULL OR expires_at > ?)",
            (*batch, now),
        )
        for item_id, key, value, metadata_json in rows:
            metadata = json.loads(metadata_json)
            verdicts[item_id] = (key, value, metadata) if accept(metadata) else None
    return verdicts


def rank(
    conn: sqlite3.Connection,
    scope_id: int,
    scope_stats: tuple[int, int],
    terms: list[str],
    top_k: int,
    now: float,
    filters: dict[str, Any] | None,
) -> list[Ranked]:
    """The best `top_k` live items of a scope for a query's `terms` that pass `filters`, by
    BM25 with the scope's statistics (`scope_stats`: its items and their terms)."""
    items, total_terms = scope_stats
    wanted = list(dict.fromkeys(terms))[:MAX_QUERY_TERMS]
    if not wanted or items <= 0:
        return []
    marks = ", ".join("?" * len(wanted))
    df = dict(
        conn.execute(
            f"SELECT term, df FROM term_df WHERE scope_id = ? AND term IN ({marks})",
            (scope_id, *wanted),
        )
    )
    weights = {term: idf(df[term], items) for term in wanted if df.get(term, 0) > 0}
    if not weights:
        return []
    query = _Query(
        conn,
        scope_id,
        weights,
        max(total_terms / items, 1.0),
        top_k,
        now,
        lambda metadata: matches_filters(metadata, filters),
    )
    # rarest first; what the terms after each could still add to an item holding none before
    order = sorted(weights, key=lambda term: (-weights[term], term))
    reach = [sum(weights[t] * (K1 + 1) for t in order[j:]) for j in range(len(order))]
    most_scored = max(MAX_SCORED, 2 * top_k)
    for term, most in zip(order, reach, strict=True):
        if len(query.scores) >= most_scored or most <= query.threshold():
            break
        found = conn.execute(
            # newest first: a cut at MAX_SCORED keeps the recent; no more rows than could be new
            "SELECT rowid FROM items_fts WHERE items_fts MATCH ? ORDER BY rowid DESC LIMIT ?",
            (f'"{scope_id}x{term}"', most_scored - len(query.scores) + len(query.seen)),
        )
        fresh = [item_id for (item_id,) in found if item_id not in query.seen]
        fresh = fresh[: most_scored - len(query.scores)]
        query.seen.update(fresh)
        query.score_items(fresh)
    return [
        (item_id, *query.verdicts[item_id], score)  # type: ignore[misc]
        for item_id, score in query.best(top_k)
    ]
