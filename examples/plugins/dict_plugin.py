#!/usr/bin/env python3
"""A complete animus memory-store plugin in one file, written from docs/protocol.md alone.

It imports nothing from animus_flows: items live in a dict, optionally saved to a JSON file so
that separate `animus memory ...` commands see each other's writes. Declare it in a workflow:

    stores:
      memory-dict:
        type: jsonrpc
        command: [python3, dict_plugin.py, --file, .animus/dict-items.json]

Protocol: JSON-RPC 2.0, one message per line, requests on stdin, responses on stdout, logs on
stderr. It reports no native TTL, so the host keeps expiry in metadata and hides expired items.
"""

import argparse
import base64
import binascii
import json
import math
import os
import re
import sys
from datetime import datetime, timezone

PROTOCOL_VERSION = "0.2.0"
CAPABILITIES = {
    "native_ttl": False,
    "native_key_get": True,
    "strong_consistency": True,
    "max_query_top_k": 100,
    "semantic": False,  # ranks by shared words, not by meaning
}
WORD = re.compile(r"\w+")


class ParamError(Exception):
    """Bad params: answered with -32602."""


class UnknownMethod(Exception):
    """A method this plugin does not serve: answered with -32601."""


class Store:
    """Items by scope, then by key. A scope is the tuple (project_id, agent_id, task_id)."""

    def __init__(self, path=None):
        self.path = path
        self.items = {}
        if path:
            try:
                with open(path, encoding="utf-8") as file:
                    for row in json.load(file):
                        self.items.setdefault(tuple(row["scope"]), {})[row["key"]] = row
            except FileNotFoundError:
                pass

    def save(self):
        if self.path:
            rows = [row for scope in self.items.values() for row in scope.values()]
            os.makedirs(os.path.dirname(os.path.abspath(self.path)), exist_ok=True)
            with open(self.path, "w", encoding="utf-8") as file:
                json.dump(rows, file)

    # -- the seven methods -----------------------------------------------------------------

    def put(self, scope, key, value, metadata=None, ttl_seconds=None):
        items = self.items.setdefault(scope, {})
        now = utcnow()
        old = items.get(key)
        items[key] = {
            "scope": list(scope),
            "key": key,
            "value": value,
            "metadata": metadata or {},
            "created_at": old["created_at"] if old else now,
            "updated_at": now,
        }
        self.save()
        return item_json(items[key])

    def get(self, scope, key):
        row = self.items.get(scope, {}).get(key)
        return item_json(row) if row else None

    def query(self, scope, text, top_k=8, filters=None):
        words = set(WORD.findall(text.lower()))
        hits = []
        for row in self.items.get(scope, {}).values():
            if not matches(row["metadata"], filters or {}):
                continue
            if words:
                found = set(WORD.findall(indexed_text(row["value"]).lower()))
                shared = len(words & found)
                if not shared:
                    continue
                score = shared / math.sqrt(len(words) * len(found))  # cosine of word sets
            else:
                score = 1.0  # an empty query lists the scope
            hits.append((score, row["updated_at"], row))
        hits.sort(key=lambda hit: (hit[0], hit[1]), reverse=True)
        return {
            "hits": [
                {"key": r["key"], "value": r["value"], "score": s, "metadata": r["metadata"]}
                for s, _, r in hits[: min(top_k, CAPABILITIES["max_query_top_k"])]
            ]
        }

    def list_scopes(self, project_id=None, cursor=None, limit=100):
        scopes = sorted(
            (scope for scope, items in self.items.items() if items),
            key=lambda scope: [part or "" for part in scope],
        )
        if project_id is not None:
            scopes = [scope for scope in scopes if scope[0] == project_id]
        # Cursors are positions we wrote: ASCII digits ("²" passes isdigit but not int()),
        # short enough for int() to read.
        if cursor is not None and not (
            isinstance(cursor, str) and cursor.isascii() and cursor.isdigit() and len(cursor) < 19
        ):
            raise ParamError(f"cursor {cursor!r} was not returned by this plugin")
        start = int(cursor) if cursor else 0
        page = scopes[start : start + limit]
        more = start + limit < len(scopes)
        return {
            "scopes": [scope_json(scope) for scope in page],
            "next_cursor": str(start + limit) if more else None,
        }

    def delete_scope(self, scope):
        deleted = len(self.items.pop(scope, {}))
        self.save()
        return {"deleted": deleted}

    def delete(self, scope, key):
        deleted = self.items.get(scope, {}).pop(key, None) is not None
        if deleted:
            self.save()
        return {"deleted": deleted}

    def list_items(self, scope, prefix=None, cursor=None, limit=100):
        after = read_cursor(cursor)
        keys = sorted(  # by code point, as Python compares strings
            key
            for key in self.items.get(scope, {})
            if key.startswith(prefix or "") and (after is None or key > after)
        )
        page = keys[:limit]
        return {
            "items": [item_json(self.items[scope][key]) for key in page],
            "next_cursor": write_cursor(page[-1]) if len(keys) > limit else None,
        }


# -- helpers -------------------------------------------------------------------------------


def utcnow():
    return datetime.now(timezone.utc).isoformat()  # noqa: UP017 - runs on any python3


def scope_json(scope):
    return {"project_id": scope[0], "agent_id": scope[1], "task_id": scope[2]}


def item_json(row):
    item = {k: row[k] for k in ("key", "value", "metadata", "created_at", "updated_at")}
    return {"scope": scope_json(tuple(row["scope"])), **item, "expires_at": None}


def write_cursor(key):
    """The cursor after `key`: its UTF-8 in base64url, so hosts treat it as opaque."""
    return base64.urlsafe_b64encode(key.encode("utf-8")).decode("ascii")


