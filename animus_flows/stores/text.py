"""Words for full-text search: what the SQLite store indexes and how queries find it.

Words are runs of Unicode letters and digits, case-folded, with accents removed. Indexing
ASCII text never loops over its words in Python (`spaced_words` works on the whole string
in C), which keeps bulk loads fast; other text goes word by word. Plurals are folded at
query time instead (`query_groups`): "markets" finds "market" and "markets", "policy" finds
"policies".
"""

from __future__ import annotations

import re
import unicodedata
from functools import cache

_WORD = re.compile(r"[^\W_]+")
# One table lookup per byte lowercases ASCII letters (casefold, for ASCII) and turns every
# other non-alphanumeric byte into a space: what FTS5's `ascii` tokenizer does to ASCII text.
_ASCII_WORDS = bytes(
    ord(char.lower()) if char.isascii() and char.isalnum() else ord(" ")
    for char in map(chr, range(256))
)
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


def words(text: str) -> list[str]:
    """Every word of `text`, in order, case-folded and without accents."""
    if text.isascii():
        return text.encode().translate(_ASCII_WORDS).decode().split()
    text = unicodedata.normalize("NFKD", text.casefold())
    return _WORD.findall(text.translate(_strip_marks()))


def spaced_words(text: str) -> str:
    """`words(text)` joined by single spaces, without splitting ASCII text into words."""
    if not text.isascii():
        return " ".join(words(text))
    spaced = text.encode().translate(_ASCII_WORDS).decode()
    while "  " in spaced:  # each pass halves the longest run of spaces
        spaced = spaced.replace("  ", " ")
    return spaced.strip(" ")


def fold_plural(word: str) -> str:
    """markets -> market, policies -> policy; bus, class, axis and short words stay."""
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    if len(word) > 3 and word.endswith("s") and not word.endswith(("ss", "us", "is")):
        return word[:-1]
    return word


def plural_forms(stem: str) -> list[str]:
    """The words `fold_plural` maps onto `stem` (a folded word): itself and its plurals.

    Those of `stem + "s"` and `stem[:-1] + "ies"` that fold back onto it, decided from the
    stem's ending without folding them (a query asks this of every word; property-tested
    against folding).
    """
    if len(stem) < 3:
        return [stem]  # "ax" + "s" is too short to fold
    forms = [stem]
    # "tie" -> "ties" folds back, "movie" -> "movies" folds onto "movy"; "bus" + "s" ends in "ss"
    if stem[-1] not in "sui" and not (len(stem) > 3 and stem.endswith("ie")):
        forms.append(stem + "s")
    if stem[-1] == "y":
        forms.append(stem[:-1] + "ies")
    return forms


def query_groups(text: str, limit: int = 32) -> list[list[str]]:
    """A query's distinct words, plurals folded, the first `limit`: each as the forms to match.

    "Markets, policy" -> [["market", "markets"], ["policy", "policys", "policies"]]; a form
    no text uses ("policys") costs one lookup and matches nothing.
    """
    stems = dict.fromkeys(fold_plural(word) for word in words(text))
    return [plural_forms(stem) for stem in list(stems)[:limit]]
