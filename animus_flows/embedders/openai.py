"""`OpenAIEmbedder`: any OpenAI-compatible `/v1/embeddings` server (OpenAI, Ollama, vLLM, TEI).

Building the request and reading the answer are plain functions (`embeddings_request`,
`parse_embeddings`), tested without a server; the class sends batches through httpx with one
deadline per request, retries 408, 429, 5xx and network errors with backoff within it, and maps
everything else onto the error tree. The API key is a `SecretStr`: it is sent in the
Authorization header and appears in no repr, error or log line.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
import email.utils
import json
import logging
import os
import random
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import httpx
from pydantic import SecretStr

from animus_flows.embedders.base import (
    Purpose,
    check_purpose,
    check_texts,
    normalized_rows,
    require_numpy,
)
from animus_flows.errors import AnimusError, ConfigError, StoreTimeout, StoreUnavailable
from animus_flows.redaction import redact_head, shown_url

if TYPE_CHECKING:
    import numpy as np

    from animus_flows.config.embedder import OpenAIEmbedderSpec

log = logging.getLogger("animus_flows.embedders")

#: Floor for a remote model, whose cosine distribution is not measured here: texts that point
#: in unrelated directions (cosine at or below 0) are never returned.
REMOTE_SIMILARITY_FLOOR = 0.0


@dataclass(frozen=True, slots=True)
class Backoff:
    """The n-th retry waits `initial_s * 2**(n-1)` (at most `max_s`), jittered, or what the
    server's Retry-After asks; a wait that would leave the next attempt less than a quarter of
    the deadline (at most 0.25 s) is not started."""

    initial_s: float = 0.2
    max_s: float = 2.0

    def delay(self, retry: int) -> float:
        return min(self.max_s, self.initial_s * 2 ** (retry - 1)) * random.uniform(0.5, 1.0)


def embeddings_url(url: str) -> str:
    """The endpoint for a base URL: `.../v1` -> `.../v1/embeddings` (kept if already there)."""
    base = url.rstrip("/")
    return base if base.endswith("/embeddings") else base + "/embeddings"


def embeddings_request(model: str, texts: Sequence[str], *, prefix: str = "") -> dict[str, Any]:
    """The JSON body for one batch. Empty texts become one space: OpenAI refuses "" inputs."""
    return {
        "model": model,
        "input": [prefix + text if prefix + text else " " for text in texts],
        "encoding_format": "float",
    }


class MalformedAnswer(StoreUnavailable):
    """The server answered 2xx with something that is not an embeddings list."""


def parse_embeddings(body: bytes | str, count: int, *, where: str) -> list[list[float]]:
    """The `count` vectors of an embeddings answer, in input order.

    Accepts `data[i].embedding` as a list of numbers or as base64 of little-endian float32
    (what OpenAI sends for `encoding_format: base64`). MalformedAnswer, with a one-line
    message naming `where`, for anything else.
    """
    try:
        answer = json.loads(body)
    except ValueError:
        raise MalformedAnswer(
            f"{where} answered with something that is not JSON: {redact_head(_one_line(body), 120)}"
        ) from None
    data = answer.get("data") if isinstance(answer, dict) else None
    if not isinstance(data, list):
        raise MalformedAnswer(f"{where} answered without a 'data' list; is it an embeddings API?")
    if len(data) != count:
        raise MalformedAnswer(f"{where} returned {len(data)} embeddings for {count} texts")
    vectors: list[list[float] | None] = [None] * count
    for position, entry in enumerate(data):
        index = entry.get("index", position) if isinstance(entry, dict) else None
        if not isinstance(index, int) or isinstance(index, bool) or not 0 <= index < count:
            raise MalformedAnswer(f"{where} returned data[{position}] without a valid index")
        if vectors[index] is not None:
            raise MalformedAnswer(f"{where} returned index {index} twice")
        vectors[index] = _vector(entry.get("embedding"), f"{where} data[{position}]")
    return vectors  # type: ignore[return-value]


def _vector(raw: object, where: str) -> list[float]:
    if isinstance(raw, str):
        try:
            packed = base64.b64decode(raw, validate=True)
        except (binascii.Error, ValueError):
            raise MalformedAnswer(f"{where}: embedding is a string but not base64") from None
        if not packed or len(packed) % 4:
            raise MalformedAnswer(f"{where}: base64 embedding is not a float32 array")
        np = require_numpy()
        return np.frombuffer(packed, dtype="<f4").tolist()
    if (
        not isinstance(raw, list)
        or not raw
        or not all(isinstance(x, int | float) and not isinstance(x, bool) for x in raw)
    ):
        raise MalformedAnswer(f"{where}: embedding is not a non-empty list of numbers")
    return raw


def _one_line(text: bytes | str) -> str:
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    return " ".join(text.split()) or "an empty body"


def _server_message(body: str) -> str:
    try:
        parsed = json.loads(body)
    except ValueError:
        parsed = None
    message = None
    if isinstance(parsed, dict):
        error = parsed.get("error")
        # OpenAI and vLLM: {"error": {"message"}}; Ollama: {"error": "..."}; TEI: {"error", ...}
        message = error.get("message") if isinstance(error, dict) else error
        message = message or parsed.get("message") or parsed.get("detail")
    # the caller goes on after a semicolon: a closing period would read ".;"
    return redact_head(_one_line(str(message) if message else body), 200).rstrip(".")


def status_error(
    status: int, body: str, *, where: str, key_env: str | None, secret: str = ""
) -> AnimusError | None:
    """The error for an HTTP answer, None for a success. `secret` is scrubbed from the text."""
    if 200 <= status < 300:
        return None
    detail = _server_message(body.replace(secret, "***") if secret else body)
    if status in (401, 403):
        fix = (
            f"set a valid key in the environment variable {key_env}"
            if key_env
            else "name the environment variable holding the key in api_key_env"
        )
        return ConfigError(f"{where} refused the API key (HTTP {status}): {detail}; {fix}")
    if status == 404:
        return ConfigError(
            f"{where} answered HTTP 404: {detail}; check that url ends in /v1 and that the "
            "server has the model (Ollama: ollama pull MODEL)"
        )
    return StoreUnavailable(f"{where} answered HTTP {status}: {detail}")


def _retryable(status: int) -> bool:
    return status in (408, 429) or status >= 500


def retry_after(headers: httpx.Headers) -> float | None:
    """Seconds the server asked to wait (Retry-After as seconds or as an HTTP date)."""
    value = (headers.get("retry-after") or "").strip()
    if not value:
        return None
    if value.replace(".", "", 1).isdigit():
        return float(value)
    with contextlib.suppress(TypeError, ValueError):
        moment = email.utils.parsedate_to_datetime(value)
        return max(0.0, moment.timestamp() - time.time())
    return None


class OpenAIEmbedder:
    """Embeds through an OpenAI-compatible `/v1/embeddings` server.

    Args:
        url: base URL up to and including `/v1` (`http://127.0.0.1:11434/v1` for Ollama).
        model: the model the server runs (`nomic-embed-text`, `text-embedding-3-small`).
        api_key_env: environment variable holding the API key, read now; None sends no
            Authorization header (local servers).
        api_key: the key itself (a Block's `SecretStr` field), instead of `api_key_env`.
        dimension: the vector size, checked against every answer; None learns it from the
            first answer.
        query_prefix, document_prefix: put before texts of each purpose; asymmetric models
            want them (nomic: `search_query: ` and `search_document: `).
        batch_size: texts per request (TEI accepts 32 by default, OpenAI 2048).
        timeout_s: deadline for one request, its retries included.
        similarity_floor: cosine under which a store returns nothing; 0.0 by default, as
            remote models are not measured here.
        client: an `httpx.AsyncClient` to send through (tests, proxies); not closed by
            `aclose()`. Without one, the embedder makes its own.

    Raises:
        ConfigError: `api_key_env` names an unset variable. When embedding: the server
            refused the key (401/403) or has no such endpoint or model (404).
        StoreUnavailable: the server stays unavailable (429, 5xx, network errors after
            retries) or answers with something that is not embeddings.
        StoreTimeout: a request and its retries outlast `timeout_s`.

    Example (with an Ollama server running `nomic-embed-text`)::

        embedder = OpenAIEmbedder("http://127.0.0.1:11434/v1", "nomic-embed-text",
                                  query_prefix="search_query: ",
                                  document_prefix="search_document: ")
        rows = await embedder.embed(["EUR/USD trades near 1.09"], purpose="document")
    """

    def __init__(
        self,
        url: str,
        model: str,
        api_key_env: str | None = None,
        *,
        api_key: SecretStr | None = None,
        dimension: int | None = None,
        query_prefix: str = "",
        document_prefix: str = "",
        batch_size: int = 32,
        timeout_s: float = 30.0,
        similarity_floor: float = REMOTE_SIMILARITY_FLOOR,
        client: httpx.AsyncClient | None = None,
        backoff: Backoff = Backoff(),
    ) -> None:
        if batch_size < 1 or not timeout_s > 0 or (dimension is not None and dimension < 1):
            raise ConfigError(
                f"OpenAIEmbedder needs batch_size >= 1 (got {batch_size}), timeout_s > 0 (got "
                f"{timeout_s}) and dimension >= 1 or None (got {dimension})"
            )
        self.url = embeddings_url(url)
        self.model = model
        self.dimension: int | None = dimension
        self.similarity_floor = similarity_floor
        self.query_prefix = query_prefix
        self.document_prefix = document_prefix
        self.batch_size = batch_size
        self.timeout_s = timeout_s
        self.backoff = backoff
        self._key_env = api_key_env
        self._api_key = api_key if api_key is not None else _key_from_env(api_key_env)
        self._client = client
        self._own_client: httpx.AsyncClient | None = None
        self._where = f"the embeddings server at {shown_url(self.url)} (model {model!r})"

    @classmethod
    def from_spec(
        cls, spec: OpenAIEmbedderSpec, *, client: httpx.AsyncClient | None = None
    ) -> OpenAIEmbedder:
        """An embedder for an `embedder: {type: openai, ...}` entry."""
        return cls(
            spec.url,
            spec.model,
            spec.api_key_env,
            dimension=spec.dimension,
            query_prefix=spec.query_prefix,
            document_prefix=spec.document_prefix,
            batch_size=spec.batch_size,
            timeout_s=spec.timeout_s,
            client=client,
        )

    def __repr__(self) -> str:
        return f"OpenAIEmbedder(url={shown_url(self.url)!r}, model={self.model!r})"

    async def aclose(self) -> None:
        """Close the HTTP client the embedder made (a client passed in stays open)."""
        if self._own_client is not None:
            await self._own_client.aclose()
            self._own_client = None

    def _http(self) -> httpx.AsyncClient:
        if self._client is not None:
            return self._client
        if self._own_client is None:
            self._own_client = httpx.AsyncClient()
        return self._own_client

    def headers(self) -> dict[str, str]:
        """The request headers, the key's included (never log them)."""
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if self._api_key is not None:
            headers["Authorization"] = f"Bearer {self._api_key.get_secret_value()}"
        return headers

    async def embed(self, texts: Sequence[str], *, purpose: Purpose) -> np.ndarray:
        """Unit float32 rows, shape (len(texts), dimension); see `Embedder.embed`."""
        items = check_texts(texts)
        prefix = self.query_prefix if check_purpose(purpose) == "query" else self.document_prefix
        np = require_numpy()
        if not items:
            return np.empty((0, self.dimension or 0), dtype=np.float32)
        rows = []
        for start in range(0, len(items), self.batch_size):
            batch = items[start : start + self.batch_size]
            body = embeddings_request(self.model, batch, prefix=prefix)
            answer = await self._post(body)
            rows.append(self._checked(parse_embeddings(answer, len(batch), where=self._where)))
        return np.concatenate(rows)

    def _checked(self, vectors: list[list[float]]) -> np.ndarray:
        sizes = {len(vector) for vector in vectors}
        if len(sizes) != 1:
            raise MalformedAnswer(f"{self._where} returned vectors of sizes {sorted(sizes)}")
        (size,) = sizes
        if self.dimension is None:
            self.dimension = size
        elif size != self.dimension:
            raise ConfigError(
                f"{self._where} returned {size}-dimensional vectors, not {self.dimension}; "
                "set dimension to the model's size (or leave it out), and run "
                "`animus memory reindex` when the model changed"
            )
        return normalized_rows(vectors, what=self._where)

    async def _post(self, body: dict[str, Any]) -> bytes:
        content = json.dumps(body).encode()
        ends_at = time.monotonic() + self.timeout_s
        secret = self._api_key.get_secret_value() if self._api_key is not None else ""
        retries = 0
        while True:
            remaining = ends_at - time.monotonic()
            if remaining <= 0:
                raise self._timeout()
            try:
                async with asyncio.timeout(remaining):
                    response = await self._http().post(
                        self.url, content=content, headers=self.headers(), timeout=remaining
                    )
            except (TimeoutError, httpx.TimeoutException):
                raise self._timeout() from None
            except httpx.TransportError as exc:
                error: AnimusError = StoreUnavailable(
                    f"cannot reach {self._where} ({type(exc).__name__}: "
                    f"{redact_head(_one_line(str(exc)), 120)})"
                )
                wait = None
            else:
                found = status_error(
                    response.status_code,
                    response.text,
                    where=self._where,
                    key_env=self._key_env,
                    secret=secret,
                )
                if found is None:
                    return response.content
                if not _retryable(response.status_code):
                    raise found
                error, wait = found, retry_after(response.headers)
            retries += 1
            delay = wait if wait is not None else self.backoff.delay(retries)
            if time.monotonic() + delay + min(0.25, self.timeout_s / 4) >= ends_at:
                raise type(error)(
                    f"{error}; gave up after {retries} attempt(s) within {self.timeout_s:g} s "
                    "(the server is unavailable or rate-limiting: retry later or raise timeout_s)"
                )
            log.debug("retrying %s in %.2f s: %s", self._where, delay, error)
            await asyncio.sleep(delay)

    def _timeout(self) -> StoreTimeout:
        return StoreTimeout(
            f"{self._where} did not answer within {self.timeout_s:g} s; it is slow or "
            "unreachable: retry later or raise timeout_s"
        )


def _key_from_env(name: str | None) -> SecretStr | None:
    if name is None:
        return None
    value = os.environ.get(name, "")
    if not value.strip():
        raise ConfigError(
            f"the environment variable {name} (api_key_env) is not set; export the API key "
            f"in it, or leave api_key_env out for a server that needs no key"
        )
    return SecretStr(value.strip())
