"""What the Zep store adds around the SDK's HTTP: one deadline per store operation, and the
SDK's errors (HTTP status, network) mapped onto our error tree with messages that never hold
the API key. Retries are the SDK's own (`request_options={"max_retries": N}`: 408, 409, 429 and
5xx answers, with exponential backoff or the server's Retry-After); the deadline bounds them.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from contextvars import ContextVar
from typing import Any

import httpx

from animus_flows.errors import (
    AnimusError,
    ConfigError,
    InvalidRequest,
    StoreTimeout,
    StoreUnavailable,
)
from animus_flows.redaction import redact_head, shown_url


class ZepNotFound(StoreUnavailable):
    """Zep has no such user, session or message (HTTP 404)."""


class ZepConflict(StoreUnavailable):
    """Zep refused to create something that already exists (HTTP 409)."""


def is_retryable(status: int) -> bool:
    return status in (408, 429) or status >= 500


def _server_message(body: str) -> str:
    try:
        parsed = json.loads(body)
    except ValueError:
        parsed = None
    message = parsed.get("message") if isinstance(parsed, dict) else None
    text = str(message) if message else body.strip()
    return redact_head(" ".join(text.split()), 200) or "no details"


def status_error(
    status: int, body: str, *, where: str, base_url: str, secret: str = ""
) -> AnimusError | None:
    """The error for an HTTP answer to `where` (the SDK call), None for a success. `secret` is
    scrubbed from the text."""
    if 200 <= status < 300:
        return None
    # Scrubbed before `_server_message` shortens it: a cut through the key would leave a piece.
    detail = _server_message(body.replace(secret, "***") if secret else body)
    if status in (401, 403):
        return ConfigError(
            f"Zep at {base_url} refused the API key (HTTP {status} on {where}); set a valid "
            "key for this Zep project in api_key_env (default ZEP_API_KEY) or the block's "
            "api_key"
        )
    if status == 404:
        return ZepNotFound(f"Zep has no such resource (HTTP 404 on {where}): {detail}")
    if status == 409:
        return ZepConflict(f"Zep reports a conflict (HTTP 409 on {where}): {detail}")
    if status in (400, 413, 422):
        return InvalidRequest(
            f"Zep refused {where} (HTTP {status}): {detail}; check the value against "
            "Zep's limits (message size, metadata)"
        )
    if is_retryable(status):
        return StoreUnavailable(f"Zep answered HTTP {status} to {where}: {detail}")
    return StoreUnavailable(
        f"Zep answered HTTP {status} to {where}: {detail}; check base_url ({base_url})"
    )


# -- one deadline per store operation -------------------------------------------------------

_within: ContextVar[bool] = ContextVar("animus_zep_deadline", default=False)


@contextlib.asynccontextmanager
async def deadline(timeout_s: float, what: str) -> AsyncIterator[None]:
    """Give every request inside the block one shared deadline, `timeout_s` from now.

    Exceeding it raises StoreTimeout naming `what`, even if a request ignores its own timeout.
    """
    if _within.get():  # nested: the outer operation's deadline holds
        yield
        return
    token = _within.set(True)
    try:
        async with asyncio.timeout(timeout_s):
            yield
    except TimeoutError:
        raise _timeout_error(what, timeout_s) from None
    finally:
        _within.reset(token)


def _timeout_error(what: str, timeout_s: float) -> StoreTimeout:
    return StoreTimeout(
        f"Zep did not complete {what} within {timeout_s:g} s; it is slow or unreachable, "
        "retry later or raise timeout_s"
    )


def body_text(body: Any) -> str:
    """An SDK error's body as text: the SDK hands over parsed JSON when it could parse it."""
    if isinstance(body, str):
        return body
    if hasattr(body, "dict"):  # the SDK's own error model (pydantic.v1)
        body = body.dict(exclude_none=True)
    try:
        return json.dumps(body)
    except (TypeError, ValueError):
        return str(body)


def unreachable(base_url: str, exc: httpx.TransportError) -> StoreUnavailable:
    return StoreUnavailable(
        f"cannot reach Zep at {shown_url(base_url)} ({type(exc).__name__}: {exc})"
    )
