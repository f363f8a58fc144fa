"""The PostgreSQL store on the session's throwaway cluster: the conformance suite unchanged,
then what only this store does (migrations, the DSN, text search configurations, workers)."""

import itertools

import pytest

from animus_flows.stores.postgres import PostgresStore
from animus_flows.testing.conformance import StoreConformance

_schemas = itertools.count()


@pytest.fixture
def fresh_schema(postgres_dsn):
    """A schema name no test used: each test starts from an empty store."""
    return f"t{next(_schemas)}"


class TestPostgresConformance(StoreConformance):
    @pytest.fixture
    def store(self, postgres_dsn, fresh_schema):
        return PostgresStore(postgres_dsn, schema=fresh_schema)
