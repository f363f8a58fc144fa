"""The HTTP seam under the Zep SDK: one deadline per store operation, retries with backoff,
and HTTP status mapped onto our error tree before the SDK's generated code reads a body.

The SDK sends every request through `AsyncHttpClient.request`; `RetryingHttpClient` is that
class with our policy, so the SDK keeps building paths, bodies and models while retries,
deadlines and error messages (which never contain the API key) are ours.
"""

from __future__ import annotations

import asyncio
import contextlib
import email.utils
import json
import random
import time
from collections.abc import AsyncIterator
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

import httpx
from zep_python.core.http_client import AsyncHttpClient

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


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How the store retries 408, 429 and 5xx answers and network errors, within its deadline.

    The n-th retry waits `initial_backoff_s * 2**(n-1)` (at most `max_backoff_s`), with
    jitter, or what the server's Retry-After asks for. A wait that would leave the next
    attempt less than a quarter of the deadline (at most 0.25 s) is not started: the last
    error is raised instead.
    """

    initial_backoff_s: float = 0.2
    max_backoff_s: float = 2.0

    def backoff(self, retry: int) -> float:
        delay = min(self.max_backoff_s, self.initial_backoff_s * 2 ** (retry - 1))
        return delay * random.uniform(0.5, 1.0)


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
    status: int, body: str, *, method: str, path: str, base_url: str, secret: str = ""
) -> AnimusError | None:
    """The error for an HTTP answer, None for a success. `secret` is scrubbed from the text."""
    if 200 <= status < 300:
        return None
    # Scrubbed before `_server_message` shortens it: a cut through the key would leave a piece.
    detail = _server_message(body.replace(secret, "***") if secret else body)
    where = f"{method} {path}"
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


def retry_after(headers: httpx.Headers) -> float | None:
    """Seconds the server asked to wait (Retry-After as seconds or an HTTP date)."""
    value = headers.get("retry-after")
    if value is None:
        return None
    value = value.strip()
    if value.replace(".", "", 1).isdigit():
        return float(value)
    with contextlib.suppress(TypeError, ValueError):
        moment = email.utils.parsedate_to_datetime(value)
        return max(0.0, moment.timestamp() - time.time())
    return None


# -- one deadline per store operation -------------------------------------------------------

_deadline: ContextVar[tuple[float, float] | None] = ContextVar("animus_zep_deadline", default=None)


@contextlib.asynccontextmanager
async def deadline(timeout_s: float, what: str) -> AsyncIterator[None]:
    """Give every request inside the block one shared deadline, `timeout_s` from now.

    Exceeding it raises StoreTimeout naming `what`, even if a request ignores its own timeout.
    """
    if _deadline.get() is not None:  # nested: the outer operation's deadline holds
        yield
        return
    token = _deadline.set((time.monotonic() + timeout_s, timeout_s))
    try:
        async with asyncio.timeout(timeout_s):
            yield
    except TimeoutError:
        raise _timeout_error(what, timeout_s) from None
    finally:
        _deadline.reset(token)


def _timeout_error(what: str, timeout_s: float) -> StoreTimeout:
    return StoreTimeout(
        f"Zep did not complete {what} within {timeout_s:g} s; it is slow or unreachable, "
        "retry later or raise timeout_s"
    )


class RetryingHttpClient(AsyncHttpClient):
    """The SDK's HTTP client with our retries, deadline and error mapping."""

    def __init__(
        self,
        *,
        httpx_client: httpx.AsyncClient,
        base_headers: dict[str, str],
        base_url: str,
        policy: RetryPolicy,
        default_timeout_s: float,
        secret: str,
    ) -> None:
        super().__init__(
            httpx_client=httpx_client,
            base_timeout=default_timeout_s,
            base_headers=base_headers,
            base_url=base_url,
        )
        self.policy = policy
        self.default_timeout_s = default_timeout_s
        self._secret = secret

    def __repr__(self) -> str:
        return f"<RetryingHttpClient {shown_url(str(self.base_url))}>"

    async def request(  # type: ignore[override]
        self, path: str | None = None, *, method: str, **kwargs: Any
    ) -> httpx.Response:
        ends_at, timeout_s = _deadline.get() or (
            time.monotonic() + self.default_timeout_s,
            self.default_timeout_s,
        )
        where = f"{method} {path}"
        options = dict(kwargs.pop("request_options", None) or {})
        retries = 0
        while True:
            remaining = ends_at - time.monotonic()
            if remaining <= 0:
                raise _timeout_error(where, timeout_s)
            # Each attempt may use what is left of the deadline; retrying is ours, not the SDK's.
            options.update(timeout_in_seconds=remaining, max_retries=0)
            try:
                response = await super().request(
                    path, method=method, request_options=options, **kwargs
                )
            except httpx.TimeoutException:
                raise _timeout_error(where, timeout_s) from None
            except httpx.TransportError as exc:
                error: AnimusError = StoreUnavailable(
                    f"cannot reach Zep at {shown_url(str(self.base_url))} "
                    f"({type(exc).__name__}: {exc})"
                )
                wait = None
            else:
                found = status_error(
                    response.status_code,
                    response.text,
                    method=method,
                    path=str(path),
                    base_url=shown_url(str(self.base_url)),
                    secret=self._secret,
                )
                if found is None:
                    return response
                if not is_retryable(response.status_code):
                    raise found
                error, wait = found, retry_after(response.headers)
            retries += 1
            delay = wait if wait is not None else self.policy.backoff(retries)
            # Retry only if the attempt after the wait still has a fair share of the deadline.
            if time.monotonic() + delay + min(0.25, timeout_s / 4) >= ends_at:
                raise type(error)(
                    f"{error}; gave up after {retries} attempt(s) within {timeout_s:g} s "
                    "(Zep is unavailable or rate-limiting: retry later or raise timeout_s)"
                )
            await asyncio.sleep(delay)
