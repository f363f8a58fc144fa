"""Writes of several records into a store without transactions are all or nothing: a real
JSON-RPC plugin (the example dict plugin, keeping its items in a file) crashes part-way through
an import, a new version, a forget or a tier review, restarts, and the layer undoes the writes
that landed through the new process."""

import json
import os
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import pytest

from animus_flows.errors import StoreUnavailable
from animus_flows.memory import AsyncMemoryLayer
from animus_flows.protocol import Scope, utcnow
from animus_flows.stores.jsonrpc import JsonRpcStore

TESTS = Path(__file__).resolve().parents[1]
CRASHING = TESTS / "stores" / "crashing_dict_plugin.py"
DICT_PLUGIN = TESTS.parent / "examples" / "plugins" / "dict_plugin.py"
SCOPE = Scope("demo", agent_id="a")
KEYS = [f"k{n}" for n in range(1, 7)]
EXPORT = json.dumps(
    {
        "format": "animus-memories",
        "version": 1,
        "memories": [{"id": key, "content": f"imported {key}"} for key in KEYS],
    }
)


def crashing(tmp_path: Path, *flags: str, after: int = 3) -> JsonRpcStore:
    """The dict plugin on `items.json`, exiting with code 3 on put number `after` + 1 (once)."""
    marker = str(tmp_path / "crashed")
    return JsonRpcStore(
        [sys.executable, str(CRASHING), "--crash-after", str(after), "--marker", marker, *flags,
         "--file", str(tmp_path / "items.json")],
        plugin_id="crash",
    )  # fmt: skip


def working(tmp_path: Path) -> JsonRpcStore:
    """The example plugin itself on the same file."""
    command = [sys.executable, str(DICT_PLUGIN), "--file", str(tmp_path / "items.json")]
    return JsonRpcStore(command, plugin_id="dict")


async def holdings(store: JsonRpcStore) -> dict[str, tuple]:
    """What the scope holds as any reader sees it: every item's value and metadata."""
    hits = await store.query(SCOPE, "", top_k=100)
    return {hit.key: (hit.value, hit.metadata) for hit in hits}


async def test_a_failed_import_of_new_keys_leaves_the_scope_empty(tmp_path):
    store = crashing(tmp_path)
    layer = AsyncMemoryLayer(store, SCOPE)
    with pytest.raises(StoreUnavailable) as raised:
        await layer.import_memories(EXPORT)
    message = str(raised.value)
    assert "plugin crash exited with code 3" in message and "\n" not in message
    assert message.endswith(
        "; the import was rolled back: project=demo/agent=a holds what it held before"
    )
    assert await layer.recall("") == []  # the undo deleted the keys the import added
    assert await holdings(store) == {}
    assert [await store.get(SCOPE, key) for key in KEYS] == [None] * 6
    await store.aclose()


async def test_a_failed_import_over_stored_items_puts_them_back(tmp_path):
    seeded = working(tmp_path)
    await AsyncMemoryLayer(seeded, SCOPE).import_memories(
        json.dumps([{"id": "k1", "content": "old one", "tags": ["kept"]}])
    )
    await seeded.put(SCOPE, "k2", "old two", metadata={"tier": "hot"}, ttl_seconds=3600)
    await seeded.put(SCOPE, "untouched", {"content": "not in the import"})
    before = await holdings(seeded)
    expires = (await seeded.get(SCOPE, "k2")).expires_at
    await seeded.aclose()

    store = crashing(tmp_path)
    with pytest.raises(StoreUnavailable, match="the import was rolled back"):
        await AsyncMemoryLayer(store, SCOPE).import_memories(EXPORT)
    assert await holdings(store) == before
    restored = (await store.get(SCOPE, "k2")).expires_at
    assert abs(restored - expires) < timedelta(seconds=5) and restored > utcnow()
    await store.aclose()


async def test_a_store_that_stays_dead_is_named_with_the_keys_it_may_hold(tmp_path):
    seeded = working(tmp_path)  # stored items under the keys: the undo must put them back
    await AsyncMemoryLayer(seeded, SCOPE).import_memories(EXPORT.replace("imported", "old"))
    await seeded.aclose()
    store = crashing(tmp_path, "--for-good")
    with pytest.raises(StoreUnavailable) as raised:
        await AsyncMemoryLayer(store, SCOPE).import_memories(EXPORT)
    await store.aclose()
    message = str(raised.value)
    assert "\n" not in message
    assert message.startswith("plugin crash exited with code 3")
    assert "; undoing the import failed too (plugin crash exited with code 3" in message
    # three puts landed and the fourth may have: those keys, and how to finish
    assert message.endswith(
        "so project=demo/agent=a may still hold imported records under 4 key(s): "
        "k1, k2, k3, k4; once the store works, import the same file again to complete the import"
    )
    fixed = working(tmp_path)
    assert await AsyncMemoryLayer(fixed, SCOPE).import_memories(EXPORT) == 6
    assert sorted(await holdings(fixed)) == KEYS
    await fixed.aclose()


