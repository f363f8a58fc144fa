"""The vector index: each scope's unit vectors as one float32 matrix in memory, searched exactly.

Exact search (one matrix-vector product per query) was measured against sqlite-vec and HNSW
libraries by `benchmarks/bench_vectors.py`: at 100k vectors of 384 dimensions per scope it
answers a top-50 query in milliseconds with perfect recall, costs O(1) per write, and needs
nothing but numpy, on every CPython. A store keeps the vectors themselves in a BLOB column
(`vector_to_bytes`) and loads a scope's matrix on first use (`vectors_from_bytes`).

Scopes are dictionary keys: a search reads exactly one scope's matrix, so no scope id, however
it is spelled (`%`, `_`, quotes, non-ASCII), can reach another scope's rows.
"""

from __future__ import annotations

import threading
from collections.abc import Hashable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from animus_flows.config.embedder import SEMANTIC_EXTRA
from animus_flows.errors import InvalidRequest

try:
    import numpy as np
except ImportError as exc:  # pragma: no cover - the semantic extra brings numpy
    raise ImportError(f"the vector index needs numpy; {SEMANTIC_EXTRA}") from exc

#: Cosine below which a search returns nothing, for the default local model
#: (multilingual-e5-small): every one of the 30 hard paraphrases of bench_embedders.py
#: (no shared content word) scores 0.77 or more, while 59% of the 1,620 unrelated
#: question-memory pairs score under 0.76. Remote models bring their own floor
#: (`Embedder.similarity_floor`).
DEFAULT_MIN_SIMILARITY = 0.76
_MIN_CAPACITY = 64


#: Rows from which a scope's cosines are computed in two halves, one on a helper thread.
SPLIT_ROWS = 20_000
#: Its thread starts with the first split product (an executor starts threads on submit).
_helper = ThreadPoolExecutor(1, thread_name_prefix="animus-vectors")


def _dot(matrix: Any, vector: Any) -> Any:
    """`matrix @ vector`, by numpy's row-by-row dot.

    Not `@`: OpenBLAS splits a product over all its threads, which spin while they wait for
    each other and for work: on a busy machine for a core another process holds (2,000 rows
    beside two busy processes: p95 8 ms with `@`, 0.2 ms without; `bench_vectors.py
    --products`), and afterwards from the next query's embedding (in back-to-back hybrid
    hooks, 45 ms p50 instead of 26). A large scope's product is split in two instead, its
    second half on a helper thread that sleeps when idle: 100,000 rows in 6.1 ms rather than
    15.7 on two idle cores, 14 rather than 18 beside two busy processes (`--products`).
    """
    if len(matrix) < SPLIT_ROWS:
        return _rows_dot(matrix, vector)
    out = np.empty(len(matrix), dtype=np.result_type(matrix, vector))
    half = len(matrix) // 2
    other = _helper.submit(_rows_dot, matrix[half:], vector, out[half:])
    _rows_dot(matrix[:half], vector, out[:half])
    other.result()
    return out


def _rows_dot(matrix: Any, vector: Any, out: Any = None) -> Any:
    if _vecdot is not None:  # numpy releases the GIL in both
        return _vecdot(matrix, vector, out=out)
    return np.einsum("ij,j->i", matrix, vector, out=out)  # numpy < 2: the same, a little slower


_vecdot = getattr(np, "vecdot", None)


def vector_to_bytes(vector: Any) -> bytes:
    """`vector` (one dimension) as a BLOB: float32, little-endian, 4 bytes per component."""
    array = np.asarray(vector, dtype="<f4")
    if array.ndim != 1 or not array.size:
        raise InvalidRequest(
            f"a stored vector has one non-empty dimension, not shape {array.shape}"
        )
    return array.tobytes()


def vector_from_bytes(blob: bytes | bytearray | memoryview, dimension: int | None = None) -> Any:
    """The float32 vector a `vector_to_bytes` BLOB holds (a writable copy).

    InvalidRequest when its length is not a whole number of float32 values, or not
    `dimension` of them.
    """
    return vectors_from_bytes([blob], dimension)[0]


def vectors_from_bytes(
    blobs: Iterable[bytes | bytearray | memoryview], dimension: int | None = None
) -> Any:
    """The (n, dimension) float32 matrix of n BLOBs, decoded in one pass (loading a scope)."""
    parts = [bytes(blob) for blob in blobs]
    if dimension is None:
        dimension = len(parts[0]) // 4 if parts else 0
    for position, blob in enumerate(parts):
        if len(blob) != 4 * dimension or not blob:
            raise InvalidRequest(
                f"stored vector {position} has {len(blob)} bytes, not {4 * dimension} "
                f"({dimension} float32 values); the store's vectors are damaged or come from "
                "another model: run `animus memory reindex`"
            )
    matrix = np.frombuffer(b"".join(parts), dtype="<f4").reshape(len(parts), dimension)
    return matrix.astype(np.float32)  # native order, and a copy that owns its memory


