"""Framing, results, versions and error codes of the memory-store protocol over JSON-RPC 2.0.

Pure functions, no I/O: the plugin server and the `jsonrpc` store both use them, so the two ends
agree byte for byte (each method's params are checked in `params`). docs/protocol.md is the
prose version of this module.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass

from animus_flows.errors import (
    AnimusError,
    ConfigError,
    InvalidRequest,
    InvalidScope,
    StoreError,
    StoreTimeout,
    StoreUnavailable,
    WriteDenied,
)
from animus_flows.jsonrpc.params import method_arguments
from animus_flows.protocol import (
    JSON,
    METHOD_DELETE,
    METHOD_DELETE_SCOPE,
    METHOD_INITIALIZE,
    METHOD_LIST_ITEMS,
    METHOD_LIST_SCOPES,
    METHOD_QUERY,
    PROTOCOL_VERSION,
    Capabilities,
    ItemPage,
    MemoryItem,
    QueryHit,
    Scope,
    ScopePage,
    is_valid_unicode,
)
from animus_flows.redaction import redact, redact_head

__all__ = ["method_arguments"]  # the params' checks live in `params`; the server calls it here

# -- error codes ----------------------------------------------------------------------------

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
#: Application codes, one per error class a store raises (JSON-RPC leaves -32000..-32099 to
#: implementations).
STORE_UNAVAILABLE = -32000
STORE_TIMEOUT = -32001
WRITE_DENIED = -32002
CONFIG_ERROR = -32003

#: The longest line either end accepts; a longer one is dropped whole and answered with an error.
MAX_MESSAGE_BYTES = 16 * 1024 * 1024

Id = str | int | float | None


class ProtocolError(Exception):
    """A message that breaks JSON-RPC itself: answered with `code`, never raised to callers.

    The message may quote what was sent: `failure` redacts it on the way out.
    """

    def __init__(self, code: int, message: str, request_id: Id = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.request_id = request_id


# -- framing --------------------------------------------------------------------------------


def encode(message: Mapping[str, JSON]) -> bytes:
    """One message as one line: compact UTF-8 JSON (newlines inside strings are escaped).

    Text that UTF-8 cannot carry (a lone surrogate, which Python strings may hold) is sent as
    JSON escapes instead, so a response always goes out.
    """
    text = json.dumps(message, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    try:
        return text.encode("utf-8") + b"\n"
    except UnicodeEncodeError:
        return json.dumps(message, separators=(",", ":"), allow_nan=False).encode() + b"\n"


def _no_constants(name: str) -> None:
    raise ValueError(f"{name} is not JSON")


def decode(line: bytes) -> JSON:
    """Parse one line; raises ProtocolError(PARSE_ERROR) when it is not JSON."""
    try:
        return json.loads(line.decode("utf-8"), parse_constant=_no_constants)
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        # RecursionError: JSON nested too deeply for the parser, which is no valid message
        raise ProtocolError(
            PARSE_ERROR, f"parse error: {exc}; send one JSON object per line"
        ) from None


@dataclass(frozen=True, slots=True)
class OversizedLine:
    """Stands in for a line longer than the limit, which was dropped."""

    size: int


class LineSplitter:
    """Cuts a byte stream into lines of at most `limit` bytes; longer lines are dropped whole.

    Example:
        ```python
        from animus_flows.jsonrpc.codec import LineSplitter

        splitter = LineSplitter()
        splitter.feed(b'{"a": 1}\\n{"b"')  # [b'{"a": 1}']
        splitter.feed(b": 2}\\n")  # [b'{"b": 2}']
        ```
    """

    def __init__(self, limit: int = MAX_MESSAGE_BYTES) -> None:
        self.limit = limit
        self._buffer = bytearray()
        self._dropping: int | None = None  # bytes dropped so far of an oversized line

    def feed(self, data: bytes) -> list[bytes | OversizedLine]:
        lines: list[bytes | OversizedLine] = []
        start = 0
        while True:
            end = data.find(b"\n", start)
            piece = data[start:] if end < 0 else data[start:end]
            if self._dropping is not None:
                self._dropping += len(piece)
            elif len(self._buffer) + len(piece) > self.limit:
                self._dropping = len(self._buffer) + len(piece)
                self._buffer.clear()
            else:
                self._buffer += piece
            if end < 0:
                return lines
            if self._dropping is not None:
                lines.append(OversizedLine(self._dropping))
                self._dropping = None
            else:
                lines.append(bytes(self._buffer))
                self._buffer.clear()
            start = end + 1

    def pending(self) -> bytes | OversizedLine | None:
        """What is left after the stream ended without a final newline."""
        if self._dropping is not None:
            return OversizedLine(self._dropping)
        return bytes(self._buffer) if self._buffer.strip() else None


# -- requests (the plugin's side) -----------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Request:
    """A well-formed request; `notification` requests (no id) get no response."""

    method: str
    params: dict[str, JSON]
    id: Id
    notification: bool


def parse_request(message: JSON) -> Request:
    """Check a decoded message against JSON-RPC 2.0; raises ProtocolError with the id to answer."""
    if isinstance(message, list):
        raise ProtocolError(
            INVALID_REQUEST,
            f"batch requests are not supported by protocol {PROTOCOL_VERSION}; send one "
            "request per line",
        )
    if not isinstance(message, dict):
        raise ProtocolError(INVALID_REQUEST, f"request {_shown(message)} is not a JSON object")
    request_id = message.get("id")
    if not _valid_id(request_id):
        raise ProtocolError(
            INVALID_REQUEST,
            f"request id {_shown(request_id)} must be a string of valid Unicode, a number or null",
        )
    if message.get("jsonrpc") != "2.0":
        raise ProtocolError(
            INVALID_REQUEST,
            f'"jsonrpc" is {message.get("jsonrpc")!r}; send "jsonrpc": "2.0"',
            request_id,
        )
    method = message.get("method")
    if not isinstance(method, str):
        raise ProtocolError(
            INVALID_REQUEST, f'"method" {_shown(method)} must be a string', request_id
        )
    params = message.get("params", {})
    if isinstance(params, list):
        raise ProtocolError(
            INVALID_PARAMS,
            f"{method}: params must be an object of named parameters, not an array",
            request_id,
        )
    if not isinstance(params, dict):
        raise ProtocolError(
            INVALID_REQUEST, f"{method}: params {_shown(params)} is not an object", request_id
        )
    return Request(method, params, request_id, notification="id" not in message)


def _valid_id(request_id: object) -> bool:
    if isinstance(request_id, str):
        return is_valid_unicode(request_id)
    if isinstance(request_id, float):
        return math.isfinite(request_id)
    return request_id is None or (isinstance(request_id, int) and not isinstance(request_id, bool))


def _shown(value: object) -> str:
    """A sent value as a message quotes it: JSON, cut short, secrets redacted."""
    return redact_head(json.dumps(value, ensure_ascii=False, default=str), 80)


def initialize_result(plugin_id: str, capabilities: Capabilities) -> dict[str, JSON]:
    return {
        "protocol_version": PROTOCOL_VERSION,
        "plugin_id": plugin_id,
        "capabilities": capabilities.to_json(),
    }


def success(request_id: Id, result: JSON) -> dict[str, JSON]:
    return {"jsonrpc": "2.0", "id": request_id, "result": result}


def failure(request_id: Id, code: int, message: str, error: str | None = None) -> dict[str, JSON]:
    """An error answer; its message is redacted here, where every error leaves a plugin."""
    body: dict[str, JSON] = {"code": code, "message": redact(message).text}
    if error is not None:
        body["data"] = {"error": error}
    return {"jsonrpc": "2.0", "id": request_id, "error": body}


def error_code(exc: BaseException) -> int:
    """The code a plugin answers with when its store raises `exc`."""
    if isinstance(exc, InvalidRequest):
        return INVALID_PARAMS
    if isinstance(exc, StoreTimeout):
        return STORE_TIMEOUT
    if isinstance(exc, WriteDenied):
        return WRITE_DENIED
    if isinstance(exc, ConfigError):
        return CONFIG_ERROR
    if isinstance(exc, AnimusError):
        return STORE_UNAVAILABLE
    return INTERNAL_ERROR


# -- requests and responses (the host's side) -----------------------------------------------


def request(request_id: int, method: str, params: Mapping[str, JSON]) -> bytes:
    return encode({"jsonrpc": "2.0", "id": request_id, "method": method, "params": dict(params)})


@dataclass(frozen=True, slots=True)
class Response:
    id: Id
    result: JSON = None
    error: dict[str, JSON] | None = None


def parse_response(message: JSON) -> Response:
    """Check a decoded line from a plugin; raises ValueError when it is not a response."""
    if not isinstance(message, dict) or message.get("jsonrpc") != "2.0" or "id" not in message:
        raise ValueError("not a JSON-RPC 2.0 response")
    if ("result" in message) == ("error" in message):
        raise ValueError("a response carries exactly one of result and error")
    error = message.get("error")
    if error is not None and not (
        isinstance(error, dict)
        and isinstance(error.get("code"), int)
        and isinstance(error.get("message"), str)
    ):
        raise ValueError("error must be an object with an integer code and a string message")
    return Response(message["id"], message.get("result"), error)


_ERRORS_BY_CODE: dict[int, type[AnimusError]] = {
    INVALID_PARAMS: InvalidRequest,
    STORE_UNAVAILABLE: StoreUnavailable,
    STORE_TIMEOUT: StoreTimeout,
    WRITE_DENIED: WriteDenied,
    CONFIG_ERROR: ConfigError,
}


def error_from_response(error: Mapping[str, JSON], source: str) -> AnimusError:
    """The exception a host raises for a plugin's error object; `source` names the plugin."""
    code = error["code"]
    # One line, of a sensible length, whatever the plugin sent: it ends up on a terminal.
    message = f"{source}: {redact_head(' '.join(str(error['message']).split()), 500)}"
    data = error.get("data")
    name = data.get("error") if isinstance(data, dict) else None
    cls = _ERRORS_BY_CODE.get(code)  # type: ignore[arg-type]
    if cls is InvalidRequest and name == "InvalidScope":
        return InvalidScope(message)
    if cls is not None:
        return cls(message)
    if code == METHOD_NOT_FOUND:
        return StoreUnavailable(
            f"{message} (code {code}); the plugin does not implement protocol "
            f"{PROTOCOL_VERSION} fully, upgrade it"
        )
    if code == INTERNAL_ERROR:
        return StoreUnavailable(f"{message} (code {code}); the plugin's stderr has the details")
    # Parse errors and invalid requests are bugs on one side or the other, never the caller's.
    return StoreUnavailable(
        f"{message} (code {code}); host and plugin disagree on protocol {PROTOCOL_VERSION}"
    )


