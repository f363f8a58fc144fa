"""The Zep store passes the conformance suite against a stateful fake of Zep's API, whose
search index lags behind writes like Zep's does."""

import pytest

from animus_flows.protocol import Scope
from animus_flows.stores.zep import ZepStore
from animus_flows.testing.conformance import StoreConformance


class TestZepConformance(StoreConformance):
    @pytest.fixture
    async def store(self, zep_fake):
        self.fake = zep_fake
        async with zep_fake.client() as client:
            yield ZepStore(zep_fake.api_key, base_url=zep_fake.base_url, http_client=client)

    async def eventually_consistent(self, store):
        await self.fake.wait_indexed()

    async def test_writes_are_not_searchable_at_once(self, s):
        await s.put(Scope("p"), "k", "freshly written okapi")
        assert await s.query(Scope("p"), "okapi") == []  # Zep has not indexed it yet
        await self.eventually_consistent(s)
        assert [hit.key for hit in await s.query(Scope("p"), "okapi")] == ["k"]
