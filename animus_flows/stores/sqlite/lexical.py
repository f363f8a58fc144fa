"""Lexical ranking in the SQLite store: BM25 with the statistics of the scope searched.

A query's terms (the analyzer's: stems, no stop words) are weighted by their rarity in the scope
(`idf`, from `term_df` and the scope's item count), and each item's score is BM25's sum over the
terms it holds, its length normalized by the scope's average (k1 1.2, b 0.75, Lucene's idf, which
is never negative).

A query runs in two steps, so that its cost stays bounded in a scope of any size:

1. Candidates: the full-text index lists the items holding each term, rarest term first and
   newest items first, until `MAX_CANDIDATES` are found. Each candidate's estimate is the idf
   of the terms it was found by: its BM25 score if it held each once at the average length.
   Reading these lists costs a fraction of a microsecond an item.
2. Scores: candidates are scored exactly, best estimate first, a window at a time (reading each
   item's terms costs a few microseconds), until `top_k` of them pass the filters.

When a scope's candidates fit one window (at least `RESCORED` items) the result is exact BM25.
In a larger scope it is the exact ranking of the best-estimated candidates: rare terms decide
the estimates, and a word found in much of the scope adds weight only to the candidates it is
scored with.
"""

from __future__ import annotations

import json
import math
import sqlite3
from collections.abc import Callable
from typing import Any

from animus_flows.protocol import JSON, matches_filters

K1 = 1.2
B = 0.75
#: The most query terms ranked: a prompt's first distinct terms.
MAX_QUERY_TERMS = 64
#: The most items one query considers (step 1).
MAX_CANDIDATES = 300
#: The fewest candidates scored exactly at a time (step 2), or twice the query's top_k.
RESCORED = 50
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


def candidates(conn: sqlite3.Connection, scope_id: int, weights: dict[str, float]) -> list[int]:
    """Step 1: the ids of at most `MAX_CANDIDATES` items holding the query's terms, best
    estimate first (newest first among equals)."""
    estimates: dict[int, float] = {}
    for term in sorted(weights, key=lambda term: (-weights[term], term)):  # rarest first
        room = MAX_CANDIDATES - len(estimates)
        if room <= 0:
            break
        weight = weights[term]
        found = conn.execute(
            # newest first: a cut at MAX_CANDIDATES keeps the recent; enough rows for `room`
            # new items even if every candidate so far holds the term too
            "SELECT rowid FROM items_fts WHERE items_fts MATCH ? ORDER BY rowid DESC LIMIT ?",
            (f'"{scope_id}x{term}"', room + len(estimates)),
        )
        for (item_id,) in found:
            if item_id in estimates:
                estimates[item_id] += weight
            elif room > 0:
                estimates[item_id] = weight
                room -= 1
    return sorted(estimates, key=lambda item_id: (-estimates[item_id], -item_id))


def scores(
    conn: sqlite3.Connection,
    ids: list[int],
    weights: dict[str, float],
    average: float,
    now: float,
) -> dict[int, float]:
    """Step 2: the exact BM25 score of each live item of `ids`."""
    # each term's idf * (K1 + 1) and the length normalization's parts, computed once
    scaled = {term: weight * (K1 + 1) for term, weight in weights.items()}
    base, per_term = K1 * (1 - B), K1 * B / average
    scored: dict[int, float] = {}
    for start in range(0, len(ids), BATCH):
        batch = ids[start : start + BATCH]
        rows = conn.execute(
            f"SELECT id, terms FROM items WHERE id IN ({', '.join('?' * len(batch))})"
            " AND (expires_at IS NULL OR expires_at > ?)",
            (*batch, now),
        )
        for item_id, terms in rows:
            words = terms.split()
            norm = base + per_term * len(words)
            score = 0.0
            # the query terms the item holds, found in C (a set against the words): an item
            # holds two or three of a prompt's dozen, so only those are counted; in sorted
            # order, so that a score never depends on a set's order
            for term in sorted(scaled.keys() & words):
                tf = words.count(term)
                score += scaled[term] * tf / (tf + norm)
            scored[item_id] = score
    return scored


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


def best(
    conn: sqlite3.Connection,
    scored: dict[int, float],
    verdicts: dict[int, Verdict],
    wanted: int,
    now: float,
    accept: Callable[[dict[str, JSON]], bool],
) -> list[Ranked]:
    """The best `wanted` scored items that pass the filters, best first; the rows of those
    not judged yet (in `verdicts`) are read as they are reached."""
    ranked = sorted(scored.items(), key=lambda pair: (-pair[1], -pair[0]))
    kept: list[Ranked] = []
    step = max(2 * wanted, 16)  # rows are read for the best only: most pass the filters
    for start in range(0, len(ranked), step):
        window = ranked[start : start + step]
        unread = [item_id for item_id, _ in window if item_id not in verdicts]
        verdicts.update(judge(conn, unread, now, accept))
        for item_id, score in window:
            row = verdicts[item_id]
            if row is not None:
                kept.append((item_id, *row, score))
                if len(kept) == wanted:
                    return kept
    return kept


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
    average = max(total_terms / items, 1.0)
    found = candidates(conn, scope_id, weights)
    window = max(RESCORED, 2 * top_k)
    scored: dict[int, float] = {}
    verdicts: dict[int, Verdict] = {}
    kept: list[Ranked] = []
    for start in range(0, len(found), window):
        scored.update(scores(conn, found[start : start + window], weights, average, now))
        kept = best(conn, scored, verdicts, top_k, now, lambda m: matches_filters(m, filters))
        if len(kept) == top_k:
            break
    return kept