def _malformed(source: str, method: str, result: JSON, why: object) -> StoreUnavailable:
    shown = redact_head(json.dumps(result, ensure_ascii=False), 120)
    return StoreUnavailable(
        f"{source} answered {method} with a malformed result {shown} ({why}); "
        f"the plugin does not follow protocol {PROTOCOL_VERSION}"
    )


def parse_item(result: JSON, source: str, method: str) -> MemoryItem:
    if not isinstance(result, dict):
        raise _malformed(source, method, result, "expected an item object")
    try:
        return MemoryItem.from_json(result)
    except (StoreError, ValueError, TypeError) as exc:
        raise _malformed(source, method, result, exc) from None


def parse_hits(result: JSON, source: str) -> list[QueryHit]:
    hits = result.get("hits") if isinstance(result, dict) else None
    if not isinstance(hits, list) or not all(isinstance(hit, dict) for hit in hits):
        raise _malformed(source, METHOD_QUERY, result, 'expected {"hits": [...]}')
    try:
        return [QueryHit.from_json(hit) for hit in hits]
    except (StoreError, ValueError, TypeError) as exc:
        raise _malformed(source, METHOD_QUERY, result, exc) from None


def parse_page(result: JSON, source: str) -> ScopePage:
    scopes = result.get("scopes") if isinstance(result, dict) else None
    cursor = result.get("next_cursor") if isinstance(result, dict) else None
    if not isinstance(scopes, list) or not isinstance(cursor, str | None):
        raise _malformed(
            source, METHOD_LIST_SCOPES, result, 'expected {"scopes": [...], "next_cursor": ...}'
        )
    try:
        return ScopePage([Scope.from_json(scope) for scope in scopes], cursor)
    except StoreError as exc:
        raise _malformed(source, METHOD_LIST_SCOPES, result, exc) from None


