"""The `jsonrpc` store against real plugin processes that misbehave on purpose.

Every fault ends in a one-line error naming the plugin and the fix, within the deadline, with
the child stopped and reaped; the next call starts a fresh process.
"""

import asyncio
import json
import os
import shutil
import signal
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from animus_flows.errors import (
    ConfigError,
    InvalidRequest,
    InvalidScope,
    StoreTimeout,
    StoreUnavailable,
    WriteDenied,
)
from animus_flows.protocol import Scope
from animus_flows.stores.jsonrpc import JsonRpcStore

FAULTY = Path(__file__).with_name("faulty_plugin.py")
SCOPE = Scope("p", agent_id="a")


def faulty(mode: str, **options) -> JsonRpcStore:
    options = {"startup_timeout_ms": 5000, "call_timeout_ms": 1000, **options}
    return JsonRpcStore([sys.executable, str(FAULTY), mode], plugin_id=f"faulty-{mode}", **options)


def assert_gone(pid: int) -> None:
    """The process was reaped: no entry at all, or (pid reused) not a zombie child of ours."""
    stat = Path(f"/proc/{pid}/stat")
    if stat.exists():
        fields = stat.read_text().rsplit(")", 1)[1].split()
        state, parent = fields[0], int(fields[1])
        assert not (state == "Z" and parent == os.getpid()), f"{pid} is a zombie"
        assert parent != os.getpid(), f"{pid} is still running"


def live_group_members(pgid: int) -> list[int]:
    """Processes of a process group that are still running (zombies wait for init to reap)."""
    members = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid and fields[0] != "Z":
            members.append(int(stat.parent.name))
    return members


async def test_the_process_starts_on_the_first_call_and_stops_on_close():
    store = faulty("ok")
    assert store.process.pid is None
    assert store.capabilities.native_key_get is False  # nothing is known before the handshake
    await store.put(SCOPE, "k", "v")
    pid = store.process.pid
    assert pid is not None
    assert store.capabilities.native_key_get is True and store.capabilities.max_query_top_k == 5
    got = await store.get(SCOPE, "k")
    assert got is not None and got.value == "v"
    await store.aclose()
    assert store.process.pid is None
    assert_gone(pid)


async def test_a_plugin_hanging_at_initialize_times_out_and_is_reaped():
    store = faulty("hang-init", startup_timeout_ms=500)
    started = time.monotonic()
    with pytest.raises(StoreTimeout) as raised:
        await store.get(SCOPE, "k")
    assert time.monotonic() - started < 3
    message = str(raised.value)
    assert "plugin faulty-hang-init did not answer initialize within 500 ms" in message
    assert "startup_timeout_ms" in message and "\n" not in message
    assert store.process.pid is None
    await store.aclose()


async def test_a_plugin_hanging_on_a_call_is_stopped_and_the_next_call_restarts_it():
    store = faulty("hang-query", call_timeout_ms=300)
    await store.put(SCOPE, "k", "v")
    first = store.process.pid
    started = time.monotonic()
    with pytest.raises(StoreTimeout, match=r"did not answer memory/query within 300 ms"):
        await store.query(SCOPE, "v")
    assert time.monotonic() - started < 3
    assert_gone(first)
    # a fresh process answers the next call (its dict starts empty)
    assert await store.get(SCOPE, "k") is None
    assert store.process.pid not in (None, first)
    await store.aclose()


async def test_helpers_a_hung_plugin_started_are_stopped_with_it():
    store = faulty("helper", call_timeout_ms=500)
    await store.connect()
    pid = store.process.pid
    with pytest.raises(StoreTimeout):
        await store.query(SCOPE, "v")
    # the helper ran in the plugin's process group, which was killed as a whole
    await asyncio.sleep(0.2)
    assert live_group_members(pid) == []
    await store.aclose()


async def test_a_crashing_plugin_fails_the_call_and_restarts_on_the_next():
    store = faulty("crash-put")
    await store.connect()
    pid = store.process.pid
    with pytest.raises(StoreUnavailable) as raised:
        await store.put(SCOPE, "k", "v")
    message = str(raised.value)
    assert "plugin faulty-crash-put exited with code 3" in message
    assert "segfault in the storage engine" in message  # the last stderr line
    assert "restarts on the next call" in message
    assert_gone(pid)
    assert await store.get(SCOPE, "k") is None
    assert store.process.pid not in (None, pid)
    await store.aclose()


