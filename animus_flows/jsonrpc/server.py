"""Serve any memory store as an out-of-process plugin: JSON-RPC 2.0, one message per line.

`animus memory serve --plugin ID` runs `serve_plugin`. Requests are answered concurrently (up
to a bound) and in any order; a malformed line, an unknown method or bad params gets its
JSON-RPC error and the server reads on. stdout carries protocol messages only; logs go to
stderr. End of input ends the server once in-flight requests are answered.
"""

from __future__ import annotations

import asyncio
import logging
import math
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from animus_flows.errors import AnimusError, InvalidRequest
from animus_flows.jsonrpc import codec
from animus_flows.jsonrpc.params import method_arguments
from animus_flows.jsonrpc.stdio import FdReader, FdWriter, claim_stdout
from animus_flows.protocol import (
    JSON,
    METHOD_DELETE,
    METHOD_DELETE_SCOPE,
    METHOD_GET,
    METHOD_INITIALIZE,
    METHOD_LIST_ITEMS,
    METHOD_LIST_SCOPES,
    METHOD_PUT,
    METHOD_QUERY,
    MemoryStore,
    shown_head,
    utcnow,
)
from animus_flows.redaction import get_logger
from animus_flows.stores.checks import EXPIRES_KEY, parse_expiry

log = get_logger("animus_flows.jsonrpc.server")

MAX_CONCURRENT_REQUESTS = 64
# What an item's answer may add to its put request (timestamps, the store's metadata): a put
# within this much of the message limit is refused, so its answer and later gets always fit.
ANSWER_HEADROOM = 64 * 1024


class PluginServer:
    """Answers protocol requests from a byte stream with one store.

    Args:
        store: the store to serve.
        plugin_id: the id reported by `initialize`.
        max_concurrent: requests handled at once; reading pauses beyond that.
    """

    def __init__(
        self,
        store: MemoryStore,
        plugin_id: str,
        *,
        max_concurrent: int = MAX_CONCURRENT_REQUESTS,
    ) -> None:
        self.store = store
        self.plugin_id = plugin_id
        self._slots = asyncio.Semaphore(max_concurrent)
        self._methods: dict[str, Callable[..., Awaitable[JSON]]] = {
            METHOD_INITIALIZE: self._initialize,
            METHOD_PUT: self._put,
            METHOD_GET: self._get,
            METHOD_QUERY: self._query,
            METHOD_LIST_SCOPES: self._list_scopes,
            METHOD_DELETE_SCOPE: self._delete_scope,
            METHOD_DELETE: self._delete,
            METHOD_LIST_ITEMS: self._list_items,
        }

    # -- one message ----------------------------------------------------------------------

    async def answer(self, line: bytes | codec.OversizedLine) -> bytes | None:
        """The encoded response to one input line, or None (blank lines, notifications)."""
        if isinstance(line, codec.OversizedLine):
            return codec.encode(
                codec.failure(
                    None,
                    codec.INVALID_REQUEST,
                    f"message of {line.size} bytes exceeds the {codec.MAX_MESSAGE_BYTES} byte "
                    "limit; store large values elsewhere and keep a reference",
                )
            )
        if not line.strip():
            return None
        try:
            request = codec.parse_request(codec.decode(line))
        except codec.ProtocolError as exc:
            return codec.encode(codec.failure(exc.request_id, exc.code, exc.message))
        if request.method == METHOD_PUT and len(line) > codec.MAX_MESSAGE_BYTES - ANSWER_HEADROOM:
            # its answer echoes the item and could not be sent (nor the item read back): refuse
            # it before it is stored, not after
            return codec.encode(
                codec.failure(
                    request.id,
                    codec.INVALID_PARAMS,
                    f"memory/put of {len(line)} bytes leaves no room for its answer within the "
                    f"{codec.MAX_MESSAGE_BYTES} byte message limit; store large values elsewhere "
                    "and keep a reference",
                )
            )
        response = await self._call(request)
        if request.notification:
            return None
        encoded = codec.encode(response)
        if len(encoded) > codec.MAX_MESSAGE_BYTES:  # the host would drop it, and this plugin
            return codec.encode(
                codec.failure(
                    request.id,
                    codec.INVALID_PARAMS,
                    f"{request.method}: the answer of {len(encoded)} bytes exceeds the "
                    f"{codec.MAX_MESSAGE_BYTES} byte message limit; store large values "
                    "elsewhere and keep a reference",
                )
            )
        return encoded

    async def _call(self, request: codec.Request) -> dict[str, JSON]:
        handler = self._methods.get(request.method)
        if handler is None:
            return codec.failure(
                request.id,
                codec.METHOD_NOT_FOUND,
                f"unknown method {request.method!r}; this plugin serves "
                + ", ".join(self._methods),
            )
        try:
            arguments = method_arguments(request.method, request.params)
            return codec.success(request.id, await handler(**arguments))
        except AnimusError as exc:
            return codec.failure(request.id, codec.error_code(exc), str(exc), type(exc).__name__)
        except Exception as exc:  # a bug in the store: report it, keep serving
            log.exception("%s failed", request.method)
            return codec.failure(
                request.id,
                codec.INTERNAL_ERROR,
                f"internal error in {request.method}: {type(exc).__name__}: {exc}",
            )

    # -- the methods ----------------------------------------------------------------------

    async def _initialize(self, **_: Any) -> JSON:
        return codec.initialize_result(self.plugin_id, self.store.capabilities)

    async def _put(self, **arguments: Any) -> JSON:
        return (await self.store.put(**host_expiry_as_ttl(arguments))).to_json()

    async def _get(self, **arguments: Any) -> JSON:
        item = await self.store.get(**arguments)
        return None if item is None else item.to_json()

    async def _query(self, **arguments: Any) -> JSON:
        return {"hits": [hit.to_json() for hit in await self.store.query(**arguments)]}

    async def _list_scopes(self, **arguments: Any) -> JSON:
        return (await self.store.list_scopes(**arguments)).to_json()

    async def _delete_scope(self, **arguments: Any) -> JSON:
        return {"deleted": await self.store.delete_scope(**arguments)}

    async def _delete(self, **arguments: Any) -> JSON:
        return {"deleted": await self.store.delete(**arguments)}

    async def _list_items(self, **arguments: Any) -> JSON:
        return (await self.store.list_items(**arguments)).to_json()

    # -- the stream -----------------------------------------------------------------------

    async def serve(self, reader: FdReader, writer: FdWriter) -> None:
        """Answer every line until end of input, then wait for the requests in flight."""
        splitter = codec.LineSplitter()
        in_flight: set[asyncio.Task[None]] = set()

        async def respond(line: bytes | codec.OversizedLine) -> None:
            try:
                response = await self.answer(line)
                if response is not None:
                    await writer.write(response)
            except (BrokenPipeError, ConnectionResetError):
                log.debug("the host stopped reading; dropping a response")
            finally:
                self._slots.release()

        def start(line: bytes | codec.OversizedLine) -> None:
            task = asyncio.create_task(respond(line))
            in_flight.add(task)
            task.add_done_callback(in_flight.discard)

        while chunk := await reader.read():
            for line in splitter.feed(chunk):
                await self._slots.acquire()
                start(line)
        if (last := splitter.pending()) is not None:
            await self._slots.acquire()
            start(last)
        if in_flight:
            await asyncio.gather(*in_flight)