def parse_deleted(result: JSON, source: str) -> int:
    deleted = result.get("deleted") if isinstance(result, dict) else None
    if isinstance(deleted, bool) or not isinstance(deleted, int) or deleted < 0:
        raise _malformed(source, METHOD_DELETE_SCOPE, result, 'expected {"deleted": N}')
    return deleted


def parse_deleted_item(result: JSON, source: str) -> bool:
    deleted = result.get("deleted") if isinstance(result, dict) else None
    if not isinstance(deleted, bool):
        raise _malformed(source, METHOD_DELETE, result, 'expected {"deleted": true or false}')
    return deleted


def parse_item_page(result: JSON, source: str) -> ItemPage:
    items = result.get("items") if isinstance(result, dict) else None
    cursor = result.get("next_cursor") if isinstance(result, dict) else None
    if (
        not isinstance(items, list)
        or not all(isinstance(item, dict) for item in items)
        or not isinstance(cursor, str | None)
    ):
        raise _malformed(
            source, METHOD_LIST_ITEMS, result, 'expected {"items": [...], "next_cursor": ...}'
        )
    try:
        return ItemPage([MemoryItem.from_json(item) for item in items], cursor)
    except (StoreError, ValueError, TypeError) as exc:
        raise _malformed(source, METHOD_LIST_ITEMS, result, exc) from None