def read_cursor(cursor):
    """The key a cursor of ours names (None: the first page)."""
    if cursor is None:
        return None
    try:
        key = base64.urlsafe_b64decode(cursor.encode("ascii")).decode("utf-8")
    except (binascii.Error, UnicodeError, ValueError):
        key = None
    if not key or write_cursor(key) != cursor:
        raise ParamError(f"cursor {cursor!r} was not returned by this plugin")
    return key


def indexed_text(value):
    """What a query searches: a string itself, a dict's "content", else the JSON."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and isinstance(value.get("content"), str):
        return value["content"]
    return json.dumps(value, sort_keys=True)


def matches(metadata, filters):
    """Equality or membership per filter key; null in a filter matches a missing key."""
    for name, wanted in filters.items():
        options = wanted if isinstance(wanted, list) else [wanted]
        actual = metadata.get(name)
        if actual is None:
            if None not in options:
                return False
        elif isinstance(actual, list):
            if not any(option in actual for option in options if option is not None):
                return False
        elif actual not in options:
            return False
    return True


# Each method's params: (required, optional). Anything else is refused with -32602, so a host
# never mistakes a param this plugin ignores for one it honours.
METHODS = {
    "initialize": ((), ("protocol_version", "host")),
    "memory/put": (("scope", "key", "value"), ("metadata", "ttl_seconds")),
    "memory/get": (("scope", "key"), ()),
    "memory/query": (("scope", "text"), ("top_k", "filters")),
    "memory/list_scopes": ((), ("project_id", "cursor", "limit")),
    "memory/delete_scope": (("scope",), ()),
    "memory/delete": (("scope", "key"), ()),
    "memory/list_items": (("scope",), ("prefix", "cursor", "limit")),
}


def read_scope(params):
    scope = params["scope"]
    if not isinstance(scope, dict) or not isinstance(scope.get("project_id"), str):
        raise ParamError("scope must be an object with a string project_id")
    return (scope["project_id"], scope.get("agent_id"), scope.get("task_id"))


def call(store, method, params):
    if method not in METHODS:
        raise UnknownMethod(method)
    required, optional = METHODS[method]
    unknown = sorted(set(params) - set(required) - set(optional))
    if unknown:
        takes = ", ".join(required + optional)
        raise ParamError(f"{method}: unknown param(s) {', '.join(unknown)}; it takes {takes}")
    missing = [name for name in required if name not in params]
    if missing:
        raise ParamError(f"{method}: missing param(s) {', '.join(missing)}")
    # An optional param sent as null means "the default".
    params = {name: v for name, v in params.items() if v is not None or name in required}
    if method == "initialize":
        return {
            "protocol_version": PROTOCOL_VERSION,
            "plugin_id": "dict-plugin",
            "capabilities": CAPABILITIES,
        }
    if method == "memory/list_scopes":
        return store.list_scopes(
            params.get("project_id"), params.get("cursor"), params.get("limit", 100)
        )
    scope = read_scope(params)
    if method == "memory/delete_scope":
        return store.delete_scope(scope)
    if method == "memory/list_items":
        limit = params.get("limit", 100)
        if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= 1000:
            raise ParamError("limit must be an integer from 1 to 1000")
        for name in ("prefix", "cursor"):
            if not isinstance(params.get(name, ""), str):
                raise ParamError(f"{name} must be a string or null")
        return store.list_items(scope, params.get("prefix"), params.get("cursor"), limit)
    if "key" in required and not isinstance(params["key"], str):  # put, get and delete
        raise ParamError("key must be a string")
    if method == "memory/delete":
        return store.delete(scope, params["key"])
    if method == "memory/put":
        return store.put(
            scope, params["key"], params["value"], params.get("metadata"), params.get("ttl_seconds")
        )
    if method == "memory/get":
        return store.get(scope, params["key"])
    if not isinstance(params["text"], str):  # memory/query
        raise ParamError("text must be a string")
    return store.query(scope, params["text"], params.get("top_k", 8), params.get("filters"))


def answer(store, line):
    """The response line for one request line, or None for a notification."""
    try:
        request = json.loads(line)
    except ValueError as exc:
        return error(None, -32700, f"parse error: {exc}")
    if not isinstance(request, dict) or not isinstance(request.get("method"), str):
        return error(None, -32600, "invalid request: expected an object with a method")
    request_id = request.get("id")
    params = request.get("params", {})
    try:
        if not isinstance(params, dict):
            raise ParamError("params must be an object")
        result = call(store, request["method"], params)
        response = {"jsonrpc": "2.0", "id": request_id, "result": result}
    except UnknownMethod:
        response = error(request_id, -32601, f"unknown method {request['method']!r}")
    except ParamError as exc:
        response = error(request_id, -32602, str(exc))
    except OSError as exc:
        response = error(request_id, -32000, f"cannot save items: {exc}")
    except Exception as exc:  # a bug: report it and keep serving
        print(f"dict-plugin: {request['method']} failed: {exc!r}", file=sys.stderr)
        response = error(request_id, -32603, f"internal error: {exc!r}")
    return None if "id" not in request else response


def error(request_id, code, message):
    return {"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": message}}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--file", help="keep items in this JSON file between runs")
    store = Store(parser.parse_args().file)
    print("dict-plugin: ready", file=sys.stderr)
    for line in sys.stdin:
        if line.strip():
            response = answer(store, line)
            if response is not None:
                sys.stdout.write(json.dumps(response) + "\n")
                sys.stdout.flush()


if __name__ == "__main__":
    main()
