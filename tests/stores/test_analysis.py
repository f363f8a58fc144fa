"""The analyzer: words, stop words and stems, the same for ASCII and other text."""

import threading

import pytest

from animus_flows.errors import ConfigError
from animus_flows.stores import analysis
from animus_flows.stores.analysis import Analyzer, words


def test_terms_drop_stop_words_and_stem_the_rest():
    assert Analyzer().terms("When did she start exploring the old harbours?") == [
        "start",
        "explor",
        "old",
        "harbour",
    ]


@pytest.mark.parametrize(
    "text",
    [
        "Deploy_script v2.1 (hotfix) -- it's DONE; 42 tests",
        "tabs\tand\nnewlines, emails a@b.c and URLs https://x.io/a?b=c",
        "Café crème brûlée: naïve façade",  # not ASCII: the slow path, same words
        "\uff26\uff35\uff2c\uff2c width and Straße",  # full-width letters
        "",
        "   ",
        "x" * 65 + " kept",  # a run too long is no word worth indexing
    ],
)
def test_the_fast_ascii_path_reads_the_words_the_regular_expression_reads(text):
    analyzer = Analyzer()
    # the definition: every word's term, stop words and runs too long dropped
    expected = [term for term in map(analyzer._term, words(text)) if term]
    assert analyzer.terms(text) == expected
    assert analyzer.terms(text) == expected  # again, from the cache


def test_ascii_and_accented_spellings_give_one_term():
    analyzer = Analyzer()
    assert analyzer.terms("cafe") == analyzer.terms("Café") == analyzer.terms("CAFÉ")


def test_simple_keeps_every_word_as_it_is():
    assert Analyzer("simple").terms("The Exploring, of THE") == ["the", "exploring", "of", "the"]


def test_the_word_cache_starts_again_when_full(monkeypatch):
    monkeypatch.setattr(analysis, "MAX_CACHED_WORDS", 10)
    analyzer = Analyzer()
    text = " ".join(f"word{n}" for n in range(50))
    assert analyzer.terms(text) == text.split()
    assert len(analyzer._terms) == 50
    assert analyzer.terms("hiking trails") == ["hike", "trail"]
    assert len(analyzer._terms) == 2  # was over the bound: cleared before learning


def test_threads_share_one_analyzer():
    analyzer, texts = Analyzer(), [f"explored harbour{n} exploring" for n in range(2000)]
    results: list[list[list[str]]] = []

    def analyze() -> None:
        results.append([analyzer.terms(text) for text in texts])

    threads = [threading.Thread(target=analyze) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    expected = [["explor", f"harbour{n}", "explor"] for n in range(2000)]
    assert results == [expected] * 4


def test_an_unknown_language_names_the_known_ones():
    with pytest.raises(ConfigError, match="language 'klingon' has no stemmer.*english"):
        Analyzer("klingon")
