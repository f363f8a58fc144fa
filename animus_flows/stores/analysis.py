"""How lexical search reads text, as search engines do: words, stop words, stems.

`Analyzer(language)` turns text into index terms: runs of Unicode letters and digits,
case-folded, accents removed; the language's stop words dropped ("what", "did", "her" say
nothing about what a memory is about); the rest stemmed with the Snowball stemmer ("explored"
and "exploring" are both "explor"). Indexing and querying use the same analyzer, so a query
finds every inflection of its words. The stop lists and stemmers are Snowball's, the ones
PostgreSQL's text search configurations use, so the SQLite and PostgreSQL stores agree.
`language="simple"` keeps every word as it is (PostgreSQL's `simple`).
"""

from __future__ import annotations

import functools
import re
import threading
import unicodedata
from importlib import resources

import snowballstemmer

from animus_flows.errors import ConfigError

DEFAULT_LANGUAGE = "english"
SIMPLE = "simple"
#: Longer runs are not words (base64, hashes, URLs glued together): they are not indexed.
MAX_WORD_CHARS = 64

_WORD = re.compile(r"[^\W_]+")
#: ASCII text's words by bytes: letters lowercased, every other byte a space, so `split` gives
#: `words`' result (as bytes) about three times faster than the regular expression.
_ASCII_WORDS = bytes(c if chr(c).isascii() and chr(c).isalnum() else 32 for c in range(256)).lower()
#: The most words whose terms an analyzer keeps: the cache starts again when it is full.
MAX_CACHED_WORDS = 1 << 16


def languages() -> list[str]:
    """The languages an analyzer knows: those with a Snowball stemmer and stop list, and
    `simple`."""
    folder = resources.files("animus_flows.stores") / "stopwords"
    with_lists = {entry.name.removesuffix(".stop") for entry in folder.iterdir()}
    return [*sorted(with_lists & set(snowballstemmer.algorithms())), SIMPLE]


def words(text: str) -> list[str]:
    """Every word of `text`, in order: runs of letters and digits, case-folded, no accents."""
    if not text.isascii():
        decomposed = unicodedata.normalize("NFKD", text.casefold())
        text = "".join(char for char in decomposed if not unicodedata.combining(char))
    return _WORD.findall(text.lower())


@functools.cache
def _stop_words(language: str) -> frozenset[str]:
    if language == SIMPLE:
        return frozenset()
    path = resources.files("animus_flows.stores") / "stopwords" / f"{language}.stop"
    return frozenset(
        " ".join(words(line))
        for line in path.read_text(encoding="utf-8").splitlines()
        if line.strip()
    )


class Analyzer:
    """Text to index terms for one language (see the module).

    Raises:
        ConfigError: `language` is none of `languages()`.

    Example:
        ```python
        from animus_flows.stores.analysis import Analyzer

        Analyzer().terms("When did she start exploring the old harbours?")
        # ['start', 'explor', 'old', 'harbour']
        ```
    """

    def __init__(self, language: str = DEFAULT_LANGUAGE) -> None:
        known = languages()
        if language not in known:
            raise ConfigError(
                f"language {language!r} has no stemmer and stop words here; use one of "
                f"{', '.join(known)}"
            )
        self.language = language
        self.stop_words = _stop_words(language)
        self._local = threading.local()  # a Snowball stemmer object is not thread-safe
        # The same few thousand words recur in every memory and prompt: each word's term is
        # found once ('' for a stop word or a run too long), keyed by its bytes in ASCII text
        # (no string made per word) and by the word elsewhere. Half of ingest's analysis time.
        self._terms: dict[bytes | str, str] = {}

    def _term(self, word: str) -> str:
        if word in self.stop_words or len(word) > MAX_WORD_CHARS:
            return ""
        if self.language == SIMPLE:
            return word
        stemmer = getattr(self._local, "stemmer", None)
        if stemmer is None:
            stemmer = self._local.stemmer = snowballstemmer.stemmer(self.language)
        return stemmer.stemWord(word)

    def terms(self, text: str) -> list[str]:
        """`text`'s index terms, in order, repeats kept (they are term frequencies)."""
        found: list[bytes] | list[str]
        if text.isascii():
            found = text.encode("ascii").translate(_ASCII_WORDS).split()
        else:
            found = words(text)
        known = self._terms
        try:
            return [term for term in map(known.__getitem__, found) if term]
        except KeyError:  # new words: each learnt once
            if len(known) > MAX_CACHED_WORDS:
                known.clear()
            terms = []
            for word in found:
                term = known.get(word)
                if term is None:
                    term = self._term(word if isinstance(word, str) else word.decode())
                    known[word] = term
                if term:
                    terms.append(term)
            return terms

    def __repr__(self) -> str:
        return f"Analyzer({self.language!r})"


@functools.cache
def analyzer(language: str = DEFAULT_LANGUAGE) -> Analyzer:
    """The process's analyzer for `language`, shared (its stem cache with it)."""
    return Analyzer(language)
