"""The wire format as pure functions: framing, params, results, errors, versions."""

import json

import pytest

from animus_flows.errors import (
    ConfigError,
    InvalidRequest,
    InvalidScope,
    StoreTimeout,
    StoreUnavailable,
    WriteDenied,
)
from animus_flows.jsonrpc import codec
from animus_flows.jsonrpc.params import method_arguments
from animus_flows.protocol import Capabilities, MemoryItem, Scope


def test_encode_writes_one_compact_line_with_newlines_escaped():
    line = codec.encode({"jsonrpc": "2.0", "id": 1, "result": "two\nlines ✓"})
    assert line == '{"jsonrpc":"2.0","id":1,"result":"two\\nlines ✓"}\n'.encode()
    assert line.count(b"\n") == 1


@pytest.mark.parametrize("line", [b"nope", b"{", b'{"a": NaN}', b"\xff\xfe", b'{"a": Infinity}'])
def test_decode_refuses_what_is_not_json(line):
    with pytest.raises(codec.ProtocolError) as raised:
        codec.decode(line)
    assert raised.value.code == codec.PARSE_ERROR and raised.value.request_id is None


def test_the_splitter_reassembles_lines_across_chunks():
    splitter = codec.LineSplitter()
    assert splitter.feed(b'{"a": 1}\n{"b"') == [b'{"a": 1}']
    assert splitter.feed(b": 2}\n\n") == [b'{"b": 2}', b""]
    assert splitter.feed(b'{"c": 3}') == []
    assert splitter.pending() == b'{"c": 3}'


def test_the_splitter_drops_an_oversized_line_whole_and_carries_on():
    splitter = codec.LineSplitter(limit=10)
    assert splitter.feed(b"0123456789abc") == []
    assert splitter.feed(b"def\nok\n") == [codec.OversizedLine(16), b"ok"]
    assert splitter.feed(b"x" * 11) == []
    assert splitter.pending() == codec.OversizedLine(11)


@pytest.mark.parametrize(
    "message,code,request_id,text",
    [
        ([{"jsonrpc": "2.0"}], codec.INVALID_REQUEST, None, "batch requests are not supported"),
        ("hello", codec.INVALID_REQUEST, None, "is not a JSON object"),
        ({"jsonrpc": "1.0", "id": 7, "method": "m"}, codec.INVALID_REQUEST, 7, '"jsonrpc": "2.0"'),
        ({"jsonrpc": "2.0", "id": {}, "method": "m"}, codec.INVALID_REQUEST, None, "request id"),
        ({"jsonrpc": "2.0", "id": True, "method": "m"}, codec.INVALID_REQUEST, None, "request id"),
        (
            {"jsonrpc": "2.0", "id": "a\ud800", "method": "m"},
            codec.INVALID_REQUEST,
            None,
            "Unicode",
        ),
        ({"jsonrpc": "2.0", "id": 8, "method": "m", "params": 5}, codec.INVALID_REQUEST, 8, "5"),
        (
            {"jsonrpc": "2.0", "id": 9, "method": "m", "params": None},
            codec.INVALID_REQUEST,
            9,
            "null",
        ),
        (
            "sk-ant-api03-" + "Aa7" * 15,
            codec.INVALID_REQUEST,
            None,
            'request "[REDACTED:anthropic_api_key]" is not a JSON object',
        ),
        ({"jsonrpc": "2.0", "id": 3, "method": 5}, codec.INVALID_REQUEST, 3, '"method" 5'),
        (
            {"jsonrpc": "2.0", "id": 3, "method": "memory/get", "params": [1]},
            codec.INVALID_PARAMS,
            3,
            "params must be an object of named parameters",
        ),
    ],
)
def test_requests_that_break_json_rpc(message, code, request_id, text):
    with pytest.raises(codec.ProtocolError) as raised:
        codec.parse_request(message)
    assert (raised.value.code, raised.value.request_id) == (code, request_id)
    assert text in raised.value.message


