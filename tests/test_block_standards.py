"""Every memory-store block passes Prefect's own block standards, offline.

The logo check opens `_logo_url` with urllib; the logos are files in this repository, so a
urllib handler answers for the repository's asset URL from the checkout (the network boundary).
"""

import io
import pickle
import sys
import urllib.request
from email.message import Message
from pathlib import Path

import pytest
from prefect.testing.standard_test_suites import BlockStandardTestSuite

from animus_flows.blocks import (
    MEMORY_STORE_CAPABILITY,
    JsonRpcMemoryStore,
    MemoryStoreBlock,
    PostgresMemoryStore,
    SQLiteMemoryStore,
    ZepMemoryStore,
)
from animus_flows.blocks._logos import ASSETS_URL
from animus_flows.protocol import MemoryStore, Scope
from animus_flows.stores.postgres import PostgresStore
from animus_flows.stores.zep import ZepStore

BLOCKS = [SQLiteMemoryStore, ZepMemoryStore, JsonRpcMemoryStore, PostgresMemoryStore]
ASSETS = Path(__file__).resolve().parents[1] / "docs" / "assets"


class _RepositoryAssets(urllib.request.HTTPSHandler):
    def https_open(self, req):
        url = req.get_full_url()
        if not url.startswith(ASSETS_URL):
            raise urllib.error.URLError(f"offline test: no network for {url}")
        body = (ASSETS / url.removeprefix(ASSETS_URL)).read_bytes()
        headers = Message()
        headers["Content-Type"] = "image/png"
        response = urllib.response.addinfourl(io.BytesIO(body), headers, url, 200)
        response.msg = "OK"
        return response


@pytest.fixture(autouse=True)
def offline_assets():
    urllib.request.install_opener(urllib.request.build_opener(_RepositoryAssets))
    yield
    urllib.request.install_opener(None)


@pytest.mark.parametrize("block", BLOCKS)
class TestBlockStandards(BlockStandardTestSuite):
    @pytest.fixture
    def block(self, block):
        return block


@pytest.mark.parametrize("block", BLOCKS)
def test_blocks_are_memory_stores_with_logos_in_the_repository(block):
    assert MEMORY_STORE_CAPABILITY in block.get_block_capabilities()
    assert block.get_block_type_slug().startswith("animus-")
    assert issubclass(block, MemoryStoreBlock)
    assert (ASSETS / str(block._logo_url).removeprefix(ASSETS_URL)).is_file()


def test_sqlite_block_hands_out_one_cached_store_and_pickles_without_it(tmp_path):
    block = SQLiteMemoryStore(path=str(tmp_path / "m.db"))
    store = block.get_store()
    assert isinstance(store, MemoryStore) and block.get_store() is store
    clone = pickle.loads(pickle.dumps(block))
    assert clone.path == block.path and clone._store is None
    assert block.get_block_type_slug() == "animus-sqlite-memory-store"


async def test_jsonrpc_block_runs_its_plugin_and_keeps_env_secret(tmp_path):
    plugin = Path(__file__).resolve().parents[1] / "tests" / "stores" / "faulty_plugin.py"
    block = JsonRpcMemoryStore(
        command=[sys.executable, str(plugin), "ok"],
        env={"FAULTY_PLUGIN_ID": "sk-secret-value"},
        cwd=str(tmp_path),
        call_timeout_ms=2000,
    )
    assert "sk-secret-value" not in repr(block)
    assert "sk-secret-value" not in block.model_dump_json()
    store = block.get_store()
    assert isinstance(store, MemoryStore) and block.get_store() is store
    assert (await store.connect()).plugin_id == "sk-secret-value"  # the plugin got the env
    clone = pickle.loads(pickle.dumps(block))
    assert clone._store is None and clone.command == block.command
    await store.aclose()
    assert block.get_block_type_slug() == "animus-jsonrpc-memory-store"


def test_zep_block_hands_out_a_zep_store_and_never_shows_the_key():
    block = ZepMemoryStore(api_key="z_block-secret-key", base_url="https://zep.test/api/v2")
    for text in (repr(block), str(block), block.model_dump_json()):
        assert "z_block-secret-key" not in text
    store = block.get_store()
    assert isinstance(store, ZepStore) and block.get_store() is store
    assert store.base_url == "https://zep.test"
    assert "z_block-secret-key" not in repr(store)
    clone = pickle.loads(pickle.dumps(block))
    assert clone._store is None and clone.api_key.get_secret_value() == "z_block-secret-key"
    assert block.get_block_type_slug() == "animus-zep-memory-store"


async def test_postgres_block_hands_out_a_postgres_store_and_never_shows_the_dsn(postgres_dsn):
    dsn = postgres_dsn.replace("animus@", "animus:pg-block-secret@")  # trust: any password
    block = PostgresMemoryStore(dsn=dsn, schema="block_store", language="simple")
    for text in (repr(block), str(block), block.model_dump_json()):
        assert "pg-block-secret" not in text
    store = block.get_store()
    assert isinstance(store, PostgresStore) and block.get_store() is store
    assert (store.schema, store.language) == ("block_store", "simple")
    assert "pg-block-secret" not in repr(store)
    await store.put(Scope("p"), "k", "the walrus")
    assert [hit.key for hit in await store.query(Scope("p"), "the")] == [
        "k"
    ]  # simple: no stop words
    await store.aclose()
    clone = pickle.loads(pickle.dumps(block))
    assert clone._store is None and clone.dsn.get_secret_value() == dsn
    assert block.get_block_type_slug() == "animus-postgres-memory-store"
    assert PostgresMemoryStore(dsn=dsn).model_dump(by_alias=True)["schema"] == "animus"