def host_expiry_as_ttl(arguments: dict[str, Any]) -> dict[str, Any]:
    """`memory/put` arguments with a host's emulated expiry turned into `ttl_seconds`.

    A host emulates TTL for a plugin without `native_ttl` (a served Zep store, say) by sending
    the expiry in the metadata key `_animus_expires_at`, which the served store refuses from a
    caller: it takes the TTL as `ttl_seconds` and keeps the expiry its own way.
    """
    metadata = arguments.get("metadata")
    if (
        not isinstance(metadata, dict)
        or EXPIRES_KEY not in metadata
        or arguments.get("ttl_seconds") is not None
    ):
        return arguments
    expires_at = parse_expiry(metadata[EXPIRES_KEY])
    if expires_at is None:
        raise InvalidRequest(
            f"metadata {EXPIRES_KEY} {shown_head(str(metadata[EXPIRES_KEY]))} is not an "
            "ISO 8601 date; send an expiry with a UTC offset, or ttl_seconds"
        )
    seconds = math.ceil((expires_at - utcnow()).total_seconds())
    rest = {name: value for name, value in metadata.items() if name != EXPIRES_KEY}
    # an expiry already past keeps the item for the shortest TTL there is
    return {**arguments, "metadata": rest, "ttl_seconds": max(1, seconds)}


async def serve_fds(store: MemoryStore, plugin_id: str, in_fd: int, out_fd: int) -> None:
    """Serve `store` on two file descriptors until end of input, then close the store."""
    reader, writer = FdReader(in_fd), FdWriter(out_fd)
    await reader.open()
    await writer.open()
    try:
        await PluginServer(store, plugin_id).serve(reader, writer)
    finally:
        writer.close()
        close = getattr(store, "aclose", None)
        if close is not None:
            await close()


def serve_plugin(workflow_file: Path, plugin: str | None) -> None:
    """Serve the store `plugin` of a workflow file on stdin/stdout until stdin ends.

    Configuration errors (no file, unknown plugin) are raised before the protocol stream is
    touched, so the caller can report them normally.
    """
    from animus_flows.cli.support import load_cli_workflow
    from animus_flows.stores.registry import PluginRegistry, blocks_wanted

    workflow = load_cli_workflow(workflow_file)
    registry = PluginRegistry(workflow, use_blocks=blocks_wanted(workflow, plugin))

    async def serve() -> None:
        plugin_id, store = await registry.choose(plugin)
        protocol_fd = claim_stdout()
        logging.basicConfig(
            stream=sys.stderr, level=logging.INFO, format=f"{plugin_id}: %(levelname)s %(message)s"
        )
        log.info("serving protocol %s on stdio", codec.PROTOCOL_VERSION)
        await serve_fds(store, plugin_id, sys.stdin.fileno(), protocol_fd)

    asyncio.run(serve())
