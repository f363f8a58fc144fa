"""The conformance suite over the wire: SQLite served by `animus memory serve`, driven through
the `jsonrpc` store, each test against a fresh plugin process and database."""

import pytest_asyncio

from animus_flows.testing.conformance import StoreConformance


class TestJsonRpcConformance(StoreConformance):
    @pytest_asyncio.fixture
    async def store(self, served_sqlite):
        store = served_sqlite()
        # Shake hands first, so capability-dependent checks see the served store's flags.
        await store.connect()
        return store

    async def test_the_served_store_reports_sqlite_capabilities(self, s):
        assert s.capabilities.native_ttl and s.capabilities.strong_consistency
        assert s.capabilities.max_query_top_k == 1000
