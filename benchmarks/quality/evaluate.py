"""Retrieval quality: the labelled corpus, its metrics, a reference BM25 and the SQLite adapter.

What users judge is whether the right memories end up in the prompt's budget (DESIGN.md
section 11), so retrieval is measured as the recall of each question's relevant items: in the
first k results, and within a token budget packed the way the `memory_bindings` hook packs
(`animus_flows.budget.pack`, blocks rendered by `render_block`, counted with `TokenCounter`).

The corpus (`corpus.json` beside this file, original text written for this repository) has
scopes of two styles, multi-session conversations between two people and the memories of agent
teams, and questions of six kinds (`KINDS`), each labelled with every item needed to answer it.

A retriever is anything with a `name` and the three coroutines of `Retriever`: `index` the
corpus once, `search` one scope for one question, `close`. Two ship here:

- `BM25Retriever`: the yardstick. Okapi BM25 (k1 1.2, b 0.75) over English words with stop
  words removed and Snowball stems, its statistics computed per scope.
- `SQLiteStoreRetriever`: a real `animus_flows.stores.SQLiteStore` in a temporary folder, one
  store scope per corpus scope, queried with `store.query(scope, question, top_k=N)`; with
  `file_per_scope=True`, one store file per scope (a diagnostic of per-scope statistics).

Example (from the benchmarks folder, as `bench_quality.py` runs it):
    ```python
    import asyncio

    from animus_flows.budget import TokenCounter
    from quality.evaluate import BM25Retriever, evaluate, load_corpus

    result = asyncio.run(evaluate(BM25Retriever(), load_corpus(), TokenCounter("cl100k_base")))
    print(result.table())
    ```
"""

from __future__ import annotations

import json
import math
import re
import tempfile
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from functools import cache
from itertools import pairwise
from pathlib import Path
from typing import Any, Protocol

from animus_flows.budget import BindingCaps, Candidate, TokenCounter, pack, render_block

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


# -- metrics ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Ranked:
    """One result of a retriever: the item's key and text, best first in a list."""

    key: str
    text: str
    score: float = 0.0


def _relevant_set(relevant: Iterable[str]) -> set[str]:
    wanted = set(relevant)
    if not wanted:
        raise ValueError("a question needs at least one relevant key to measure recall")
    return wanted


def recall_at_k(ranked_keys: Sequence[str], relevant: Iterable[str], k: int) -> float:
    """The share of `relevant` keys among the first `k` of `ranked_keys`, in [0, 1].

    Raises:
        ValueError: `relevant` is empty, or `k` is below 1.
    """
    if k < 1:
        raise ValueError(f"k {k!r} must be 1 or more")
    wanted = _relevant_set(relevant)
    return len(wanted & set(ranked_keys[:k])) / len(wanted)


def pack_ranked(
    ranked_items: Sequence[Ranked],
    budget_tokens: int,
    counter: TokenCounter,
    binding: str = "corpus",
) -> list[str]:
    """The keys that `budget_tokens` holds when `ranked_items` are packed in order, as the
    hook packs: each rendered as its block (`[binding/key] text` and a newline, by
    `animus_flows.budget.render_block`), counted by `counter`, skipped when it does not fit
    (a later, smaller one may still fit).

    Every item goes in as HOT, so the order is the retriever's own and the WARM gate (70% of
    the budget) does not apply: this measures ranking, not the memory layer's tiers.
    """
    count = len(ranked_items)
    candidates = [
        Candidate(binding, item.key, item.text, (count - rank) / count, "hot")
        for rank, item in enumerate(ranked_items)
    ]
    result = pack(candidates, {binding: BindingCaps(budget_tokens, ("hot",))}, counter)
    return [packed.candidate.key for packed in result.selected]


