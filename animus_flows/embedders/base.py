"""The `Embedder` protocol and what every embedder shares: input checks and row normalization.

An embedder turns texts into unit vectors, so the cosine of two texts is the dot product of
their rows. `purpose` tells queries from stored documents: asymmetric models (e5, nomic) embed
them with different prefixes.
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Literal, Protocol, runtime_checkable

from animus_flows.config.embedder import SEMANTIC_EXTRA
from animus_flows.errors import ConfigError, InvalidRequest, StoreUnavailable

if TYPE_CHECKING:
    import numpy as np

Purpose = Literal["query", "document"]
PURPOSES: tuple[Purpose, ...] = ("query", "document")


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into L2-normalized float32 vectors.

    Attributes:
        model: the model's name, recorded by a store next to its vectors: opening the store
            with another model is an error that says to reindex.
        dimension: the length of every vector; None while unknown (a remote model's is learned
            from its first answer, see `resolve_dimension`).
        similarity_floor: the cosine below which a query and a document are taken as
            unrelated, measured for the model (a store's vector leg returns nothing under it).
    """

    model: str
    dimension: int | None
    similarity_floor: float

    async def embed(self, texts: Sequence[str], *, purpose: Purpose) -> np.ndarray:
        """One row per text: float32, shape (len(texts), dimension), each of length 1.

        CPU-bound work runs off the event loop; texts are sent or computed in batches.
        """
        ...


async def resolve_dimension(embedder: Embedder) -> int:
    """`embedder.dimension`, embedding one short text first when it is not known yet."""
    if embedder.dimension is None:
        await embedder.embed(["dimension probe"], purpose="document")
    if embedder.dimension is None:  # an embedder that never learns its size
        raise StoreUnavailable(f"embedder {embedder.model!r} did not report its dimension")
    return embedder.dimension


def require_numpy() -> Any:
    """The numpy module, or a ConfigError saying which extra brings it."""
    try:
        return importlib.import_module("numpy")
    except ImportError:
        raise ConfigError(
            f"embedders need numpy; install the semantic extra: {SEMANTIC_EXTRA}"
        ) from None


def check_texts(texts: object) -> list[str]:
    """`texts` as a list of strings; InvalidRequest when it is one string or holds a non-string.

    A bare string is a sequence of characters: embedding each one is never what was meant.
    """
    if isinstance(texts, str | bytes) or not isinstance(texts, Sequence):
        raise InvalidRequest(
            f"texts must be a sequence of strings, not {type(texts).__name__}; "
            "wrap a single text in a list: embed([text], ...)"
        )
    for position, text in enumerate(texts):
        if not isinstance(text, str):
            raise InvalidRequest(
                f"texts[{position}] is a {type(text).__name__}, not a string; pass text only"
            )
    return list(texts)


def check_purpose(purpose: object) -> Purpose:
    if purpose not in PURPOSES:
        raise InvalidRequest(f"purpose {purpose!r} is neither 'query' nor 'document'")
    return purpose  # type: ignore[return-value]


def normalized_rows(matrix: Any, *, what: str) -> np.ndarray:
    """`matrix` as C-contiguous float32 rows of length 1.

    StoreUnavailable naming `what` when a row is not finite or is all zeros: such a vector has
    no direction, and a store would rank it at random.
    """
    np = require_numpy()
    rows = np.array(matrix, dtype=np.float32, order="C", copy=True, ndmin=2)
    if rows.size and not np.isfinite(rows).all():
        raise StoreUnavailable(f"{what} returned a vector with NaN or infinite values")
    norms = np.linalg.norm(rows, axis=1, keepdims=True)
    if rows.size and not (norms > 0).all():
        raise StoreUnavailable(f"{what} returned an all-zero vector, which has no direction")
    if rows.size:
        rows /= norms
    return rows
