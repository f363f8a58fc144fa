"""One query in the PostgreSQL store: the lexical ranking, the vector leg and their fusion.

The scope's statistics and the query's terms come in one read (`lexical.TERMS`); the ranking
statement returns every item it scored with its metadata (and its value, unless large), so the
walk down the ranking judges filters, and the hits are made, without another read. With an
embedder, the query's vector is embedded while the words are ranked, the scope's vectors are
searched in memory (`semantic.SemanticLeg`, read again only when the scope's version moved),
and the two rankings are fused (`semantic.fuse`).
"""

from __future__ import annotations

import asyncio
import json
from datetime import datetime
from typing import Any

from animus_flows.protocol import JSON, QueryHit, Scope
from animus_flows.stores.postgres import lexical
from animus_flows.stores.postgres.reads import NEWEST, Judge, scope_ids
from animus_flows.stores.postgres.writes import MAX_INDEXED_CHARS
from animus_flows.stores.semantic import FUSION_DEPTH, SemanticLeg, fuse
from animus_flows.stores.sqlite import bm25_score

#: Rows a listing (empty query text) reads per window while filters drop some.
LISTING_WINDOW = 64
VECTORS = "SELECT item_id, vector FROM {s}.item_vectors WHERE scope_id = %s"


class _Unloaded(Exception):
    """The kept vectors went stale between the check and the search: load them first."""


async def newest(
    conn: Any, sql: Any, scope_id: int, now: datetime, top_k: int, filters: dict[str, JSON] | None
) -> list[QueryHit]:
    """A listing: the scope newest first, `top_k` of the items passing `filters`, score 1."""
    judge = Judge(conn, sql, scope_id, now, filters)
    hits: list[QueryHit] = []
    after: tuple[datetime | None, int] = (None, 0)
    window = top_k if not filters else max(2 * top_k, LISTING_WINDOW)
    while len(hits) < top_k:
        params = {"scope_id": scope_id, "now": now, "after": after[0], "after_id": after[1]}
        cursor = await conn.execute(sql(NEWEST), {**params, "window": window})
        rows = await cursor.fetchall()
        for item_id, key, metadata, value, _ in rows:
            judge.offer(item_id, key, metadata, value)
            found = judge.verdict(item_id)
            if found is not None and len(hits) < top_k:
                hits.append(QueryHit(key, json.loads(value), 1.0, found.metadata))
        if len(rows) < window:
            break
        after = (rows[-1][4], rows[-1][0])
    return hits


async def ranked(
    conn: Any,
    sql: Any,
    judge: Judge,
    query: lexical.Plan,
    wanted: int,
) -> list[tuple[int, float]]:
    """The best `wanted` items by BM25 that are live and pass the filters, best first, with
    their raw scores; the rows read are offered to `judge`."""
    params = query.params(judge.scope_id, judge.now)
    statement, extra = query.first()
    cursor = await conn.execute(sql(statement), {**params, **extra})
    scored = _ordered(await _scored(judge, query, cursor))
    best = judge.best(scored, wanted)
    last = best[-1][1] if len(best) == wanted else 0.0
    essential = query.essential(len(scored), len(best), last, wanted)
    if essential:
        statement, extra = query.second(judge.scope_id, len(scored), essential)
        cursor = await conn.execute(sql(statement), {**params, **extra})
        scored = _ordered(scored + await _scored(judge, query, cursor))
        best = judge.best(scored, wanted)
    return best


def _ordered(scored: list[tuple[int, float]]) -> list[tuple[int, float]]:
    return sorted(scored, key=lambda pair: (-pair[1], -pair[0]))  # newest first among equals


async def _scored(judge: Judge, query: lexical.Plan, cursor: Any) -> list[tuple[int, float]]:
    scored = []
    for item_id, length, key, metadata, matched, value in await cursor.fetchall():
        judge.offer(item_id, key, metadata, value)
        scored.append((item_id, query.score(length, matched)))
    return scored