def test_a_request_without_id_is_a_notification():
    request = codec.parse_request({"jsonrpc": "2.0", "method": "memory/get"})
    assert request.notification and request.params == {}
    assert not codec.parse_request({"jsonrpc": "2.0", "id": None, "method": "x"}).notification


def test_method_arguments_become_store_keyword_arguments():
    arguments = method_arguments(
        "memory/put",
        {
            "scope": {"project_id": "p", "agent_id": "a"},
            "key": "k",
            "value": None,
            "ttl_seconds": 5,
        },
    )
    assert arguments == {"scope": Scope("p", "a"), "key": "k", "value": None, "ttl_seconds": 5}
    assert method_arguments("memory/list_scopes", {"cursor": None}) == {"cursor": None}
    assert method_arguments("memory/list_items", {"scope": {"project_id": "p"}, "limit": 5}) == {
        "scope": Scope("p"),
        "limit": 5,
    }
    assert method_arguments("initialize", {}) == {}


@pytest.mark.parametrize(
    "method,params,error,text",
    [
        ("memory/get", {"scope": {"project_id": "p"}}, InvalidRequest, "missing param(s) key"),
        (
            "memory/get",
            {"scope": {"project_id": "p"}, "key": "k", "keys": 1},
            InvalidRequest,
            "unknown param(s) keys; memory/get takes scope, key",
        ),
        (
            "memory/query",
            {"scope": {"project_id": "p"}, "text": "x", "top_k": "3"},
            InvalidRequest,
            'param top_k is "3"; send an integer',
        ),
        (
            "memory/query",
            {"scope": {"project_id": "p"}, "text": "x", "top_k": True},
            InvalidRequest,
            "param top_k is true; send an integer",
        ),
        ("memory/get", {"scope": "p", "key": "k"}, InvalidScope, "scope 'p' is not an object"),
        ("memory/get", {"scope": {"project_id": "p", "x": 1}, "key": "k"}, InvalidScope, "unknown"),
        ("memory/put", {"scope": {"project_id": "p"}, "key": "k"}, InvalidRequest, "value"),
        ("memory/delete", {"scope": {"project_id": "p"}}, InvalidRequest, "missing param(s) key"),
        (
            "memory/delete",
            {"scope": {"project_id": "p"}, "key": 5},
            InvalidRequest,
            "memory/delete: param key is 5; send a string",
        ),
        (
            "memory/list_items",
            {"scope": {"project_id": "p"}, "limit": "5"},
            InvalidRequest,
            'memory/list_items: param limit is "5"; send an integer',
        ),
        (
            "memory/list_items",
            {"scope": {"project_id": "p"}, "prefix": ["a"]},
            InvalidRequest,
            'memory/list_items: param prefix is ["a"]; send a string or null',
        ),
        (
            "memory/list_items",
            {"scope": {"project_id": "p"}, "after": "k"},
            InvalidRequest,
            "unknown param(s) after; memory/list_items takes scope, prefix, cursor, limit",
        ),
        ("memory/list_items", {}, InvalidRequest, "memory/list_items: missing param(s) scope"),
        (
            "memory/put",
            {"scope": {"project_id": "p"}, "key": "k", "value": 1, "metadata": []},
            InvalidRequest,
            "memory/put: param metadata is []; send an object or null",
        ),
        (
            "initialize",
            {"host": "me"},
            InvalidRequest,
            'initialize: param host is "me"; send an object',
        ),
    ],
)
def test_bad_params_name_the_param_and_the_fix(method, params, error, text):
    with pytest.raises(error) as raised:
        method_arguments(method, params)
    assert text in str(raised.value)


