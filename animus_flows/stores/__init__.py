"""Memory store implementations and the sync facade.

Backends with optional dependencies import lazily, so `animus_flows.stores` always imports.
"""

from animus_flows.stores.base import BaseStore
from animus_flows.stores.sqlite import SQLiteLedgerStore, SQLiteStore
from animus_flows.stores.sync import SyncStore

__all__ = ["BaseStore", "SQLiteLedgerStore", "SQLiteStore", "SyncStore"]