def recall_within_budget(
    ranked_items: Sequence[Ranked],
    relevant: Iterable[str],
    budget_tokens: int,
    counter: TokenCounter,
    binding: str = "corpus",
) -> float:
    """The share of `relevant` keys that fit in `budget_tokens` (see `pack_ranked`).

    Raises:
        ValueError: `relevant` is empty.
    """
    wanted = _relevant_set(relevant)
    return len(wanted & set(pack_ranked(ranked_items, budget_tokens, counter, binding))) / len(
        wanted
    )


# -- retrievers ------------------------------------------------------------------------------


class Retriever(Protocol):
    """What `evaluate` runs: index the corpus once, then rank one scope's items per question."""

    name: str

    async def index(self, corpus: Corpus) -> None: ...

    async def search(self, scope: str, question: str, limit: int) -> list[Ranked]: ...

    async def close(self) -> None: ...


class BM25Index:
    """Okapi BM25 over one scope's memories, in pure Python.

    Words are case-folded, stop words (`STOP_WORDS`) dropped, the rest stemmed with Snowball's
    English stemmer; document frequencies and the average length are the scope's own. IDF is
    `ln(1 + (N - n + 0.5) / (n + 0.5))`, positive for every word.
    """

    def __init__(self, memories: Sequence[Memory], k1: float = 1.2, b: float = 0.75) -> None:
        self.memories = list(memories)
        self.k1, self.b = k1, b
        self.terms = [Counter(content_stems(memory.text)) for memory in self.memories]
        self.lengths = [sum(terms.values()) for terms in self.terms]
        self.average = sum(self.lengths) / len(self.lengths) if self.lengths else 0.0
        frequency: Counter[str] = Counter()
        for terms in self.terms:
            frequency.update(terms.keys())
        size = len(self.memories)
        self.idf = {t: math.log(1 + (size - n + 0.5) / (n + 0.5)) for t, n in frequency.items()}

    def scores(self, text: str) -> list[float]:
        """Each memory's BM25 score for `text`, in the memories' order."""
        query = [t for t in dict.fromkeys(content_stems(text)) if t in self.idf]
        scores = []
        for terms, length in zip(self.terms, self.lengths, strict=True):
            norm = self.k1 * (1 - self.b + self.b * length / (self.average or 1))
            scores.append(
                sum(
                    self.idf[t] * terms[t] * (self.k1 + 1) / (terms[t] + norm)
                    for t in query
                    if t in terms
                )
            )
        return scores

    def search(self, text: str, limit: int) -> list[Ranked]:
        """The memories that share a content stem with `text`, best first (ties: corpus order),
        the first `limit`."""
        scored = [(s, i) for i, s in enumerate(self.scores(text)) if s > 0]
        scored.sort(key=lambda pair: (-pair[0], pair[1]))
        return [
            Ranked(self.memories[i].key, self.memories[i].text, score)
            for score, i in scored[:limit]
        ]


class BM25Retriever:
    """The reference lexical ranking: `BM25Index` per scope (k1 1.2, b 0.75)."""

    name = "reference BM25 (stop words, Snowball, per scope)"

    def __init__(self, k1: float = 1.2, b: float = 0.75) -> None:
        self.k1, self.b = k1, b
        self.indexes: dict[str, BM25Index] = {}

    async def index(self, corpus: Corpus) -> None:
        self.indexes = {s.id: BM25Index(s.memories, self.k1, self.b) for s in corpus.scopes}

    async def search(self, scope: str, question: str, limit: int) -> list[Ranked]:
        return self.indexes[scope].search(question, limit)

    async def close(self) -> None:
        self.indexes = {}


