"""The Zep mapping and the HTTP status rules, as pure functions: no fake, no network."""

import re
from datetime import UTC, datetime, timedelta

import pytest

from animus_flows.errors import ConfigError, InvalidRequest, StoreUnavailable
from animus_flows.protocol import Scope
from animus_flows.stores import zep_wire as wire
from animus_flows.stores.checks import EXPIRES_KEY
from animus_flows.stores.zep_http import (
    ZepConflict,
    ZepNotFound,
    is_retryable,
    status_error,
)
from animus_flows.testing.conformance import AWKWARD_ID_PAIRS

T0 = datetime(2026, 1, 2, 3, 4, 5, 678901, tzinfo=UTC)


@pytest.mark.parametrize("mine,theirs", AWKWARD_ID_PAIRS, ids=repr)
def test_awkward_ids_map_to_distinct_url_safe_sessions(mine, theirs):
    scopes = [
        Scope(mine),
        Scope(theirs),
        Scope("p", mine),
        Scope("p", theirs),
        Scope("p", None, mine),
    ]
    ids = [wire.session_id(scope) for scope in scopes]
    assert len(set(ids)) == len(ids)
    assert all(re.fullmatch(r"animus-s-[0-9a-f]{32}", session) for session in ids)
    assert wire.user_id(mine) != wire.user_id(theirs)
    assert re.fullmatch(r"animus-p-[0-9a-f]{32}", wire.user_id(mine))


def test_agent_and_task_ids_do_not_alias():
    assert wire.session_id(Scope("p", "x", None)) != wire.session_id(Scope("p", None, "x"))


def test_a_message_carries_the_item_and_round_trips():
    scope = Scope("p", "a%_/.'\"東")
    body = wire.message(scope, "k", {"content": "walrus", "n": 1}, {"tier": "hot"}, T0, T0)
    assert body["content"] == "walrus"
    assert (body["role"], body["role_type"]) == ("animus-memory", "norole")
    version = wire.read_version("u1", body["metadata"], scope)
    assert version is not None and not version.superseded
    assert version.item.value == {"content": "walrus", "n": 1}
    assert version.item.metadata == {"tier": "hot"}
    assert version.item.created_at == T0
    assert wire.read_version("u1", wire.superseded(body["metadata"]), scope).superseded


def test_empty_text_is_never_sent_as_empty_content():
    assert wire.message(Scope("p"), "k", "", {}, T0, T0)["content"] == '""'


def test_versions_of_other_scopes_and_foreign_messages_are_ignored():
    body = wire.message(Scope("p", "a"), "k", "v", {}, T0, T0)
    assert wire.read_version("u", body["metadata"], Scope("p", "b")) is None
    assert wire.read_version("u", body["metadata"], Scope("p")) is None
    assert wire.read_version("u", {"some": "chat metadata"}, Scope("p", "a")) is None
    assert wire.read_version("u", None, Scope("p", "a")) is None
    broken = {**body["metadata"], wire.M_CREATED: "yesterday"}
    assert wire.read_version("u", broken, Scope("p", "a")) is None


def test_a_scope_survives_a_server_dropping_null_ids():
    body = wire.message(Scope("p"), "k", "v", {}, T0, T0)
    body["metadata"][wire.M_SCOPE] = {"project_id": "p"}
    assert wire.read_version("u", body["metadata"], Scope("p")) is not None


def version(key, value, updated, uuid="u", superseded=False, metadata=None):
    body = wire.message(Scope("p"), key, value, metadata or {}, T0, updated)
    meta = wire.superseded(body["metadata"]) if superseded else body["metadata"]
    return wire.read_version(uuid, meta, Scope("p"))


def test_latest_prefers_the_newest_version_marked_or_not():
    old = version("k", "old", T0)
    new = version("k", "new", T0 + timedelta(seconds=1))
    # a crash between writing `new` and marking `old` leaves both unmarked: still `new`
    assert wire.latest([old, new])["k"].item.value == "new"
    assert wire.latest([new, old])["k"].item.value == "new"
    # equal timestamps: the later message wins
    twin = version("k", "twin", T0 + timedelta(seconds=1))
    assert wire.latest([new, twin])["k"].item.value == "twin"


