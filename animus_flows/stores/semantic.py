"""The semantic leg a store carries with an embedder: vectors per scope, and the fusion of
its ranking with the lexical one. One implementation for the SQLite and PostgreSQL stores.

A store keeps each item's vector in its own tables and tells this leg which scopes changed;
the leg keeps a scope's vectors in memory (`VectorIndex`, exact cosine search) from its first
query until the store reports another version of that scope, embeds queries once per text (the
bindings of a phase ask the same prompt), and fuses the two rankings (`fuse`: each scaled by its
own best and worst, then averaged), scores in [0, 1]. Below the embedder's similarity floor a
vector match counts for nothing: an item unrelated to the query is never returned on the
strength of the vector alone.
"""

from __future__ import annotations

import asyncio
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import Any

from animus_flows.embedders.base import Embedder, resolve_dimension
from animus_flows.errors import ConfigError
from animus_flows.stores.fusion import convex_fusion

#: Candidates each leg contributes to a fused ranking, at least: fusion needs more than the
#: few a query keeps, or an item second on one leg and absent from the other's short list
#: would miss its credit.
FUSION_DEPTH = 50
#: The least a leg's worst candidate counts for in a fused score (see `fuse`).
MIN_SHARE = 0.01
#: Query vectors kept for the process: the prompts of recent phases.
QUERY_CACHE = 256

# One cache for every store of the process, by model and text: the bindings of a phase (each
# its own store, often) ask the same prompt, which is embedded once. Embeddings under way are
# shared the same way, per event loop.
_queries: OrderedDict[tuple[str, str], Any] = OrderedDict()
_pending: dict[tuple[int, str, str], asyncio.Task[Any]] = {}
_queries_lock = threading.Lock()

#: A scope's vectors as a store reads them: item ids and their float32 BLOBs.
Loader = Callable[[], tuple[list[int], list[bytes]]]


def _retrieve(task: asyncio.Task[Any]) -> None:
    # An embedding whose askers all gave up: its error is nobody's, and not worth a warning.
    if not task.cancelled():
        task.exception()


def model_mismatch(where: str, recorded: str, wanted: str) -> ConfigError:
    """The error for a store whose vectors another model made."""
    return ConfigError(
        f"{where} holds vectors of the embedding model {recorded}, not {wanted}; run "
        "`animus memory reindex` to embed its items with the new model, or configure the "
        "model it was indexed with"
    )


def model_label(embedder: Embedder, dimension: int) -> str:
    """What a store records about the model: name and dimension (`name/384`)."""
    return f"{embedder.model}/{dimension}"


