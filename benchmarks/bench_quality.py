"""Retrieval quality: recall of the right memories at 10 and within 500 and 2,000 tokens.

    .venv/bin/python benchmarks/bench_quality.py [--retrievers sqlite,bm25,...] [--k 10]
        [--budgets 500,2000] [--limit 200] [--by-style] [--misses N]

Runs every question of the labelled corpus (benchmarks/quality/corpus.json: conversations
between two people and agent teams' memories, six question kinds) through each retriever and
prints, per kind and overall, the mean recall of the relevant items in the first k results
and within each token budget, packed the way the `memory_bindings` hook packs (each item
rendered as its `[corpus/key] text` block, cl100k_base tokens, skipped when it does not fit).
The corpus is checked first: labels, counts, and that paraphrase questions share no content
stem with their answers.

Retrievers are listed in `RETRIEVERS` (name -> a function making one); add one there, with
`index`, `search` and `close` as `quality.evaluate.Retriever` describes.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

from quality.evaluate import (
    KINDS,
    STYLES,
    BM25Retriever,
    Corpus,
    DenseRetriever,
    PostgresStoreRetriever,
    Retriever,
    SQLiteStoreRetriever,
    evaluate,
    inflection_misfits,
    load_corpus,
    paraphrase_overlaps,
    scope_tokens,
    validate,
)
from quality.fusions import METHODS, FusionRetriever, Legs
from quality.hook import evaluate_hook
from quality.porter import PorterRetriever, analysis_rates

from animus_flows.budget import TokenCounter


#: The retrievers to compare, by the name `--retrievers` takes.
def _local() -> Any:
    from animus_flows.embedders import LocalEmbedder

    return LocalEmbedder()


@functools.cache
def _legs() -> Legs:
    return Legs(_local())


RETRIEVERS: dict[str, Callable[[], Retriever]] = {
    "sqlite": SQLiteStoreRetriever,
    "bm25": BM25Retriever,
    "dense": lambda: DenseRetriever(_local()),
    "hybrid": lambda: SQLiteStoreRetriever(embedder=_local()),
    "postgres": PostgresStoreRetriever,
    "postgres-hybrid": lambda: PostgresStoreRetriever(embedder=_local()),
    # a diagnostic: the same store with the ranking's statistics of one scope only
    "sqlite-file-per-scope": lambda: SQLiteStoreRetriever(file_per_scope=True),
    # the other stemmer: SQLite FTS5's built-in porter tokenizer
    "fts5-porter": PorterRetriever,
    # fusion methods compared on the same two legs (quality/fusions.py)
    **{
        f"fusion-{method}": (lambda method=method: FusionRetriever(_legs(), method))
        for method in METHODS
    },
}
#: The stores the hook is measured on (`--hook`), as `stores:` entries.
HOOK_STORES = {
    "sqlite": "{type: sqlite, path: quality.db}",
    "hybrid": "{type: sqlite, path: quality.db, embedder: {type: local}}",
}
#: The ones run when `--retrievers` is not given, in the order printed.
DEFAULT = "sqlite,bm25,fts5-porter,dense,hybrid"


def describe(corpus: Corpus, counter: TokenCounter) -> str:
    """The corpus's counts by scope style and question kind, and its checks."""
    lines = []
    for style in STYLES:
        scopes = [s for s in corpus.scopes if s.style == style]
        sizes = "; ".join(
            f"{s.id}: {len(s.memories)}, {scope_tokens(s, counter):,} tokens" for s in scopes
        )
        lines.append(
            f"{style}: {len(scopes)} scopes, {sum(len(s.memories) for s in scopes)} memories"
            f" ({sizes})"
        )
    kinds = Counter(q.kind for q in corpus.questions)
    lines.append(
        f"{len(corpus.questions)} questions: " + ", ".join(f"{k} {kinds[k]}" for k in KINDS)
    )
    problems = validate(corpus)
    lines.append(f"labels: {len(problems)} problems" + "".join(f"\n  {p}" for p in problems))
    overlaps = paraphrase_overlaps(corpus)
    lines.append(
        f"paraphrase questions sharing a content stem with a relevant item: {len(overlaps)}"
        + "".join(f"\n  {q}: {', '.join(sorted(s))}" for q, s in overlaps.items())
    )
    misfits = inflection_misfits(corpus)
    lines.append(f"inflection questions with no inflected match: {len(misfits)} {misfits or ''}")
    return "\n".join(lines)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--retrievers", default=DEFAULT, help=f"of {', '.join(RETRIEVERS)}")
    parser.add_argument("--k", type=int, default=10)
    parser.add_argument("--budgets", default="500,2000")
    parser.add_argument("--limit", type=int, default=200, help="results asked per question")
    parser.add_argument("--by-style", action="store_true", help="also a table per scope style")
    parser.add_argument("--misses", type=int, default=0, help="print N missed questions each")
    parser.add_argument(
        "--hook", default="sqlite,hybrid", help="stores the hook is measured on (or none)"
    )
    args = parser.parse_args()
    names = [name.strip() for name in args.retrievers.split(",") if name.strip()]
    unknown = [name for name in names if name not in RETRIEVERS]
    if unknown:
        parser.error(f"unknown retrievers {unknown}; choose from {', '.join(RETRIEVERS)}")
    budgets = [int(b) for b in args.budgets.split(",")]

    corpus = load_corpus()
    counter = TokenCounter("cl100k_base")
    print(describe(corpus, counter))
    if "fts5-porter" in names:
        texts = [memory.text for scope in corpus.scopes for memory in scope.memories] * 10
        rates = analysis_rates(texts)
        print(
            f"analysis and FTS5 insert, {len(texts):,} items: Snowball in Python"
            f" {rates['snowball']:,.0f} items/s, FTS5 porter {rates['porter']:,.0f} items/s"
        )
    for name in names:
        started = time.perf_counter()
        result = await evaluate(
            RETRIEVERS[name](), corpus, counter, k=args.k, budgets=budgets, limit=args.limit
        )
        print(f"\n## {result.retriever} ({time.perf_counter() - started:.1f} s)\n")
        print(result.table())
        if args.by_style:
            print()
            print(result.table(by="style"))
        missed = [r for r in result.results if r.recall_at_k < 1][: args.misses]
        for r in missed:
            absent = [key for key in r.question.relevant if key not in r.ranked[: args.k]]
            print(f"  missed {r.question.id} ({r.question.kind}) {absent}: {r.question.question}")
    for name in [n.strip() for n in args.hook.split(",") if n.strip() and n.strip() != "none"]:
        started = time.perf_counter()
        hooked = await evaluate_hook(corpus, budgets, store=HOOK_STORES[name])
        print(f"\n## the memory_bindings hook on {name} ({time.perf_counter() - started:.1f} s)\n")
        print(hooked.table())


if __name__ == "__main__":
    asyncio.run(main())
