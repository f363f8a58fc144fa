"""The Zep store on the wire: exact requests, HTTP status mapped to errors, retries under one
deadline, client ownership and the API key kept out of everything a person sees."""

import json
import logging
import time

import httpx
import pytest
import respx

from animus_flows.errors import ConfigError, InvalidRequest, StoreTimeout, StoreUnavailable
from animus_flows.protocol import Scope
from animus_flows.stores import zep_wire as wire
from animus_flows.stores.zep import ZepStore

SCOPE = Scope("trade-desk", agent_id="analyst")
SID = wire.session_id(SCOPE)
UID = wire.user_id("trade-desk")


@pytest.fixture
async def client(zep_fake):
    async with zep_fake.client() as client:
        yield client


@pytest.fixture
def store(zep_fake, client):
    return ZepStore(
        zep_fake.api_key,
        base_url=zep_fake.base_url,
        http_client=client,
        timeout_s=2.0,
    )


def body(request: httpx.Request):
    return json.loads(request.content)


# -- exact requests -------------------------------------------------------------------------


async def test_the_first_put_creates_the_user_and_session_then_adds_a_message(zep_fake, store):
    await store.put(SCOPE, "fx", {"content": "EUR/USD at 1.09"}, metadata={"tier": "hot"})
    assert zep_fake.calls() == [
        ("GET", f"/api/v2/sessions/{SID}"),
        ("GET", f"/api/v2/users/{UID}"),
        ("POST", "/api/v2/users"),
        ("POST", "/api/v2/sessions"),
        ("GET", f"/api/v2/sessions/{SID}/messages?cursor=1&limit=100"),
        ("POST", f"/api/v2/sessions/{SID}/memory"),
    ]
    for request in zep_fake.log:
        assert request.headers["authorization"] == f"Api-Key {zep_fake.api_key}"
    add_user, add_session, add_memory = (zep_fake.log[i] for i in (2, 3, 5))
    assert body(add_user) == {
        "user_id": UID,
        "metadata": {"animus_schema": 1, "animus_project_id": "trade-desk"},
    }
    assert body(add_session) == {
        "session_id": SID,
        "user_id": UID,
        "metadata": {
            "animus_schema": 1,
            "animus_scope": {"project_id": "trade-desk", "agent_id": "analyst", "task_id": None},
            "animus_live": True,
        },
    }
    [message] = body(add_memory)["messages"]
    assert message["content"] == "EUR/USD at 1.09"
    assert (message["role"], message["role_type"]) == ("animus-memory", "norole")
    assert message["metadata"]["animus_key"] == "fx"
    assert message["metadata"]["animus_value"] == {"content": "EUR/USD at 1.09"}
    assert message["metadata"]["animus_metadata"] == {"tier": "hot"}


async def test_later_puts_reuse_the_session_and_mark_the_replaced_version(zep_fake, store):
    await store.put(SCOPE, "fx", "first")
    old_uuid = zep_fake.messages[SID][0]["uuid"]
    zep_fake.log.clear()
    await store.put(SCOPE, "fx", "second")
    assert zep_fake.calls() == [
        ("GET", f"/api/v2/sessions/{SID}"),
        ("GET", f"/api/v2/sessions/{SID}/messages?cursor=1&limit=100"),
        ("POST", f"/api/v2/sessions/{SID}/memory"),
        ("PATCH", f"/api/v2/sessions/{SID}/messages/{old_uuid}"),
    ]
    assert body(zep_fake.log[-1])["metadata"]["animus_superseded"] is True


async def test_get_is_one_listing_and_query_is_one_search(zep_fake, store):
    await store.put(SCOPE, "fx", "EUR/USD at 1.09")
    await zep_fake.wait_indexed()
    zep_fake.log.clear()
    assert (await store.get(SCOPE, "fx")).value == "EUR/USD at 1.09"
    assert [hit.key for hit in await store.query(SCOPE, "EUR/USD", top_k=3)] == ["fx"]
    assert zep_fake.calls() == [
        ("GET", f"/api/v2/sessions/{SID}/messages?cursor=1&limit=100"),
        ("POST", "/api/v2/sessions/search?limit=22"),
    ]
    assert body(zep_fake.log[1]) == {
        "text": "EUR/USD",
        "user_id": UID,
        "session_ids": [SID],
        "search_scope": "messages",
    }


async def test_filtered_queries_ask_for_the_most(zep_fake, store):
    await store.query(SCOPE, "x", filters={"tier": "hot"})
    assert zep_fake.calls() == [("POST", "/api/v2/sessions/search?limit=50")]


