"""The labelled retrieval corpus (`corpus.json` beside this file): its scopes, memories and
questions, `load_corpus`, the checks `validate` runs on it, and the word analysis (stop words,
Snowball stems) that the checks and the reference BM25 share. See `evaluate` for the harness.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import dataclass, field
from functools import cache
from itertools import pairwise
from pathlib import Path
from typing import Any

from animus_flows.budget import Candidate, TokenCounter, render_block

#: The corpus shipped beside this module.
CORPUS_PATH = Path(__file__).with_name("corpus.json")

#: The question kinds, each exercising one cause of a miss.
KINDS = ("lexical", "paraphrase", "multi-hop", "temporal", "distractor", "inflection")
#: The scope styles: dialogues between two people, and memories of agent teams.
STYLES = ("conversation", "agent-memory")

#: What the corpus must hold at least (checked by `validate`). A conversation runs to several
#: hundred turns over 10 to 25 sessions and an agent team keeps at least 200 memories, so that a
#: 2,000-token budget holds a small share of a scope (about 15% of a conversation), as in the
#: long-term conversational-memory benchmarks this corpus stands in for.
MIN_MEMORIES = 1800
MIN_SCOPES = 6
MIN_SCOPES_PER_STYLE = 3
MIN_QUESTIONS = 320
MIN_QUESTIONS_PER_KIND = 50
CONVERSATION_TURNS = (400, 800)
CONVERSATION_SESSIONS = (10, 25)
AGENT_MEMORY_ITEMS = 200
AGENT_MEMORY_WORDS = (10, 80)

_TURN_KEY = re.compile(r"s(\d+):t(\d+)")

# English function words: pronouns, articles, auxiliaries, prepositions, conjunctions and the
# pieces that contractions split into ("didn't" -> "didn", "t"). Content words, even common
# ones ("go", "time", "said"), are not listed: telling those apart is BM25's IDF's job.
_STOP_WORDS = """
    a about above after again against all am an and any are aren as at be because been before
    being below between both but by can cannot could couldn d did didn do does doesn doing don
    down during each either else ever few for from further had hadn has hasn have haven having
    he her here hers herself him himself his how i if in into is isn it its itself just ll m ma
    may me might mightn more most must mustn my myself neither no nor not now o of off on once
    only or other ought our ours ourselves out over own re s same shall shan she should
    shouldn so some such t than that the their theirs them themselves then there these they
    this those through to too under until up upon us ve very was wasn we were weren what when
    where whether which while who whom whose why will with won would wouldn y yet you your
    yours yourself yourselves
"""
STOP_WORDS = frozenset(_STOP_WORDS.split())

_WORD = re.compile(r"[^\W_]+")


# -- the corpus ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Memory:
    """One item of a scope: its key, its text and the date of its session (or of its entry).

    `extra` holds the item's other fields (a conversation turn's `speaker`, an agent memory's
    `type`), as written in the corpus.
    """

    key: str
    text: str
    session_date: str | None = None
    extra: dict[str, Any] = field(default_factory=dict, compare=False)


@dataclass(frozen=True)
class CorpusScope:
    """One scope: a conversation or one agent team's memories."""

    id: str
    style: str
    memories: tuple[Memory, ...]
    description: str = ""

    def keys(self) -> set[str]:
        return {memory.key for memory in self.memories}


@dataclass(frozen=True)
class Question:
    """A question asked in one scope, with every item needed to answer it, and only those."""

    id: str
    scope: str
    question: str
    relevant: tuple[str, ...]
    kind: str


@dataclass(frozen=True)
class Corpus:
    scopes: tuple[CorpusScope, ...]
    questions: tuple[Question, ...]

    def scope(self, scope_id: str) -> CorpusScope:
        for scope in self.scopes:
            if scope.id == scope_id:
                return scope
        raise KeyError(f"no scope {scope_id!r} in the corpus")

    def memories(self) -> int:
        return sum(len(scope.memories) for scope in self.scopes)


def load_corpus(path: str | Path | None = None) -> Corpus:
    """The corpus at `path` (default: `corpus.json` beside this module), as dataclasses.

    Raises:
        ValueError: a scope, memory or question lacks a required field.
    """
    data = json.loads(Path(path or CORPUS_PATH).read_text(encoding="utf-8"))
    try:
        scopes = tuple(
            CorpusScope(
                id=scope["id"],
                style=scope["style"],
                description=scope.get("description", ""),
                memories=tuple(
                    Memory(
                        key=memory["key"],
                        text=memory["text"],
                        session_date=memory.get("session_date"),
                        extra={
                            k: v
                            for k, v in memory.items()
                            if k not in ("key", "text", "session_date")
                        },
                    )
                    for memory in scope["memories"]
                ),
            )
            for scope in data["scopes"]
        )
        questions = tuple(
            Question(
                id=question["id"],
                scope=question["scope"],
                question=question["question"],
                relevant=tuple(question["relevant"]),
                kind=question["kind"],
            )
            for question in data["questions"]
        )
    except KeyError as exc:
        raise ValueError(f"the corpus lacks the field {exc.args[0]!r} somewhere") from None
    return Corpus(scopes, questions)