class _Rows:
    """One scope: rows [0, size) of `matrix` are live; `ids[r]` owns row r."""

    __slots__ = ("ids", "lock", "matrix", "rows", "seq", "size")

    def __init__(self, dimension: int) -> None:
        self.matrix = np.empty((_MIN_CAPACITY, dimension), dtype=np.float32)
        self.seq = np.empty(_MIN_CAPACITY, dtype=np.int64)  # insertion order, for ties
        self.ids: list[Hashable] = []
        self.rows: dict[Hashable, int] = {}
        self.size = 0
        self.lock = threading.Lock()

    def reserve(self, needed: int) -> None:
        capacity = len(self.matrix)
        if needed <= capacity:
            return
        while capacity < needed:
            capacity *= 2  # doubling: appends cost O(1) amortized
        self._resize(capacity)

    def shrink(self) -> None:
        if len(self.matrix) > _MIN_CAPACITY and self.size < len(self.matrix) // 4:
            self._resize(max(_MIN_CAPACITY, 2 * self.size))

    def _resize(self, capacity: int) -> None:
        matrix = np.empty((capacity, self.matrix.shape[1]), dtype=np.float32)
        matrix[: self.size] = self.matrix[: self.size]
        seq = np.empty(capacity, dtype=np.int64)
        seq[: self.size] = self.seq[: self.size]
        self.matrix, self.seq = matrix, seq

    def remove(self, item_id: Hashable) -> bool:
        row = self.rows.pop(item_id, None)
        if row is None:
            return False
        last = self.size - 1
        if row != last:  # the last row fills the hole: removal is O(1), rows stay dense
            moved = self.ids[last]
            self.matrix[row] = self.matrix[last]
            self.seq[row] = self.seq[last]
            self.ids[row] = moved
            self.rows[moved] = row
        self.ids.pop()
        self.size = last
        return True