async def test_listings_are_paged(zep_fake, client):
    store = ZepStore(zep_fake.api_key, base_url=zep_fake.base_url, http_client=client, page_size=2)
    for n in range(5):
        await store.put(SCOPE, f"k{n}", n)
    zep_fake.log.clear()
    assert await store.count(SCOPE) == 5
    assert zep_fake.calls() == [
        ("GET", f"/api/v2/sessions/{SID}/messages?cursor={page}&limit=2") for page in (1, 2, 3)
    ]
    for n in range(5):
        await store.put(Scope("other", agent_id=str(n)), "k", n)
    zep_fake.log.clear()
    first = await store.list_scopes(project_id="other", limit=3)
    assert len(first.scopes) == 3 and first.next_cursor is not None
    rest = await store.list_scopes(project_id="other", cursor=first.next_cursor, limit=3)
    assert len(rest.scopes) == 2 and rest.next_cursor is None
    assert {s.agent_id for s in first.scopes + rest.scopes} == {"0", "1", "2", "3", "4"}
    assert zep_fake.calls()[0] == (
        "GET",
        "/api/v2/sessions-ordered?asc=true&order_by=created_at&page_size=2&page_number=1",
    )


async def test_delete_scope_clears_the_memory_and_retires_the_session(zep_fake, store):
    await store.put(SCOPE, "a", 1)
    await store.put(SCOPE, "b", 2)
    zep_fake.log.clear()
    assert await store.delete_scope(SCOPE) == 2
    assert zep_fake.calls() == [
        ("GET", f"/api/v2/sessions/{SID}/messages?cursor=1&limit=100"),
        ("DELETE", f"/api/v2/sessions/{SID}/memory"),
        ("PATCH", f"/api/v2/sessions/{SID}"),
    ]
    assert body(zep_fake.log[-1])["metadata"]["animus_live"] is False
    assert (await store.list_scopes()).scopes == []


async def test_delete_marks_the_keys_versions_deleted_as_an_overwrite_marks_them(zep_fake, store):
    await store.put(SCOPE, "fx", "EUR/USD at 1.09")
    await store.put(SCOPE, "fx", "sterling at 1.27")
    await store.put(SCOPE, "oil", "Brent at 80")
    await zep_fake.wait_indexed()
    newest = zep_fake.messages[SID][1]["uuid"]
    zep_fake.log.clear()
    assert await store.delete(SCOPE, "fx") is True
    # one listing, one PATCH: the older version was marked replaced when the newer landed
    assert zep_fake.calls() == [
        ("GET", f"/api/v2/sessions/{SID}/messages?cursor=1&limit=100"),
        ("PATCH", f"/api/v2/sessions/{SID}/messages/{newest}"),
    ]
    marked = body(zep_fake.log[-1])["metadata"]
    assert marked["animus_deleted"] is True and marked["animus_superseded"] is True
    assert await store.get(SCOPE, "fx") is None
    assert [hit.key for hit in await store.query(SCOPE, "sterling EUR/USD Brent")] == ["oil"]
    assert [item.key for item in (await store.list_items(SCOPE)).items] == ["oil"]
    assert await store.count(SCOPE) == 1
    zep_fake.log.clear()
    assert await store.delete(SCOPE, "fx") is False  # nothing left to mark
    assert zep_fake.calls() == [("GET", f"/api/v2/sessions/{SID}/messages?cursor=1&limit=100")]
    await store.put(SCOPE, "fx", "yen at 150")  # a new item under the key
    assert (await store.get(SCOPE, "fx")).value == "yen at 150"


async def test_a_stale_search_index_never_returns_a_replaced_value(zep_fake, store):
    await store.put(SCOPE, "fx", "EUR/USD at 1.09")
    await zep_fake.wait_indexed()
    await store.put(SCOPE, "fx", "sterling at 1.27")
    # the new version is not indexed yet; the old one is, but it is marked replaced
    assert await store.query(SCOPE, "EUR/USD") == []
    await zep_fake.wait_indexed()
    assert [hit.value for hit in await store.query(SCOPE, "sterling")] == ["sterling at 1.27"]


async def test_another_writers_session_is_not_read_as_ours(zep_fake, store):
    await store.put(SCOPE, "k", "mine")
    zep_fake.sessions[SID]["metadata"]["animus_scope"] = {"project_id": "someone-else"}
    with pytest.raises(StoreUnavailable, match=f"Zep session {SID} holds project=someone-else"):
        await store.put(SCOPE, "k", "again")


