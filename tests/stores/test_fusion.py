"""Fusion of the lexical and vector legs: reciprocal rank fusion and convex combinations."""

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from animus_flows.errors import InvalidRequest
from animus_flows.stores.fusion import (
    RRF_K,
    convex_fusion,
    cosine_score,
    ranking,
    reciprocal_rank_fusion,
)

ids = st.sampled_from(list("abcdefghij"))
scores = st.floats(-5, 5, allow_nan=False)
legs = st.lists(st.dictionaries(ids, scores, max_size=10), min_size=1, max_size=3)


# -- reciprocal rank fusion -----------------------------------------------------------------


def test_rrf_matches_the_formula():
    fused = dict(reciprocal_rank_fusion([["a", "b"], ["b", "c"]]))
    best = 2 / (RRF_K + 1)
    assert fused["b"] == pytest.approx((1 / 62 + 1 / 61) / best)
    assert fused["a"] == pytest.approx((1 / 61) / best) == pytest.approx(0.5)
    assert fused["c"] == pytest.approx((1 / 62) / best)
    assert list(fused) == ["b", "a", "c"]


def test_rrf_first_everywhere_scores_one():
    assert reciprocal_rank_fusion([["x", "y"], ["x"], ["x", "z"]])[0] == ("x", 1.0)


def test_rrf_weights_tilt_toward_a_leg():
    lexical, vector = ["a", "b"], ["b", "a"]
    assert reciprocal_rank_fusion([lexical, vector], weights=[1, 3])[0][0] == "b"
    assert reciprocal_rank_fusion([lexical, vector], weights=[3, 1])[0][0] == "a"
    # a leg of weight 0 changes nothing
    assert [i for i, _ in reciprocal_rank_fusion([lexical, vector], weights=[1, 0])] == ["a", "b"]


def test_rrf_ties_follow_first_appearance():
    # a and c each come first in one leg: equal scores, a appears first
    assert [i for i, _ in reciprocal_rank_fusion([["a", "b"], ["c", "d"]])] == ["a", "c", "b", "d"]


def test_rrf_counts_an_id_repeated_within_a_leg_once():
    assert dict(reciprocal_rank_fusion([["a", "a", "b"]])) == pytest.approx(
        {"a": 1.0, "b": 61 / 62}
    )


def test_rrf_with_nothing_is_empty():
    assert reciprocal_rank_fusion([]) == []
    assert reciprocal_rank_fusion([[], []]) == []


def test_rrf_refuses_a_mapping_or_a_string_as_a_ranking():
    with pytest.raises(InvalidRequest, match="pass ranking"):
        reciprocal_rank_fusion([{"a": 1.0}])
    with pytest.raises(InvalidRequest, match="not a str"):
        reciprocal_rank_fusion(["abc"])
    with pytest.raises(InvalidRequest, match="non-negative integer"):
        reciprocal_rank_fusion([["a"]], k=-1)
    with pytest.raises(InvalidRequest, match="2 weights for 1 legs"):
        reciprocal_rank_fusion([["a"]], weights=[1, 1])
    with pytest.raises(InvalidRequest, match="all 0"):
        reciprocal_rank_fusion([["a"]], weights=[0])


@given(st.lists(st.lists(ids, max_size=10), max_size=3))
def test_rrf_scores_are_in_0_1_sorted_and_deterministic(rankings):
    fused = reciprocal_rank_fusion(rankings)
    assert fused == reciprocal_rank_fusion(rankings)
    assert all(0 < score <= 1 for _, score in fused)
    assert [s for _, s in fused] == sorted((s for _, s in fused), reverse=True)
    assert {i for i, _ in fused} == {i for leg in rankings for i in leg}


# -- convex combinations --------------------------------------------------------------------


def test_minmax_puts_each_leg_on_0_1_before_weighting():
    lexical = {"a": 10.0, "b": 5.0, "c": 0.0}
    vector = {"c": 0.9, "d": 0.7}
    fused = dict(convex_fusion([lexical, vector], [0.5, 0.5]))
    assert fused == pytest.approx({"a": 0.5, "b": 0.25, "c": 0.5, "d": 0.0})
    assert list(fused)[:2] == ["a", "c"]  # tie: a appears first