@pytest.mark.parametrize(
    "exc,code",
    [
        (InvalidScope("x"), codec.INVALID_PARAMS),
        (InvalidRequest("x"), codec.INVALID_PARAMS),
        (StoreTimeout("x"), codec.STORE_TIMEOUT),
        (WriteDenied("x"), codec.WRITE_DENIED),
        (ConfigError("x"), codec.CONFIG_ERROR),
        (StoreUnavailable("x"), codec.STORE_UNAVAILABLE),
        (RuntimeError("x"), codec.INTERNAL_ERROR),
    ],
)
def test_errors_round_trip_through_their_codes(exc, code):
    assert codec.error_code(exc) == code
    response = codec.failure(1, code, "went wrong", type(exc).__name__)
    back = codec.error_from_response(response["error"], "plugin p")
    expected = StoreUnavailable if isinstance(exc, RuntimeError) else type(exc)
    assert type(back) is expected
    assert str(back).startswith("plugin p: went wrong")


def test_protocol_level_errors_become_store_unavailable_with_a_hint():
    error = codec.error_from_response({"code": -32601, "message": "unknown method"}, "plugin p")
    assert isinstance(error, StoreUnavailable) and "upgrade it" in str(error)
    error = codec.error_from_response({"code": 17, "message": "odd"}, "plugin p")
    assert isinstance(error, StoreUnavailable) and "(code 17)" in str(error)


@pytest.mark.parametrize(
    "message",
    [
        {"id": 1, "result": 1},
        {"jsonrpc": "2.0", "result": 1},
        {"jsonrpc": "2.0", "id": 1},
        {"jsonrpc": "2.0", "id": 1, "result": 1, "error": {"code": 1, "message": "m"}},
        {"jsonrpc": "2.0", "id": 1, "error": {"code": "1", "message": "m"}},
        [1],
    ],
)
def test_parse_response_refuses_what_is_not_a_response(message):
    with pytest.raises(ValueError):
        codec.parse_response(message)


def test_results_parse_back_into_protocol_types():
    item = MemoryItem(Scope("p"), "k", {"content": "x"}, {"tier": "hot"})
    assert codec.parse_item(item.to_json(), "plugin p", "memory/get") == item
    hits = codec.parse_hits(
        {"hits": [{"key": "k", "value": 1, "score": 0.5, "metadata": {}}]}, "plugin p"
    )
    assert hits[0].key == "k" and hits[0].score == 0.5
    page = codec.parse_page(
        {"scopes": [{"project_id": "p", "agent_id": None, "task_id": "t"}], "next_cursor": "2"},
        "plugin p",
    )
    assert page.scopes == [Scope("p", task_id="t")] and page.next_cursor == "2"
    assert codec.parse_deleted({"deleted": 3}, "plugin p") == 3
    assert codec.parse_deleted_item({"deleted": False}, "plugin p") is False
    items = codec.parse_item_page({"items": [item.to_json()], "next_cursor": "c"}, "plugin p")
    assert items.items == [item] and items.next_cursor == "c"


@pytest.mark.parametrize(
    "parse,result",
    [
        (lambda r: codec.parse_item(r, "plugin p", "memory/put"), {"key": "k"}),
        (lambda r: codec.parse_item(r, "plugin p", "memory/put"), [1]),
        (lambda r: codec.parse_hits(r, "plugin p"), {"hits": [{"key": "k"}]}),
        (lambda r: codec.parse_hits(r, "plugin p"), []),
        (lambda r: codec.parse_page(r, "plugin p"), {"scopes": [], "next_cursor": 3}),
        (lambda r: codec.parse_page(r, "plugin p"), {"scopes": [{"project_id": ""}]}),
        (lambda r: codec.parse_deleted(r, "plugin p"), {"deleted": -1}),
        (lambda r: codec.parse_deleted(r, "plugin p"), {"deleted": True}),
        (lambda r: codec.parse_deleted_item(r, "plugin p"), {"deleted": 1}),
        (lambda r: codec.parse_item_page(r, "plugin p"), {"items": [{"key": "k"}]}),
        (lambda r: codec.parse_item_page(r, "plugin p"), {"items": [], "next_cursor": 5}),
        (lambda r: codec.parse_item_page(r, "plugin p"), {"hits": []}),
    ],
)
def test_malformed_results_are_the_plugins_fault(parse, result):
    with pytest.raises(StoreUnavailable) as raised:
        parse(result)
    assert "plugin p answered" in str(raised.value)
    assert "does not follow protocol 0.2.0" in str(raised.value)


