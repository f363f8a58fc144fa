"""What may leave the system, and in what order: sensitivity, temperature tiers, disclosure.

Pure rules over the reserved metadata keys (and, for versions, the memory layer's stored
value). The read path (`animus_flows.retrieval.service`) applies them for the hook, the loader
and the MCP binding server; the memory layer reads its records with the same functions.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from animus_flows.budget import DEFAULT_TIER, TIERS

if TYPE_CHECKING:
    from animus_flows.config.models import MemoryBinding

SENSITIVITIES = ("public", "personal", "confidential", "secret")
MEMORY_TYPES = ("episodic", "semantic", "procedural", "active", "reflective")
DEFAULT_SENSITIVITY = "public"
DEFAULT_MEMORY_TYPE = "semantic"

#: What an absent reserved key reads as (seed 003's defaults).
METADATA_DEFAULTS: dict[str, str] = {
    "memory_type": DEFAULT_MEMORY_TYPE,
    "sensitivity": DEFAULT_SENSITIVITY,
    "tier": DEFAULT_TIER,
    "source": "stated",
    "provenance": "direct",
}

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
    """The item's temperature tier as the memory layer reads it; absent or unknown is WARM."""
    return declared_tier(metadata) or DEFAULT_TIER


def declared_tier(metadata: Mapping[str, Any]) -> str | None:
    """The tier an item declares, or None for an untiered item (a raw corpus written by another
    tool, or a tier name nobody knows). Disclosure treats untiered items apart: after HOT they
    compete by score with WARM, without WARM's 70% gate."""
    value = metadata.get("tier")
    if value is None:
        return None
    value = str(value).lower()
    return value if value in TIERS else None


def memory_type_of(metadata: Mapping[str, Any]) -> str:
    """The item's memory type; absent or unknown reads as `semantic`, the seed's default."""
    value = metadata.get("memory_type")
    value = str(value).lower() if value is not None else DEFAULT_MEMORY_TYPE
    return value if value in MEMORY_TYPES else DEFAULT_MEMORY_TYPE


def metadata_filter(name: str, values: Iterable[str]) -> list[str | None]:
    """A store filter for `name` in `values`, matching items that omit `name` when its default
    is among `values` (an item without `tier` is WARM), and the spellings other tools use
    (`HOT`, `Semantic`): reads of the reserved keys ignore case, so filters must too."""
    options: list[str | None] = list(
        dict.fromkeys(form for value in values for form in (value, value.upper(), value.title()))
    )
    if METADATA_DEFAULTS.get(name) in options:
        options.append(None)
    return options


def is_superseded(value: Any) -> bool:
    """Whether a stored value names a newer version of itself: the memory layer writes
    `superseded_by` into a memory's value when it versions it. History is never injected."""
    return isinstance(value, dict) and value.get("superseded_by") is not None


@dataclass(frozen=True)
class ReadRules:
    """What one read may disclose: PUBLIC items only, always, within `tiers` (untiered items
    count as WARM here) and `memory_types` (None: every type)."""

    tiers: tuple[str, ...] = ("hot", "warm")
    memory_types: tuple[str, ...] | None = None

    @classmethod
    def of(cls, binding: MemoryBinding) -> ReadRules:
        """What a workflow file's memory binding may disclose: its `tiers` and `memory_types`."""
        types = tuple(binding.memory_types) if binding.memory_types else None
        return cls(tuple(binding.tiers), types)

    def store_filters(self) -> dict[str, Any]:
        """Filters that keep a store's top_k for what these rules may disclose."""
        filters: dict[str, Any] = {"tier": metadata_filter("tier", self.tiers)}
        if self.memory_types:  # no memory_type means SEMANTIC, as the memory layer reads it
            filters["memory_type"] = metadata_filter("memory_type", self.memory_types)
        filters.update(EGRESS_FILTER)
        return filters

    def refusal(self, metadata: Mapping[str, Any], value: Any) -> str | None:
        """Why an item may not be disclosed (a plugin may ignore filters), or None."""
        if not is_egress_safe(metadata):
            return "not PUBLIC"
        if tier_of(metadata) not in self.tiers:
            return "tier not listed"
        if self.memory_types and memory_type_of(metadata) not in self.memory_types:
            return "memory type not listed"
        if is_superseded(value):
            return "superseded by a newer version"
        return None
