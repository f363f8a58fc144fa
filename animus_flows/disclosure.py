"""What may leave the system, and in what order: sensitivity, temperature tiers, disclosure.

Pure rules over the reserved metadata keys (and, for versions, the memory layer's stored
value), shared by the `memory_bindings` hook, the loader, the MCP servers and the memory layer,
so every egress path applies the same ones.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

SENSITIVITIES = ("public", "personal", "confidential", "secret")
TIERS = ("hot", "warm", "cold")
DEFAULT_SENSITIVITY = "public"
DEFAULT_TIER = "warm"

#: WARM items are disclosed only while less than this share of a budget is used (seed 002).
WARM_THRESHOLD = 0.7

#: A store filter that keeps only what may be egressed: PUBLIC (as people spell it), or no
#: sensitivity at all. Results are checked again with `is_egress_safe`.
EGRESS_FILTER: dict[str, Any] = {"sensitivity": [None, "public", "PUBLIC", "Public"]}


def sensitivity_of(metadata: Mapping[str, Any]) -> str:
    """The item's sensitivity; a missing or unknown value reads as its strictest neighbour.

    Absent means PUBLIC (seed 003's default); anything present but unrecognized is treated as
    SECRET, so a typo can never widen what is disclosed.
    """
    value = metadata.get("sensitivity")
    if value is None:
        return DEFAULT_SENSITIVITY
    value = str(value).lower()
    return value if value in SENSITIVITIES else "secret"


def is_egress_safe(metadata: Mapping[str, Any]) -> bool:
    """Whether an item may leave the system (a prompt, an MCP answer, a webhook)."""
    return sensitivity_of(metadata) == DEFAULT_SENSITIVITY


def tier_of(metadata: Mapping[str, Any]) -> str:
    """The item's temperature tier; absent or unknown means WARM."""
    value = str(metadata.get("tier") or DEFAULT_TIER).lower()
    return value if value in TIERS else DEFAULT_TIER


def is_superseded(value: Any) -> bool:
    """Whether a stored value names a newer version of itself: the memory layer writes
    `superseded_by` into a memory's value when it versions it. History is never injected."""
    return isinstance(value, dict) and value.get("superseded_by") is not None


def tier_rank(tier: str) -> int:
    """0 for HOT, 1 for WARM, 2 for COLD: the order of progressive disclosure."""
    return TIERS.index(tier)


def warm_allowed(used_tokens: int, budget_tokens: int | None) -> bool:
    """Seed 002's gate: WARM only while less than 70% of the budget is spent."""
    return budget_tokens is None or used_tokens < WARM_THRESHOLD * budget_tokens