def version_tuple(version: object) -> tuple[int, int, int] | None:
    if not isinstance(version, str):
        return None
    parts = version.split(".")
    if len(parts) != 3 or not all(part.isdigit() for part in parts):
        return None
    return int(parts[0]), int(parts[1]), int(parts[2])


#: The (major, minor) protocol versions this host talks to. A 0.1.x plugin serves every method
#: but those 0.2.0 added (`METHODS_SINCE`); the host never fakes them.
COMPATIBLE_VERSIONS = ((0, 1), (0, 2))
METHODS_SINCE = {METHOD_DELETE: (0, 2), METHOD_LIST_ITEMS: (0, 2)}


def is_compatible(version: object) -> bool:
    """Whether a plugin speaking `version` can serve this host: 0.2.x, or 0.1.x for every
    method it had (semver: while the major is 0, each minor is its own protocol)."""
    theirs = version_tuple(version)
    return theirs is not None and theirs[:2] in COMPATIBLE_VERSIONS


def check_method_served(handshake: Handshake, method: str, source: str) -> None:
    """Refuse `method` when the plugin's protocol version predates it: a ConfigError naming
    the plugin, its version and the upgrade."""
    since = METHODS_SINCE.get(method)
    theirs = version_tuple(handshake.protocol_version)
    if since is not None and theirs is not None and theirs[:2] < since:
        raise ConfigError(
            f"{source} speaks protocol {handshake.protocol_version}, which has no {method} "
            f"(added in {since[0]}.{since[1]}.0); upgrade the plugin to protocol "
            f"{PROTOCOL_VERSION}"
        )


@dataclass(frozen=True, slots=True)
class Handshake:
    """What a plugin said in answer to `initialize`."""

    protocol_version: str
    plugin_id: str
    capabilities: Capabilities


def parse_initialize(result: JSON, source: str) -> Handshake:
    """Read an `initialize` result; raises ConfigError for a version this host cannot speak."""
    if not isinstance(result, dict):
        raise _malformed(source, METHOD_INITIALIZE, result, "expected an object")
    version = result.get("protocol_version")
    if not is_compatible(version):
        raise ConfigError(
            f"{source} speaks protocol {version!r}, this animus-flows speaks "
            f"{PROTOCOL_VERSION}; use a plugin built for protocol "
            f"{'.'.join(PROTOCOL_VERSION.split('.')[:2])}.x (or 0.1.x) or upgrade animus-flows"
        )
    plugin_id = result.get("plugin_id")
    capabilities = result.get("capabilities")
    if not isinstance(plugin_id, str) or not isinstance(capabilities, dict):
        raise _malformed(
            source, METHOD_INITIALIZE, result, "plugin_id must be a string, capabilities an object"
        )
    try:
        caps = Capabilities.from_json(capabilities)
    except StoreError as exc:
        raise _malformed(source, METHOD_INITIALIZE, result, exc) from None
    return Handshake(str(version), plugin_id, caps)