class SQLiteStoreRetriever:
    """The SQLite store as it is: the corpus written with `put_many` into a store file in a
    temporary folder, each corpus scope as `Scope("quality", agent_id=<scope id>)`, each
    memory's value `{"content": text}` with its `session_date` (and other fields) as metadata;
    questions asked with `store.query(scope, question, top_k=limit)`.

    `file_per_scope=True` gives every scope a store file of its own: a diagnostic, since the
    ranking's statistics then cover that scope alone, as DESIGN.md section 11 asks of them.
    """

    project_id = "quality"

    def __init__(self, *, file_per_scope: bool = False, embedder: Any = None) -> None:
        self.file_per_scope = file_per_scope
        self.embedder = embedder
        self.name = (
            "SQLiteStore, one file per scope"
            if file_per_scope
            else "SQLiteStore, lexical"
            if embedder is None
            else f"SQLiteStore, hybrid ({embedder.model})"
        )
        self._folder: tempfile.TemporaryDirectory[str] | None = None
        self.stores: dict[str, Any] = {}

    @property
    def store(self) -> Any:
        """The one store (or the first one, with `file_per_scope`); None before `index`."""
        return next(iter(self.stores.values()), None)

    def scope_of(self, scope_id: str) -> Any:
        from animus_flows.protocol import Scope

        return Scope(self.project_id, agent_id=scope_id)

    async def index(self, corpus: Corpus) -> None:
        from animus_flows.stores import SQLiteStore

        await self.close()
        self._folder = tempfile.TemporaryDirectory(prefix="animus-quality-")
        files: dict[str, Any] = {}
        for scope in corpus.scopes:
            name = scope.id if self.file_per_scope else "quality"
            if name not in files:
                files[name] = SQLiteStore(
                    Path(self._folder.name) / f"{name}.db", embedder=self.embedder
                )
            self.stores[scope.id] = files[name]
            entries = []
            for memory in scope.memories:
                metadata = dict(memory.extra)
                if memory.session_date is not None:
                    metadata["session_date"] = memory.session_date
                entries.append(
                    (self.scope_of(scope.id), memory.key, {"content": memory.text}, metadata)
                )
            await files[name].put_many(entries)
        for store in files.values():
            await store.optimize()

    async def search(self, scope: str, question: str, limit: int) -> list[Ranked]:
        from animus_flows.protocol import indexed_text

        hits = await self.stores[scope].query(self.scope_of(scope), question, top_k=limit)
        return [Ranked(hit.key, indexed_text(hit.value), hit.score) for hit in hits]

    async def close(self) -> None:
        for store in {id(store): store for store in self.stores.values()}.values():
            await store.aclose()
        self.stores = {}
        if self._folder is not None:
            self._folder.cleanup()
            self._folder = None


class PostgresStoreRetriever(SQLiteStoreRetriever):
    """The PostgreSQL store as it is, on a throwaway cluster (`animus_flows.testing.postgres`),
    one schema for the whole corpus, scopes and values as `SQLiteStoreRetriever` writes them."""

    def __init__(self, *, embedder: Any = None) -> None:
        super().__init__(embedder=embedder)
        self.name = "PostgresStore, lexical" if embedder is None else "PostgresStore, hybrid"
        self._cluster: Any = None

    async def index(self, corpus: Corpus) -> None:
        from animus_flows.stores.postgres import PostgresStore
        from animus_flows.testing.postgres import TemporaryCluster

        await self.close()
        self._cluster = TemporaryCluster().__enter__()
        store = PostgresStore(self._cluster.create_database("quality"), embedder=self.embedder)
        for scope in corpus.scopes:
            self.stores[scope.id] = store
            entries = []
            for memory in scope.memories:
                metadata = dict(memory.extra)
                if memory.session_date is not None:
                    metadata["session_date"] = memory.session_date
                entries.append(
                    (self.scope_of(scope.id), memory.key, {"content": memory.text}, metadata)
                )
            await store.put_many(entries)

    async def close(self) -> None:
        await super().close()
        if self._cluster is not None:
            self._cluster.__exit__(None, None, None)
            self._cluster = None


