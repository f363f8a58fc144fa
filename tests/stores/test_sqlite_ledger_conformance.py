import pytest

from animus_flows.stores import SQLiteLedgerStore
from animus_flows.testing.ledger import LedgerConformance


class TestSQLiteLedgerConformance(LedgerConformance):
    @pytest.fixture
    def store(self, tmp_path):
        return SQLiteLedgerStore(tmp_path / "memory.db")