def scope_tokens(scope: CorpusScope, counter: TokenCounter, binding: str = "corpus") -> int:
    """The tokens of all of `scope`'s items rendered as the hook renders them: a budget this
    large holds the whole scope, whatever the ranking."""
    return sum(
        counter.count(render_block(Candidate(binding, m.key, m.text, 0.0))) for m in scope.memories
    )


def validate(corpus: Corpus) -> list[str]:
    """Every problem with the corpus's shape and labels, as sentences; empty when it is sound.

    Checks the counts (`MIN_*`), the styles and kinds, unique scope ids, keys and question ids,
    conversation lengths (`CONVERSATION_TURNS`) and sessions (`conversation_session_problems`),
    agent memory counts and lengths (`AGENT_MEMORY_ITEMS`, `AGENT_MEMORY_WORDS`), ISO session
    dates, and that every question names a scope of the
    corpus and at least one relevant key, each of them an item of that scope.
    """
    problems: list[str] = []
    scope_ids = [scope.id for scope in corpus.scopes]
    problems += [f"scope id {i!r} is used twice" for i, n in Counter(scope_ids).items() if n > 1]
    if len(corpus.scopes) < MIN_SCOPES:
        problems.append(f"{len(corpus.scopes)} scopes; at least {MIN_SCOPES} are needed")
    if corpus.memories() < MIN_MEMORIES:
        problems.append(f"{corpus.memories()} memories; at least {MIN_MEMORIES} are needed")
    styles = Counter(scope.style for scope in corpus.scopes)
    for style in STYLES:
        if styles[style] < MIN_SCOPES_PER_STYLE:
            problems.append(f"{styles[style]} {style} scopes; at least {MIN_SCOPES_PER_STYLE}")
    for scope in corpus.scopes:
        if scope.style not in STYLES:
            problems.append(f"scope {scope.id} has the style {scope.style!r}, not one of {STYLES}")
        keys = Counter(memory.key for memory in scope.memories)
        problems += [f"{scope.id}: key {k!r} is used {n} times" for k, n in keys.items() if n > 1]
        for memory in scope.memories:
            if not memory.text.strip():
                problems.append(f"{scope.id}/{memory.key} has no text")
            date = memory.session_date
            if date is not None and not re.fullmatch(r"\d{4}-\d\d-\d\d", date):
                problems.append(f"{scope.id}/{memory.key}: session_date {date!r} is not ISO")
        if scope.style == "conversation":
            low, high = CONVERSATION_TURNS
            if not low <= len(scope.memories) <= high:
                problems.append(f"{scope.id} has {len(scope.memories)} turns, not {low}-{high}")
            problems += [
                f"{scope.id}/{m.key} names no speaker ('Name: ...')"
                for m in scope.memories
                if not re.match(r"[A-Z][a-z]+: ", m.text)
            ]
            problems += [
                f"{scope.id}/{m.key} has no session_date"
                for m in scope.memories
                if m.session_date is None
            ]
            problems += conversation_session_problems(scope)
        elif scope.style == "agent-memory":
            if len(scope.memories) < AGENT_MEMORY_ITEMS:
                problems.append(
                    f"{scope.id} has {len(scope.memories)} memories; at least {AGENT_MEMORY_ITEMS}"
                )
            low, high = AGENT_MEMORY_WORDS
            for memory in scope.memories:
                count = len(memory.text.split())
                if not low <= count <= high:
                    problems.append(f"{scope.id}/{memory.key} has {count} words, not {low}-{high}")
    if len(corpus.questions) < MIN_QUESTIONS:
        problems.append(f"{len(corpus.questions)} questions; at least {MIN_QUESTIONS} are needed")
    ids = Counter(question.id for question in corpus.questions)
    problems += [f"question id {i!r} is used {n} times" for i, n in ids.items() if n > 1]
    kinds = Counter(question.kind for question in corpus.questions)
    for kind in KINDS:
        if kinds[kind] < MIN_QUESTIONS_PER_KIND:
            problems.append(f"{kinds[kind]} {kind} questions; at least {MIN_QUESTIONS_PER_KIND}")
    known = {scope.id: scope.keys() for scope in corpus.scopes}
    for question in corpus.questions:
        if question.kind not in KINDS:
            problems.append(f"{question.id} has the kind {question.kind!r}, not one of {KINDS}")
        if question.scope not in known:
            problems.append(f"{question.id} names the scope {question.scope!r}, not in the corpus")
            continue
        if not question.relevant:
            problems.append(f"{question.id} has no relevant key")
        if len(set(question.relevant)) != len(question.relevant):
            problems.append(f"{question.id} lists a relevant key twice")
        problems += [
            f"{question.id}: relevant key {key!r} is not an item of {question.scope}"
            for key in question.relevant
            if key not in known[question.scope]
        ]
        if question.kind == "multi-hop" and len(question.relevant) < 2:
            problems.append(f"{question.id} is multi-hop but has one relevant key")
    return problems