class DenseRetriever:
    """The vector leg alone: every memory embedded (as the store embeds it), each scope's
    vectors searched by cosine, no floor: dense retrieval as a reference for the hybrid."""

    def __init__(self, embedder: Any) -> None:
        self.embedder = embedder
        self.name = f"dense only ({embedder.model})"
        self._index: Any = None
        self._keys: dict[int, tuple[str, str]] = {}

    async def index(self, corpus: Corpus) -> None:
        from animus_flows.stores.vectors import VectorIndex

        self._index = VectorIndex(self.embedder.dimension, min_similarity=-1.0)
        for scope in corpus.scopes:
            rows = await self.embedder.embed([m.text for m in scope.memories], purpose="document")
            ids = [len(self._keys) + n for n in range(len(scope.memories))]
            self._keys.update(
                (i, (m.key, m.text)) for i, m in zip(ids, scope.memories, strict=True)
            )
            self._index.add_many(scope.id, ids, rows)

    async def search(self, scope: str, question: str, limit: int) -> list[Ranked]:
        (vector,) = await self.embedder.embed([question], purpose="query")
        found = self._index.search(scope, vector, limit)
        return [Ranked(*self._keys[item_id], cosine) for item_id, cosine in found]

    async def close(self) -> None:
        self._index, self._keys = None, {}


# -- evaluation ------------------------------------------------------------------------------


@dataclass(frozen=True)
class QuestionResult:
    """One question's recall: at `k` and within each budget (tokens -> recall)."""

    question: Question
    style: str
    ranked: tuple[str, ...]
    recall_at_k: float
    within: dict[int, float]


@dataclass(frozen=True)
class Evaluation:
    """A retriever's results on a corpus, question by question."""

    retriever: str
    k: int
    budgets: tuple[int, ...]
    results: tuple[QuestionResult, ...]

    def rows(self, by: str = "kind") -> list[tuple[str, int, float, list[float]]]:
        """(group, questions, mean recall@k, mean recall per budget) for each question kind
        (`by="kind"`) or scope style (`by="style"`), then "overall"."""
        if by not in ("kind", "style"):
            raise ValueError(f"by {by!r} must be 'kind' or 'style'")
        names = KINDS if by == "kind" else STYLES
        group_of = (lambda r: r.question.kind) if by == "kind" else (lambda r: r.style)
        groups = [(name, [r for r in self.results if group_of(r) == name]) for name in names]
        groups.append(("overall", list(self.results)))
        rows = []
        for name, results in groups:
            if not results:
                continue
            n = len(results)
            rows.append(
                (
                    name,
                    n,
                    sum(r.recall_at_k for r in results) / n,
                    [sum(r.within[b] for r in results) / n for b in self.budgets],
                )
            )
        return rows

    def table(self, by: str = "kind") -> str:
        """`rows(by)` as a Markdown table."""
        head = [by, "questions", f"recall@{self.k}"] + [
            f"within {b:,} tokens" for b in self.budgets
        ]
        lines = ["| " + " | ".join(head) + " |", "|" + "|".join(" --- " for _ in head) + "|"]
        for name, n, at_k, within in self.rows(by):
            cells = [name, str(n), f"{at_k:.3f}"] + [f"{value:.3f}" for value in within]
            lines.append("| " + " | ".join(cells) + " |")
        return "\n".join(lines)


async def evaluate(
    retriever: Retriever,
    corpus: Corpus,
    counter: TokenCounter,
    *,
    k: int = 10,
    budgets: Sequence[int] = (500, 2000),
    limit: int = 200,
    binding: str = "corpus",
) -> Evaluation:
    """Index `corpus` into `retriever`, ask every question (the first `limit` results), and
    measure recall@`k` and recall within each of `budgets`. The retriever is closed after."""
    styles = {scope.id: scope.style for scope in corpus.scopes}
    await retriever.index(corpus)
    try:
        results = []
        for question in corpus.questions:
            ranked = await retriever.search(question.scope, question.question, limit)
            results.append(
                QuestionResult(
                    question,
                    styles[question.scope],
                    tuple(item.key for item in ranked),
                    recall_at_k([item.key for item in ranked], question.relevant, k),
                    {
                        b: recall_within_budget(ranked, question.relevant, b, counter, binding)
                        for b in budgets
                    },
                )
            )
    finally:
        await retriever.close()
    return Evaluation(retriever.name, k, tuple(budgets), tuple(results))
