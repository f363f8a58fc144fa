"""One query of the SQLite store: a listing (empty text), the lexical ranking, or the lexical
ranking fused with the vector leg, read on the store's reader connection."""

from __future__ import annotations

import asyncio
import json
import sqlite3
from dataclasses import dataclass
from typing import Any

from animus_flows.protocol import JSON, QueryHit, Scope, utcnow
from animus_flows.stores.semantic import FUSION_DEPTH, SemanticLeg
from animus_flows.stores.sqlite import lexical
from animus_flows.stores.sqlite.connection import StoreFile
from animus_flows.stores.sqlite.reads import bm25_score, fused, newest, scope_ids

INLINE_SCAN_ITEMS = 5_000  # a filtered listing of a larger scope leaves the event loop


@dataclass(frozen=True, slots=True)
class Query:
    """What `run` searches: `terms` are the text's analyzed terms; `listing` an empty text."""

    scope: Scope
    text: str
    terms: list[str]
    top_k: int
    filters: dict[str, JSON] | None
    listing: bool


def _scope_row(conn: sqlite3.Connection, scope: Scope) -> tuple[int, int, int, int] | None:
    """The scope's id, item count, summed lengths and vectors' version (None: no such scope)."""
    return conn.execute(  # type: ignore[no-any-return]
        "SELECT id, items, terms, vectors FROM scopes"
        " WHERE project_id = ? AND agent_id = ? AND task_id = ?",
        scope_ids(scope),
    ).fetchone()


async def run(file: StoreFile, query: Query, semantic: SemanticLeg | None) -> list[QueryHit]:
    """The hits of `query` in `file`, fused with the vector leg when `semantic` is given."""
    now = utcnow().timestamp()
    vector = None
    if semantic is not None:
        # The model embeds the query on its own thread while the lexical leg reads: the
        # stores of a hook rank words during the embedding instead of after it (about a
        # third of a hybrid hook over 3 x 100k items).
        vector = asyncio.ensure_future(semantic.query_vector(query.text))
        await asyncio.sleep(0)  # the embedding starts before the inline read holds the loop
    depth = query.top_k if vector is None else max(query.top_k, FUSION_DEPTH)

    def find(conn: sqlite3.Connection) -> list[Any] | None:
        row = _scope_row(conn, query.scope)
        if row is None:
            return []
        scope_id, items, total_terms, _ = row
        if query.listing:
            # A filtered listing reads the scope until top_k items pass its filters: all of
            # it when few pass (165 to 230 ms in a 100k-item scope). In a large scope it runs
            # on the store's thread, where a caller's timeout can abandon it, instead of
            # holding the event loop: None sends it there.
            if query.filters and items > INLINE_SCAN_ITEMS and file.is_reader(conn):
                return None
            return newest(conn, scope_id, now, query.top_k, query.filters)
        if not query.terms:
            return []
        ranked = lexical.rank(
            conn, scope_id, (items, total_terms), query.terms, depth, now, query.filters
        )
        if vector is not None:
            return ranked  # fused below, once the query's vector is there
        return [(key, value, meta, bm25_score(s)) for _, key, value, meta, s in ranked]

    try:
        rows = await file.read(find)
        if rows is None:
            rows = await file.run(find)
    except BaseException:
        if vector is not None:  # the embedding goes on for the other stores awaiting it
            vector.cancel()
        raise
    if vector is not None:
        ranked, query_vector = rows, await vector

        def fuse_ranked(conn: sqlite3.Connection) -> list[Any]:
            row = _scope_row(conn, query.scope)  # again: the vectors' version as read now
            if row is None:
                return []
            return fused(
                conn,
                semantic,
                (row[0], row[3]),
                ranked,
                query_vector,
                depth,
                query.top_k,
                now,
                query.filters,
            )

        rows = await file.read(fuse_ranked)
    return [
        QueryHit(key, json.loads(value), score, metadata) for key, value, metadata, score in rows
    ]
