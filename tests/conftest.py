"""Test session setup: a private PREFECT_HOME, and one Prefect test server for the session."""

import os
import tempfile

import pytest

# Before anything imports Prefect: its settings are read from the environment.
os.environ["PREFECT_HOME"] = tempfile.mkdtemp(prefix="animus-prefect-home-")
os.environ["PREFECT_SERVER_ANALYTICS_ENABLED"] = "false"
os.environ.setdefault("PREFECT_LOGGING_HANDLERS_CONSOLE_LEVEL", "WARNING")
os.environ.setdefault("PREFECT_SERVER_LOGGING_LEVEL", "WARNING")

pytest.register_assert_rewrite("animus_flows.testing")


@pytest.fixture(scope="session")
def prefect_api() -> str:
    """One temporary Prefect server for the whole session; yields its API URL."""
    from prefect.settings import PREFECT_API_URL
    from prefect.testing.utilities import prefect_test_harness

    with prefect_test_harness(server_startup_timeout=180):
        yield PREFECT_API_URL.value()
