"""How memory items live in Zep: ids, session and message metadata, and reading them back.

Pure functions, no I/O (the store sends what they build). A project is a Zep user, a scope is
a Zep session, an item version is a message whose content is the indexed text and whose
metadata carries the real key, value, metadata and timestamps. docs/stores/zep.md explains the
mapping; this module is its executable form.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from animus_flows.errors import InvalidRequest
from animus_flows.protocol import (
    JSON,
    MemoryItem,
    QueryHit,
    Scope,
    canonical_json,
    indexed_text,
    utcnow,
)
from animus_flows.stores.checks import EXPIRES_KEY, stored_expiry
from animus_flows.stores.cursors import numeric_cursor

SCHEMA = 1
ROLE = "animus-memory"
ROLE_TYPE = "norole"  # not a conversation turn

# Metadata keys; every one starts with "animus_" so nothing collides with other Zep users.
M_SCHEMA = "animus_schema"
M_SCOPE = "animus_scope"
M_PROJECT = "animus_project_id"
M_LIVE = "animus_live"
M_KEY = "animus_key"
M_VALUE = "animus_value"
M_METADATA = "animus_metadata"
M_CREATED = "animus_created_at"
M_UPDATED = "animus_updated_at"
M_SUPERSEDED = "animus_superseded"
M_DELETED = "animus_deleted"


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:32]


def user_id(project_id: str) -> str:
    """The Zep user holding a project's sessions.

    A hash, so no id character reaches a URL path (the SDK does not escape path segments) and
    no two projects can collide on Zep's side; the real id is kept in the user's metadata.
    """
    return f"animus-p-{_digest(project_id)}"


def session_id(scope: Scope) -> str:
    """The Zep session holding one scope: a hash of the scope's canonical JSON."""
    return f"animus-s-{_digest(canonical_json(scope.to_json()))}"


def user_metadata(project_id: str) -> dict[str, JSON]:
    return {M_SCHEMA: SCHEMA, M_PROJECT: project_id}


def session_metadata(scope: Scope, *, live: bool) -> dict[str, JSON]:
    """`live` is False after `delete_scope`, so `list_scopes` skips emptied sessions."""
    return {M_SCHEMA: SCHEMA, M_SCOPE: scope.to_json(), M_LIVE: live}


def session_scope(metadata: Mapping[str, Any] | None) -> Scope | None:
    """The scope a session holds, or None for sessions that are not ours."""
    if not metadata or metadata.get(M_SCHEMA) != SCHEMA:
        return None
    try:
        return Scope.from_json(metadata.get(M_SCOPE))
    except InvalidRequest:
        return None


def session_is_live(metadata: Mapping[str, Any] | None) -> bool:
    return bool(metadata) and metadata.get(M_LIVE) is True  # type: ignore[union-attr]


def message(
    scope: Scope,
    key: str,
    value: JSON,
    metadata: Mapping[str, JSON],
    created_at: datetime,
    updated_at: datetime,
) -> dict[str, JSON]:
    """The Zep message for one version of an item."""
    # Zep refuses empty content; an empty string value is indexed as its JSON spelling.
    content = indexed_text(value) or canonical_json(value)
    return {
        "content": content,
        "role": ROLE,
        "role_type": ROLE_TYPE,
        "metadata": {
            M_SCHEMA: SCHEMA,
            M_SCOPE: scope.to_json(),
            M_KEY: key,
            M_VALUE: value,
            M_METADATA: dict(metadata),
            M_CREATED: created_at.isoformat(),
            M_UPDATED: updated_at.isoformat(),
        },
    }


def superseded(metadata: Mapping[str, JSON]) -> dict[str, JSON]:
    """A message's metadata, marked as replaced by a newer version of its key."""
    return {**metadata, M_SUPERSEDED: True}


def deleted(metadata: Mapping[str, JSON]) -> dict[str, JSON]:
    """A message's metadata, marked as a version of a deleted key: replaced, as an overwrite
    marks it (searches skip it), and deleted (reads skip the key while it is the newest)."""
    return {**metadata, M_SUPERSEDED: True, M_DELETED: True}


@dataclass(frozen=True, slots=True)
class Version:
    """One stored version of an item, read back from a Zep message."""

    uuid: str | None
    item: MemoryItem
    superseded: bool
    raw_metadata: dict[str, JSON]
    deleted: bool = False

    @property
    def key(self) -> str:
        return self.item.key

    def expired(self, now: datetime | None = None) -> bool:
        if EXPIRES_KEY not in self.item.metadata:
            return False
        expires = stored_expiry(self.item.metadata[EXPIRES_KEY], self.item.scope, self.key)
        return expires is not None and expires <= (now or utcnow())


def read_version(
    uuid: str | None, metadata: Mapping[str, Any] | None, scope: Scope
) -> Version | None:
    """The item version a message holds, or None when it is not ours or not in `scope`.

    The scope check makes isolation exact even if a session ever held a foreign message.
    """
    if not metadata or metadata.get(M_SCHEMA) != SCHEMA:
        return None
    try:
        # Compared as scopes, not as JSON: a null id dropped by the server still matches.
        if Scope.from_json(metadata.get(M_SCOPE)) != scope:
            return None
        item = MemoryItem(
            scope=scope,
            key=str(metadata[M_KEY]),
            value=metadata.get(M_VALUE),
            metadata=dict(metadata.get(M_METADATA) or {}),
            created_at=datetime.fromisoformat(str(metadata[M_CREATED])),
            updated_at=datetime.fromisoformat(str(metadata[M_UPDATED])),
        )
    except (KeyError, TypeError, ValueError):  # InvalidScope is a ValueError too
        return None
    return Version(
        uuid,
        item,
        metadata.get(M_SUPERSEDED) is True,
        dict(metadata),
        metadata.get(M_DELETED) is True,
    )


def latest(versions: Iterable[Version]) -> dict[str, Version]:
    """The newest version of every key (later in the list wins a tie on updated_at).

    Listing sees every version, marked or not, so a mark lost to a crash between writing a
    new version and marking the old one cannot resurrect the old value.
    """
    newest: dict[str, Version] = {}
    for version in versions:
        current = newest.get(version.key)
        if current is None or version.item.updated_at >= current.item.updated_at:
            newest[version.key] = version
    return newest


def current(versions: Iterable[Version], now: datetime | None = None) -> dict[str, Version]:
    """The live version of every key: its newest, unless that one is deleted or expired."""
    moment = now or utcnow()
    return {
        key: version
        for key, version in latest(versions).items()
        if not version.deleted and not version.expired(moment)
    }


def hits(
    results: Iterable[tuple[str | None, float | None, Version | None]], scope_session: str
) -> list[QueryHit]:
    """Query hits from search results `(session_id, score, version)`, best first.

    Results from other sessions, foreign messages and superseded versions are dropped; when
    several versions of one key still match, the newest speaks for the key.
    """
    best: dict[str, tuple[Version, float]] = {}
    for result_session, score, version in results:
        if result_session != scope_session or version is None or version.superseded:
            continue
        current = best.get(version.key)
        if current is None or version.item.updated_at > current[0].item.updated_at:
            best[version.key] = (version, float(score or 0.0))
    ranked = sorted(best.values(), key=lambda pair: pair[1], reverse=True)
    return [
        QueryHit(version.key, version.item.value, score, version.item.metadata)
        for version, score in ranked
    ]


def parse_cursor(cursor: str | None) -> int:
    """The position in Zep's session list where the next `list_scopes` page starts."""
    return numeric_cursor(cursor)
