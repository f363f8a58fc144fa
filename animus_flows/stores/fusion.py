"""Fusing the lexical and the vector ranking of a query into one list, scores in [0, 1].

Pure functions of the legs' results, no I/O:

- `reciprocal_rank_fusion`: each leg contributes 1 / (k + rank); ranks only, so legs whose
  scores live on different scales (BM25, cosine) combine without calibration. Normalized so
  that an item ranked first by every leg scores 1.
- `convex_fusion`: a weighted mean of the legs' scores after putting each on [0, 1], by
  min-max (`"minmax"`), by rank (`"rank"`), or as given (`"none"`, for scores already
  calibrated to [0, 1], such as `bm25_score` and `cosine_score`).

Both return (id, score) best first. Equal scores are ordered by first appearance, scanning
the legs in the order given, each best first: the same input always gives the same output.
Which one serves retrieval best is measured on a labelled corpus, not assumed here.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Hashable, Mapping, Sequence
from typing import Literal

from animus_flows.errors import InvalidRequest

#: The constant of Cormack, Clarke and Buettcher (2009): large enough that the first few
#: ranks of one leg do not drown the others.
RRF_K = 60

Normalization = Literal["minmax", "rank", "none"]
Fused = list[tuple[Hashable, float]]


def ranking(scores: Mapping[Hashable, float]) -> list[Hashable]:
    """The ids of `scores`, best first; equal scores keep the mapping's order."""
    _check_scores(scores, "scores")
    order = {item: position for position, item in enumerate(scores)}
    return sorted(scores, key=lambda item: (-scores[item], order[item]))


def reciprocal_rank_fusion(
    rankings: Sequence[Sequence[Hashable]],
    *,
    k: int = RRF_K,
    weights: Sequence[float] | None = None,
) -> Fused:
    """Reciprocal rank fusion of rankings (each a sequence of ids, best first).

    An id at rank r (1-based) of leg i adds `weights[i] / (k + r)`; the sum is divided by
    the most any id can get (rank 1 in every leg), so scores fall in (0, 1]. An id repeated
    within a leg counts once, at its best rank (the ids after it move up).

    Example:
        ```python
        from animus_flows.stores.fusion import reciprocal_rank_fusion

        reciprocal_rank_fusion([["a", "b"], ["b", "c"]])
        # [('b', 0.9919...), ('a', 0.5), ('c', 0.4919...)]
        ```
    """
    if isinstance(k, bool) or not isinstance(k, int) or k < 0:
        raise InvalidRequest(f"k {k!r} must be a non-negative integer (60 is the usual)")
    weights = _weights(weights, len(rankings))
    best = sum(w / (k + 1) for w in weights)
    totals: dict[Hashable, float] = {}
    for leg, weight in zip(rankings, weights, strict=True):
        if isinstance(leg, str | bytes | Mapping):
            raise InvalidRequest(
                f"a ranking is a sequence of ids, not a {type(leg).__name__}; pass "
                "ranking(scores) for a mapping of scores"
            )
        # an id repeated within a leg counts once, at its best rank, and takes no rank twice
        for rank, item in enumerate(dict.fromkeys(leg), start=1):
            totals[item] = totals.get(item, 0.0) + weight / (k + rank)
    return _ordered({item: total / best for item, total in totals.items()} if best else {})


