"""Which fusion of the lexical and the vector ranking serves retrieval best, measured.

`FusionRetriever(legs, method)` fuses two shared legs: the SQLite store without an embedder
(BM25 over stems, scores `bm25_score` in [0, 1)) and `DenseRetriever` (cosine, no floor), each
asked for its best `DEPTH` (as the store asks each leg for `FUSION_DEPTH`), then fused by:

    minmax   what the stores ship (`semantic.fuse`): each leg min-max scaled onto
             [MIN_SHARE, 1], then averaged (an item a leg did not return gets 0 there);
    max      each leg divided by its best score, then averaged;
    rrf      reciprocal rank fusion, k 60 (ranks only);
    rrf-lex  reciprocal rank fusion weighting the lexical leg 2:1.

The legs are indexed once and their answers kept, so the methods differ only in the fusion.
"""

from __future__ import annotations

from typing import Any

from quality.evaluate import Corpus, DenseRetriever, Ranked, SQLiteStoreRetriever

from animus_flows.stores.fusion import convex_fusion, reciprocal_rank_fusion
from animus_flows.stores.semantic import FUSION_DEPTH, fuse

DEPTH = FUSION_DEPTH
METHODS = ("minmax", "max", "rrf", "rrf-lex")


class Legs:
    """The two legs, indexed once, their rankings kept per question."""

    def __init__(self, embedder: Any) -> None:
        self.lexical = SQLiteStoreRetriever()
        self.dense = DenseRetriever(embedder)
        self.indexed = False
        self._answers: dict[tuple[str, str, int], tuple[list[Ranked], list[Ranked]]] = {}

    async def index(self, corpus: Corpus) -> None:
        if not self.indexed:
            await self.lexical.index(corpus)
            await self.dense.index(corpus)
            self.indexed = True

    async def rankings(self, scope: str, question: str) -> tuple[list[Ranked], list[Ranked]]:
        key = (scope, question, DEPTH)
        if key not in self._answers:
            self._answers[key] = (
                await self.lexical.search(scope, question, DEPTH),
                await self.dense.search(scope, question, DEPTH),
            )
        return self._answers[key]


class FusionRetriever:
    """The legs fused by one `method` of `METHODS`."""

    def __init__(self, legs: Legs, method: str) -> None:
        if method not in METHODS:
            raise ValueError(f"fusion method {method!r} is not one of {', '.join(METHODS)}")
        self.legs, self.method = legs, method
        self.name = f"fusion: {method} (lexical store + dense, {DEPTH} deep each)"

    async def index(self, corpus: Corpus) -> None:
        await self.legs.index(corpus)

    async def search(self, scope: str, question: str, limit: int) -> list[Ranked]:
        lexical, dense = await self.legs.rankings(scope, question)
        texts = {r.key: r.text for r in [*lexical, *dense]}
        legs = [[(r.key, r.score) for r in lexical], [(r.key, r.score) for r in dense]]
        if self.method == "minmax":
            fused = fuse(*legs)
        elif self.method == "max":
            fused = convex_fusion([_by_best(leg) for leg in legs], normalize="none")
        else:
            weights = [2.0, 1.0] if self.method == "rrf-lex" else None
            fused = reciprocal_rank_fusion(
                [[key for key, _ in leg] for leg in legs], weights=weights
            )
        return [Ranked(key, texts[key], score) for key, score in fused[:limit]]

    async def close(self) -> None:
        """The legs stay open for the other methods of the run."""


def _by_best(leg: list[tuple[str, float]]) -> dict[str, float]:
    best = max((score for _, score in leg), default=0.0)
    return {key: score / best if best > 0 else 0.0 for key, score in leg}
