"""The retrieval-quality corpus and harness (benchmarks/quality): labels, metrics, BM25.

No recall threshold of any store is asserted here: benchmarks/bench_quality.py measures them.
"""

import importlib
import sys
from pathlib import Path

import pytest

from animus_flows.budget import Candidate, TokenCounter, render_block

QUALITY = Path(__file__).resolve().parents[2] / "benchmarks" / "quality"


# benchmarks/ is not a package: its folder goes on the path, as when bench_quality.py runs
sys.path.insert(0, str(QUALITY.parent))
ev = importlib.import_module("quality.evaluate")
corpus_module = importlib.import_module("quality.corpus")


@pytest.fixture(scope="module")
def corpus():
    return ev.load_corpus()


@pytest.fixture(scope="module")
def counter():
    return TokenCounter("cl100k_base")


def tiny_corpus(questions=None):
    memories = (
        ev.Memory("m1", "Tom: We went to the market on Sunday.", "2026-01-01"),
        ev.Memory("m2", "Maya: I explored the old lighthouse yesterday.", "2026-01-02"),
        ev.Memory("m3", "Tom: What did you think of it?", "2026-01-02"),
    )
    scope = ev.CorpusScope("conv-a", "conversation", memories)
    return ev.Corpus((scope,), tuple(questions or ()))


# -- the corpus ------------------------------------------------------------------------------


def test_the_corpus_validates(corpus):
    assert ev.validate(corpus) == []


def test_the_corpus_has_the_counts_styles_and_kinds_asked_for(corpus):
    assert corpus.memories() >= 1800
    assert len(corpus.scopes) >= 6
    for style in ("conversation", "agent-memory"):
        assert sum(scope.style == style for scope in corpus.scopes) >= 3
    for scope in corpus.scopes:
        assert len(scope.memories) >= (400 if scope.style == "conversation" else 200), scope.id
    assert len(corpus.questions) >= 320
    for kind in ev.KINDS:
        assert sum(q.kind == kind for q in corpus.questions) >= 50, kind


def test_a_scope_is_many_times_the_largest_budget(corpus, counter):
    # a 2,000-token budget must hold a small share of a scope, or it measures nothing
    for scope in corpus.scopes:
        limit = 6 if scope.style == "conversation" else 3.5
        assert ev.scope_tokens(scope, counter) > limit * 2000, scope.id


def test_every_relevant_key_is_an_item_of_the_questions_scope(corpus):
    for question in corpus.questions:
        keys = corpus.scope(question.scope).keys()
        assert question.relevant, question.id
        assert set(question.relevant) <= keys, question.id


def test_conversation_turns_name_their_speaker_and_session_date(corpus):
    for scope in corpus.scopes:
        if scope.style == "conversation":
            assert 400 <= len(scope.memories) <= 800
            speakers = {memory.text.split(":", 1)[0] for memory in scope.memories}
            assert len(speakers) == 2, scope.id
            assert all(memory.session_date for memory in scope.memories)


def test_conversations_run_over_ten_to_twenty_five_sessions_in_date_order(corpus):
    for scope in corpus.scopes:
        if scope.style == "conversation":
            assert corpus_module.conversation_session_problems(scope) == []
            dates = {m.key.split(":")[0]: m.session_date for m in scope.memories}
            assert 10 <= len(dates) <= 25, scope.id
            assert list(dates.values()) == sorted(dates.values()), scope.id


def test_conversation_session_problems_names_order_numbering_and_dates():
    def turn(key, date):
        return ev.Memory(key, "Tom: Hi.", date)

    scope = ev.CorpusScope(
        "conv-a",
        "conversation",
        (
            turn("s1:t1", "2026-01-02"),
            turn("s1:t2", "2026-01-03"),
            turn("s2:t2", "2026-01-01"),
            turn("m1", "2026-01-05"),
        ),
    )
    assert corpus_module.conversation_session_problems(scope) == [
        "conv-a/s1:t2 is dated unlike the rest of its session",
        "conv-a/s2:t2 follows s1:t2",
        "conv-a/m1 is not a key s<session>:t<turn>",
        "conv-a: a session dated 2026-01-01 follows one dated 2026-01-02",
        "conv-a has 2 sessions, not 10-25",
    ]


def test_paraphrase_questions_share_no_content_stem_with_their_answers(corpus):
    assert ev.paraphrase_overlaps(corpus) == {}


def test_inflection_questions_reach_their_answer_through_another_inflection(corpus):
    assert ev.inflection_misfits(corpus) == []


def test_the_corpus_file_is_utf8_pretty_printed_json():
    text = (QUALITY / "corpus.json").read_text(encoding="utf-8")
    assert text.startswith('{\n  "')
    assert text.endswith("}\n")


