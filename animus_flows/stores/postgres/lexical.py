"""Lexical ranking in the PostgreSQL store: BM25 over `tsvector`s, with the scope's statistics.

The query text goes through the store's text search configuration (`to_tsvector`: the same
parser, stop words and stemmer as the items), so a query of stop words only has no terms and
finds nothing. Each term is weighted by its rarity in the scope searched (`term_df` and the
scope's item count: Lucene's BM25 idf, as the SQLite store), and an item's score is BM25's sum
over the terms it holds (k1 1.2, b 0.75), its length (distinct lexemes) normalized by the
scope's average. An item that holds no query term is never scored, so there is no zero-score
filler.

The GIN index on the scope's postings finds candidates in two steps. First every item holding
one of the rarest terms, as many terms as their items fit in `MAX_SCORED`. Then, as MaxScore
would, the newest items holding one of the other terms that could still lift an item into the
best `top_k` (all of them while fewer were found; else all but the commonest, whose weights
together stay below the last of the best), up to the same bound in all (as the SQLite store,
newest first). A query of words found in most of a large scope thus reads a bounded part of it,
and its commonest words only weigh the items the rarer ones found.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

K1 = 1.2
B = 0.75
#: The most query terms ranked: a prompt's first distinct terms.
MAX_QUERY_TERMS = 64
#: The most items a query scores (or twice its top_k, if more). The SQLite store scores up to
#: 300; here each costs a few microseconds more (its row crosses the wire), and on the labelled
#: corpus of benchmarks/quality 100 keeps the same recall while halving a hook's latency.
MAX_SCORED = 100

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

#: A value up to this size comes with its ranked row (the hits need no other read); a larger
#: one is read for the hits alone.
INLINE_VALUE_BYTES = 4096
#: The live items of a scope holding a `finders` posting (and no `skip` one): (id, length, key,
#: metadata, matched, value) rows, where `matched` is the item's tsvector cut to the query's
#: lexemes (`setweight` marks them, `ts_filter` keeps them: their positions are the term
#: frequencies `Plan.score` reads). `{source}`, `{skip}` and `{cut}` are filled by
#: `rank_statement`.
_RANK = f"""
SELECT i.id, i.length, i.key, i.metadata,
       ts_filter(setweight(i.tsv, 'A', %(lexemes)s::text[]), '{{a}}')::text,
       CASE WHEN octet_length(i.value) <= {INLINE_VALUE_BYTES} THEN i.value END
FROM {{source}} i
WHERE {{match}}{{skip}}
{{cut}}
"""
#: Through the GIN index: the scope's match is written so that the planner does not intersect
#: it with a scope-wide index (the postings are the scope's already).
_INDEXED = """(SELECT * FROM {s}.items i WHERE (i.scope_id = %(scope_id)s::bigint) IS TRUE
   AND (i.expires_at IS NULL OR i.expires_at > %(now)s))"""
#: Walking the scope newest first (the recency index), at most `window` items.
_NEWEST = """(SELECT * FROM {s}.items i WHERE i.scope_id = %(scope_id)s::bigint
   AND (i.expires_at IS NULL OR i.expires_at > %(now)s)
   ORDER BY i.updated_at DESC, i.id DESC LIMIT %(window)s)"""

#: What reading a row by walking a scope newest first costs, in rows read through the GIN
#: index (a bitmap scan reads the heap in order): `Plan.window` weighs the two ways to find
#: items.
WALK_COST = 2.0
#: A walk reads this many times the items it expects to need, for the estimate's error.
WALK_MARGIN = 2.0
#: A lexeme of a tsvector's text and its positions (`'it''s':1A,4A`).
_ENTRY = re.compile(r"'((?:[^'\\]|''|\\.)*)'(?::([0-9A-D,]+))?")


def rank_statement(*, skip: bool, cut: bool, walk: bool = False) -> str:
    """The ranking statement (a template of `{s}`): without the items holding a `skip` term;
    limited to the newest `cap` found; found by walking the newest `window` items of the scope
    rather than through the GIN index. Items already read are matched on their tsvector (a
    binary search per term), which costs less than comparing the postings array."""
    source, match = _INDEXED, "i.postings && %(finders)s::text[]"
    if walk:
        source, match = _NEWEST, "i.tsv @@ %(terms)s::tsquery"
    statement = _RANK.replace("{source}", source).replace("{match}", match)
    without = " AND NOT i.tsv @@ %(skip)s::tsquery" if skip else ""
    statement = statement.replace("{skip}", without)
    order = "ORDER BY i.updated_at DESC, i.id DESC LIMIT %(cap)s" if cut else ""
    return statement.replace("{cut}", order)


def idf(df: int, items: int) -> float:
    """Lucene's BM25 idf: high for a term few items hold, small but positive for a common one."""
    return math.log(1 + (items - df + 0.5) / (df + 0.5))


