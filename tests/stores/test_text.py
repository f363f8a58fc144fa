from animus_flows.stores.text import query_terms, terms


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
