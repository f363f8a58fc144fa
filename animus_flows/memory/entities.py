"""Entity extraction for entity linking: capitalized-phrase heuristics, no model, no network.

`extract_entities` finds runs of capitalized words ("Alice", "Animus", "New York Times") and
guesses a type from the words around them: "the Animus project" is a project, "from Alice" a
person, "Acme Inc" an organization, anything else `unknown`. It is deliberately simple and
predictable; docs/memory.md lists what it misses.
"""

from __future__ import annotations

import re

from animus_flows.memory.records import Entity, entity_key

# A capitalized word: Alice, GitHub, AWS, S3, O'Neil, Jean-Luc. Markers like [REDACTED:jwt]
# are removed before extraction.
_WORD = r"[A-Z][A-Za-z0-9]*(?:['\u2019-][A-Za-z0-9]+)*"
_PHRASE = re.compile(rf"(?<![\w'\u2019-])({_WORD}(?:[ \t]+{_WORD})*)(?![\w'\u2019-])")
_MARKER = re.compile(r"\[REDACTED:[a-z_]+\]")
_SENTENCE_END = re.compile(r"(?:^|[.!?:;\n]|[-*•]\s)\s*$")


# Capitalized words that are almost never names on their own.
def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


_STOPWORDS = _words(
    """
    a an the this that these those there here it its i we you he she they me my our your his
    her their them us and or but if then so yes no not all any some each every other another
    in on at by for from to of with about into onto over under after before during since until
    what when where which who whom whose why how is are was were be been being do does did
    done have has had will would shall should can could may might must also just only very
    please thanks thank hello hi dear note todo fixme ok okay
    monday tuesday wednesday thursday friday saturday sunday today tomorrow yesterday
    january february march april may june july august september october november december
    """
)

# Imperatives that open a sentence or a list item: "Ping Dave", "Review the Animus PR".
_SENTENCE_VERBS = _words(
    """
    add ask build call check close create delete deploy email fix install make meet merge open
    ping read remind remove review run schedule see send start stop test update use write
    """
)
_ORG_SUFFIXES = frozenset({"inc", "corp", "corporation", "ltd", "llc", "gmbh", "ag", "sa", "plc"})

_PROJECT_AFTER = re.compile(r"^\s+(?:project|repo|repository|codebase|service|app|library)\b", re.I)
_ORG_AFTER = re.compile(r"^,?\s+(?:Inc|Corp|Corporation|Ltd|LLC|GmbH|AG|SA|plc)\b\.?")
_PERSON_BEFORE = re.compile(
    r"\b(?:from|by|with|cc|ask|asked|tell|told|thank|thanks|ping|pinged|dear|hi|hello|mr|ms|"
    r"mrs|dr)\.?\s+$",
    re.I,
)
_PERSON_AFTER = re.compile(
    r"^\s+(?:said|says|asked|asks|wrote|writes|thinks|prefers|wants|likes|reviewed|approved|"
    r"mentioned|suggested|reported)\b",
    re.I,
)


def extract_entities(text: str, *, max_entities: int = 32) -> list[Entity]:
    """Named entities in `text`, first mention first, one per key (case-insensitive).

    Example:
        ```python
        from animus_flows.memory.entities import extract_entities

        extract_entities("Review pull request from Alice on the Animus project")
        # [Entity(name='Alice', type='person'), Entity(name='Animus', type='project')]
        ```
    """
    text = _MARKER.sub(" ", text)
    found: dict[str, Entity] = {}
    for match in _PHRASE.finditer(text):
        words = match.group(1).split()
        start = match.start(1)
        # Sentence-initial capitals are grammar, not names: drop a leading stopword ("The
        # Animus project" -> "Animus"), and a lone sentence-initial word unless it is written
        # like a name no sentence would produce (GitHub, AWS, S3).
        at_sentence_start = bool(_SENTENCE_END.search(text[: match.start(1)]))
        leading = _STOPWORDS | (_SENTENCE_VERBS if at_sentence_start else frozenset())
        while words and words[0].lower() in leading:
            start = text.index(words[0], start) + len(words[0])
            words = words[1:]
        if not words:
            continue
        start = text.index(words[0], start)
        lone_opener = at_sentence_start and words == match.group(1).split() and len(words) == 1
        # "Alice reviewed it" keeps Alice; "Deploy it" and "Tomorrow" do not
        if (
            lone_opener
            and not _unusual_capitals(words[0])
            and not _PERSON_AFTER.search(text[match.end(1) : match.end(1) + 30])
        ):
            continue
        name = " ".join(words)
        key = entity_key(name)
        if key in found or len(key) < 2:
            continue
        kind = _guess_type(text, start, match.end(1))
        if len(words) > 1 and words[-1].lower().rstrip(".") in _ORG_SUFFIXES:
            kind = "organization"
        found[key] = Entity(name, kind)
        if len(found) >= max_entities:
            break
    return list(found.values())


def _unusual_capitals(word: str) -> bool:
    return any(c.isupper() or c.isdigit() for c in word[1:])


def _guess_type(text: str, start: int, end: int) -> str:
    before, after = text[max(0, start - 20) : start], text[end : end + 30]
    if _PROJECT_AFTER.search(after):
        return "project"
    if _ORG_AFTER.search(after):
        return "organization"
    if _PERSON_BEFORE.search(before) or _PERSON_AFTER.search(after):
        return "person"
    return "unknown"


def query_entity_keys(query: str, *, max_words: int = 3, limit: int = 64) -> list[str]:
    """Every 1- to 3-word phrase of a query as an entity key, so "what did alice say" can match
    the entity "Alice" whatever the case. The store filter matches any of them."""
    words = re.findall(r"[\w'\u2019-]+", query.lower())
    keys: dict[str, None] = {}
    for size in range(1, max_words + 1):
        for index in range(len(words) - size + 1):
            phrase = words[index : index + size]
            if size == 1 and phrase[0] in _STOPWORDS:
                continue
            keys[entity_key(" ".join(phrase))] = None
            if len(keys) >= limit:
                return list(keys)
    return list(keys)
