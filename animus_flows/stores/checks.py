"""The arguments a store is given, checked once, and the forms it keeps them in: scopes, keys,
JSON values, metadata (with its reserved and misspelt keys), expiries, `put_many` entries and
page requests. Each refusal is one `InvalidRequest` line naming the value and the fix."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from datetime import UTC, datetime

from animus_flows.errors import InvalidRequest, InvalidScope
from animus_flows.protocol import (
    HOST_METADATA_PREFIX,
    JSON,
    MAX_KEY_LENGTH,
    Scope,
    canonical_json,
    check_no_control,
    check_unicode,
    shown_head,
)
from animus_flows.redaction import get_logger

log = get_logger("animus_flows.stores")

#: Where TTL is emulated, the expiry travels in this metadata key and is stripped on the way out.
EXPIRES_KEY = HOST_METADATA_PREFIX + "expires_at"
MAX_LIST_LIMIT = 1000

#: One write for `put_many`: scope, key, value, metadata (or None), and optionally
#: `ttl_seconds` (None, or left out: the item does not expire).
PutEntry = (
    tuple[Scope, str, JSON, "dict[str, JSON] | None"]
    | tuple[Scope, str, JSON, "dict[str, JSON] | None", "int | None"]
)


def entry_fields(entry: object) -> tuple[Scope, str, JSON, dict[str, JSON] | None, int | None]:
    """The five fields of a `put_many` entry, `ttl_seconds` None when it has four; the fields
    themselves are not checked here."""
    if not isinstance(entry, tuple | list) or len(entry) not in (4, 5):
        size = f" of {len(entry)} fields" if isinstance(entry, tuple | list) else ""
        raise InvalidRequest(
            f"a put_many entry is a {type(entry).__name__}{size}; pass tuples "
            "(scope, key, value, metadata) or (scope, key, value, metadata, ttl_seconds)"
        )
    scope, key, value, metadata, *ttl = entry
    return scope, key, value, metadata, ttl[0] if ttl else None


def check_scope(scope: object) -> Scope:
    if not isinstance(scope, Scope):
        raise InvalidScope(f"scope {scope!r} is not a Scope; build one with Scope(project_id=...)")
    return scope


def check_key(key: object) -> str:
    if not isinstance(key, str) or not key:
        raise InvalidRequest(f"key {key!r} must be a non-empty string")
    if len(key) > MAX_KEY_LENGTH:
        raise InvalidRequest(
            f"key {shown_head(key)} is {len(key)} characters; use at most {MAX_KEY_LENGTH}"
        )
    check_no_control("key", key)
    check_unicode(lambda: f"key {shown_head(key)}", key)
    return key


def checked_keys(keys: Sequence[str]) -> list[str]:
    """`keys` once each, every one checked as `get` checks a key."""
    if isinstance(keys, str) or not isinstance(keys, Sequence):
        raise InvalidRequest(f"keys {keys!r} must be a list of keys, not a {type(keys).__name__}")
    return list(dict.fromkeys(check_key(key) for key in keys))


def encode_json(name: str, value: object) -> str:
    """`value`'s canonical JSON; InvalidRequest naming `name` when it is not JSON data (or
    holds a string that is not valid Unicode, anywhere inside it)."""
    try:
        text = canonical_json(value)  # type: ignore[arg-type]
    except (TypeError, ValueError, RecursionError) as exc:
        key = _mixed_key(value) if isinstance(exc, TypeError) else None
        if key is not None:  # sorting keys failed: "'<' not supported" would say nothing
            raise InvalidRequest(
                f"{name} has an object with the {type(key).__name__} key {key!r} beside string "
                f"keys; JSON object keys are strings: pass {str(key)!r}"
            ) from None
        raise InvalidRequest(f"{name} is not JSON-serializable ({exc}); pass JSON data") from None
    check_unicode(name, text)  # one pass over the text checks every string and object key
    return text


def _mixed_key(value: object) -> object | None:
    """A non-string key of an object in `value` that also has string keys, if any."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            odd = [key for key in item if not isinstance(key, str)]
            if odd and len(odd) < len(item):
                return odd[0]
            stack.extend(item.values())
        elif isinstance(item, (list, tuple)):
            stack.extend(item)
    return None


def check_json(name: str, value: object) -> None:
    encode_json(name, value)


def stored_json(name: str, value: object) -> JSON:
    """`value` as a store keeps it, decoded from its canonical JSON: a tuple is a list and a
    non-string object key its JSON string (`{1: "a"}` is `{"1": "a"}`), as `get` returns it."""
    return json.loads(encode_json(name, value))


