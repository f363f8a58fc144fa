"""The retrievers `evaluate` runs: anything with a `name` and the three coroutines of
`Retriever`. `BM25Retriever` is the yardstick; `SQLiteStoreRetriever`,
`PostgresStoreRetriever` and `DenseRetriever` measure the stores and the local model.
"""

from __future__ import annotations

import math
import tempfile
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from quality.corpus import Corpus, CorpusScope, Memory, content_stems

from animus_flows.protocol import JSON


@dataclass(frozen=True)
class Ranked:
    """One result of a retriever: the item's key and text, best first in a list."""

    key: str
    text: str
    score: float = 0.0


# -- retrievers ------------------------------------------------------------------------------


class Retriever(Protocol):
    """What `evaluate` runs: index the corpus once, then rank one scope's items per question."""

    name: str

    async def index(self, corpus: Corpus) -> None: ...

    async def search(self, scope: str, question: str, limit: int) -> list[Ranked]: ...

    async def close(self) -> None: ...


class BM25Index:
    """Okapi BM25 over one scope's memories, in pure Python.

    Words are case-folded, stop words (`STOP_WORDS`) dropped, the rest stemmed with Snowball's
    English stemmer; document frequencies and the average length are the scope's own. IDF is
    `ln(1 + (N - n + 0.5) / (n + 0.5))`, positive for every word.
    """

    def __init__(self, memories: Sequence[Memory], k1: float = 1.2, b: float = 0.75) -> None:
        self.memories = list(memories)
        self.k1, self.b = k1, b
        self.terms = [Counter(content_stems(memory.text)) for memory in self.memories]
        self.lengths = [sum(terms.values()) for terms in self.terms]
        self.average = sum(self.lengths) / len(self.lengths) if self.lengths else 0.0
        frequency: Counter[str] = Counter()
        for terms in self.terms:
            frequency.update(terms.keys())
        size = len(self.memories)
        self.idf = {t: math.log(1 + (size - n + 0.5) / (n + 0.5)) for t, n in frequency.items()}

    def scores(self, text: str) -> list[float]:
        """Each memory's BM25 score for `text`, in the memories' order."""
        query = [t for t in dict.fromkeys(content_stems(text)) if t in self.idf]
        scores = []
        for terms, length in zip(self.terms, self.lengths, strict=True):
            norm = self.k1 * (1 - self.b + self.b * length / (self.average or 1))
            scores.append(
                sum(
                    self.idf[t] * terms[t] * (self.k1 + 1) / (terms[t] + norm)
                    for t in query
                    if t in terms
                )
            )
        return scores

    def search(self, text: str, limit: int) -> list[Ranked]:
        """The memories that share a content stem with `text`, best first (ties: corpus order),
        the first `limit`."""
        scored = [(s, i) for i, s in enumerate(self.scores(text)) if s > 0]
        scored.sort(key=lambda pair: (-pair[0], pair[1]))
        return [
            Ranked(self.memories[i].key, self.memories[i].text, score)
            for score, i in scored[:limit]
        ]


class BM25Retriever:
    """The reference lexical ranking: `BM25Index` per scope (k1 1.2, b 0.75)."""

    name = "reference BM25 (stop words, Snowball, per scope)"

    def __init__(self, k1: float = 1.2, b: float = 0.75) -> None:
        self.k1, self.b = k1, b
        self.indexes: dict[str, BM25Index] = {}

    async def index(self, corpus: Corpus) -> None:
        self.indexes = {s.id: BM25Index(s.memories, self.k1, self.b) for s in corpus.scopes}

    async def search(self, scope: str, question: str, limit: int) -> list[Ranked]:
        return self.indexes[scope].search(question, limit)

    async def close(self) -> None:
        self.indexes = {}


