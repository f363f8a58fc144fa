"""The other stemmer issue 26 asked to measure: SQLite FTS5's own `porter` tokenizer.

`PorterRetriever` indexes each corpus scope in an FTS5 table of its own (so word rarity is the
scope's, as in the store) with `tokenize='porter unicode61'`, and asks FTS5's BM25 with the
question's words, stop words dropped by the store's own English list, joined by OR. It differs
from the store's lexical leg only in the stemmer (Porter's 1980 algorithm, built into SQLite,
against Snowball's English "Porter2") and in its BM25 constants (FTS5: k1 1.2, b 0.75).

`analysis_rates` times both analyses of the same texts, items per second.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Sequence

from quality.evaluate import Corpus, Ranked

from animus_flows.stores.analysis import analyzer, words


def _match(question: str, stop: frozenset[str]) -> str | None:
    """An FTS5 query: the question's content words, each quoted, joined by OR."""
    kept = [w for w in dict.fromkeys(words(question)) if w not in stop]
    return " OR ".join(f'"{w}"' for w in kept) or None


class PorterRetriever:
    """FTS5 with its porter tokenizer, one table per scope, in memory."""

    name = "FTS5 porter tokenizer (stop words, per scope)"

    def __init__(self) -> None:
        self.db = sqlite3.connect(":memory:")
        self.tables: dict[str, str] = {}
        self.stop = analyzer("english").stop_words

    async def index(self, corpus: Corpus) -> None:
        for number, scope in enumerate(corpus.scopes):
            table = f"scope_{number}"
            self.db.execute(
                f"CREATE VIRTUAL TABLE {table} USING fts5(key UNINDEXED, body,"
                " tokenize='porter unicode61 remove_diacritics 2')"
            )
            self.db.executemany(
                f"INSERT INTO {table} (key, body) VALUES (?, ?)",
                [(memory.key, memory.text) for memory in scope.memories],
            )
            self.tables[scope.id] = table

    async def search(self, scope: str, question: str, limit: int) -> list[Ranked]:
        match = _match(question, self.stop)
        if match is None:
            return []
        rows = self.db.execute(
            f"SELECT key, body, -bm25({self.tables[scope]}) FROM {self.tables[scope]}"
            f" WHERE {self.tables[scope]} MATCH ? ORDER BY rank LIMIT ?",
            (match, limit),
        ).fetchall()
        return [Ranked(key, body, score) for key, body, score in rows]

    async def close(self) -> None:
        self.db.close()


def analysis_rates(texts: Sequence[str]) -> dict[str, float]:
    """Items per second written into an in-memory FTS5 table, the same texts both ways:
    analyzed by the store's Snowball analyzer in Python, then indexed as they are
    (`unicode61`), or given whole to FTS5's `porter` tokenizer."""

    def rate(tokenizer: str, rows: Sequence[str], analyze: bool) -> float:
        db = sqlite3.connect(":memory:")
        db.execute(f"CREATE VIRTUAL TABLE t USING fts5(body, tokenize='{tokenizer}')")
        snowball = analyzer("english")
        started = time.perf_counter()
        bodies = [" ".join(snowball.terms(text)) for text in rows] if analyze else rows
        db.executemany("INSERT INTO t (body) VALUES (?)", [(body,) for body in bodies])
        elapsed = time.perf_counter() - started
        db.close()
        return len(rows) / elapsed

    return {
        "snowball": rate("unicode61", texts, analyze=True),
        "porter": rate("porter unicode61", texts, analyze=False),
    }