class SemanticLeg:
    """An embedder with its vector index and query cache, for one store (see the module)."""

    def __init__(self, embedder: Embedder) -> None:
        self.embedder = embedder
        self.dimension: int | None = embedder.dimension
        self._index: Any = None  # VectorIndex, made once the dimension is known
        self._versions: dict[Hashable, int] = {}
        self._loading = threading.Lock()
        self._lock = threading.Lock()

    async def label(self) -> str:
        """`model/dimension` of this leg's embedder (asking a remote model once if needed)."""
        self.dimension = await resolve_dimension(self.embedder)
        return model_label(self.embedder, self.dimension)

    @property
    def floor(self) -> float:
        return self.embedder.similarity_floor

    def _vectors(self) -> Any:
        if self._index is None:
            from animus_flows.stores.vectors import VectorIndex

            assert self.dimension is not None
            self._index = VectorIndex(self.dimension, min_similarity=self.floor)
        return self._index

    # -- documents ------------------------------------------------------------------------

    async def embed_documents(self, texts: Sequence[str]) -> list[bytes]:
        """The vectors of `texts` as BLOBs to store (float32, little-endian)."""
        from animus_flows.stores.vectors import vector_to_bytes

        if not texts:
            return []
        rows = await self.embedder.embed(list(texts), purpose="document")
        self.dimension = rows.shape[1]
        return [vector_to_bytes(row) for row in rows]

    def changed_scopes(
        self,
        versions: Mapping[Hashable, tuple[int, int]],
        written: Mapping[Hashable, Sequence[tuple[int, bytes]]],
        removed: Mapping[Hashable, Sequence[int]],
    ) -> None:
        """`changed` for every scope a committed transaction changed: `versions` holds each
        scope's (before, after), `written` and `removed` its vectors written and removed."""
        for scope_key, (before, after) in versions.items():
            self.changed(
                scope_key, before, after, written.get(scope_key, []), removed.get(scope_key, [])
            )

    def changed(
        self,
        scope_key: Hashable,
        before: int,
        version: int,
        written: Sequence[tuple[int, bytes]],
        removed: Sequence[int],
    ) -> None:
        """This process changed a scope's vectors from version `before` to `version`: the
        kept copy follows without reading the scope again when it was at `before`, and is
        dropped otherwise (another process wrote in between)."""
        from animus_flows.stores.vectors import vectors_from_bytes

        with self._lock:
            current = self._versions.pop(scope_key, None) == before
        if self._index is None:
            return
        if not current:
            self._index.drop_scope(scope_key)
            return
        self._index.remove_many(scope_key, removed)
        if written:
            ids = [item_id for item_id, _ in written]
            self._index.add_many(scope_key, ids, vectors_from_bytes([b for _, b in written]))
        with self._lock:
            self._versions[scope_key] = version

    def forget(self, scope_key: Hashable | None = None) -> None:
        """Drop the kept vectors of a scope (None: of every scope), e.g. after a reindex."""
        with self._lock:
            if scope_key is None:
                self._versions.clear()
                if self._index is not None:
                    self._index.clear()
            else:
                self._versions.pop(scope_key, None)
                if self._index is not None:
                    self._index.drop_scope(scope_key)

    # -- queries --------------------------------------------------------------------------

    async def query_vector(self, text: str) -> Any:
        """The query's vector, embedded once per model and text however many stores ask.

        The embedding runs in a task of its own that every asker awaits shielded: one that
        gives up (its binding's deadline) leaves it running for the others and the cache.
        """
        key = (self.embedder.model, text)
        loop = asyncio.get_running_loop()
        with _queries_lock:
            cached = _queries.get(key)
            if cached is not None:
                _queries.move_to_end(key)
                return cached
            pending = _pending.get((id(loop), *key))
            if pending is None:
                pending = loop.create_task(self._embed_query(key, text))
                pending.add_done_callback(_retrieve)
                _pending[id(loop), *key] = pending
        return await asyncio.shield(pending)

    async def _embed_query(self, key: tuple[str, str], text: str) -> Any:
        try:
            (vector,) = await self.embedder.embed([text], purpose="query")
        finally:
            with _queries_lock:
                _pending.pop((id(asyncio.get_running_loop()), *key), None)
        with _queries_lock:
            _queries[key] = vector
            if len(_queries) > QUERY_CACHE:
                _queries.popitem(last=False)
        return vector

    def current(self, scope_key: Hashable, version: int) -> bool:
        """Whether the kept vectors of a scope are at `version`: a search needs no load then
        (a store whose reads are async loads first, when this is False)."""
        with self._lock:
            return self._versions.get(scope_key) == version

    def search(
        self, scope_key: Hashable, version: int, load: Loader, vector: Any, k: int
    ) -> list[tuple[int, float]]:
        """The scope's `k` items nearest `vector` above the floor, as (item id, cosine); the
        scope's vectors are (re)read with `load` when `version` is not the one kept. Runs on
        the caller's thread, as the store's read does."""
        with self._loading:  # one thread reads a scope's vectors; the others wait for them
            if self._versions.get(scope_key) != version:
                ids, blobs = load()
                self._replace(scope_key, version, ids, blobs)
        if self._index is None:
            return []
        return self._index.search(scope_key, vector, k)  # type: ignore[no-any-return]

    def _replace(
        self, scope_key: Hashable, version: int, ids: list[int], blobs: list[bytes]
    ) -> None:
        from animus_flows.stores.vectors import vectors_from_bytes

        index = self._vectors()
        index.drop_scope(scope_key)
        if ids:
            index.add_many(scope_key, ids, vectors_from_bytes(blobs, self.dimension))
        with self._lock:
            self._versions[scope_key] = version


def fuse(
    lexical: Sequence[tuple[int, float]], vector: Sequence[tuple[int, float]]
) -> list[tuple[int, float]]:
    """The mean of each item's lexical and vector score, each leg's scores scaled onto
    [MIN_SHARE, 1] by its own best and worst (min-max; an item absent from a leg gets 0
    there): (item id, score in (0, 1]) best first. Measured on benchmarks/quality against
    reciprocal rank fusion (weighted or not) and against scaling by the best alone: min-max
    ranked best at 10 and within 500 tokens, and as well within 2,000."""
    return convex_fusion(  # type: ignore[return-value]
        [_scaled(lexical), _scaled(vector)], normalize="none"
    )


def _scaled(leg: Sequence[tuple[int, float]]) -> dict[int, float]:
    """A leg's scores onto [MIN_SHARE, 1]: every item a leg returned keeps a share of its
    weight, so a fused score is never 0 (a store's 0 means no match at all)."""
    if not leg:
        return {}
    low, high = min(s for _, s in leg), max(s for _, s in leg)
    span = high - low
    return {
        item_id: 1.0 if span == 0 else MIN_SHARE + (1 - MIN_SHARE) * (score - low) / span
        for item_id, score in leg
    }