async def test_a_user_and_session_created_meanwhile_by_another_writer_are_adopted(zep_fake, store):
    # Another writer creates both between our lookups and our creations.
    zep_fake.add_user({"user_id": UID, "metadata": wire.user_metadata("trade-desk")})
    zep_fake.add_session(
        {"session_id": SID, "user_id": UID, "metadata": wire.session_metadata(SCOPE, live=True)}
    )
    zep_fake.fail_next(404, method="GET", path=f"sessions/{SID}")
    zep_fake.fail_next(404, method="GET", path=f"users/{UID}")
    await store.put(SCOPE, "k", "v")
    assert zep_fake.calls()[:6] == [
        ("GET", f"/api/v2/sessions/{SID}"),
        ("GET", f"/api/v2/users/{UID}"),
        ("POST", "/api/v2/users"),  # refused: it exists now
        ("GET", f"/api/v2/users/{UID}"),
        ("POST", "/api/v2/sessions"),  # refused: it exists now
        ("GET", f"/api/v2/sessions/{SID}"),
    ]
    assert (await store.get(SCOPE, "k")).value == "v"


async def test_a_creation_refused_for_another_reason_is_reported(zep_fake, store):
    zep_fake.fail_next(400, method="POST", path="users", body='{"message": "user_id too long"}')
    with pytest.raises(InvalidRequest, match=r"Zep refused user.add \(HTTP 400\): user_id"):
        await store.put(SCOPE, "k", "v")


# -- HTTP status --------------------------------------------------------------------------


@pytest.mark.parametrize("status", [401, 403])
async def test_a_refused_key_is_a_configuration_error(zep_fake, client, status):
    store = ZepStore("z_wrong-key", base_url=zep_fake.base_url, http_client=client)
    zep_fake.api_key = "z_the-right-one" if status == 401 else zep_fake.api_key
    if status == 403:
        zep_fake.fail_next(403)
    with pytest.raises(ConfigError) as raised:
        await store.get(SCOPE, "k")
    assert "refused the API key" in str(raised.value) and "api_key_env" in str(raised.value)
    assert "z_wrong-key" not in str(raised.value)
    assert len(zep_fake.log) == 1  # not retried


async def test_a_missing_session_reads_as_empty(zep_fake, store):
    assert await store.get(SCOPE, "k") is None
    assert await store.query(SCOPE, "anything") == []
    assert await store.delete_scope(SCOPE) == 0


async def test_an_unexpected_404_is_reported(zep_fake, store):
    zep_fake.fail_next(404, path="sessions-ordered", body="<html>Not Found</html>")
    with pytest.raises(StoreUnavailable) as raised:
        await store.list_scopes()
    assert str(raised.value) == (
        "Zep has no such resource (HTTP 404 on memory.list_sessions): <html>Not Found</html>"
    )


async def test_429_and_5xx_are_retried_by_the_sdk(zep_fake, client):
    store = ZepStore(zep_fake.api_key, base_url=zep_fake.base_url, http_client=client)
    zep_fake.fail_next(429, path="messages", headers={"Retry-After": "0"})
    zep_fake.fail_next(503, path="messages", body="<html>Service Unavailable</html>")
    assert await store.get(SCOPE, "k") is None
    assert len(zep_fake.calls("GET")) == 3


async def test_retries_end_with_the_last_answer(zep_fake, client):
    store = ZepStore(
        zep_fake.api_key, base_url=zep_fake.base_url, http_client=client, max_retries=1
    )
    zep_fake.fail_next(
        503, times=1000, body='{"message": "overloaded"}', headers={"Retry-After": "0"}
    )
    with pytest.raises(StoreUnavailable) as raised:
        await store.get(SCOPE, "k")
    assert str(raised.value) == (
        "Zep answered HTTP 503 to memory.get_session_messages: overloaded; gave up after 2 "
        "attempt(s) (Zep is unavailable or rate-limiting: retry later)"
    )
    assert len(zep_fake.log) == 2


async def test_retries_give_up_within_the_deadline(zep_fake, client):
    store = ZepStore(
        zep_fake.api_key, base_url=zep_fake.base_url, http_client=client, timeout_s=0.3
    )
    zep_fake.fail_next(429, times=1000, headers={"Retry-After": "60"})
    started = time.monotonic()
    with pytest.raises(StoreTimeout, match="Zep did not complete get within 0.3 s"):
        await store.get(SCOPE, "k")
    assert time.monotonic() - started < 1.0


async def test_a_hanging_server_is_a_timeout_within_the_deadline(zep_fake, client):
    store = ZepStore(
        zep_fake.api_key, base_url=zep_fake.base_url, http_client=client, timeout_s=0.3
    )
    zep_fake.fail_next(200, delay_s=30)
    started = time.monotonic()
    with pytest.raises(StoreTimeout) as raised:
        await store.query(SCOPE, "walrus")
    assert time.monotonic() - started < 1.0
    assert str(raised.value) == (
        "Zep did not complete query within 0.3 s; it is slow or unreachable, retry later or "
        "raise timeout_s"
    )