def test_search_hits_skip_other_sessions_marked_versions_and_duplicates():
    session = wire.session_id(Scope("p"))
    old = version("k", "old", T0, superseded=True)
    stale = version("j", "stale", T0)
    fresh = version("j", "fresh", T0 + timedelta(seconds=1))
    other = version("x", "other", T0)
    hits = wire.hits(
        [
            (session, 0.9, old),
            (session, 0.8, stale),
            (session, 0.3, fresh),
            ("animus-s-someone-else", 0.99, other),
            (session, 0.5, None),
        ],
        session,
    )
    assert [(hit.key, hit.value, hit.score) for hit in hits] == [("j", "fresh", 0.3)]


def test_session_metadata_marks_live_scopes():
    scope = Scope("p", task_id="t")
    live = wire.session_metadata(scope, live=True)
    assert wire.session_scope(live) == scope and wire.session_is_live(live)
    assert not wire.session_is_live(wire.session_metadata(scope, live=False))
    assert wire.session_scope({"created_by": "a chatbot"}) is None
    assert wire.session_scope(None) is None


def test_expiry_is_read_from_emulated_ttl_metadata():
    past = (datetime.now(UTC) - timedelta(seconds=1)).isoformat()
    future = (datetime.now(UTC) + timedelta(hours=1)).isoformat()
    assert version("k", "v", T0, metadata={EXPIRES_KEY: past}).expired()
    assert not version("k", "v", T0, metadata={EXPIRES_KEY: future}).expired()
    assert not version("k", "v", T0).expired()


def test_an_expiry_that_is_no_date_is_read_as_none(caplog):
    # written by another tool: the item must not make its whole scope unreadable
    secret = "ghp_" + "A1b2" * 9
    for raw in ("not-a-date", secret, 17, None):
        assert not version("k", "v", T0, metadata={EXPIRES_KEY: raw}).expired()
    assert "reading it as not expiring" in caplog.text and secret not in caplog.text
    naive_past = (datetime.now(UTC) - timedelta(seconds=5)).replace(tzinfo=None).isoformat()
    assert version("k", "v", T0, metadata={EXPIRES_KEY: naive_past}).expired()  # UTC


def test_cursors_are_positions():
    assert wire.parse_cursor(None) == 0 and wire.parse_cursor("42") == 42
    for bad in ("-1", "abc", "1.5", "", "²", "9" * 23, "9" * 5000):
        with pytest.raises(InvalidRequest, match="pass next_cursor unchanged"):
            wire.parse_cursor(bad)


# -- HTTP status -> errors ------------------------------------------------------------------

KEY = "z_secret-key-value"


def error(status, body='{"message": "boom"}'):
    return status_error(
        status, body, where="memory.get_session", base_url="https://zep.test", secret=KEY
    )


@pytest.mark.parametrize("status", [200, 201, 204])
def test_success_is_no_error(status):
    assert error(status) is None


@pytest.mark.parametrize("status", [401, 403])
def test_a_refused_key_is_a_configuration_error_naming_the_fix(status):
    found = error(status)
    assert isinstance(found, ConfigError)
    assert str(found) == (
        f"Zep at https://zep.test refused the API key (HTTP {status} on memory.get_session); set a "
        "valid key for this Zep project in api_key_env (default ZEP_API_KEY) or the block's "
        "api_key"
    )


def test_status_classes():
    assert isinstance(error(404), ZepNotFound) and isinstance(error(404), StoreUnavailable)
    assert isinstance(error(409), ZepConflict)
    bad = error(400, '{"message": "content exceeds 2500 characters"}')
    assert isinstance(bad, InvalidRequest)
    assert "HTTP 400): content exceeds 2500 characters; check the value" in str(bad)
    assert isinstance(error(503), StoreUnavailable)
    assert "check base_url" in str(error(418))
    assert [s for s in (400, 401, 404, 408, 409, 418, 429, 500, 502, 503) if is_retryable(s)] == [
        408,
        429,
        500,
        502,
        503,
    ]


def test_server_text_is_shortened_and_scrubbed_of_the_key():
    echoed = error(500, f"<html>invalid header Authorization: Api-Key {KEY}</html>" + "x" * 500)
    assert KEY not in str(echoed) and "Api-Key ***" in str(echoed)
    assert len(str(echoed)) < 300
