"""Opaque page cursors the stores hand out: a position in digits (`list_scopes`), or the key a
`list_items` page ended at (base64url, so no character of a key can make it ambiguous). A
cursor the store did not return is refused with a one-line error."""

from __future__ import annotations

import base64
import binascii

from animus_flows.errors import InvalidRequest
from animus_flows.protocol import MAX_KEY_LENGTH, ItemPage, MemoryItem, shown_head

#: The largest position a numeric cursor names: SQLite's largest integer.
MAX_CURSOR = 2**63 - 1


def numeric_cursor(cursor: str | None) -> int:
    """The position a store's cursor of digits names (0 for the first page); InvalidRequest
    for any other string, which the store cannot have returned."""
    if cursor is None:
        return 0
    # ASCII digits only ("²" passes isdigit but not int()); the length bounds int()'s work
    if cursor.isascii() and cursor.isdecimal() and len(cursor) <= len(str(MAX_CURSOR)):
        position = int(cursor)
        if position <= MAX_CURSOR:
            return position
    raise InvalidRequest(
        f"cursor {shown_head(cursor)} was not returned by this store; pass next_cursor unchanged"
    )


#: How a key cursor starts: `k.` and the key's UTF-8 in unpadded base64url.
_KEY_CURSOR = "k."


def key_cursor(key: str) -> str:
    """The `list_items` cursor of a page that ended at `key` (opaque to callers: base64url, so
    no character of a key can make it ambiguous)."""
    return _KEY_CURSOR + base64.urlsafe_b64encode(key.encode()).decode().rstrip("=")


def cursor_key(cursor: str | None) -> str | None:
    """The key a `key_cursor` names (None for the first page); InvalidRequest for any other
    string, which the store cannot have returned."""
    if cursor is None:
        return None
    body = cursor[len(_KEY_CURSOR) :]
    # the length bounds the decoding's work: a key is at most MAX_KEY_LENGTH characters
    if cursor.startswith(_KEY_CURSOR) and cursor.isascii() and len(body) <= 6 * MAX_KEY_LENGTH:
        try:
            key = base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)).decode()
        except (binascii.Error, ValueError):
            key = None
        # decoding skips stray characters: only the canonical spelling is a cursor we wrote
        if key and key_cursor(key) == cursor:
            return key
    raise InvalidRequest(
        f"cursor {shown_head(cursor)} was not returned by this store; pass next_cursor unchanged"
    )


def item_page(items: list[MemoryItem], limit: int) -> ItemPage:
    """The page of `items` (the live items after the cursor, in key order, at least `limit` + 1
    when there are more) that holds `limit`, with the cursor of the next one."""
    if len(items) <= limit:
        return ItemPage(items)
    return ItemPage(items[:limit], key_cursor(items[limit - 1].key))
