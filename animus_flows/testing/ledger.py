"""The conformance suite of the ledger extension (`animus_flows.ledger.LedgerStore`).

`LedgerConformance` holds every check of `StoreConformance` (a store that keeps a ledger is a
memory store first) and the ledger's: versions, ops, valid and transaction times, snapshots,
versioned writes that conflict, and every write path recorded. Subclass it alone, with a
`store` fixture returning a fresh, empty store that keeps a ledger::

    import pytest
    from animus_flows.testing.ledger import LedgerConformance

    class TestMyLedgerStore(LedgerConformance):
        @pytest.fixture
        def store(self, tmp_path):
            return MyLedgerStore(tmp_path / "db")

Needs pytest and pytest-asyncio, as `animus_flows.testing.conformance` does.
"""

from __future__ import annotations

import asyncio
import itertools
from datetime import UTC, timedelta
from typing import Any

try:
    import pytest
except ImportError as exc:  # the test tools are not dependencies of the package
    raise ModuleNotFoundError(
        f"the conformance suite needs pytest and pytest-asyncio, and {exc.name} is not "
        "installed: pip install pytest pytest-asyncio",
        name=exc.name,
    ) from exc

from animus_flows.errors import ConflictError, InvalidRequest, InvalidScope
from animus_flows.ledger import LEDGER_OPS, LedgerEvent, LedgerStore, VersionedItem, conflict
from animus_flows.protocol import Scope
from animus_flows.testing.conformance import AWKWARD_ID_PAIRS, JSON_VALUES, StoreConformance

#: How far apart two readings of one moment may be (a store may keep times in microseconds).
CLOCK_SLACK = timedelta(milliseconds=1)


def check_history(events: list[LedgerEvent], *, expiring: bool = False) -> None:
    """What every history holds: versions 1, 2, 3, ...; known ops; aware times; transaction
    and valid time never going back; each state valid until the next one begins (or, with
    `expiring`, until then at the latest: a state with a TTL may end before)."""
    assert [event.version for event in events] == list(range(1, len(events) + 1))
    for event in events:
        assert event.op in LEDGER_OPS
        assert event.recorded_at.tzinfo is not None and event.valid_from.tzinfo is not None
        if event.op == "delete":
            assert event.value is None and event.metadata == {}
    for before, after in itertools.pairwise(events):
        assert before.recorded_at <= after.recorded_at
        assert before.valid_from <= after.valid_from
        assert before.valid_to is not None and before.valid_to <= after.valid_from + CLOCK_SLACK
        if not expiring:
            assert before.valid_to >= after.valid_from - CLOCK_SLACK


