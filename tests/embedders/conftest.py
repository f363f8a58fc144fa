"""Fixtures of the embedder tests: the fake embeddings server, and the local model loaded once."""

import importlib.util
import socket
import sys
from pathlib import Path

import pytest


def _load(name: str):
    # Loaded by path: with --import-mode=importlib, tests are not a package.
    path = Path(__file__).parent / f"{name}.py"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


openai_fake = _load("openai_fake")


@pytest.fixture
def fake():
    """A fresh fake embeddings server (tests/embedders/openai_fake.py)."""
    return openai_fake.EmbeddingsFake()


@pytest.fixture(scope="session")
def local_embedder():
    """The default local model, loaded once for the session."""
    from animus_flows.embedders import LocalEmbedder

    embedder = LocalEmbedder()
    embedder.load()
    return embedder


@pytest.fixture
def no_network(monkeypatch):
    """Fail any connection attempt made during the test."""

    def refuse(*args, **kwargs):
        raise AssertionError("the test tried to open a network connection")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket.socket, "connect_ex", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
