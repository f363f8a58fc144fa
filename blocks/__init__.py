"""Prefect blocks for memory stores, installed as `animus_flows.blocks`.

Register them with `prefect block register -m animus_flows.blocks`. Prefect imports this module
through the `prefect.collections` entry point, so `Block.load("animus-sqlite-memory-store/NAME")`
works in a fresh worker.
"""

from animus_flows.blocks.base import MEMORY_STORE_CAPABILITY, MemoryStoreBlock
from animus_flows.blocks.jsonrpc import JsonRpcMemoryStore
from animus_flows.blocks.postgres import PostgresMemoryStore
from animus_flows.blocks.sqlite import SQLiteMemoryStore
from animus_flows.blocks.zep import ZepMemoryStore

__all__ = [
    "MEMORY_STORE_CAPABILITY",
    "JsonRpcMemoryStore",
    "MemoryStoreBlock",
    "PostgresMemoryStore",
    "SQLiteMemoryStore",
    "ZepMemoryStore",
]
