"""Test session setup: a private PREFECT_HOME, and one Prefect test server for the session."""

import importlib.util
import os
import sys
import tempfile
from pathlib import Path

import pytest

from animus_flows.stores.jsonrpc import JsonRpcStore

# Before anything imports Prefect: its settings are read from the environment.
os.environ["PREFECT_HOME"] = tempfile.mkdtemp(prefix="animus-prefect-home-")
os.environ["PREFECT_SERVER_ANALYTICS_ENABLED"] = "false"
os.environ.setdefault("PREFECT_LOGGING_HANDLERS_CONSOLE_LEVEL", "WARNING")
os.environ.setdefault("PREFECT_SERVER_LOGGING_LEVEL", "WARNING")
# Commands run as subprocesses may start a temporary server of their own: on a loaded CI
# machine that takes longer than Prefect's default 20 s.
os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "180")

pytest.register_assert_rewrite("animus_flows.testing")


@pytest.fixture(scope="session")
def postgres_cluster():
    """One throwaway PostgreSQL cluster for the session (animus_flows.testing.postgres).

    Without PostgreSQL binaries the tests that use it skip with the reason; under CI=true a
    missing PostgreSQL fails them instead: CI installs it, so its absence is a broken CI.
    """
    from animus_flows.testing.postgres import ClusterUnavailable, TemporaryCluster

    try:
        cluster = TemporaryCluster().__enter__()
    except ClusterUnavailable as exc:
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI=true but {exc}")
        pytest.skip(str(exc))
    try:
        yield cluster
    finally:
        cluster.__exit__(None, None, None)


@pytest.fixture(scope="session")
def postgres_dsn(postgres_cluster) -> str:
    """The DSN of a database `animus_test` on the session's cluster."""
    return postgres_cluster.create_database("animus_test")


@pytest.fixture(scope="session")
def prefect_api() -> str:
    """One temporary Prefect server for the whole session; yields its API URL."""
    from prefect.settings import PREFECT_API_URL
    from prefect.testing.utilities import prefect_test_harness

    with prefect_test_harness(server_startup_timeout=180):
        yield PREFECT_API_URL.value()


def _load(name: str, folder: str):
    # Test helpers are loaded by path: with --import-mode=importlib, tests are not a package.
    path = Path(__file__).parent / folder / f"{name}.py"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


zep_fake_module = _load("zep_fake", "stores")


@pytest.fixture
def zep_fake():
    """A fresh, empty fake Zep (tests/stores/zep_fake.py)."""
    return zep_fake_module.ZepFake()


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