def test_the_cli_import_is_rolled_back_and_exits_1(tmp_path):
    plugin = [sys.executable, str(CRASHING), "--crash-after", "3", "--marker", "crashed",
              "--file", "items.json"]  # fmt: skip
    (tmp_path / "w.yaml").write_text(
        "version: 1\nproject: demo\n"
        f"stores:\n  crash: {{type: jsonrpc, command: {json.dumps(plugin)}}}\n"
        "agents: {a: {}}\nworkflows: {w: {phases: [{id: p, agent: a}]}}\n"
    )
    (tmp_path / "exp.json").write_text(EXPORT)
    animus = Path(sys.executable).with_name("animus")
    done = subprocess.run(
        [str(animus), "memory", "import", "exp.json", "--workflow-file", "w.yaml",
         "--plugin", "crash", "--scope", "agent", "--agent-id", "a"],
        cwd=tmp_path, capture_output=True, text=True, timeout=60,
        env={**os.environ, "PYTHONWARNINGS": "ignore"},
    )  # fmt: skip
    assert done.returncode == 1, done.stderr
    assert done.stdout == "" and done.stderr.count("\n") == 1
    assert done.stderr.startswith("error: plugin crash exited with code 3")
    assert "the import was rolled back: project=demo/agent=a holds what it held before" in (
        done.stderr
    )
    assert json.loads((tmp_path / "items.json").read_text()) == []  # the new keys deleted


ROLLED_BACK = "was rolled back: project=demo/agent=a holds what it held before"


async def seeded(tmp_path: Path, *contents: str) -> list:
    """Memories remembered through the working plugin, which is closed after."""
    store = working(tmp_path)
    layer = AsyncMemoryLayer(store, SCOPE)
    memories = [await layer.remember(content) for content in contents]
    await store.aclose()
    return memories


async def test_a_failed_update_leaves_the_parent_current_and_no_new_version(tmp_path):
    (parent,) = await seeded(tmp_path, "the desk closes at five")
    store = working(tmp_path)
    before = await holdings(store)
    await store.aclose()

    store = crashing(tmp_path, after=1)  # the parent's rewrite lands, the child's put crashes
    layer = AsyncMemoryLayer(store, SCOPE)
    with pytest.raises(StoreUnavailable) as raised:
        await layer.update_with_version(parent.id, "the desk closes at six")
    message = str(raised.value)
    assert message.startswith("plugin crash exited with code 3") and "\n" not in message
    assert message.endswith(f"; the update {ROLLED_BACK}")
    # the parent is current and unchanged, the new version deleted: the scope is as it was
    current = await layer.get_memory(parent.id)
    assert (current.tier, current.superseded_by) == (parent.tier, None)
    assert [m.id for m in await layer.history(parent.id)] == [parent.id]
    assert await holdings(store) == before
    assert [m.content for m in await layer.recall("desk")] == ["the desk closes at five"]
    assert await layer.recall("six") == []
    await store.aclose()


async def test_a_failed_forget_of_the_newest_version_puts_both_back(tmp_path):
    (parent,) = await seeded(tmp_path, "the desk closes at five")
    store = working(tmp_path)
    child = await AsyncMemoryLayer(store, SCOPE).update_with_version(parent.id, "at six")
    before = await holdings(store)
    await store.aclose()

    store = crashing(tmp_path, after=0)  # the delete lands, the parent's relink crashes
    layer = AsyncMemoryLayer(store, SCOPE)
    with pytest.raises(StoreUnavailable, match=f"the forget {ROLLED_BACK}"):
        await layer.forget(child.id)
    assert await holdings(store) == before
    assert (await layer.get_memory(child.id)).content == "at six"
    assert [m.id for m in await layer.history(parent.id)] == [parent.id, child.id]
    await store.aclose()


async def test_a_failed_tier_review_moves_no_memory(tmp_path):
    await seeded(tmp_path, "one", "two", "three")
    store = working(tmp_path)
    before = await holdings(store)
    await store.aclose()

    store = crashing(tmp_path, after=1)  # the first demotion lands, the second crashes
    layer = AsyncMemoryLayer(store, SCOPE)
    with pytest.raises(StoreUnavailable, match=f"the tier review {ROLLED_BACK}"):
        await layer.run_tier_review(now=utcnow() + timedelta(days=60))
    assert await holdings(store) == before
    await store.aclose()


async def test_an_update_that_cannot_be_undone_names_its_keys(tmp_path):
    (parent,) = await seeded(tmp_path, "the desk closes at five")
    store = crashing(tmp_path, "--for-good", after=1)
    with pytest.raises(StoreUnavailable) as raised:
        await AsyncMemoryLayer(store, SCOPE).update_with_version(parent.id, "at six")
    await store.aclose()
    message = str(raised.value)
    assert "\n" not in message
    assert "; undoing the update failed too (plugin crash exited with code 3" in message
    assert f"may still hold the update's writes under 2 key(s): {parent.id}, " in message
    assert message.endswith("; once the store works, check them and repeat the update")


async def test_a_recall_through_a_plugin_keeps_the_expiry_of_an_item_stored_with_a_ttl(tmp_path):
    # a plugin: the layer reads the items it rewrites with a get each, for their expiries
    store = working(tmp_path)
    await store.put(SCOPE, "window", {"content": "the deploy window is open"}, ttl_seconds=600)
    expires_at = (await store.get(SCOPE, "window")).expires_at
    layer = AsyncMemoryLayer(store, SCOPE)
    [found] = await layer.recall("deploy window")
    assert found.access_count == 1
    item = await store.get(SCOPE, "window")
    assert item.value["access_count"] == 1 and item.expires_at is not None
    assert abs(item.expires_at - expires_at) <= timedelta(seconds=2)
    await store.aclose()
