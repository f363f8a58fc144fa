"""Lexical ranking in the PostgreSQL store: BM25 over `tsvector`s, with the scope's statistics.

The query text goes through the store's text search configuration (`to_tsvector`: the same
parser, stop words and stemmer as the items), so a query of stop words only has no terms and
finds nothing. Each term is weighted by its rarity in the scope searched (`term_df` and the
scope's item count: Lucene's BM25 idf, as the SQLite store), and an item's score is BM25's sum
over the terms it holds (k1 1.2, b 0.75), its length (distinct lexemes) normalized by the
scope's average. An item that holds no query term is never scored, so there is no zero-score
filler.

The GIN index finds candidates: the rarest terms whose items fit `MAX_SCORED` first, every item
holding one of them; then, only when those could leave room in the best `top_k` (fewer found,
or the rest could still outscore the last of them), the newest items holding only the common
terms, up to the same bound (as the SQLite store's cut, newest first). A query of words found
in most of a large scope thus reads a bounded part of it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime
from typing import Any

K1 = 1.2
B = 0.75
#: The most query terms ranked: a prompt's first distinct terms.
MAX_QUERY_TERMS = 64
#: The most items one step of a query scores (or twice its top_k, if more).
MAX_SCORED = 300

#: The scope's row and statistics, and the query's terms (its first `MAX_QUERY_TERMS`
#: lexemes, in order) with their document frequency in the scope. No row: no such scope.
TERMS = f"""
SELECT s.id, s.items, s.terms, s.version, q.lexemes, q.dfs
FROM {{s}}.scopes s
LEFT JOIN LATERAL (
    SELECT array_agg(t.lexeme ORDER BY t.first, t.lexeme) AS lexemes,
           array_agg(coalesce(d.df, 0) ORDER BY t.first, t.lexeme) AS dfs
    FROM (SELECT lexeme, positions[1] AS first
          FROM unnest(to_tsvector(%(language)s::regconfig, %(text)s))
          ORDER BY 2, 1 LIMIT {MAX_QUERY_TERMS}) t
    LEFT JOIN {{s}}.term_df d ON d.scope_id = s.id AND d.lexeme = t.lexeme
) q ON true
WHERE s.project_id = %(project_id)s AND s.agent_id = %(agent_id)s AND s.task_id = %(task_id)s
"""

#: BM25 of the live items of a scope holding a `finders` posting (and no `skip` one), newest
#: first up to `cap`, best first: (id, score, key, metadata, value) rows, the value of the first
#: `window` only. A term's frequency is its positions in `tsv`: `setweight` marks the query's
#: lexemes and `ts_filter` keeps them, so only those are unnested. `{match}`, `{where}` and
#: `{cut}` are filled by `rank_statement`.
_RANK = f"""
WITH found AS (
    SELECT i.id, i.key, i.metadata, i.value, (
        SELECT sum((%(weights)s::float8[])[array_position(%(lexemes)s::text[], u.lexeme)]
                   * tf.n * {K1 + 1} / (tf.n + {K1} * ({1 - B} + {B} * i.length / %(average)s)))
        FROM unnest(ts_filter(setweight(i.tsv, 'A', %(lexemes)s::text[]), '{{a}}')) u
        CROSS JOIN LATERAL (SELECT coalesce(cardinality(u.positions), 1)::float8 AS n) tf
    ) AS score
    FROM {{s}}.items i
    WHERE i.scope_id = %(scope_id)s::bigint AND {{match}}{{where}}
      AND (i.expires_at IS NULL OR i.expires_at > %(now)s)
    {{cut}}
)
SELECT id, score, key, metadata,
       CASE WHEN row_number() OVER (ORDER BY score DESC, id DESC) <= %(window)s THEN value END
FROM found ORDER BY score DESC, id DESC
"""

#: What reading a row by walking a scope newest first costs, in rows read through the GIN
#: index (a bitmap scan reads the heap in order): `Plan.walks` weighs the two ways to find items.
WALK_COST = 2.0


def rank_statement(*, skip: bool, cut: bool, walk: bool = False) -> str:
    """The ranking statement (a template of `{s}`): without the items holding a `skip`
    posting; limited to the newest `cap` found; found by walking the scope newest first (a
    match the index cannot serve, so the planner reads the recency index) rather than
    through the GIN index."""
    match = "i.postings && %(finders)s::text[]"
    if walk:
        match = f"({match}) IS TRUE"
    where = " AND NOT i.postings && %(skip)s::text[]" if skip else ""
    order = "ORDER BY i.updated_at DESC, i.id DESC LIMIT %(cap)s" if cut else ""
    return _RANK.replace("{match}", match).replace("{where}", where).replace("{cut}", order)


def idf(df: int, items: int) -> float:
    """Lucene's BM25 idf: high for a term few items hold, small but positive for a common one."""
    return math.log(1 + (items - df + 0.5) / (df + 0.5))


