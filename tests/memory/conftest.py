import pytest

from animus_flows.memory import MemoryLayer
from animus_flows.protocol import Scope
from animus_flows.stores import SQLiteStore, SyncStore

SCOPE = Scope("demo", agent_id="dev")


@pytest.fixture
def db(tmp_path):
    return tmp_path / "memory.db"


@pytest.fixture
def memory(db):
    layer = MemoryLayer(SQLiteStore(db), SCOPE)
    yield layer
    layer.close(close_store=True)


@pytest.fixture
def raw(db):
    """A second, independent store on the same file: what any other reader would see."""
    with SyncStore(SQLiteStore(db)) as store:
        yield store
