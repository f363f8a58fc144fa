import re
import unicodedata

from hypothesis import given, settings
from hypothesis import strategies as st

from animus_flows.stores.text import (
    _strip_marks,
    fold_plural,
    plural_forms,
    query_groups,
    spaced_words,
    words,
)


def test_words_are_folded_for_case_and_accents():
    assert words("Markets RALLIED; policies, Café, naïve") == [
        "markets",
        "rallied",
        "policies",
        "cafe",
        "naive",
    ]


def test_underscores_and_punctuation_split_words_and_unicode_letters_stay():
    assert words("snake_cases EUR/USD 1.10 東京 emoji🙂") == [
        "snake",
        "cases",
        "eur",
        "usd",
        "1",
        "10",
        "東京",
        "emoji",
    ]


def test_plurals_fold_onto_one_stem_and_queries_match_every_form():
    stems = [fold_plural(w) for w in ["markets", "policies", "ties", "bus", "class", "axis"]]
    assert stems == ["market", "policy", "tie", "bus", "class", "axis"]
    assert plural_forms("market") == ["market", "markets"]
    assert plural_forms("policy") == ["policy", "policys", "policies"]
    assert plural_forms("bus") == ["bus"]  # "buss" would not fold back onto "bus"
    assert query_groups("Markets and a market, POLICIES") == [
        ["market", "markets"],
        ["and", "ands"],
        ["a"],
        ["policy", "policys", "policies"],
    ]
    assert query_groups("a b c", limit=2) == [["a"], ["b"]]


@settings(max_examples=300, deadline=None)
@given(st.text(min_size=1, max_size=12).map(str.lower))
def test_every_plural_form_folds_back_onto_its_stem(word):
    stem = fold_plural(word)
    assert fold_plural(stem) == stem
    assert word in plural_forms(stem)
    assert all(fold_plural(form) == stem for form in plural_forms(stem))


@settings(max_examples=500, deadline=None)
@given(st.text(alphabet="aeisuy", max_size=7) | st.text(max_size=7))
def test_plural_forms_are_the_candidates_that_fold_back(stem):
    candidates = [stem + "s", stem[:-1] + "ies"]
    assert plural_forms(stem) == [stem] + [form for form in candidates if fold_plural(form) == stem]


@settings(max_examples=400, deadline=None)
@given(st.text(alphabet="abcXYZ019 _-./,'\"!?\t\néÉ東ßﬁ", max_size=90), st.integers(0, 140))
def test_the_ascii_fast_path_splits_exactly_like_the_unicode_rule(text, long_run):
    text += "q" * long_run
    folded = text.casefold()
    if not folded.isascii():
        folded = unicodedata.normalize("NFKD", folded).translate(_strip_marks())
    expected = re.findall(r"[^\W_]+", folded)
    assert words(text) == expected
    assert spaced_words(text) == " ".join(expected)  # built without splitting ASCII text
