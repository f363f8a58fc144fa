"""The memory layer (seed 003) and the memory loader (seed 002), on top of any memory store.

Example:
    ```python
    from animus_flows.memory import MemoryLayer, MemoryType
    from animus_flows.protocol import Scope
    from animus_flows.stores import SQLiteStore

    memory = MemoryLayer(SQLiteStore(".animus/memory.db"), Scope("demo", agent_id="dev"))
    memory.remember("Run the suite with make test", MemoryType.PROCEDURAL, tags=["testing"])
    ```
"""

from animus_flows.memory.durable import LedgerRecord
from animus_flows.memory.layer import AsyncMemoryLayer, MemoryLayer
from animus_flows.memory.load_request import AGENT_SECTOR_PREFERENCES
from animus_flows.memory.load_result import LoadedMemory, LoadMetadata, LoadMetrics, LoadResult
from animus_flows.memory.loader import AsyncMemoryLoader, MemoryLoader
from animus_flows.memory.records import Entity, Memory, MemoryTier, MemoryType, Sensitivity
from animus_flows.memory.tiers import TierPolicy

__all__ = [
    "AGENT_SECTOR_PREFERENCES",
    "AsyncMemoryLayer",
    "AsyncMemoryLoader",
    "Entity",
    "LedgerRecord",
    "LoadMetadata",
    "LoadMetrics",
    "LoadResult",
    "LoadedMemory",
    "Memory",
    "MemoryLayer",
    "MemoryLoader",
    "MemoryTier",
    "MemoryType",
    "Sensitivity",
    "TierPolicy",
]