def conversation_session_problems(scope: CorpusScope) -> list[str]:
    """A conversation's problems with its sessions, as sentences: keys `s<session>:t<turn>`,
    in order, sessions numbered 1, 2, 3 ... and turns 1, 2, 3 ... within each, one date per
    session, dates that never go back, and `CONVERSATION_SESSIONS` sessions in all."""
    problems: list[str] = []
    dates: dict[int, str | None] = {}
    last = (0, 0)
    for memory in scope.memories:
        match = _TURN_KEY.fullmatch(memory.key)
        if not match:
            problems.append(f"{scope.id}/{memory.key} is not a key s<session>:t<turn>")
            continue
        session, turn = int(match[1]), int(match[2])
        expected = (last[0], last[1] + 1) if session == last[0] else (last[0] + 1, 1)
        if (session, turn) != expected:
            problems.append(f"{scope.id}/{memory.key} follows s{last[0]}:t{last[1]}")
        last = (session, turn)
        if session in dates and dates[session] != memory.session_date:
            problems.append(f"{scope.id}/{memory.key} is dated unlike the rest of its session")
        dates.setdefault(session, memory.session_date)
    ordered = [date for _, date in sorted(dates.items()) if date is not None]
    problems += [
        f"{scope.id}: a session dated {later} follows one dated {earlier}"
        for earlier, later in pairwise(ordered)
        if later < earlier
    ]
    low, high = CONVERSATION_SESSIONS
    if not low <= len(dates) <= high:
        problems.append(f"{scope.id} has {len(dates)} sessions, not {low}-{high}")
    return problems


# -- words -----------------------------------------------------------------------------------


def words(text: str) -> list[str]:
    """`text`'s words, case-folded: runs of letters and digits ("didn't" -> "didn", "t")."""
    return _WORD.findall(text.casefold())


@cache
def _stemmer() -> Any:
    import snowballstemmer

    return snowballstemmer.stemmer("english")


@cache
def stem(word: str) -> str:
    """`word`'s English Snowball stem: "explored" and "exploring" -> "explor"."""
    return _stemmer().stemWord(word)


def content_stems(text: str) -> list[str]:
    """The stems of `text`'s words that are not stop words, in order, repeats kept."""
    return [stem(word) for word in words(text) if word not in STOP_WORDS]


def shared_stems(question: Question, corpus: Corpus) -> set[str]:
    """The content stems a question shares with any of its relevant items."""
    texts = {memory.key: memory.text for memory in corpus.scope(question.scope).memories}
    relevant = set().union(*(content_stems(texts[key]) for key in question.relevant))
    return set(content_stems(question.question)) & relevant


def paraphrase_overlaps(corpus: Corpus) -> dict[str, set[str]]:
    """The paraphrase questions that share a content stem with a relevant item, with the stems
    they share: a paraphrase question must find its answer by meaning alone."""
    overlaps = {}
    for question in corpus.questions:
        if question.kind == "paraphrase":
            shared = shared_stems(question, corpus)
            if shared:
                overlaps[question.id] = shared
    return overlaps


def _singular(word: str) -> str:
    """`word` without a plural ending ("policies" -> "policy", "markets" -> "market")."""
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    if len(word) > 3 and word.endswith("s") and not word.endswith(("ss", "us", "is")):
        return word[:-1]
    return word


def inflected_pairs(question: Question, corpus: Corpus) -> set[tuple[str, str]]:
    """(question word, item word) pairs of one stem spelled differently, beyond singular and
    plural ("exploring", "explored"), between a question and its relevant items."""
    texts = {memory.key: memory.text for memory in corpus.scope(question.scope).memories}
    asked = {w for w in words(question.question) if w not in STOP_WORDS}
    answer = {w for key in question.relevant for w in words(texts[key]) if w not in STOP_WORDS}
    return {
        (a, b) for a in asked for b in answer if stem(a) == stem(b) and _singular(a) != _singular(b)
    }


def inflection_misfits(corpus: Corpus) -> list[str]:
    """The inflection questions that share no stem with a relevant item through another
    inflection of a word (see `inflected_pairs`): they would not test one."""
    return [
        question.id
        for question in corpus.questions
        if question.kind == "inflection" and not inflected_pairs(question, corpus)
    ]
