"""Turn text into search terms: the one tokenizer for indexing and querying.

Words are runs of Unicode letters and digits (at most 64 characters; longer runs are cut into
pieces), case-folded, with accents removed and plurals folded (markets -> market, policies ->
policy). Doing this in Python rather than in SQLite's tokenizer means the SQLite store knows
the exact terms it indexed, so it can prefix them with a scope and look up their frequencies.
Case and accents are folded over the whole text at once; plurals word by word through a cache.
"""

from __future__ import annotations

import re
import unicodedata
from functools import cache

MAX_TERM_LENGTH = 64
_WORD = re.compile(rf"[^\W_]{{1,{MAX_TERM_LENGTH}}}")
# ASCII text splits faster as bytes than with a Unicode regex: one table lookup per byte
# lowercases letters (casefold, for ASCII) and turns every other non-alphanumeric into a space.
_ASCII_WORDS = bytes(
    ord(char.lower()) if char.isascii() and char.isalnum() else ord(" ")
    for char in map(chr, range(256))
)
_CACHE_LIMIT = 200_000


class _PluralCache(dict[str, str]):
    """word -> folded word, computed on first sight; lookups of known words stay in C."""

    def __missing__(self, word: str) -> str:
        folded = fold_plural(word)
        if len(self) < _CACHE_LIMIT:
            self[word] = folded
        return folded


_folded = _PluralCache()
_COMBINING_RANGES = [
    (0x0300, 0x036F),
    (0x1AB0, 0x1AFF),
    (0x1DC0, 0x1DFF),
    (0x20D0, 0x20FF),
    (0xFE20, 0xFE2F),
]


@cache
def _strip_marks() -> dict[int, None]:
    return {
        code: None
        for low, high in _COMBINING_RANGES
        for code in range(low, high + 1)
        if unicodedata.combining(chr(code))
    }


def fold_plural(word: str) -> str:
    """markets -> market, policies -> policy; bus, class, axis and short words stay."""
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    if len(word) > 3 and word.endswith("s") and not word.endswith(("ss", "us", "is")):
        return word[:-1]
    return word


def terms(text: str) -> list[str]:
    """Every term of `text`, in order, repeats kept (term frequency matters to ranking)."""
    if text.isascii():
        words = text.encode().translate(_ASCII_WORDS).decode().split()
        if words and max(map(len, words)) > MAX_TERM_LENGTH:
            words = _WORD.findall(" ".join(words))  # cut long runs, as the regex does
    else:
        text = unicodedata.normalize("NFKD", text.casefold())
        words = _WORD.findall(text.translate(_strip_marks()))
    return list(map(_folded.__getitem__, words))


def query_terms(text: str, limit: int = 32) -> list[str]:
    """The distinct terms of a query, the first `limit` of them."""
    return list(dict.fromkeys(terms(text)))[:limit]
