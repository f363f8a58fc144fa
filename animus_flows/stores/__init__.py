"""Memory store implementations and the sync facade.

Backends with optional dependencies import lazily, so `animus_flows.stores` always imports.
"""

from animus_flows.stores.base import BaseStore, SyncStore
from animus_flows.stores.sqlite import SQLiteStore

__all__ = ["BaseStore", "SQLiteStore", "SyncStore"]
