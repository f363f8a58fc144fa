"""The one read path: ask each source's store under its deadline, keep what may leave the
system, disclose by tier within the budgets, and note what happened to each source.

The `memory_bindings` hook, the MCP binding server and the memory loader all read through
here; none of them holds a disclosure or egress rule of its own:

- `fetch(source)` runs one query or key lookup under the source's deadline (a slow, failing or
  missing store degrades to no hits with a status), caps `top_k` at the store's maximum, and
  keeps only the hits the source's `ReadRules` may disclose.
- `read(sources, counter, ...)` fetches every source at once and packs the survivors
  (`animus_flows.budget.pack`: HOT first, then WARM and untiered items by score, within each
  source's budget, the phase cap and the flow budget). A source without `top_k` asks its store
  for more candidates until its budget is full or the store has no more.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field

from animus_flows.budget import BindingCaps, Candidate, PackResult, TokenCounter, pack
from animus_flows.protocol import (
    JSON,
    MemoryItem,
    MemoryStore,
    QueryHit,
    Scope,
    canonical_json,
    indexed_text,
)
from animus_flows.retrieval.degrade import run_degraded
from animus_flows.retrieval.disclosure import ReadRules, declared_tier

#: How many candidates a source without `top_k` asks for first, per this many budget tokens
#: (a short memory with its label costs about this much), and the factor it grows by.
TOKENS_PER_CANDIDATE = 40
FIRST_CANDIDATES = 8
GROWTH = 4
#: Less room than this (tokens) fits no block ("[b/k] x\n"): a source stops asking for more.
SMALLEST_BLOCK = 6

#: An extra rule of one read (the loader's tags or age): why a hit may not be used, or None.
Refusal = Callable[[QueryHit], Awaitable[str | None]]


@dataclass
class Source:
    """One read: a store (None when its plugin matched nothing), a scope, what to ask for, and
    what it may disclose within which budget.

    `label` names the source in the packed text and the audit (a binding's label); sources
    sharing a label share its budget. `key` makes the read a key lookup instead of a query for
    `text`. Without `top_k` the source asks for as many candidates as fit `budget_tokens`.
    A `problem` (status, note) set before the read stands for it: the store is not asked.
    """

    label: str
    store: MemoryStore | None
    scope: Scope | None
    text: str = ""
    key: str | None = None
    rules: ReadRules = field(default_factory=ReadRules)
    top_k: int | None = None
    budget_tokens: int | None = None
    timeout_ms: float | None = 500
    filters: dict[str, JSON] | None = None
    refuse: Refusal | None = None
    shown_key: Callable[[str], str] | None = None  # how a key reads in the packed text
    problem: tuple[str, str] | None = None


@dataclass
class Fetched:
    """What one source returned (the hits its rules admit), or why it returned nothing.

    `notes` read as the audit's `detail`; `asked` is the top_k last sent to the store and
    `returned` how many hits it sent back before the rules, so a short page means no more.
    """

    source: Source
    op: str
    hits: list[QueryHit] = field(default_factory=list)
    status: str = "ok"
    queried: bool = True
    notes: list[str] = field(default_factory=list)
    latency_ms: float = 0.0
    bytes_in: int = 0
    bytes_out: int = 0
    asked: int = 0
    returned: int = 0
    refused: dict[str, int] = field(default_factory=dict)
    item: MemoryItem | None = None  # what a key lookup found, with its timestamps

    @property
    def exhausted(self) -> bool:
        """Whether the store has nothing more to give this source."""
        return self.op == "get" or self.returned < self.asked or self.status != "ok"


@dataclass
class Reading:
    """The outcome of `read`: each source's fetch and what was packed from all of them."""

    fetches: list[Fetched]
    packed: PackResult

    def tokens_of(self, label: str) -> int:
        return self.packed.tokens_by_binding().get(label, 0)

    def detail(self, fetched: Fetched) -> str:
        """The audit detail of one source: what it injected, then every note."""
        label = fetched.source.label
        notes = list(fetched.notes)
        if fetched.status == "ok" and fetched.queried:
            injected = sum(1 for p in self.packed.selected if p.candidate.binding == label)
            dropped: dict[str, int] = {}
            for drop in self.packed.dropped:
                if drop.candidate.binding == label:
                    dropped[drop.reason] = dropped.get(drop.reason, 0) + 1
            notes.insert(0, f"injected {injected}")
            notes += [f"{count} dropped: {reason}" for reason, count in dropped.items()]
        return "; ".join(notes)


async def fetch(source: Source, top_k: int | None = None) -> Fetched:
    """Ask `source`'s store once, under its deadline, for `top_k` hits (default: the source's
    own, else a first guess from its budget); never raises for a store's failure."""
    fetched = Fetched(source, "get" if source.key is not None else "query")
    if source.problem is not None:
        fetched.status, note = source.problem
        fetched.queried = False
        fetched.notes.append(note)
        return fetched
    store, scope = source.store, source.scope
    if store is None or scope is None:
        fetched.status = "unmatched"
        fetched.notes.append(f"no store or saved memory-store block named {source.label!r}")
        return fetched
    wanted = top_k or source.top_k or first_top_k(source.budget_tokens)

    async def call() -> list[QueryHit]:
        connect = getattr(store, "connect", None)
        if connect is not None:  # out-of-process plugins report capabilities at handshake
            await connect()
        if source.key is not None:
            fetched.bytes_in = len(source.key.encode())
            item = fetched.item = await store.get(scope, source.key)
            return [] if item is None else [QueryHit(item.key, item.value, 1.0, item.metadata)]
        fetched.asked = min(wanted, store.capabilities.max_query_top_k)
        if source.top_k is not None and fetched.asked < source.top_k:
            fetched.notes.append(f"top_k {source.top_k} clamped to {fetched.asked} (store maximum)")
        fetched.bytes_in = len(source.text.encode())
        filters = {**(source.filters or {}), **source.rules.store_filters()}
        return await store.query(scope, source.text, top_k=fetched.asked, filters=filters)

    outcome = await run_degraded(call, timeout_ms=source.timeout_ms, fallback=[])
    fetched.status, fetched.latency_ms = outcome.status, round(outcome.duration_ms, 3)
    if outcome.status == "timeout":
        fetched.notes.append(f"{outcome.detail}; went on without it")
    elif outcome.status == "error":
        fetched.notes.append(outcome.detail)
    fetched.returned = len(outcome.value)
    fetched.bytes_out = len(canonical_json([hit.to_json() for hit in outcome.value]).encode())
    fetched.hits = await _admitted(source, outcome.value, fetched.refused)
    fetched.notes += [f"{count} refused: {why}" for why, count in fetched.refused.items()]
    return fetched


def first_top_k(budget_tokens: int | None) -> int:
    """How many candidates a source without `top_k` asks for first."""
    if budget_tokens is None:
        return FIRST_CANDIDATES * GROWTH
    return max(FIRST_CANDIDATES, -(-budget_tokens // TOKENS_PER_CANDIDATE))


async def _admitted(
    source: Source, hits: list[QueryHit], refused: dict[str, int]
) -> list[QueryHit]:
    """The hits `source` may use, best first; the others counted by reason in `refused`."""
    kept = []
    for hit in hits:
        reason = source.rules.refusal(hit.metadata, hit.value)
        if reason is None and source.text and source.key is None and hit.score <= 0:
            # a store's filler (the newest items, sharing no word that counts) is no match
            reason = "score 0: no match"
        if reason is None and source.refuse is not None:
            reason = await source.refuse(hit)
        if reason is None:
            kept.append(hit)
        else:
            refused[reason] = refused.get(reason, 0) + 1
    return kept


def candidates(fetches: Sequence[Fetched]) -> list[Candidate]:
    """Every admitted hit as a packing candidate, the sources taking turns (so equal scores,
    such as a listing's, share the budget fairly)."""
    per_source = [
        [
            Candidate(
                f.source.label,
                f.source.shown_key(hit.key) if f.source.shown_key else hit.key,
                indexed_text(hit.value),
                hit.score,
                declared_tier(hit.metadata),
                {"hit": hit, "source": f.source},
            )
            for hit in f.hits
        ]
        for f in fetches
    ]
    longest = max((len(kept) for kept in per_source), default=0)
    return [kept[n] for n in range(longest) for kept in per_source if n < len(kept)]


async def read(
    sources: Sequence[Source],
    counter: TokenCounter,
    *,
    phase_remaining: int | None = None,
    flow_remaining: int | None = None,
    limit: int | None = None,
) -> Reading:
    """Fetch every source concurrently and pack what they may disclose (see the module).

    `limit` caps how many items are packed in all; a source without `top_k` stops growing once
    it is reached.
    """
    fetches = list(await asyncio.gather(*(fetch(source) for source in sources)))
    tiers: dict[str, tuple[str, ...]] = {}
    for source in sources:  # sources sharing a label share its budget and every tier they read
        tiers[source.label] = (*tiers.get(source.label, ()), *source.rules.tiers)
    budgets = {source.label: source.budget_tokens for source in reversed(sources)}
    caps = {label: BindingCaps(budgets[label], tiers[label]) for label in tiers}
    while True:
        packed = pack(
            candidates(fetches),
            caps,
            counter,
            phase_remaining=phase_remaining,
            flow_remaining=flow_remaining,
            limit=limit,
        )
        growing = [i for i, f in enumerate(fetches) if _wants_more(f, packed, limit)]
        if not growing:
            return Reading(fetches, packed)
        more = await asyncio.gather(
            *(fetch(fetches[i].source, fetches[i].asked * GROWTH) for i in growing)
        )
        for i, fetched in zip(growing, more, strict=True):
            fetched.latency_ms = round(fetched.latency_ms + fetches[i].latency_ms, 3)
            fetches[i] = fetched


def _wants_more(fetched: Fetched, packed: PackResult, limit: int | None) -> bool:
    """Whether a source without `top_k` should ask its store for more candidates: everything
    it has fit so far, its budget has room, and its store may hold more."""
    source = fetched.source
    if source.top_k is not None or fetched.exhausted or fetched.asked == 0:
        return False
    if limit is not None and len(packed.selected) >= limit:
        return False
    capped = getattr(source.store, "capabilities", None)
    if capped is not None and fetched.asked >= capped.max_query_top_k:
        return False
    label = source.label
    for drop in packed.dropped:
        # one of its own left out (no room, a closed tier, the limit): more would fare no
        # better; another source's skipped for lack of room: the shared budget is full
        if drop.candidate.metadata.get("source") is source or (
            drop.candidate.binding == label and drop.reason.startswith("over the")
        ):
            return False
    spent = packed.tokens_by_binding().get(label, 0)
    return source.budget_tokens is None or source.budget_tokens - spent >= SMALLEST_BLOCK