async def test_network_errors_are_reported(zep_fake, client):
    store = ZepStore(zep_fake.api_key, base_url=zep_fake.base_url, http_client=client)
    zep_fake.router.routes.clear()
    zep_fake.router.route().mock(side_effect=httpx.ConnectError("connection refused"))
    with pytest.raises(StoreUnavailable) as raised:
        await store.get(SCOPE, "k")
    assert str(raised.value) == (
        "cannot reach Zep at https://zep.test/api/v2 (ConnectError: connection refused)"
    )


async def test_a_bad_request_is_not_retried(zep_fake, store):
    await store.put(SCOPE, "k", "v")
    zep_fake.fail_next(400, path="memory", body='{"message": "content too long"}')
    zep_fake.log.clear()
    with pytest.raises(InvalidRequest, match=r"HTTP 400\): content too long"):
        await store.put(SCOPE, "k", "x" * 100)
    assert [method for method, _ in zep_fake.calls()].count("POST") == 1


async def test_an_unreadable_success_body_is_reported(zep_fake, store):
    zep_fake.fail_next(200, path="messages", body="<html>captive portal</html>")
    with pytest.raises(StoreUnavailable, match="Zep answered get with a body this store cannot"):
        await store.get(SCOPE, "k")


# -- clients and secrets ------------------------------------------------------------------


async def test_an_injected_client_is_not_closed(zep_fake, client, store):
    await store.get(SCOPE, "k")
    await store.aclose()
    assert not client.is_closed


async def test_an_own_client_is_opened_and_closed(zep_fake):
    store = ZepStore(zep_fake.api_key, base_url=zep_fake.base_url)
    with respx.mock(base_url=zep_fake.base_url) as router:
        router.route().mock(side_effect=zep_fake.handle)
        await store.put(SCOPE, "k", "v")
        own = store._own_client
        assert own is not None and not own.is_closed
        await store.aclose()
    assert own.is_closed


async def test_zep_api_url_in_the_environment_does_not_redirect_the_key(
    zep_fake, store, monkeypatch
):
    monkeypatch.setenv("ZEP_API_URL", "https://attacker.test")
    await store.get(SCOPE, "k")
    assert {request.url.host for request in zep_fake.log} == {"zep.test"}


async def test_the_key_never_shows(zep_fake, client, caplog):
    key = zep_fake.api_key
    store = ZepStore(
        key, base_url=zep_fake.base_url, http_client=client, timeout_s=1.0, max_retries=0
    )
    assert key not in repr(store) and key not in store.describe()
    assert key not in repr(store.__dict__)  # SecretStr inside
    caplog.set_level(logging.DEBUG)
    messages = []
    zep_fake.fail_next(500, times=100, body=f'{{"message": "bad header Api-Key {key}"}}')
    with pytest.raises(StoreUnavailable) as raised:
        await store.put(SCOPE, "k", "v")
    messages.append(str(raised.value))
    zep_fake.api_key = "rotated"
    zep_fake.faults.clear()
    with pytest.raises(ConfigError) as raised:
        await store.get(SCOPE, "k")
    messages.append(str(raised.value))
    for text in [*messages, caplog.text]:
        assert key not in text
    assert "Api-Key ***" in messages[0]


def test_a_workflow_entry_takes_the_key_from_the_environment(tmp_path, monkeypatch):
    from animus_flows import load_workflow
    from animus_flows.stores.specs import open_store

    (tmp_path / "animus.yaml").write_text(
        "version: 1\nstores:\n"
        "  memory-zep: {type: zep, base_url: 'https://zep.test/', api_key_env: MY_ZEP_KEY}\n"
        "  inline: {type: zep, api_key: z_inline-key}\n"
    )
    workflow = load_workflow(tmp_path / "animus.yaml")
    monkeypatch.delenv("MY_ZEP_KEY", raising=False)
    with pytest.raises(ConfigError) as raised:
        open_store(workflow.stores["memory-zep"], workflow, "memory-zep")
    assert str(raised.value) == (
        "stores.memory-zep: no Zep API key; set the MY_ZEP_KEY environment variable "
        "(or name another one with api_key_env)"
    )
    monkeypatch.setenv("MY_ZEP_KEY", "z_from-env")
    store = open_store(workflow.stores["memory-zep"], workflow, "memory-zep")
    assert isinstance(store, ZepStore) and store.base_url == "https://zep.test"
    assert repr(store) == "<ZepStore('https://zep.test')>"
    inline = open_store(workflow.stores["inline"], workflow, "inline")
    assert inline._api_key.get_secret_value() == "z_inline-key"
    assert "z_inline-key" not in repr(workflow)
