"""The standalone example plugin (examples/plugins/dict_plugin.py, nothing imported from
animus_flows) passes the same conformance suite, driven through the `jsonrpc` store."""

import sys
from pathlib import Path

import pytest_asyncio

from animus_flows.stores.jsonrpc import JsonRpcStore
from animus_flows.testing.conformance import StoreConformance

DICT_PLUGIN = Path(__file__).resolve().parents[2] / "examples" / "plugins" / "dict_plugin.py"


class TestExamplePluginConformance(StoreConformance):
    @pytest_asyncio.fixture
    async def store(self):
        store = JsonRpcStore([sys.executable, str(DICT_PLUGIN)], plugin_id="memory-dict")
        await store.connect()
        return store

    async def test_it_reports_what_it_does_natively(self, s):
        assert s.capabilities.native_key_get and s.capabilities.strong_consistency
        assert not s.capabilities.native_ttl  # the host emulates TTL through metadata
        assert s.capabilities.max_query_top_k == 100