def metadata_object(metadata: object) -> dict[str, JSON]:
    """A caller's `metadata` itself when it is an object with string keys (None is `{}`), none
    of them reserved for the store machinery; else refused."""
    if metadata is None:
        return {}
    if not isinstance(metadata, dict) or not all(isinstance(k, str) for k in metadata):
        raise InvalidRequest(f"metadata {metadata!r} must be an object with string keys")
    for name in metadata:
        if name != "sensitivity" and _near("sensitivity", name):
            # a typo here would silently make the item PUBLIC: never guess, never drop it
            raise InvalidRequest(
                f"metadata key {shown_head(name)} looks like a misspelt 'sensitivity' (did you "
                "mean 'sensitivity'?); spell it exactly, or the item would be read as public"
            )
        if name.startswith(HOST_METADATA_PREFIX):
            # An expiry the caller wrote would be read as the store's own (or fail to parse).
            fix = "pass ttl_seconds= instead" if name == EXPIRES_KEY else "rename it"
            raise InvalidRequest(
                f"metadata key {shown_head(name)} is reserved: keys starting with "
                f"{HOST_METADATA_PREFIX!r} belong to the store machinery; {fix}"
            )
    return metadata


def _near(word: str, name: str) -> bool:
    """Whether `name` is `word` but for case, surrounding whitespace, or one or two letters
    (inserted, dropped or changed)."""
    name = name.strip().casefold()
    if name == word:
        return True
    if abs(len(name) - len(word)) > 2:
        return False
    previous = list(range(len(word) + 1))  # Levenshtein distance, row by row
    for i, char in enumerate(name, 1):
        current = [i]
        for j, wanted in enumerate(word, 1):
            current.append(
                min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (char != wanted))
            )
        previous = current
    return previous[-1] <= 2


def stored_expiry(raw: object, scope: Scope, key: str) -> datetime | None:
    """The moment an item kept in `EXPIRES_KEY` expires (UTC when it names no offset).

    A value that is no ISO 8601 date (written by another tool into a plugin's store, say) is
    logged and read as no expiry: one bad item must not make its whole scope unreadable.
    """
    moment = parse_expiry(raw)
    if moment is None:
        log.warning(
            "item %s in %s has %s %s, not an ISO 8601 date; reading it as not expiring",
            shown_head(key),
            scope,
            EXPIRES_KEY,
            shown_head(str(raw)),
        )
        return None
    return moment


def parse_expiry(raw: object) -> datetime | None:
    """`raw` read as the moment an item expires: an ISO 8601 string (UTC when it names no
    offset); None when it is not one."""
    try:
        moment = datetime.fromisoformat(raw) if isinstance(raw, str) else None
    except ValueError:
        return None
    if moment is None or moment.tzinfo:
        return moment
    return moment.replace(tzinfo=UTC)


def check_prefix(prefix: object) -> str:
    """A `list_items` key prefix: a string that could start a key (the empty one starts all)."""
    if not isinstance(prefix, str):
        raise InvalidRequest(f"prefix {prefix!r} must be a string, or None for every key")
    if len(prefix) > MAX_KEY_LENGTH:
        raise InvalidRequest(
            f"prefix {shown_head(prefix)} is {len(prefix)} characters; no key is longer than "
            f"{MAX_KEY_LENGTH}"
        )
    check_no_control("prefix", prefix)
    check_unicode(lambda: f"prefix {shown_head(prefix)}", prefix)
    return prefix


def prefix_end(prefix: str) -> str | None:
    """The least string after every string starting with `prefix` (None: there is none): a
    prefix read is a range read, `prefix <= key < prefix_end(prefix)`."""
    stem = prefix.rstrip(chr(0x10FFFF))
    if not stem:
        return None
    following = ord(stem[-1]) + 1
    if 0xD800 <= following <= 0xDFFF:  # surrogates are no characters (no store can hold them)
        following = 0xE000
    return stem[:-1] + chr(following)


def check_page_request(cursor: object, limit: object) -> None:
    """Refuse a `cursor` that is no string (None passes) and a `limit` outside 1..1000, for
    `list_scopes` and `list_items` alike."""
    if cursor is not None and not isinstance(cursor, str):
        raise InvalidRequest(f"cursor {cursor!r} must be a string from a previous page")
    if cursor is not None:
        check_unicode(lambda: f"cursor {shown_head(cursor)}", cursor)
    if not isinstance(limit, int) or isinstance(limit, bool) or not 1 <= limit <= MAX_LIST_LIMIT:
        raise InvalidRequest(f"limit {limit!r} must be an integer from 1 to {MAX_LIST_LIMIT}")


def clamp_score(score: float) -> float:
    if math.isnan(score):
        return 0.0
    return min(1.0, max(0.0, float(score)))