def test_minmax_of_a_leg_whose_scores_are_equal_is_one():
    assert convex_fusion([{"a": 0.3, "b": 0.3}]) == [("a", 1.0), ("b", 1.0)]


def test_rank_normalization_shares_ties_and_ignores_the_scale():
    fused = dict(convex_fusion([{"a": 100.0, "b": 100.0, "c": 1.0, "d": -3.0}], normalize="rank"))
    assert fused == {"a": 1.0, "b": 1.0, "c": 0.5, "d": 0.25}


def test_none_takes_calibrated_scores_as_they_are():
    lexical = {"a": 0.63, "b": 0.2}
    vector = {"b": cosine_score(0.88, floor=0.76), "c": cosine_score(0.80, floor=0.76)}
    fused = dict(convex_fusion([lexical, vector], [0.3, 0.7], normalize="none"))
    assert fused["a"] == pytest.approx(0.3 * 0.63)
    assert fused["b"] == pytest.approx(0.3 * 0.2 + 0.7 * 0.5)
    assert fused["c"] == pytest.approx(0.7 * (0.04 / 0.24))
    with pytest.raises(InvalidRequest, match=r"score 1.5 outside \[0, 1\]"):
        convex_fusion([{"a": 1.5}], normalize="none")


def test_weights_only_matter_by_their_ratio():
    legs_ = [{"a": 1.0, "b": 0.0}, {"b": 1.0, "a": 0.5}]
    one, other = convex_fusion(legs_, [1, 3]), convex_fusion(legs_, [0.25, 0.75])
    assert [i for i, _ in one] == [i for i, _ in other] == ["b", "a"]
    assert [s for _, s in one] == pytest.approx([s for _, s in other])


def test_convex_refuses_bad_input():
    with pytest.raises(InvalidRequest, match="is not a finite number"):
        convex_fusion([{"a": math.nan}])
    with pytest.raises(InvalidRequest, match="must map ids to scores"):
        convex_fusion([["a"]])
    with pytest.raises(InvalidRequest, match="normalize 'z'"):
        convex_fusion([{"a": 1}], normalize="z")
    with pytest.raises(InvalidRequest, match=">= 0"):
        convex_fusion([{"a": 1}], [-1])


@pytest.mark.parametrize("normalize", ["minmax", "rank"])
@given(legs=legs, data=st.data())
def test_convex_scores_are_in_0_1_sorted_and_deterministic(normalize, legs, data):
    weights = data.draw(
        st.lists(st.floats(0, 10), min_size=len(legs), max_size=len(legs)).filter(
            lambda w: sum(w) > 0
        )
    )
    fused = convex_fusion(legs, weights, normalize=normalize)
    assert fused == convex_fusion(legs, weights, normalize=normalize)
    assert all(0 <= score <= 1 for _, score in fused)
    assert [s for _, s in fused] == sorted((s for _, s in fused), reverse=True)
    assert {i for i, _ in fused} == {i for leg in legs for i in leg}


@given(legs=legs)
def test_an_id_first_in_every_leg_wins(legs):
    # put "top" above everything in every leg
    boosted = [{**leg, "top": max(leg.values(), default=0) + 1} for leg in legs]
    for normalize in ("minmax", "rank"):
        assert convex_fusion(boosted, normalize=normalize)[0] == ("top", 1.0)
    assert reciprocal_rank_fusion([ranking(leg) for leg in boosted])[0] == ("top", 1.0)


# -- helpers ----------------------------------------------------------------------------------


def test_ranking_orders_by_score_then_given_order():
    assert ranking({"a": 0.1, "b": 0.5, "c": 0.5}) == ["b", "c", "a"]


def test_cosine_score_starts_at_the_floor():
    assert cosine_score(0.76, floor=0.76) == 0.0
    assert cosine_score(0.5, floor=0.76) == 0.0
    assert cosine_score(1.0, floor=0.76) == 1.0
    assert cosine_score(1.0000001, floor=0.76) == 1.0
    assert cosine_score(0.88, floor=0.76) == pytest.approx(0.5)
    with pytest.raises(InvalidRequest):
        cosine_score(0.5, floor=1.0)