def convex_fusion(
    legs: Sequence[Mapping[Hashable, float]],
    weights: Sequence[float] | None = None,
    *,
    normalize: Normalization = "minmax",
) -> Fused:
    """The weighted mean of each id's normalized scores over the legs (0 where it is absent).

    Args:
        legs: one mapping of id -> score per leg (e.g. lexical, vector); higher is better.
        weights: one non-negative weight per leg, not all 0; default equal. Only their
            ratios matter (`[0.3, 0.7]` gives the vector leg 70%).
        normalize: how each leg's scores are put on [0, 1] first:
            `"minmax"`: (s - min) / (max - min); a leg whose scores are all equal gives 1.
            `"rank"`: 1 - (r - 1) / n for rank r of n (ties share the better rank).
            `"none"`: as given, which must already be in [0, 1].

    Example:
        ```python
        from animus_flows.stores.fusion import convex_fusion, cosine_score

        lexical = {"a": 0.63, "b": 0.20}
        vector = {"b": cosine_score(0.91, floor=0.76), "c": cosine_score(0.80, floor=0.76)}
        convex_fusion([lexical, vector], [0.5, 0.5], normalize="none")
        ```
    """
    if normalize not in ("minmax", "rank", "none"):
        raise InvalidRequest(f"normalize {normalize!r} is not one of 'minmax', 'rank', 'none'")
    weights = _weights(weights, len(legs))
    total_weight = sum(weights)
    fused: dict[Hashable, float] = {}
    for position, (leg, weight) in enumerate(zip(legs, weights, strict=True)):
        _check_scores(leg, f"legs[{position}]")
        for item, score in _normalized(leg, normalize, position).items():
            fused[item] = fused.get(item, 0.0) + weight * score
    return _ordered({item: value / total_weight for item, value in fused.items()})


def cosine_score(cosine: float, floor: float) -> float:
    """A cosine on [0, 1]: 0 at or below the model's similarity floor, 1 for the same text.

    e5 models score unrelated texts 0.7 and more: the raw cosine would overrate them next to
    a lexical score, so the vector leg's scale starts at the floor.
    """
    if not -1 <= floor < 1:
        raise InvalidRequest(f"floor {floor!r} must be in [-1, 1)")
    if not math.isfinite(cosine):
        raise InvalidRequest(f"cosine {cosine!r} is not a finite number")
    return min(1.0, max(0.0, (cosine - floor) / (1 - floor)))


# -- helpers --------------------------------------------------------------------------------


def _normalized(
    leg: Mapping[Hashable, float], normalize: Normalization, position: int
) -> dict[Hashable, float]:
    if not leg:
        return {}
    if normalize == "none":
        outside = [s for s in leg.values() if not 0 <= s <= 1]
        if outside:
            raise InvalidRequest(
                f"legs[{position}] has the score {outside[0]!r} outside [0, 1]; normalize it "
                "(normalize='minmax' or 'rank', or cosine_score for cosines)"
            )
        return dict(leg)
    if normalize == "minmax":
        low, high = min(leg.values()), max(leg.values())
        if high == low:
            return dict.fromkeys(leg, 1.0)
        return {item: (score - low) / (high - low) for item, score in leg.items()}
    ordered = ranking(leg)
    result: dict[Hashable, float] = {}
    rank, previous = 0, None
    for index, item in enumerate(ordered):
        if leg[item] != previous:  # competition ranking: ties share the better rank
            rank, previous = index, leg[item]
        result[item] = 1 - rank / len(ordered)
    return result


def _ordered(scores: dict[Hashable, float]) -> Fused:
    # dicts keep first-insertion order, which is first appearance over the legs in order;
    # a stable sort on the score alone keeps it among equals
    clamped = [(item, min(1.0, max(0.0, score))) for item, score in scores.items()]
    return sorted(clamped, key=lambda pair: -pair[1])


def _weights(weights: Sequence[float] | None, legs: int) -> list[float]:
    if weights is None:
        return [1.0] * legs
    values = list(weights)
    if len(values) != legs:
        raise InvalidRequest(f"{len(values)} weights for {legs} legs; give one per leg")
    for value in values:
        if isinstance(value, bool) or not isinstance(value, numbers.Real):
            raise InvalidRequest(f"weight {value!r} is not a number")
        if not math.isfinite(value) or value < 0:
            raise InvalidRequest(f"weight {value!r} must be a finite number >= 0")
    if legs and not sum(values) > 0:
        raise InvalidRequest("the weights are all 0; give at least one leg a positive weight")
    return [float(v) for v in values]


def _check_scores(scores: Mapping[Hashable, float], name: str) -> None:
    if not isinstance(scores, Mapping):
        raise InvalidRequest(f"{name} must map ids to scores, not a {type(scores).__name__}")
    for item, score in scores.items():
        if (
            isinstance(score, bool)
            or not isinstance(score, numbers.Real)
            or not math.isfinite(score)
        ):
            raise InvalidRequest(f"{name}[{item!r}] = {score!r} is not a finite number")
