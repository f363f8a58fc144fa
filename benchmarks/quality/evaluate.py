"""Retrieval quality: the harness that measures a retriever on the labelled corpus.

What users judge is whether the right memories end up in the prompt's budget (DESIGN.md
section 11), so retrieval is measured as the recall of each question's relevant items: in the
first k results, and within a token budget packed the way the `memory_bindings` hook packs
(`animus_flows.budget.pack`, blocks rendered by `render_block`, counted with `TokenCounter`).

The corpus (`corpus.json` beside this file, original text written for this repository) has
scopes of two styles, multi-session conversations between two people and the memories of agent
teams, and questions of six kinds (`KINDS`), each labelled with every item needed to answer it.

A retriever is anything with a `name` and the three coroutines of `Retriever`: `index` the
corpus once, `search` one scope for one question, `close` (`retrievers`, re-exported here):

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

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from quality.corpus import (  # noqa: F401  (re-exported: this module is the harness's API)
    AGENT_MEMORY_ITEMS,
    CORPUS_PATH,
    KINDS,
    STOP_WORDS,
    STYLES,
    Corpus,
    CorpusScope,
    Memory,
    Question,
    content_stems,
    inflection_misfits,
    load_corpus,
    paraphrase_overlaps,
    scope_tokens,
    shared_stems,
    stem,
    validate,
    words,
)
from quality.retrievers import (  # noqa: F401  (re-exported)
    BM25Index,
    BM25Retriever,
    DenseRetriever,
    PostgresStoreRetriever,
    Ranked,
    Retriever,
    SQLiteStoreRetriever,
)

from animus_flows.budget import BindingCaps, Candidate, TokenCounter, pack

# -- metrics ---------------------------------------------------------------------------------


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