async def nearest(
    conn: Any, sql: Any, semantic: SemanticLeg, scope: tuple[int, int], vector: Any, k: int
) -> list[tuple[int, float]]:
    """The scope's `k` items nearest `vector` above the model's floor, as (id, cosine); the
    scope's vectors are read when the kept ones are not at the scope's version."""
    scope_id, version = scope
    loaded: tuple[list[int], list[bytes]] | None = None

    def load() -> tuple[list[int], list[bytes]]:
        if loaded is None:
            raise _Unloaded
        return loaded

    for _ in range(2):
        if loaded is None and not semantic.current(scope_id, version):
            cursor = await conn.execute(sql(VECTORS), (scope_id,))
            rows = await cursor.fetchall()
            loaded = ([item_id for item_id, _ in rows], [bytes(blob) for _, blob in rows])
        try:  # numpy's search (and reading a large scope's vectors) off the event loop
            return await asyncio.to_thread(semantic.search, scope_id, version, load, vector, k)
        except _Unloaded:
            continue
    return []


async def fused(
    conn: Any,
    sql: Any,
    judge: Judge,
    semantic: SemanticLeg,
    scope: tuple[int, int],
    lexical_best: list[tuple[int, float]],
    vector: Any,
    depth: int,
    top_k: int,
) -> list[tuple[int, float]]:
    """The lexical ranking fused with the vector one, both `depth` deep, the best `top_k`
    kept; vector hits are judged (live, filters) as lexical ones."""
    near = await nearest(conn, sql, semantic, scope, vector, 2 * depth)  # some fail the filters
    await judge.read([item_id for item_id, _ in near])
    close = [(item_id, cosine) for item_id, cosine in near if judge.verdict(item_id)][:depth]
    return fuse(lexical_best, close)[:top_k]  # type: ignore[return-value]


async def hits(judge: Judge, best: list[tuple[int, float]], *, raw: bool) -> list[QueryHit]:
    """The hits for `best` (id, score) pairs: raw BM25 scores mapped onto [0, 1) when `raw`."""
    found = await judge.found([item_id for item_id, _ in best])
    scores = {item_id: bm25_score(score) if raw else score for item_id, score in best}
    return [
        QueryHit(item.key, json.loads(item.value), scores[item_id], item.metadata)  # type: ignore[arg-type]
        for item_id, item in found
    ]


async def run(
    conn: Any,
    sql: Any,
    language: str,
    scope: Scope,
    text: str,
    top_k: int,
    filters: dict[str, JSON] | None,
    now: datetime,
    semantic: SemanticLeg | None,
    vector: asyncio.Future[Any] | None,
) -> list[QueryHit]:
    """One query of `scope` under the text search configuration `language`: a listing for an
    empty text, else the lexical ranking, fused with the vector leg when `semantic` and the
    query's `vector` (being embedded) are given."""
    project_id, agent_id, task_id = scope_ids(scope)
    terms = {
        "language": language,
        "text": text[:MAX_INDEXED_CHARS].replace("\x00", " "),
        "project_id": project_id,
        "agent_id": agent_id,
        "task_id": task_id,
    }
    cursor = await conn.execute(sql(lexical.TERMS), terms)
    row = await cursor.fetchone()
    if row is None:
        return []  # no such scope
    scope_id, items, total, version, lexemes, dfs = row
    if not text.strip():
        return await newest(conn, sql, scope_id, now, top_k, filters)
    judge = Judge(conn, sql, scope_id, now, filters)
    depth = top_k if semantic is None else max(top_k, FUSION_DEPTH)
    query = lexical.plan(lexemes or [], dfs or [], items, total, depth)
    best = []
    if query is not None:
        best = await ranked(conn, sql, judge, query, depth)
    if semantic is None or vector is None:
        return await hits(judge, best[:top_k], raw=True)
    best = await fused(
        conn, sql, judge, semantic, (scope_id, version), best, await vector, depth, top_k
    )
    return await hits(judge, best, raw=False)