def test_validate_names_a_relevant_key_missing_from_the_scope():
    question = ev.Question("q1", "conv-a", "Where did Tom go?", ("m1", "m9"), "lexical")
    problems = ev.validate(tiny_corpus([question]))
    assert "q1: relevant key 'm9' is not an item of conv-a" in problems


def test_validate_names_a_question_without_relevant_keys_and_an_unknown_scope():
    questions = [
        ev.Question("q1", "conv-a", "Where did Tom go?", (), "lexical"),
        ev.Question("q2", "conv-b", "Where did Tom go?", ("m1",), "lexical"),
        ev.Question("q3", "conv-a", "Where did Tom go?", ("m1",), "multi-hop"),
    ]
    problems = ev.validate(tiny_corpus(questions))
    assert "q1 has no relevant key" in problems
    assert "q2 names the scope 'conv-b', not in the corpus" in problems
    assert "q3 is multi-hop but has one relevant key" in problems


def test_load_corpus_reads_a_file_and_keeps_extra_fields(tmp_path):
    path = tmp_path / "corpus.json"
    path.write_text(
        '{"scopes": [{"id": "s", "style": "agent-memory", "memories": [{"key": "k",'
        ' "text": "Brent rolls on Thursday before noon", "type": "procedure"}]}],'
        ' "questions": [{"id": "q", "scope": "s", "question": "When do we roll Brent?",'
        ' "relevant": ["k"], "kind": "lexical"}]}',
        encoding="utf-8",
    )
    corpus = ev.load_corpus(path)
    assert corpus.scope("s").memories[0] == ev.Memory("k", "Brent rolls on Thursday before noon")
    assert corpus.scope("s").memories[0].extra == {"type": "procedure"}
    assert corpus.questions[0].relevant == ("k",)


# -- words -----------------------------------------------------------------------------------


def test_content_stems_drop_function_words_and_fold_inflections():
    assert ev.content_stems("What did she explore?") == ["explor"]
    assert ev.content_stems("She explored the markets, and he's exploring") == [
        "explor",
        "market",
        "explor",
    ]
    assert ev.stem("studies") == ev.stem("studied")


# -- metrics ---------------------------------------------------------------------------------


def test_recall_at_k_counts_the_relevant_keys_in_the_first_k():
    ranked = ["a", "b", "c", "d"]
    assert ev.recall_at_k(ranked, ["b", "x"], 2) == 0.5
    assert ev.recall_at_k(ranked, ["c"], 2) == 0.0
    assert ev.recall_at_k(ranked, ["c", "a"], 10) == 1.0
    assert ev.recall_at_k([], ["a"], 3) == 0.0


def test_recall_at_k_refuses_no_relevant_keys_and_k_below_one():
    with pytest.raises(ValueError, match="at least one relevant key"):
        ev.recall_at_k(["a"], [], 1)
    with pytest.raises(ValueError, match="k 0"):
        ev.recall_at_k(["a"], ["a"], 0)


def _tokens(counter, key, text):
    return counter.count(render_block(Candidate("corpus", key, text, 0.0)))


def test_recall_within_budget_packs_in_order_and_skips_what_does_not_fit(counter):
    items = [
        ev.Ranked("a", "short one"),
        ev.Ranked("b", "a much longer memory " * 20),
        ev.Ranked("c", "short two"),
    ]
    room = _tokens(counter, "a", "short one") + _tokens(counter, "c", "short two")
    assert ev.pack_ranked(items, room, counter) == ["a", "c"]
    assert ev.recall_within_budget(items, ["c"], room, counter) == 1.0
    assert ev.recall_within_budget(items, ["b", "c"], room, counter) == 0.5
    # one token less: "c" no longer fits after "a", and the order is the retriever's
    assert ev.recall_within_budget(items, ["c"], room - 1, counter) == 0.0
    assert ev.recall_within_budget(items, ["a"], room - 1, counter) == 1.0


def test_recall_within_budget_counts_the_hooks_block_with_the_binding_name(counter):
    items = [ev.Ranked("s1:t3", "Maya: I signed up for the pottery class")]
    exact = counter.count("[corpus/s1:t3] Maya: I signed up for the pottery class\n")
    assert ev.recall_within_budget(items, ["s1:t3"], exact, counter) == 1.0
    assert ev.recall_within_budget(items, ["s1:t3"], exact - 1, counter) == 0.0
    longer = counter.count(
        "[a-much-longer-binding/s1:t3] Maya: I signed up for the pottery class\n"
    )
    assert longer > exact
    assert ev.recall_within_budget(items, ["s1:t3"], exact, counter, "a-much-longer-binding") == 0


def test_recall_within_budget_refuses_no_relevant_keys(counter):
    with pytest.raises(ValueError, match="at least one relevant key"):
        ev.recall_within_budget([ev.Ranked("a", "text")], [], 100, counter)


