import pytest

from animus_flows.stores import SQLiteStore
from animus_flows.testing.conformance import StoreConformance


class TestSQLiteConformance(StoreConformance):
    @pytest.fixture
    def store(self, tmp_path):
        return SQLiteStore(tmp_path / "memory.db")
