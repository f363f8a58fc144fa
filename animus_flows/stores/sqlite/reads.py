"""Reading the SQLite store's rows: the SQL every read starts from, rows to items, listings,
and the fusion of the lexical ranking with the vector one."""

from __future__ import annotations

import json
import math
import sqlite3
from datetime import UTC, datetime
from typing import Any

from animus_flows.protocol import JSON, MemoryItem, Scope, matches_filters
from animus_flows.stores.semantic import SemanticLeg, fuse
from animus_flows.stores.sqlite import lexical
from animus_flows.stores.sqlite.schema import id_range

#: A result row: key, value JSON, metadata (decoded) and its score in [0, 1].
Found = tuple[str, str, dict[str, JSON], float]

LIVE = "(i.expires_at IS NULL OR i.expires_at > ?)"
# The start of every read of a scope's items as `_item` takes them; `_scope_ids` fills it.
SCOPE_ITEMS = (
    "SELECT i.key, i.value, i.metadata, i.created_at, i.updated_at, i.expires_at"
    " FROM items i JOIN scopes s ON s.id = i.scope_id"
    " WHERE s.project_id = ? AND s.agent_id = ? AND s.task_id = ?"
)


def scope_ids(scope: Scope) -> tuple[str, str, str]:
    """The `scopes` table's columns for `scope`: absent agent and task ids are ''."""
    return (scope.project_id, scope.agent_id or "", scope.task_id or "")


def moment(epoch: float | None) -> datetime | None:
    return None if epoch is None else datetime.fromtimestamp(epoch, tz=UTC)


def item_of(
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
        moment(created_at),  # type: ignore[arg-type]
        moment(updated_at),  # type: ignore[arg-type]
        moment(expires_at),
    )


def filter_clause(filters: dict[str, JSON] | None) -> tuple[str, list[Any]]:
    """SQL conditions on `i.metadata` with the semantics of `protocol.matches_filters`, for a
    listing that must stop inside SQL. Keys travel as parameters through `json_each`, so no
    metadata key can inject SQL or JSON path syntax."""
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


def bm25_score(score: float) -> float:
    """Map a BM25 score (0 and up) onto [0, 1), higher is better: 1 - exp(-score / 10). A strong
    single-term match (about 10) scores ~0.63, several rare terms approach 1. The same score
    always maps alike, across queries."""
    return 1.0 - math.exp(-max(0.0, score) / 10.0)


def newest(
    conn: sqlite3.Connection,
    scope_id: int,
    now: float,
    top_k: int,
    filters: dict[str, JSON] | None,
) -> list[Found]:
    """A listing (empty query text): the scope newest first, walking `items_by_recency` and
    stopping at top_k matches; the index is named because, with the statistics `optimize()`
    gathers for a large scope, the planner would rather sort the whole scope."""
    where, params = filter_clause(filters)
    rows = conn.execute(
        "SELECT i.key, i.value, i.metadata FROM items i INDEXED BY items_by_recency"
        f" WHERE i.scope_id = ? AND {LIVE}{where}"
        " ORDER BY i.updated_at DESC, i.id DESC LIMIT ?",
        (scope_id, now, *params, top_k),
    ).fetchall()
    return [(key, value, json.loads(metadata), 1.0) for key, value, metadata in rows]


def fused(
    conn: sqlite3.Connection,
    semantic: SemanticLeg,
    scope: tuple[int, int],
    ranked: list[lexical.Ranked],
    vector: Any,
    depth: int,
    top_k: int,
    now: float,
    filters: dict[str, JSON] | None,
) -> list[Found]:
    """The lexical ranking fused with the vector one (`semantic.fuse`), both `depth` deep,
    the best `top_k` kept; vector hits are checked against the filters as lexical ones.
    `scope` is the scope's id and the version of its vectors."""
    scope_id, version = scope

    def load() -> tuple[list[int], list[bytes]]:
        found = conn.execute(
            "SELECT item_id, vector FROM item_vectors WHERE item_id BETWEEN ? AND ?",
            id_range(scope_id),
        ).fetchall()
        return [item_id for item_id, _ in found], [blob for _, blob in found]

    # twice as deep: some fail the filters or expired
    near = semantic.search(scope_id, version, load, vector, 2 * depth)
    verdicts = lexical.judge(
        conn, [item_id for item_id, _ in near], now, lambda m: matches_filters(m, filters)
    )
    rows = {item_id: (key, value, meta) for item_id, key, value, meta, _ in ranked}
    rows.update((item_id, row) for item_id, row in verdicts.items() if row is not None)
    close = [(item_id, cosine) for item_id, cosine in near if verdicts[item_id]][:depth]
    best = fuse([(item_id, score) for item_id, *_, score in ranked], close)[:top_k]
    return [(*rows[item_id], score) for item_id, score in best]  # type: ignore[misc]
