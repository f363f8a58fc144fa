"""`animus memory serve`: the plugin server, in process and as a real subprocess."""

import json
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from animus_flows.errors import StoreUnavailable
from animus_flows.jsonrpc import codec
from animus_flows.jsonrpc.server import PluginServer
from animus_flows.protocol import MAX_TTL_SECONDS, Scope
from animus_flows.stores import SQLiteStore
from animus_flows.stores.checks import EXPIRES_KEY
from animus_flows.stores.zep import ZepStore

WORKFLOW = """\
version: 1
project: demo
stores:
  memory-local: {type: sqlite, path: memory.db}
  other: {type: sqlite, path: other.db}
"""
SERVE = [sys.executable, "-m", "animus_flows", "memory", "serve"]


def rpc(request_id, method, **params):
    return json.dumps({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params})


SCOPE = {"project_id": "demo", "agent_id": "a%_/.'\"東", "task_id": None}


@pytest.fixture
def project(tmp_path):
    (tmp_path / "animus.yaml").write_text(WORKFLOW)
    return tmp_path


def serve(project: Path, lines: list[str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*SERVE, "--plugin", "memory-local", *args],
        input="".join(line + "\n" for line in lines),
        capture_output=True,
        text=True,
        cwd=project,
        timeout=60,
    )


def responses(stdout: str) -> dict:
    """Responses by id; every stdout line must be a JSON-RPC response."""
    by_id = {}
    for line in stdout.splitlines():
        message = json.loads(line)
        assert message["jsonrpc"] == "2.0" and ("result" in message) != ("error" in message)
        by_id.setdefault(message["id"], []).append(message)
    return by_id


def test_bad_lines_get_their_errors_and_the_server_keeps_going(project):
    result = serve(
        project,
        [
            rpc(1, "initialize", protocol_version="0.1.0"),
            "this is not json",
            "",
            "[1, 2]",
            '{"jsonrpc": "2.0", "id": 2, "method": "memory/fly", "params": {}}',
            rpc(3, "memory/get", scope=SCOPE),
            rpc(4, "memory/get", scope=SCOPE, key="k", extra=1),
            rpc(5, "memory/query", scope=SCOPE, text="x", top_k="many"),
            rpc(6, "memory/get", scope={"project_id": ""}, key="k"),
            rpc(7, "memory/put", scope=SCOPE, key="k", value={"content": "walrus facts"}),
            '{"jsonrpc": "2.0", "method": "memory/put", "params": {"oops": 1}}',  # notification
            '{"jsonrpc": "2.0", "id": 8, "method": "memory/get", "params": [1]}',
            '{"id": 9, "method": "initialize"}',
        ],
    )
    assert result.returncode == 0, result.stderr
    by_id = responses(result.stdout)
    errors = {
        key: [m["error"]["code"] for m in messages if "error" in m]
        for key, messages in by_id.items()
    }
    assert errors[None] == [codec.PARSE_ERROR, codec.INVALID_REQUEST]
    assert errors[2] == [codec.METHOD_NOT_FOUND]
    assert "unknown method 'memory/fly'" in by_id[2][0]["error"]["message"]
    assert errors[3] == errors[4] == errors[5] == errors[6] == [codec.INVALID_PARAMS]
    assert by_id[6][0]["error"]["data"] == {"error": "InvalidScope"}
    assert errors[8] == [codec.INVALID_PARAMS] and errors[9] == [codec.INVALID_REQUEST]
    assert by_id[1][0]["result"]["plugin_id"] == "memory-local"
    assert by_id[7][0]["result"]["scope"] == SCOPE
    assert len(result.stdout.splitlines()) == 11  # no answer to the blank line or notification