class SQLiteStoreRetriever:
    """The SQLite store as it is: the corpus written with `put_many` into a store file in a
    temporary folder, each corpus scope as `Scope("quality", agent_id=<scope id>)`, each
    memory's value `{"content": text}` with its `session_date` (and other fields) as metadata;
    questions asked with `store.query(scope, question, top_k=limit)`.

    `file_per_scope=True` gives every scope a store file of its own: a diagnostic, since the
    ranking's statistics then cover that scope alone, as DESIGN.md section 11 asks of them.
    """

    project_id = "quality"

    def __init__(self, *, file_per_scope: bool = False, embedder: Any = None) -> None:
        self.file_per_scope = file_per_scope
        self.embedder = embedder
        self.name = (
            "SQLiteStore, one file per scope"
            if file_per_scope
            else "SQLiteStore, lexical"
            if embedder is None
            else f"SQLiteStore, hybrid ({embedder.model})"
        )
        self._folder: tempfile.TemporaryDirectory[str] | None = None
        self.stores: dict[str, Any] = {}

    @property
    def store(self) -> Any:
        """The one store (or the first one, with `file_per_scope`); None before `index`."""
        return next(iter(self.stores.values()), None)

    def scope_of(self, scope_id: str) -> Any:
        from animus_flows.protocol import Scope

        return Scope(self.project_id, agent_id=scope_id)

    def entries(self, scope: CorpusScope) -> list[tuple[Any, str, JSON, dict[str, JSON]]]:
        """The `put_many` entries of a corpus scope: each memory's text as `content`, its
        extra fields and session date as metadata."""
        entries = []
        for memory in scope.memories:
            metadata = dict(memory.extra)
            if memory.session_date is not None:
                metadata["session_date"] = memory.session_date
            content = {"content": memory.text}
            entries.append((self.scope_of(scope.id), memory.key, content, metadata))
        return entries

    async def index(self, corpus: Corpus) -> None:
        from animus_flows.stores import SQLiteStore

        await self.close()
        self._folder = tempfile.TemporaryDirectory(prefix="animus-quality-")
        files: dict[str, Any] = {}
        for scope in corpus.scopes:
            name = scope.id if self.file_per_scope else "quality"
            if name not in files:
                files[name] = SQLiteStore(
                    Path(self._folder.name) / f"{name}.db", embedder=self.embedder
                )
            self.stores[scope.id] = files[name]
            await files[name].put_many(self.entries(scope))
        for store in files.values():
            await store.optimize()

    async def search(self, scope: str, question: str, limit: int) -> list[Ranked]:
        from animus_flows.protocol import indexed_text

        hits = await self.stores[scope].query(self.scope_of(scope), question, top_k=limit)
        return [Ranked(hit.key, indexed_text(hit.value), hit.score) for hit in hits]

    async def close(self) -> None:
        for store in {id(store): store for store in self.stores.values()}.values():
            await store.aclose()
        self.stores = {}
        if self._folder is not None:
            self._folder.cleanup()
            self._folder = None


class PostgresStoreRetriever(SQLiteStoreRetriever):
    """The PostgreSQL store as it is, on a throwaway cluster (`animus_flows.testing.postgres`),
    one schema for the whole corpus, scopes and values as `SQLiteStoreRetriever` writes them."""

    def __init__(self, *, embedder: Any = None) -> None:
        super().__init__(embedder=embedder)
        self.name = "PostgresStore, lexical" if embedder is None else "PostgresStore, hybrid"
        self._cluster: Any = None

    async def index(self, corpus: Corpus) -> None:
        from animus_flows.stores.postgres import PostgresStore
        from animus_flows.testing.postgres import TemporaryCluster

        await self.close()
        self._cluster = TemporaryCluster().__enter__()
        store = PostgresStore(self._cluster.create_database("quality"), embedder=self.embedder)
        for scope in corpus.scopes:
            self.stores[scope.id] = store
            await store.put_many(self.entries(scope))

    async def close(self) -> None:
        await super().close()
        if self._cluster is not None:
            self._cluster.__exit__(None, None, None)
            self._cluster = None


class DenseRetriever:
    """The vector leg alone: every memory embedded (as the store embeds it), each scope's
    vectors searched by cosine, no floor: dense retrieval as a reference for the hybrid."""

    def __init__(self, embedder: Any) -> None:
        self.embedder = embedder
        self.name = f"dense only ({embedder.model})"
        self._index: Any = None
        self._keys: dict[int, tuple[str, str]] = {}

    async def index(self, corpus: Corpus) -> None:
        from animus_flows.stores.vectors import VectorIndex

        self._index = VectorIndex(self.embedder.dimension, min_similarity=-1.0)
        for scope in corpus.scopes:
            rows = await self.embedder.embed([m.text for m in scope.memories], purpose="document")
            ids = [len(self._keys) + n for n in range(len(scope.memories))]
            self._keys.update(
                (i, (m.key, m.text)) for i, m in zip(ids, scope.memories, strict=True)
            )
            self._index.add_many(scope.id, ids, rows)

    async def search(self, scope: str, question: str, limit: int) -> list[Ranked]:
        (vector,) = await self.embedder.embed([question], purpose="query")
        found = self._index.search(scope, vector, limit)
        return [Ranked(*self._keys[item_id], cosine) for item_id, cosine in found]

    async def close(self) -> None:
        self._index, self._keys = None, {}