# -- the reference BM25 ----------------------------------------------------------------------


def test_bm25_ranks_a_planted_item_first_across_inflections_and_function_words():
    filler = [
        ev.Memory(f"f{i}", f"What did she say about the {word} when she went there?")
        for i, word in enumerate(["weather", "train", "party", "garden", "film", "dinner"])
    ]
    planted = ev.Memory("planted", "Maya explored the abandoned lighthouse on the island.")
    index = ev.BM25Index([*filler[:3], planted, *filler[3:]])
    ranked = index.search("What did she say when she was exploring the lighthouses?", 10)
    assert ranked[0].key == "planted"
    assert ranked[0].score > 0


def test_bm25_ignores_stop_words_and_returns_only_matches():
    index = ev.BM25Index([ev.Memory("a", "What did she do there?"), ev.Memory("b", "Pottery")])
    assert index.search("what did she do", 10) == []
    assert [r.key for r in index.search("potteries", 10)] == ["b"]


def test_bm25_statistics_are_per_scope():
    # "market" is in every item of one scope and in one item of the other: only there does it
    # carry weight
    common = [ev.Memory(f"c{i}", f"market note {i}") for i in range(5)]
    rare = [ev.Memory("r0", "market report")] + [
        ev.Memory(f"r{i}", f"weather note {i}") for i in range(1, 5)
    ]
    assert ev.BM25Index(common).idf["market"] < ev.BM25Index(rare).idf["market"]


async def test_bm25_retriever_searches_each_scope_on_its_own():
    corpus = tiny_corpus()
    retriever = ev.BM25Retriever()
    await retriever.index(corpus)
    ranked = await retriever.search("conv-a", "Who is exploring lighthouses?", 5)
    assert [r.key for r in ranked] == ["m2"]
    await retriever.close()


async def test_the_sqlite_adapter_loads_each_scope_and_queries_the_store():
    memories = (ev.Memory("x1", "Brent rolls on Thursday before noon", "2026-01-09"),)
    other = ev.CorpusScope("agent-b", "agent-memory", memories)
    corpus = ev.Corpus((tiny_corpus().scopes[0], other), ())
    retriever = ev.SQLiteStoreRetriever()
    await retriever.index(corpus)
    try:
        ranked = await retriever.search("conv-a", "lighthouse", 5)
        assert [r.key for r in ranked] == ["m2"]
        assert ranked[0].text == "Maya: I explored the old lighthouse yesterday."
        assert await retriever.search("conv-a", "Brent", 5) == []  # another scope's item
        item = await retriever.store.get(retriever.scope_of("agent-b"), "x1")
        assert item.value == {"content": "Brent rolls on Thursday before noon"}
        assert item.metadata == {"session_date": "2026-01-09"}
    finally:
        await retriever.close()


async def test_the_sqlite_adapter_can_give_each_scope_a_file_of_its_own():
    memories = (ev.Memory("x1", "Brent rolls on Thursday before noon", "2026-01-09"),)
    other = ev.CorpusScope("agent-b", "agent-memory", memories)
    corpus = ev.Corpus((tiny_corpus().scopes[0], other), ())
    retriever = ev.SQLiteStoreRetriever(file_per_scope=True)
    await retriever.index(corpus)
    try:
        assert retriever.stores["conv-a"] is not retriever.stores["agent-b"]
        assert [r.key for r in await retriever.search("agent-b", "Brent", 5)] == ["x1"]
        assert [r.key for r in await retriever.search("conv-a", "lighthouse", 5)] == ["m2"]
    finally:
        await retriever.close()
    assert retriever.stores == {}


def test_scope_tokens_counts_every_item_as_rendered(counter):
    scope = tiny_corpus().scopes[0]
    expected = sum(counter.count(f"[corpus/{m.key}] {m.text}\n") for m in scope.memories)
    assert ev.scope_tokens(scope, counter) == expected


async def test_evaluate_reports_recall_per_kind_and_overall(counter):
    questions = [
        ev.Question("q1", "conv-a", "Who explored the lighthouse?", ("m2",), "lexical"),
        ev.Question("q2", "conv-a", "Which tower by the sea did she visit?", ("m2",), "paraphrase"),
    ]
    result = await ev.evaluate(ev.BM25Retriever(), tiny_corpus(questions), counter)
    rows = {name: (n, at_k, within) for name, n, at_k, within in result.rows()}
    assert rows["lexical"] == (1, 1.0, [1.0, 1.0])
    assert rows["paraphrase"] == (1, 0.0, [0.0, 0.0])
    assert rows["overall"] == (2, 0.5, [0.5, 0.5])
    assert "| paraphrase | 1 | 0.000 | 0.000 | 0.000 |" in result.table()
    assert "| conversation | 2 | 0.500 |" in result.table(by="style")