def postings(scope_id: int, lexemes: list[str]) -> list[str]:
    """The index keys of `lexemes` in a scope: `<scope id>x<lexeme>` (`items.postings`)."""
    return [f"{scope_id}x{lexeme}" for lexeme in lexemes]


@dataclass
class Plan:
    """How one query is ranked in a scope of `items` items: its terms' weights, rarest first,
    split into those that find candidates at once (`rare`) and those read only if the best
    need them (`common`); `frequency` is each term's document frequency in the scope."""

    weights: dict[str, float]
    frequency: dict[str, int]
    items: int
    rare: list[str]
    common: list[str]
    average: float
    bound: int

    def reach(self) -> float:
        """The most the common terms can add to an item that holds none of the rare ones."""
        return sum(self.weights[term] * (K1 + 1) for term in self.common)

    def params(self, scope_id: int, now: datetime, window: int) -> dict[str, Any]:
        return {
            "lexemes": list(self.weights),
            "weights": list(self.weights.values()),
            "scope_id": scope_id,
            "average": self.average,
            "now": now,
            "cap": self.bound,
            "window": window,
            "finders": postings(scope_id, self.rare),
        }

    def walks(self, terms: list[str], cap: int) -> bool:
        """Whether the newest `cap` items holding one of `terms` are found sooner by walking
        the scope newest first (about cap x items / matches rows read, each costing
        `WALK_COST` index rows) than through the GIN index (every match read)."""
        missed = 1.0
        for term in terms:  # the items holding none of the terms, were they independent
            missed *= 1 - min(1.0, self.frequency[term] / self.items)
        matches = self.items * (1 - missed)
        return matches * matches > WALK_COST * cap * self.items

    def first(self) -> str:
        """Every item holding a rare term; the newest `bound` when even the rarest is in more
        items than that."""
        cut = sum(self.frequency[term] for term in self.rare) > self.bound
        return rank_statement(skip=False, cut=cut, walk=cut and self.walks(self.rare, self.bound))

    def needs_second(self, scored: int, kept: int, last: float, wanted: int) -> bool:
        """Whether items holding only common terms could enter the best `wanted`: fewer were
        `kept` (scored, live, passing the filters), or the common terms could outscore the
        `last` of them; never past `bound` items scored."""
        if not self.common or scored >= self.bound:
            return False
        return kept < wanted or self.reach() > last

    def second(self, scope_id: int, scored: int) -> tuple[str, dict[str, Any]]:
        """The newest items holding a common term and no rare one, up to `bound` in all."""
        cap = self.bound - scored
        params = {
            "finders": postings(scope_id, self.common),
            "skip": postings(scope_id, self.rare),
            "cap": cap,
        }
        return rank_statement(skip=True, cut=True, walk=self.walks(self.common, cap)), params


def plan(lexemes: list[str], dfs: list[int], items: int, terms: int, depth: int) -> Plan | None:
    """The plan for a query's terms in a scope of `items` items (`terms` their summed
    lengths), asked for its best `depth`; None when no term is in the scope."""
    if items <= 0:
        return None
    frequency = {lex: df for lex, df in zip(lexemes, dfs, strict=True) if df > 0}
    if not frequency:
        return None
    weights = {lex: idf(df, items) for lex, df in frequency.items()}
    order = sorted(weights, key=lambda lex: (-weights[lex], lex))
    bound = max(MAX_SCORED, 2 * depth)
    rare: list[str] = []
    found = 0
    for lex in order:
        if rare and found + frequency[lex] > bound:
            break
        rare.append(lex)
        found += frequency[lex]
    return Plan(
        {lex: weights[lex] for lex in order},
        frequency,
        items,
        rare,
        order[len(rare) :],
        max(terms / items, 1.0),
        bound,
    )