async def test_garbage_on_stdout_stops_the_plugin():
    store = faulty("garbage")
    await store.put(SCOPE, "k", "v")
    pid = store.process.pid
    with pytest.raises(StoreUnavailable) as raised:
        await store.get(SCOPE, "k")
    message = str(raised.value)
    assert "wrote 'Loading model weights... done' to stdout" in message
    assert "logs to stderr" in message
    assert_gone(pid)
    await store.aclose()


async def test_a_plugin_exiting_before_the_handshake_is_reported_with_its_stderr():
    store = faulty("exit-early")
    with pytest.raises(StoreUnavailable) as raised:
        await store.put(SCOPE, "k", "v")
    message = str(raised.value)
    assert "plugin faulty-exit-early exited with code 4" in message
    assert "missing configuration file plugin.toml" in message
    await store.aclose()


async def test_a_plugin_closing_stdout_is_stopped():
    store = faulty("silent-exit", call_timeout_ms=3000)
    await store.connect()
    pid = store.process.pid
    with pytest.raises(StoreUnavailable, match="closed its stdout"):
        await store.get(SCOPE, "k")
    assert_gone(pid)
    await store.aclose()


async def test_the_wrong_protocol_version_is_a_configuration_error():
    store = faulty("version")
    with pytest.raises(ConfigError) as raised:
        await store.connect()
    assert str(raised.value) == (
        "plugin faulty-version speaks protocol '9.0.0', this animus-flows speaks 0.2.0; "
        "use a plugin built for protocol 0.2.x (or 0.1.x) or upgrade animus-flows"
    )
    assert store.process.pid is None
    await store.aclose()


async def test_a_0_1_plugin_works_but_for_delete_and_list_items_which_say_to_upgrade_it():
    store = faulty("ok")  # speaks protocol 0.1.0
    await store.put(SCOPE, "k", "kept")
    assert (await store.get(SCOPE, "k")).value == "kept"
    assert store.capabilities.semantic is False
    calls = [store.delete(SCOPE, "k"), store.list_items(SCOPE)]
    for method, call in zip(("memory/delete", "memory/list_items"), calls, strict=True):
        with pytest.raises(ConfigError) as refused:
            await call
        assert str(refused.value) == (
            f"plugin faulty-ok speaks protocol 0.1.0, which has no {method} (added in 0.2.0); "
            "upgrade the plugin to protocol 0.2.0"
        )
    assert (await store.get(SCOPE, "k")).value == "kept"  # the host never fakes a delete
    await store.aclose()


async def test_an_unknown_command_is_a_configuration_error(tmp_path):
    store = JsonRpcStore(["no-such-plugin-binary", "--serve"], plugin_id="memory-x", cwd=tmp_path)
    with pytest.raises(ConfigError) as raised:
        await store.get(SCOPE, "k")
    assert str(raised.value) == (
        f"plugin memory-x: command 'no-such-plugin-binary' was not found (working folder "
        f"{tmp_path}); install it, or fix `command:` (use an absolute path or a program on PATH)"
    )


async def test_a_file_that_is_not_executable_is_a_configuration_error(tmp_path):
    script = tmp_path / "plugin.py"
    script.write_text("print('hi')\n")
    store = JsonRpcStore([str(script)], plugin_id="memory-x")
    with pytest.raises(ConfigError, match="is not executable; make it executable"):
        await store.get(SCOPE, "k")


async def test_a_missing_working_folder_is_a_configuration_error(tmp_path):
    store = JsonRpcStore([sys.executable], plugin_id="memory-x", cwd=tmp_path / "nope")
    with pytest.raises(ConfigError, match=r"working folder .*nope does not exist; fix `cwd:`"):
        await store.get(SCOPE, "k")


async def test_concurrent_calls_get_their_own_answers_even_out_of_order():
    store = faulty("reorder")
    await store.connect()
    # The plugin answers every pair of requests in reverse order.
    first, second = await asyncio.gather(
        store.put(SCOPE, "one", "first value"), store.put(SCOPE, "two", "second value")
    )
    assert (first.key, first.value) == ("one", "first value")
    assert (second.key, second.value) == ("two", "second value")
    got = await asyncio.gather(*(store.get(SCOPE, key) for key in ("one", "two")))
    assert [item.value for item in got] == ["first value", "second value"]
    await store.aclose()


async def test_many_concurrent_calls_through_one_process(served_sqlite):
    store = served_sqlite()
    scopes = [Scope("p", agent_id=f"agent-{n}") for n in range(40)]
    await asyncio.gather(*(store.put(s, "k", f"note {n}") for n, s in enumerate(scopes)))
    got = await asyncio.gather(*(store.get(s, "k") for s in scopes))
    assert [item.value for item in got] == [f"note {n}" for n in range(40)]
    await store.aclose()