def _escaped(lexeme: str) -> str:
    """`lexeme` as tsvector and tsquery text quote it: quotes and backslashes doubled."""
    return lexeme.replace("\\", "\\\\").replace("'", "''")


def tsquery(lexemes: list[str]) -> str:
    """A tsquery matching any of `lexemes`, each quoted, so no character of a lexeme is read
    as an operator."""
    return " | ".join(f"'{_escaped(lexeme)}'" for lexeme in lexemes)


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
    _quoted: dict[str, float] | None = field(default=None, repr=False, compare=False)

    def params(self, scope_id: int, now: datetime) -> dict[str, Any]:
        return {
            "lexemes": list(self.weights),
            "scope_id": scope_id,
            "now": now,
            "cap": self.bound,
            "finders": postings(scope_id, self.rare),
        }

    def score(self, length: int, matched: str) -> float:
        """BM25 of an item of `length` distinct lexemes whose tsvector, cut to the query's
        lexemes, reads `matched`."""
        if self._quoted is None:  # each query lexeme as a tsvector's text spells it
            self._quoted = {_escaped(lexeme): w for lexeme, w in self.weights.items()}
        norm = K1 * (1 - B + B * length / self.average)
        total = 0.0
        for lexeme, positions in _ENTRY.findall(matched):  # in the tsvector's (sorted) order
            weight = self._quoted.get(lexeme)
            if weight is not None:
                tf = positions.count(",") + 1 if positions else 1
                total += weight * tf * (K1 + 1) / (tf + norm)
        return total

    def window(self, terms: list[str], cap: int) -> int | None:
        """How many of the scope's newest items to walk to find the newest `cap` holding one
        of `terms` (about cap x items / matches, with a margin), when that costs less than
        reading every match through the GIN index; None when it does not."""
        missed = 1.0
        for term in terms:  # the items holding none of the terms, were they independent
            missed *= 1 - min(1.0, self.frequency[term] / self.items)
        matches = max(self.items * (1 - missed), 1.0)
        if matches * matches <= WALK_COST * cap * self.items:
            return None
        return min(self.items, math.ceil(WALK_MARGIN * cap * self.items / matches))

    def first(self) -> tuple[str, dict[str, Any]]:
        """Every item holding a rare term; the newest `bound` when even the rarest is in more
        items than that."""
        if sum(self.frequency[term] for term in self.rare) <= self.bound:
            return rank_statement(skip=False, cut=False), {}
        window = self.window(self.rare, self.bound)
        params = {"window": window, "terms": tsquery(self.rare)}
        return rank_statement(skip=False, cut=True, walk=window is not None), params

    def essential(self, scored: int, kept: int, last: float, wanted: int) -> list[str]:
        """The common terms whose items must be read too (MaxScore): all of them while fewer
        than `wanted` items were `kept` (scored, live, passing the filters); else those whose
        items could outscore the `last` kept, i.e. all but the commonest terms whose summed
        reach stays below it. None once `bound` items were scored."""
        if scored >= self.bound:
            return []
        if kept < wanted:
            return self.common
        reach, essential = 0.0, len(self.common)
        for position in range(len(self.common) - 1, -1, -1):  # commonest first
            reach += self.weights[self.common[position]] * (K1 + 1)
            if reach >= last:
                break
            essential = position
        return self.common[:essential]

    def second(self, scope_id: int, scored: int, terms: list[str]) -> tuple[str, dict[str, Any]]:
        """The newest items holding one of `terms` and no rare term, up to `bound` in all."""
        cap = self.bound - scored
        window = self.window(terms, cap)
        params = {
            "finders": postings(scope_id, terms),
            "terms": tsquery(terms),
            "skip": tsquery(self.rare),
            "cap": cap,
            "window": window,
        }
        return rank_statement(skip=True, cut=True, walk=window is not None), params


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