class LedgerConformance(StoreConformance):
    """Checks of `LedgerStore` and of the protocol; inherit and provide a `store` fixture."""

    @pytest.fixture
    def store(self) -> LedgerStore:
        raise NotImplementedError("define a `store` fixture returning a fresh store with a ledger")

    async def test_the_store_offers_the_extension(self, s: Any) -> None:
        assert isinstance(s, LedgerStore)

    # -- the history of a key ---------------------------------------------------------------

    async def test_every_change_of_a_key_is_recorded_with_its_version(self, s: Any) -> None:
        scope = Scope("ledger", agent_id="a")
        await s.put(scope, "k", "first", metadata={"tier": "warm"})
        await s.put(scope, "k", {"content": "second"}, metadata={"tier": "hot"})
        assert await s.delete(scope, "k") is True
        await s.put(scope, "k", "third")
        events = await s.ledger_events(scope, "k")
        check_history(events)
        assert [(e.version, e.op) for e in events] == [
            (1, "create"), (2, "update"), (3, "delete"), (4, "create")
        ]  # fmt: skip
        assert [e.value for e in events] == ["first", {"content": "second"}, None, "third"]
        assert [e.metadata for e in events] == [{"tier": "warm"}, {"tier": "hot"}, {}, {}]
        assert events[-1].valid_to is None  # the state that holds now
        assert all(e.scope == scope and e.key == "k" for e in events)

    async def test_a_deletion_holds_until_the_key_is_written_again(self, s: Any) -> None:
        scope = Scope("ledger-delete")
        await s.put(scope, "k", "v")
        await s.delete(scope, "k")
        assert await s.delete(scope, "k") is False  # deleting again changes nothing
        assert await s.delete(scope, "never") is False
        events = await s.ledger_events(scope, "k")
        assert [(e.op, e.valid_to) for e in events][-1] == ("delete", None)
        assert len(events) == 2
        assert await s.ledger_events(scope, "never") == []

    async def test_transaction_times_follow_the_order_of_writes(self, s: Any) -> None:
        scope = Scope("ledger-order")
        for n in range(5):
            await s.put(scope, "k", n)
        events = await s.ledger_events(scope, "k")
        check_history(events)
        assert [e.value for e in events] == [0, 1, 2, 3, 4]
        assert events[0].recorded_at < events[-1].recorded_at

    @pytest.mark.parametrize("value", JSON_VALUES, ids=repr)
    async def test_snapshots_hold_what_get_returned(self, s: Any, value: Any) -> None:
        scope = Scope("ledger-json")
        await s.put(scope, "k", value, metadata={"n": [1, {"x": None}]})
        stored = await s.get(scope, "k")
        (event,) = await s.ledger_events(scope, "k")
        assert (event.value, event.metadata) == (stored.value, stored.metadata)

    async def test_histories_never_cross_scopes_with_awkward_ids(self, s: Any) -> None:
        for n, (left, right) in enumerate(AWKWARD_ID_PAIRS):
            for agent in (left, right):
                await s.put(Scope(f"ledger-iso-{n}", agent_id=agent), left, agent)
        for n, (left, right) in enumerate(AWKWARD_ID_PAIRS):
            for agent in (left, right):
                events = await s.ledger_events(Scope(f"ledger-iso-{n}", agent_id=agent), left)
                assert [(e.version, e.value) for e in events] == [(1, agent)], (left, right)

    # -- every write path -------------------------------------------------------------------

    async def test_put_many_and_delete_scope_are_recorded(self, s: Any) -> None:
        scope, other = Scope("ledger-many", agent_id="a"), Scope("ledger-many", agent_id="b")
        await s.put_many([(scope, "a", 1, None), (scope, "b", 2, {"m": 1}), (other, "a", 3, None)])
        await s.put_many([(scope, "a", 10, None)])
        await s.put(scope, "short", "v", ttl_seconds=1)
        await asyncio.sleep(1.2)  # an item that expired ends without a deletion
        assert await s.delete_scope(scope) == 2
        a, b = await s.ledger_events(scope, "a"), await s.ledger_events(scope, "b")
        assert [(e.op, e.value) for e in a] == [("create", 1), ("update", 10), ("delete", None)]
        assert [(e.op, e.metadata) for e in b] == [("create", {"m": 1}), ("delete", {})]
        assert [e.op for e in await s.ledger_events(scope, "short")] == ["create"]
        assert [e.op for e in await s.ledger_events(other, "a")] == ["create"]
        await s.put(scope, "a", "again")  # the scope's history outlives the scope
        assert [e.version for e in await s.ledger_events(scope, "a")] == [1, 2, 3, 4]

    async def test_an_expiring_state_is_valid_until_its_expiry(self, s: Any) -> None:
        scope = Scope("ledger-ttl")
        await s.put(scope, "k", "v", ttl_seconds=3600)
        expires_at = (await s.get(scope, "k")).expires_at
        (event,) = await s.ledger_events(scope, "k")
        assert abs(event.valid_to - expires_at) <= CLOCK_SLACK
        await s.put(scope, "k", "kept")  # no TTL now: the expiring state ends here
        first, second = await s.ledger_events(scope, "k")
        assert first.valid_to < expires_at - timedelta(minutes=59)
        assert abs(first.valid_to - second.valid_from) <= CLOCK_SLACK
        assert second.valid_to is None

    async def test_a_write_after_expiry_is_a_create(self, s: Any) -> None:
        scope = Scope("ledger-expired")
        await s.put(scope, "k", "short", ttl_seconds=1)
        await asyncio.sleep(1.2)
        assert await s.get_versioned(scope, "k") is None
        written = await s.put_versioned(scope, "k", "again", expected_version=0)
        assert written.version == 2
        events = await s.ledger_events(scope, "k")
        check_history(events, expiring=True)
        assert [e.op for e in events] == ["create", "create"]

    # -- versioned reads and writes ---------------------------------------------------------

    async def test_get_versioned_reads_the_item_and_its_version(self, s: Any) -> None:
        scope = Scope("ledger-get")
        assert await s.get_versioned(scope, "k") is None
        await s.put(scope, "k", "one")
        await s.put(scope, "k", "two")
        found = await s.get_versioned(scope, "k")
        assert isinstance(found, VersionedItem)
        assert (found.item, found.version) == (await s.get(scope, "k"), 2)
        await s.delete(scope, "k")
        assert await s.get_versioned(scope, "k") is None

    async def test_put_versioned_writes_only_over_the_expected_version(self, s: Any) -> None:
        scope = Scope("ledger-cas")
        created = await s.put_versioned(scope, "k", "one", expected_version=0)
        assert created.version == 1 and created.item == await s.get(scope, "k")
        updated = await s.put_versioned(scope, "k", "two", expected_version=1, metadata={"m": 1})
        assert (updated.version, updated.item.value, updated.item.metadata) == (2, "two", {"m": 1})
        unchecked = await s.put_versioned(scope, "k", "three")
        assert unchecked.version == 3
        await s.delete(scope, "k")
        recreated = await s.put_versioned(scope, "k", "five", expected_version=0, ttl_seconds=60)
        assert recreated.version == 5 and recreated.item.expires_at is not None

    @pytest.mark.parametrize("expected", [0, 1, 3])
    async def test_a_conflict_writes_nothing(self, s: Any, expected: int) -> None:
        scope = Scope("ledger-conflict", task_id="t")
        await s.put(scope, "k", "one")
        await s.put(scope, "k", "two")  # the stored version is 2
        before = (await s.get(scope, "k"), await s.ledger_events(scope, "k"))
        with pytest.raises(ConflictError) as raised:
            await s.put_versioned(scope, "k", "lost", expected_version=expected)
        assert str(raised.value) == str(conflict(scope, "k", expected, 2))
        assert (await s.get(scope, "k"), await s.ledger_events(scope, "k")) == before

    async def test_the_conflict_message_names_key_versions_and_fix(self, s: Any) -> None:
        scope = Scope("ledger-message")
        with pytest.raises(ConflictError) as raised:
            await s.put_versioned(scope, "absent", "v", expected_version=4)
        assert str(raised.value) == (
            "key 'absent' in project=ledger-message has no live item (version 0), not the "
            "expected version 4: another writer changed it since it was read, and nothing was "
            "written; read it again and retry with its current version"
        )
        assert await s.get(scope, "absent") is None
        assert await s.ledger_events(scope, "absent") == []

    async def test_racing_versioned_writes_let_exactly_one_win(self, s: Any) -> None:
        scope = Scope("ledger-race")
        await s.put(scope, "k", "start")
        outcomes = await asyncio.gather(
            *(s.put_versioned(scope, "k", f"writer {n}", expected_version=1) for n in range(5)),
            return_exceptions=True,
        )
        won = [o for o in outcomes if isinstance(o, VersionedItem)]
        assert len(won) == 1 and won[0].version == 2
        assert all(isinstance(o, ConflictError) for o in outcomes if o not in won)
        events = await s.ledger_events(scope, "k")
        assert [e.value for e in events] == ["start", won[0].item.value]
        assert (await s.get(scope, "k")).value == won[0].item.value

    # -- bad input --------------------------------------------------------------------------

    @pytest.mark.parametrize("expected", [-1, True, 1.0, "1"], ids=repr)
    async def test_a_bad_expected_version_is_refused(self, s: Any, expected: Any) -> None:
        scope = Scope("ledger-bad")
        with pytest.raises(InvalidRequest, match="expected_version"):
            await s.put_versioned(scope, "k", "v", expected_version=expected)
        assert await s.get(scope, "k") is None
        assert await s.ledger_events(scope, "k") == []

    async def test_bad_keys_and_scopes_are_refused(self, s: Any) -> None:
        for call in (
            lambda scope, key: s.get_versioned(scope, key),
            lambda scope, key: s.put_versioned(scope, key, "v"),
            lambda scope, key: s.ledger_events(scope, key),
        ):
            with pytest.raises(InvalidRequest):
                await call(Scope("ledger-bad"), "")
            with pytest.raises(InvalidRequest):
                await call(Scope("ledger-bad"), "line\nbreak")
            with pytest.raises(InvalidScope):
                await call("not-a-scope", "k")

    async def test_times_are_utc(self, s: Any) -> None:
        scope = Scope("ledger-utc")
        await s.put(scope, "k", "v")
        (event,) = await s.ledger_events(scope, "k")
        assert event.recorded_at.utcoffset() == UTC.utcoffset(None)
        assert event.to_json()["recorded_at"].endswith("+00:00")
