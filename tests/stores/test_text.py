import re
import unicodedata

from hypothesis import given, settings
from hypothesis import strategies as st

from animus_flows.stores.text import _strip_marks, fold_plural, query_terms, terms


def test_words_are_folded_for_case_accents_and_plurals():
    assert terms("Markets RALLIED; policies, Café, naïve, bus, class, axis, ties") == [
        "market",
        "rallied",
        "policy",
        "cafe",
        "naive",
        "bus",
        "class",
        "axis",
        "tie",
    ]


def test_underscores_and_punctuation_split_words_and_unicode_letters_stay():
    assert terms("snake_cases EUR/USD 1.10 東京 emoji🙂") == [
        "snake",
        "case",
        "eur",
        "usd",
        "1",
        "10",
        "東京",
        "emoji",
    ]


def test_query_terms_are_distinct_and_capped_and_long_runs_are_cut():
    assert query_terms("a b a c b", limit=2) == ["a", "b"]
    assert terms("x" * 100) == ["x" * 64, "x" * 36]


@settings(max_examples=400, deadline=None)
@given(st.text(alphabet="abcXYZ019 _-./,'\"!?\t\néÉ東ßﬁ", max_size=90), st.integers(0, 140))
def test_the_ascii_fast_path_splits_exactly_like_the_unicode_rule(text, long_run):
    text += "q" * long_run
    folded = text.casefold()
    if not folded.isascii():
        folded = unicodedata.normalize("NFKD", folded).translate(_strip_marks())
    expected = [fold_plural(word) for word in re.findall(r"[^\W_]{1,64}", folded)]
    assert terms(text) == expected