class VectorIndex:
    """Unit vectors per scope, searched exactly by cosine; safe to share between threads.

    Args:
        dimension: the length of every vector (the embedder's `dimension`).
        min_similarity: the default floor of `search`: rows whose cosine with the query is
            below it are never returned. `DEFAULT_MIN_SIMILARITY` is measured for the
            default local model; pass `embedder.similarity_floor`.

    Scope keys and item ids are any hashable values (a `Scope`, a tuple of its ids, a row
    id) compared by equality. Vectors are normalized as they are added, so a search's score
    is the cosine. Memory: 4 x dimension bytes per vector (1.5 KiB at 384), 154 MB for a
    100k-item scope, with up to twice that reserved while a scope grows.

    Example:
        ```python
        import numpy as np
        from animus_flows.protocol import Scope
        from animus_flows.stores.vectors import VectorIndex

        index = VectorIndex(3, min_similarity=0.5)   # pass embedder.similarity_floor
        scope = Scope("trade-desk", agent_id="analyst")
        index.add_many(scope, [1, 2], np.array([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]]))
        index.search(scope, np.array([0.9, 0.1, 0.0]), k=50)   # [(1, 0.9938...)]
        ```
    """

    def __init__(self, dimension: int, *, min_similarity: float = DEFAULT_MIN_SIMILARITY) -> None:
        if not isinstance(dimension, int) or dimension < 1:
            raise InvalidRequest(f"dimension {dimension!r} must be a positive integer")
        self.dimension = dimension
        self.min_similarity = _floor(min_similarity)
        self._scopes: dict[Hashable, _Rows] = {}
        # Held for every write and for finding a scope; a search then holds only its scope's
        # lock, so searches of different scopes run in parallel (numpy releases the GIL).
        self._lock = threading.Lock()
        self._next_seq = 0

    def __repr__(self) -> str:
        return f"VectorIndex(dimension={self.dimension}, scopes={len(self._scopes)})"

    # -- writing ----------------------------------------------------------------------------

    def add(self, scope_key: Hashable, item_id: Hashable, vector: Any) -> None:
        """Add `item_id`'s vector to the scope, or replace the one it has."""
        self.add_many(scope_key, [item_id], np.asarray(vector).reshape(1, -1))

    def add_many(self, scope_key: Hashable, item_ids: Sequence[Hashable], vectors: Any) -> None:
        """Add or replace several rows at once: `vectors` has one row per id (the last row of
        an id given twice wins)."""
        matrix = self._unit_rows(vectors, what="vectors")
        if len(matrix) != len(item_ids):
            raise InvalidRequest(f"{len(item_ids)} item ids for {len(matrix)} vectors")
        last = {item_id: position for position, item_id in enumerate(item_ids)}
        with self._lock:
            scope = self._scopes.get(scope_key)
            if scope is None:
                scope = self._scopes[scope_key] = _Rows(self.dimension)
            with scope.lock:
                scope.reserve(scope.size + sum(i not in scope.rows for i in last))
                targets, sources = [], []
                for item_id, position in last.items():
                    row = scope.rows.get(item_id)
                    if row is None:
                        row = scope.rows[item_id] = scope.size
                        scope.ids.append(item_id)
                        scope.seq[row] = self._next_seq
                        self._next_seq += 1
                        scope.size += 1
                    targets.append(row)
                    sources.append(position)
                first = targets[0] if targets else 0
                if targets == list(range(first, first + len(matrix))):
                    # new ids, none repeated (loading a scope): one copy, no fancy indexing
                    scope.matrix[first : first + len(matrix)] = matrix
                else:
                    scope.matrix[targets] = matrix[sources]

    def remove(self, scope_key: Hashable, item_id: Hashable) -> bool:
        """Remove one row; True if it was there."""
        return self.remove_many(scope_key, [item_id]) == 1

    def remove_many(self, scope_key: Hashable, item_ids: Iterable[Hashable]) -> int:
        """Remove rows; returns how many were there. A scope left empty is dropped."""
        with self._lock:
            scope = self._scopes.get(scope_key)
            if scope is None:
                return 0
            with scope.lock:
                removed = sum(scope.remove(item_id) for item_id in set(item_ids))
                scope.shrink()
                if not scope.size:
                    del self._scopes[scope_key]
            return removed

    def drop_scope(self, scope_key: Hashable) -> int:
        """Forget a scope's rows; returns how many it had."""
        with self._lock:
            scope = self._scopes.pop(scope_key, None)
            return 0 if scope is None else scope.size

    def clear(self) -> None:
        """Forget every scope (before a reindex)."""
        with self._lock:
            self._scopes.clear()

    # -- reading ----------------------------------------------------------------------------

    def search(
        self,
        scope_key: Hashable,
        query: Any,
        k: int,
        min_similarity: float | None = None,
    ) -> list[tuple[Hashable, float]]:
        """The `k` rows of the scope most similar to `query`, best first, as (id, cosine).

        Rows under `min_similarity` (default: the index's floor) are left out, so fewer than
        `k` may come back. Equal cosines keep the order in which the rows were first added.
        """
        if not isinstance(k, int) or isinstance(k, bool) or k < 1:
            raise InvalidRequest(f"k {k!r} must be a positive integer")
        floor = self.min_similarity if min_similarity is None else _floor(min_similarity)
        (unit,) = self._unit_rows(np.asarray(query).reshape(1, -1), what="query")
        # One dict lookup is atomic: no wait behind a write to another scope.
        scope = self._scopes.get(scope_key)
        if scope is None:
            return []
        with scope.lock:
            cosines = _dot(scope.matrix[: scope.size], unit)
            candidates = np.flatnonzero(cosines >= floor)
            if len(candidates) > k:
                # the k-th best cosine, and every row that reaches it (ties at the cut)
                kth = np.partition(cosines[candidates], len(candidates) - k)[len(candidates) - k]
                candidates = candidates[cosines[candidates] >= kth]
            order = np.lexsort((scope.seq[candidates], -cosines[candidates]))[:k]
            chosen = candidates[order]
            ids = [scope.ids[row] for row in chosen.tolist()]
            scores = np.clip(cosines[chosen], -1.0, 1.0).tolist()
        return list(zip(ids, scores, strict=True))

    def get(self, scope_key: Hashable, item_id: Hashable) -> Any | None:
        """A copy of the (normalized) vector of `item_id`, or None."""
        scope = self._scopes.get(scope_key)
        if scope is None:
            return None
        with scope.lock:
            row = scope.rows.get(item_id)
            return None if row is None else scope.matrix[row].copy()

    def count(self, scope_key: Hashable) -> int:
        """Rows in the scope."""
        with self._lock:
            scope = self._scopes.get(scope_key)
            return 0 if scope is None else scope.size

    def __contains__(self, scope_key: object) -> bool:
        with self._lock:
            return scope_key in self._scopes

    def scopes(self) -> list[Hashable]:
        """The scope keys that hold rows."""
        with self._lock:
            return list(self._scopes)

    def __len__(self) -> int:
        with self._lock:
            return sum(scope.size for scope in self._scopes.values())

    @property
    def nbytes(self) -> int:
        """Bytes reserved for vectors, over all scopes."""
        with self._lock:
            return sum(s.matrix.nbytes + s.seq.nbytes for s in self._scopes.values())

    def _unit_rows(self, vectors: Any, *, what: str) -> Any:
        try:
            matrix = np.array(vectors, dtype=np.float32, ndmin=2)
        except (TypeError, ValueError):
            raise InvalidRequest(f"{what} are not numbers") from None
        if matrix.ndim != 2 or matrix.shape[1] != self.dimension:
            raise InvalidRequest(
                f"{what} have shape {matrix.shape}; this index holds {self.dimension}-dimensional "
                "vectors (another embedding model? run `animus memory reindex`)"
            )
        if not np.isfinite(matrix).all():
            raise InvalidRequest(f"{what} hold NaN or infinite values")
        norms = np.linalg.norm(matrix, axis=1, keepdims=True)
        if not (norms > 0).all():
            raise InvalidRequest(f"{what} hold an all-zero vector, which has no direction")
        return matrix / norms


def _floor(value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not -1 <= value <= 1:
        raise InvalidRequest(f"min_similarity {value!r} must be a number in [-1, 1]")
    return float(value)
