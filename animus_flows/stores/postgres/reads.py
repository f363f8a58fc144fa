"""Reading the PostgreSQL store: items of one scope by key, listings, and the rows a ranking
found, judged against the filters as the ranking is walked."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from animus_flows.protocol import JSON, MemoryItem, Scope, matches_filters

LIVE = "(i.expires_at IS NULL OR i.expires_at > %s)"
#: The start of every read of a scope's items by its ids; `writes.scope_ids` fills it.
SCOPE_ITEMS = (
    "SELECT i.key, i.value, i.metadata, i.created_at, i.updated_at, i.expires_at"
    " FROM {s}.items i JOIN {s}.scopes s ON s.id = i.scope_id"
    " WHERE s.project_id = %s AND s.agent_id = %s AND s.task_id = %s"
)

#: A listing (empty query text): the scope newest first, one window after another.
NEWEST = f"""
SELECT i.id, i.key, i.metadata, i.value, i.updated_at FROM {{s}}.items i
WHERE i.scope_id = %(scope_id)s AND {LIVE.replace("%s", "%(now)s")}
  AND (%(after)s::timestamptz IS NULL OR i.updated_at < %(after)s
       OR (i.updated_at = %(after)s AND i.id < %(after_id)s))
ORDER BY i.updated_at DESC, i.id DESC LIMIT %(window)s
"""

#: The rows of items a ranking found, live ones only, in the scope searched.
JUDGE = f"""
SELECT i.id, i.key, i.metadata, i.value FROM {{s}}.items i
WHERE i.id = ANY(%s) AND i.scope_id = %s AND {LIVE}
"""

LIST_SCOPES = f"""
SELECT s.id, s.project_id, s.agent_id, s.task_id FROM {{s}}.scopes s
WHERE s.id > %(after)s AND (%(project_id)s::text IS NULL OR s.project_id = %(project_id)s)
  AND EXISTS (SELECT 1 FROM {{s}}.items i WHERE i.scope_id = s.id
              AND {LIVE.replace("%s", "%(now)s")})
ORDER BY s.id LIMIT %(limit)s
"""

COUNT = f"""
SELECT count(*) FROM {{s}}.items i JOIN {{s}}.scopes s ON s.id = i.scope_id
WHERE s.project_id = %s AND s.agent_id = %s AND s.task_id = %s AND {LIVE}
"""


def scope_ids(scope: Scope) -> tuple[str, str, str]:
    """The `scopes` columns of `scope`: absent agent and task ids are `''`."""
    return (scope.project_id, scope.agent_id or "", scope.task_id or "")


def moment(value: datetime) -> datetime:
    """A timestamp as the store returns it: in UTC, whatever the session's time zone."""
    return value.astimezone(UTC)


def item_of(scope: Scope, row: Sequence[Any]) -> MemoryItem:
    """A `SCOPE_ITEMS` row as an item."""
    key, value, metadata, created_at, updated_at, expires_at = row
    return MemoryItem(
        scope,
        key,
        json.loads(value),
        json.loads(metadata),
        moment(created_at),
        moment(updated_at),
        None if expires_at is None else moment(expires_at),
    )


@dataclass
class Found:
    """A live item a query found that passes its filters: key, metadata, and value JSON
    (None until read)."""

    key: str
    metadata: dict[str, JSON]
    value: str | None


class Judge:
    """The rows of one scope's items as a query walks its rankings: read once, judged (live,
    passing the filters) only when the walk reaches them, since most never are."""

    def __init__(
        self, conn: Any, sql: Any, scope_id: int, now: datetime, filters: dict[str, JSON] | None
    ) -> None:
        self.conn = conn
        self.sql = sql
        self.scope_id = scope_id
        self.now = now
        self.filters = filters
        self._rows: dict[int, tuple[str, str, str | None]] = {}
        self._verdicts: dict[int, Found | None] = {}

    def offer(self, item_id: int, key: str, metadata: str, value: str | None) -> None:
        """A live row a ranking read already: its metadata JSON, and its value or None."""
        if item_id not in self._verdicts:
            self._rows.setdefault(item_id, (key, metadata, value))

    def verdict(self, item_id: int) -> Found | None:
        """The item if it was read, is live and passes the filters; else None."""
        if item_id in self._verdicts:
            return self._verdicts[item_id]
        row = self._rows.pop(item_id, None)
        found = None
        if row is not None:
            key, metadata, value = row
            decoded = json.loads(metadata)
            if matches_filters(decoded, self.filters):
                found = Found(key, decoded, value)
        self._verdicts[item_id] = found
        return found

    async def read(self, ids: list[int]) -> None:
        """Read the rows of `ids` not read yet (gone or expired ones stay unread: refused)."""
        unread = [i for i in ids if i not in self._verdicts and i not in self._rows]
        if unread:
            cursor = await self.conn.execute(self.sql(JUDGE), (unread, self.scope_id, self.now))
            for row in await cursor.fetchall():
                self.offer(*row)

    def best(self, ranked: list[tuple[int, float]], wanted: int) -> list[tuple[int, float]]:
        """The first `wanted` of `ranked` (best first) kept by `verdict`."""
        kept: list[tuple[int, float]] = []
        for item_id, score in ranked:
            if self.verdict(item_id) is not None:
                kept.append((item_id, score))
                if len(kept) == wanted:
                    break
        return kept

    async def found(self, ids: list[int]) -> list[tuple[int, Found]]:
        """The kept items of `ids`, in order, their values read where still missing (an item
        deleted meanwhile is left out)."""
        items = [(item_id, self.verdict(item_id)) for item_id in ids]
        missing = [item_id for item_id, item in items if item and item.value is None]
        values: dict[int, str] = {}
        if missing:
            cursor = await self.conn.execute(
                self.sql("SELECT id, value FROM {s}.items WHERE id = ANY(%s)"), (missing,)
            )
            values = dict(await cursor.fetchall())
        kept = []
        for item_id, item in items:
            if item is not None and item.value is None:
                item.value = values.get(item_id)
            if item is not None and item.value is not None:
                kept.append((item_id, item))
        return kept
