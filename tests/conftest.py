import importlib.util
import sys
from pathlib import Path

import pytest

pytest.register_assert_rewrite("animus_flows.testing")


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
