import sys

import pytest

from animus_flows.stores.jsonrpc import JsonRpcStore

SERVED_WORKFLOW = """\
version: 1
project: conformance
stores:
  memory-local: {type: sqlite, path: memory.db}
"""


@pytest.fixture
def served_sqlite(tmp_path):
    """A factory of `jsonrpc` stores running `animus memory serve` on a fresh SQLite file."""

    def make(folder=tmp_path, **options) -> JsonRpcStore:
        (folder / "animus.yaml").write_text(SERVED_WORKFLOW)
        command = [
            *(sys.executable, "-m", "animus_flows"),
            *("memory", "serve", "--plugin", "memory-local"),
        ]
        options = {"startup_timeout_ms": 20000, **options}
        return JsonRpcStore(command, plugin_id="served-sqlite", cwd=folder, **options)

    return make