def test_a_conversation_one_request_at_a_time(project):
    proc = subprocess.Popen(
        [*SERVE, "--plugin", "memory-local"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=project,
        text=True,
    )
    try:

        def ask(line):
            proc.stdin.write(line + "\n")
            proc.stdin.flush()
            return json.loads(proc.stdout.readline())

        handshake = ask(rpc(1, "initialize", protocol_version="0.2.0"))["result"]
        assert handshake["protocol_version"] == "0.2.0"
        assert handshake["capabilities"]["strong_consistency"] is True
        assert handshake["capabilities"]["semantic"] is False
        ask(rpc(2, "memory/put", scope=SCOPE, key="k", value="walrus", metadata={"tier": "hot"}))
        assert ask(rpc(3, "memory/get", scope=SCOPE, key="k"))["result"]["value"] == "walrus"
        assert ask(rpc(4, "memory/get", scope=SCOPE, key="missing"))["result"] is None
        hits = ask(rpc(5, "memory/query", scope=SCOPE, text="walrus"))["result"]["hits"]
        assert [hit["key"] for hit in hits] == ["k"]
        page = ask(rpc(6, "memory/list_scopes", project_id="demo"))["result"]
        assert page == {"scopes": [SCOPE], "next_cursor": None}
        ask(rpc(7, "memory/put", scope=SCOPE, key="k2", value="walrus two"))
        page = ask(rpc(8, "memory/list_items", scope=SCOPE, prefix="k", limit=1))["result"]
        assert [item["key"] for item in page["items"]] == ["k"] and page["next_cursor"]
        rest = ask(rpc(9, "memory/list_items", scope=SCOPE, cursor=page["next_cursor"]))["result"]
        assert [item["key"] for item in rest["items"]] == ["k2"] and rest["next_cursor"] is None
        assert ask(rpc(10, "memory/delete", scope=SCOPE, key="k2"))["result"] == {"deleted": True}
        assert ask(rpc(11, "memory/delete", scope=SCOPE, key="k2"))["result"] == {"deleted": False}
        assert ask(rpc(12, "memory/delete_scope", scope=SCOPE))["result"] == {"deleted": 1}
        proc.stdin.close()
        assert proc.wait(timeout=30) == 0
    finally:
        proc.kill()
        proc.wait()


def test_requests_from_a_file(project):
    (project / "requests.jsonl").write_text(rpc(1, "initialize") + "\n")
    with open(project / "requests.jsonl") as stdin:
        result = subprocess.run(
            [*SERVE, "--plugin", "memory-local"],
            stdin=stdin,
            capture_output=True,
            text=True,
            cwd=project,
            timeout=60,
        )
    assert result.returncode == 0
    assert responses(result.stdout)[1][0]["result"]["plugin_id"] == "memory-local"


def test_an_oversized_line_is_refused_and_the_next_one_answered(project):
    huge = rpc(1, "memory/put", scope=SCOPE, key="k", value="x" * (codec.MAX_MESSAGE_BYTES + 10))
    result = serve(project, [huge, rpc(2, "memory/get", scope=SCOPE, key="k")])
    by_id = responses(result.stdout)
    assert by_id[None][0]["error"]["code"] == codec.INVALID_REQUEST
    assert "exceeds the 16777216 byte limit" in by_id[None][0]["error"]["message"]
    assert by_id[2][0]["result"] is None


@pytest.mark.parametrize(
    "args,message",
    [
        ([], "2 stores are available (memory-local, other); choose one with --plugin"),
        (
            ["--plugin", "nope"],
            "unknown plugin 'nope'; animus.yaml declares memory-local, other (no saved "
            "memory-store block has that name)",
        ),
    ],
)
def test_configuration_errors_are_one_line_on_stderr_and_exit_2(project, args, message):
    result = subprocess.run(
        [*SERVE, *args], input="", capture_output=True, text=True, cwd=project, timeout=60
    )
    assert result.returncode == 2
    assert result.stdout == ""
    assert result.stderr.strip().splitlines() == [f"error: {message}"]


def test_stray_output_cannot_reach_the_protocol_stream():
    code = (
        "import os, sys\n"
        "from animus_flows.jsonrpc.stdio import claim_stdout\n"
        "fd = claim_stdout()\n"
        "print('a stray print')\n"
        "os.system('echo from a child process')\n"
        "os.write(fd, b'protocol only\\n')\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60
    )
    assert result.stdout == "protocol only\n"
    assert "a stray print" in result.stderr and "from a child process" in result.stderr


# -- in process: the answer to one line -----------------------------------------------------


class BrokenStore(SQLiteStore):
    async def _get(self, scope, key):
        raise ZeroDivisionError("division by zero")

    async def _query(self, scope, text, top_k, filters):
        raise StoreUnavailable("the index is being rebuilt; retry in a minute")


async def test_store_errors_and_bugs_are_answered(tmp_path):
    server = PluginServer(BrokenStore(tmp_path / "m.db"), "broken")
    scope = Scope("p").to_json()
    bug = json.loads(await server.answer(rpc(1, "memory/get", scope=scope, key="k").encode()))
    assert bug["error"]["code"] == codec.INTERNAL_ERROR
    assert (
        bug["error"]["message"]
        == "internal error in memory/get: ZeroDivisionError: division by zero"
    )
    down = json.loads(await server.answer(rpc(2, "memory/query", scope=scope, text="x").encode()))
    assert down["error"] == {
        "code": codec.STORE_UNAVAILABLE,
        "message": "the index is being rebuilt; retry in a minute",
        "data": {"error": "StoreUnavailable"},
    }
    assert await server.answer(b"   \n") is None
    await server.store.aclose()


async def test_json_nested_too_deeply_is_a_parse_error(tmp_path):
    server = PluginServer(SQLiteStore(tmp_path / "m.db"), "p")
    deep = "[" * 100_000 + "]" * 100_000
    line = rpc(1, "memory/put", scope=Scope("p").to_json(), key="k", value=0).replace("0}", deep)
    error = json.loads(await server.answer(line.encode() + b"}"))["error"]
    assert error["code"] == codec.PARSE_ERROR
    assert "maximum recursion depth exceeded" in error["message"]
    after = json.loads(await server.answer(rpc(2, "initialize").encode()))
    assert after["result"]["plugin_id"] == "p"
    await server.store.aclose()


async def test_a_ttl_over_the_maximum_is_invalid_params(tmp_path):
    server = PluginServer(SQLiteStore(tmp_path / "m.db"), "p")
    scope = Scope("p").to_json()
    for request_id, ttl in enumerate([MAX_TTL_SECONDS + 1, 99999999999999999999]):
        line = rpc(request_id, "memory/put", scope=scope, key="k", value="v", ttl_seconds=ttl)
        error = json.loads(await server.answer(line.encode()))["error"]
        assert error["code"] == codec.INVALID_PARAMS
        assert "over the maximum, 3155760000 (100 years)" in error["message"]
    line = rpc(9, "memory/get", scope=scope, key="k")
    assert json.loads(await server.answer(line.encode()))["result"] is None
    await server.store.aclose()


async def test_ids_are_echoed_whatever_their_type(tmp_path):
    server = PluginServer(SQLiteStore(tmp_path / "m.db"), "p")
    for request_id in ("abc", 0, -5, None, 1.5, 1.0, "東%_'\""):
        line = json.dumps({"jsonrpc": "2.0", "id": request_id, "method": "initialize"})
        assert json.loads(await server.answer(line.encode()))["id"] == request_id
    await server.store.aclose()


def test_stdin_ending_stops_the_server_with_exit_0(project):
    result = serve(project, [])
    assert result.returncode == 0 and result.stdout == ""


async def test_every_answer_fits_the_message_limit(tmp_path):
    # A put whose answer (the item, echoed) would not fit is refused before anything is stored;
    # and an answer that still comes out too long becomes an error with the request's id.
    server = PluginServer(SQLiteStore(tmp_path / "m.db"), "p")
    scope = Scope("p").to_json()
    big = '"' * (codec.MAX_MESSAGE_BYTES // 2 - 100)  # each quote is sent as two bytes
    line = rpc(1, "memory/put", scope=scope, key="k", value=big).encode()
    assert len(line) <= codec.MAX_MESSAGE_BYTES
    answer = await server.answer(line)
    assert len(answer) < 1000
    error = json.loads(answer)["error"]
    assert (
        error["code"] == codec.INVALID_PARAMS
        and "leaves no room for its answer" in error["message"]
    )
    get = rpc(2, "memory/get", scope=scope, key="k").encode()
    assert json.loads(await server.answer(get))["result"] is None

    await server.store.put(Scope("p"), "k", big + big[:200])  # written by another path
    answer = await server.answer(get)
    assert len(answer) < 1000
    error = json.loads(answer)
    assert (
        error["id"] == 2 and "exceeds the 16777216 byte message limit" in error["error"]["message"]
    )
    await server.store.aclose()


async def test_an_id_that_is_not_valid_unicode_still_gets_an_answer(tmp_path):
    server = PluginServer(SQLiteStore(tmp_path / "m.db"), "p")
    line = b'{"jsonrpc": "2.0", "id": "a\\ud800", "method": "initialize"}'
    error = json.loads(await server.answer(line))
    assert error["id"] is None and error["error"]["code"] == codec.INVALID_REQUEST
    await server.store.aclose()


async def test_reserved_keys_bad_text_and_bad_cursors_are_invalid_params(tmp_path):
    server = PluginServer(SQLiteStore(tmp_path / "m.db"), "p")
    scope = Scope("p").to_json()

    async def error(**params):
        method = params.pop("method", "memory/put")
        answer = json.loads(await server.answer(rpc(1, method, **params).encode()))
        assert answer["error"]["code"] == codec.INVALID_PARAMS
        return answer["error"]["message"], answer["error"]["data"]["error"]

    message, _ = await error(scope=scope, key="k", value="v", metadata={"_animus_x": 1})
    assert message == (
        "metadata key '_animus_x' is reserved: keys starting with '_animus_' belong to the "
        "store machinery; rename it"
    )
    message, _ = await error(
        scope=scope, key="k", value="v", metadata={EXPIRES_KEY: "ghp_" + "A1b2" * 9}
    )
    assert message == (
        "metadata _animus_expires_at '[REDACTED:github_token]' is not an ISO 8601 date; "
        "send an expiry with a UTC offset, or ttl_seconds"
    )
    # json.dumps writes the lone surrogate as the escape "\ud800"
    assert "pass valid UTF-8 text" in (await error(scope=scope, key="k\ud800", value="v"))[0]
    assert "pass valid UTF-8 text" in (await error(scope=scope, key="k", value=["\udfff"]))[0]
    bad_scope = {"project_id": "p\ud800"}
    assert (await error(method="memory/get", scope=bad_scope, key="k"))[1] == "InvalidScope"
    for cursor in ("²", "9" * 23):
        message, _ = await error(method="memory/list_scopes", cursor=cursor)
        assert message.endswith("was not returned by this store; pass next_cursor unchanged")
    line = rpc(9, "memory/query", scope=scope, text="")
    assert json.loads(await server.answer(line.encode()))["result"] == {"hits": []}
    await server.store.aclose()


async def test_a_served_store_without_native_ttl_keeps_the_hosts_expiry(zep_fake):
    # A host emulates TTL for a plugin without native_ttl: the expiry comes as metadata.
    async with zep_fake.client() as client:
        store = ZepStore(zep_fake.api_key, base_url=zep_fake.base_url, http_client=client)
        server = PluginServer(store, "served-zep")
        hello = json.loads(await server.answer(rpc(0, "initialize").encode()))
        assert hello["result"]["capabilities"]["native_ttl"] is False
        scope = Scope("p").to_json()
        expires = datetime.now(UTC) + timedelta(hours=1)
        metadata = {"v": 1, EXPIRES_KEY: expires.isoformat()}
        line = rpc(1, "memory/put", scope=scope, key="k", value="walrus", metadata=metadata)
        put = json.loads(await server.answer(line.encode()))["result"]
        line = rpc(2, "memory/get", scope=scope, key="k")
        got = json.loads(await server.answer(line.encode()))["result"]
        for item in (put, got):
            assert item["metadata"] == {"v": 1}
            expires_at = datetime.fromisoformat(item["expires_at"])
            assert timedelta(0) <= expires_at - expires < timedelta(seconds=5)
