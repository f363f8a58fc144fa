"""The standalone example plugin (examples/plugins/dict_plugin.py, nothing imported from
animus_flows) passes the same conformance suite, driven through the `jsonrpc` store."""

import json
import subprocess
import sys
from pathlib import Path

import pytest_asyncio

from animus_flows.stores.jsonrpc import JsonRpcStore
from animus_flows.testing.conformance import StoreConformance

ROOT = Path(__file__).resolve().parents[2]
DICT_PLUGIN = ROOT / "examples" / "plugins" / "dict_plugin.py"
PROTOCOL = ROOT / "docs" / "protocol.md"


class TestExamplePluginConformance(StoreConformance):
    @pytest_asyncio.fixture
    async def store(self):
        store = JsonRpcStore([sys.executable, str(DICT_PLUGIN)], plugin_id="memory-dict")
        await store.connect()
        return store

    async def test_it_reports_what_it_does_natively(self, s):
        assert s.capabilities.native_key_get and s.capabilities.strong_consistency
        assert not s.capabilities.native_ttl  # the host emulates TTL through metadata
        assert s.capabilities.max_query_top_k == 100 and not s.capabilities.semantic


def _talk(lines: list[str]) -> list[dict]:
    """Feed request lines to a fresh plugin process; its response lines, parsed."""
    done = subprocess.run(
        [sys.executable, str(DICT_PLUGIN)],
        input="".join(line + "\n" for line in lines),
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert done.returncode == 0, done.stderr
    return [json.loads(line) for line in done.stdout.splitlines()]


def _comparable(message):
    """A message without what varies between runs: timestamps, and score digits past two."""
    if isinstance(message, dict):
        return {
            k: "<time>" if k in ("created_at", "updated_at") else _comparable(v)
            for k, v in message.items()
        }
    if isinstance(message, list):
        return [_comparable(v) for v in message]
    return round(message, 2) if isinstance(message, float) else message


def test_the_example_session_of_the_protocol_is_what_it_answers():
    session = PROTOCOL.read_text(encoding="utf-8").split("## 10. Example session")[1]
    sent = [line[2:] for line in session.splitlines() if line.startswith("> ")]
    expected = [json.loads(line[2:]) for line in session.splitlines() if line.startswith("< ")]
    assert len(sent) == len(expected) == 9
    assert _comparable(_talk(sent)) == _comparable(expected)  # line 9: -32601, unknown method


def test_unknown_and_missing_params_are_invalid_params():
    scope = {"project_id": "demo"}
    requests = [
        {"method": "memory/get", "params": {"scope": scope, "key": "fx", "bogus": 1}},
        {"method": "memory/get", "params": {"scope": scope}},
        {"method": "memory/forget", "params": {"scope": scope, "bogus": 1}},
    ]
    lines = [json.dumps({"jsonrpc": "2.0", "id": n, **r}) for n, r in enumerate(requests)]
    errors = [answer["error"] for answer in _talk(lines)]
    assert errors[0] == {
        "code": -32602,
        "message": "memory/get: unknown param(s) bogus; it takes scope, key",
    }
    assert errors[1] == {"code": -32602, "message": "memory/get: missing param(s) key"}
    assert errors[2]["code"] == -32601  # the method is checked first