@pytest.mark.parametrize(
    "version,ok",
    [
        ("0.1.0", True),
        ("0.1.7", True),
        ("0.2.0", True),
        ("0.2.3", True),
        ("0.3.0", False),
        ("0.0.9", False),
        ("1.1.0", False),
        ("0.1", False),
        ("v0.1.0", False),
        (None, False),
        (10, False),
    ],
)
def test_version_compatibility_follows_semver_for_0_x(version, ok):
    assert codec.is_compatible(version) is ok


def test_a_0_1_plugin_serves_all_but_the_methods_0_2_added():
    result = {
        "protocol_version": "0.1.0",
        "plugin_id": "old",
        "capabilities": {
            "native_ttl": False,
            "native_key_get": True,
            "strong_consistency": True,
            "max_query_top_k": 5,
        },
    }
    handshake = codec.parse_initialize(result, "plugin old")
    assert handshake.capabilities.semantic is False  # 0.1.0 has no such capability
    for method in ("memory/put", "memory/get", "memory/query", "memory/delete_scope"):
        codec.check_method_served(handshake, method, "plugin old")
    for method in ("memory/delete", "memory/list_items"):
        with pytest.raises(ConfigError) as refused:
            codec.check_method_served(handshake, method, "plugin old")
        assert str(refused.value) == (
            f"plugin old speaks protocol 0.1.0, which has no {method} (added in 0.2.0); "
            "upgrade the plugin to protocol 0.2.0"
        )
    new = codec.parse_initialize({**result, "protocol_version": "0.2.0"}, "plugin new")
    codec.check_method_served(new, "memory/delete", "plugin new")


def test_the_handshake_is_checked():
    caps = Capabilities(False, True, False, 50)
    result = codec.initialize_result("mine", caps)
    assert result == {
        "protocol_version": "0.2.0",
        "plugin_id": "mine",
        "capabilities": {
            "native_ttl": False,
            "native_key_get": True,
            "strong_consistency": False,
            "max_query_top_k": 50,
            "semantic": False,
        },
    }
    assert codec.parse_initialize(result, "plugin p").capabilities == caps
    with pytest.raises(StoreUnavailable, match="max_query_top_k is 0"):
        codec.parse_initialize(
            {**result, "capabilities": {**result["capabilities"], "max_query_top_k": 0}},
            "plugin p",
        )
    with pytest.raises(StoreUnavailable, match="incomplete"):
        codec.parse_initialize({**result, "capabilities": {"native_ttl": True}}, "plugin p")
    with pytest.raises(ConfigError, match=r"speaks protocol '0\.3\.0'"):
        codec.parse_initialize({**result, "protocol_version": "0.3.0"}, "plugin p")


def test_requests_are_json_rpc_2():
    line = codec.request(4, "memory/get", {"scope": {"project_id": "p"}, "key": "k"})
    assert json.loads(line) == {
        "jsonrpc": "2.0",
        "id": 4,
        "method": "memory/get",
        "params": {"scope": {"project_id": "p"}, "key": "k"},
    }


def test_a_plugins_error_message_is_shown_on_one_line():
    error = codec.error_from_response(
        {"code": -32000, "message": "disk full\n  at write()\n" + "x" * 1000}, "plugin p"
    )
    assert str(error).startswith("plugin p: disk full at write() xxx")
    assert "\n" not in str(error) and len(str(error)) <= 510