async def test_a_caller_giving_up_leaves_the_plugin_running():
    store = faulty("slow-query", call_timeout_ms=5000)
    await store.put(SCOPE, "k", "v")
    pid = store.process.pid
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(store.query(SCOPE, "v"), 0.1)
    assert store.process.pid == pid  # the binding's own deadline is not the plugin's
    assert store.process._pending == {}
    # the late answer to the abandoned query is dropped; the next call gets its own
    assert (await store.get(SCOPE, "k")).value == "v"
    await store.aclose()
    assert_gone(pid)


async def test_a_plugin_killed_between_calls_is_restarted_transparently():
    store = faulty("ok")
    await store.put(SCOPE, "k", "v")
    pid = store.process.pid
    os.kill(pid, signal.SIGKILL)
    await asyncio.sleep(0.2)
    assert await store.get(SCOPE, "k") is None  # a new, empty process answered
    assert store.process.pid not in (None, pid)
    await store.aclose()


async def test_application_errors_map_to_the_error_tree():
    store = faulty("read-only")
    with pytest.raises(WriteDenied) as raised:
        await store.put(SCOPE, "k", "v")
    assert str(raised.value) == (
        "plugin faulty-read-only: this corpus is read-only; use another store for writes"
    )
    await store.aclose()


async def test_the_plugins_capabilities_are_respected():
    store = faulty("ok")
    for n in range(8):
        await store.put(SCOPE, f"k{n}", f"v{n}")
    # max_query_top_k is 5: the request is clamped before it is sent
    assert len(await store.query(SCOPE, "v", top_k=50)) == 5
    # no native TTL: the host keeps the expiry in metadata and hides expired items
    item = await store.put(SCOPE, "short", "gone soon", ttl_seconds=1)
    assert item.expires_at is not None and item.metadata == {}
    await asyncio.sleep(1.1)
    assert await store.get(SCOPE, "short") is None
    await store.aclose()


async def test_bad_arguments_are_refused_by_the_plugin_too(served_sqlite):
    store = served_sqlite()
    await store.connect()
    # sent as-is, past the host's own checks: the served store refuses it with -32602
    with pytest.raises(InvalidScope, match="scope project_id is empty"):
        await store.process.call("memory/get", {"scope": {"project_id": ""}, "key": "k"})
    await store.aclose()


async def test_a_workflow_entry_runs_next_to_the_file_with_extra_environment(tmp_path):
    from animus_flows import load_workflow
    from animus_flows.stores.specs import open_store

    (tmp_path / "plugins").mkdir()
    shutil.copy(FAULTY, tmp_path / "plugins" / "faulty.py")
    (tmp_path / "animus.yaml").write_text(
        "version: 1\nstores:\n  memory-x:\n    type: jsonrpc\n"
        f"    command: [{json.dumps(sys.executable)}, plugins/faulty.py, ok]\n"
        "    env: {FAULTY_PLUGIN_ID: from-the-env}\n"
    )
    workflow = load_workflow(tmp_path / "animus.yaml")
    store = open_store(workflow.stores["memory-x"], workflow, "memory-x")
    assert repr(store) == "<JsonRpcStore('memory-x')>"
    handshake = await store.connect()  # found plugins/faulty.py relative to the file's folder
    assert handshake.plugin_id == "from-the-env"
    await store.aclose()


async def test_put_many_writes_entries_with_their_ttls_one_put_each(served_sqlite):
    # the fallback put_many of a store without batches: every entry checked first, then a put
    # each, the TTL field included
    store = served_sqlite()
    try:
        await _put_many_with_ttls(store)
    finally:
        await store.aclose()


async def _put_many_with_ttls(served_sqlite: JsonRpcStore) -> None:
    before = datetime.now(UTC)
    assert (
        await served_sqlite.put_many(
            [(SCOPE, "lasting", "v", None), (SCOPE, "expiring", "v", {"n": 1}, 600)]
        )
        == 2
    )
    assert (await served_sqlite.get(SCOPE, "lasting")).expires_at is None
    expires_at = (await served_sqlite.get(SCOPE, "expiring")).expires_at
    assert (
        before + timedelta(seconds=599) <= expires_at <= datetime.now(UTC) + timedelta(seconds=601)
    )
    with pytest.raises(InvalidRequest, match="a put_many entry is a str; pass tuples"):
        await served_sqlite.put_many([(SCOPE, "a", "v", None), "b"])
    assert await served_sqlite.get(SCOPE, "a") is None
