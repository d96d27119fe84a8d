"""Static membership (KIP-345) through the coordinator's async API (see helpers.py for the rules).

A static member (group.instance.id) that restarts within its session timeout takes its old place
back without a rebalance of the others; an older incarnation is fenced; a static member that does
not come back is removed by its session timeout.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import trio
import trio.testing
from rokka.gateway.kafka.groups import CommitOffset, ErrorCode, GroupCoordinator, JoinResult, LeavingMember, SyncRequest

from tests.gateway.kafka_groups.helpers import (
    REBALANCE_MS,
    SESSION_MS,
    join,
    join_request,
    make_coordinator,
    running,
    sync_all,
)

LONG_SESSION_MS = REBALANCE_MS + 15_000


@pytest.fixture
def coord(tmp_path: Path) -> GroupCoordinator:
    return make_coordinator(tmp_path)


async def _form_static(coord: GroupCoordinator, n: int, session_ms: int = SESSION_MS) -> list[JoinResult]:
    """n static members (instance ids i0..) join concurrently and sync; results in instance order."""
    results: dict[int, JoinResult] = {}

    async def one(i: int) -> None:
        results[i] = await coord.join(join_request(instance_id=f"i{i}", client_id=f"c{i}", session_ms=session_ms))

    async with trio.open_nursery() as nursery:
        for i in range(n):
            nursery.start_soon(one, i)
    joined = [results[i] for i in range(n)]
    assert all(j.error_code == ErrorCode.NONE for j in joined)
    synced = await sync_all(coord, joined)
    assert all(s.error_code == ErrorCode.NONE for s in synced.values())
    return joined


def _assignment_of(coord: GroupCoordinator, instance_id: str) -> bytes:
    d = coord.describe(["g"])[0]
    return next(m.assignment for m in d.members if m.group_instance_id == instance_id)


async def test_restarted_follower_gets_its_assignment_without_rebalance(
        coord: GroupCoordinator, autojump_clock: trio.testing.MockClock) -> None:
    async with running(coord):
        joined = await _form_static(coord, 3)
        gen, leader = joined[0].generation_id, joined[0].leader
        follower = next(j for j in joined if j.member_id != leader)
        iid = follower.member_id.rsplit("-", 5)[0]
        before = _assignment_of(coord, iid)
        assert before == f"assign-{follower.member_id}".encode()

        again = await coord.join(join_request(instance_id=iid, client_id="restarted"))
        assert again.error_code == ErrorCode.NONE and again.member_id != follower.member_id
        assert (again.generation_id, again.leader, again.members) == (gen, leader, ())
        assert coord.describe(["g"])[0].state == "Stable"
        # the others are not asked to rejoin
        for j in joined:
            if j is not follower:
                assert coord.heartbeat("g", gen, j.member_id, j.member_id.rsplit("-", 5)[0]) == ErrorCode.NONE
        synced = await coord.sync(SyncRequest("g", gen, again.member_id, (), iid))
        assert synced.error_code == ErrorCode.NONE and synced.assignment == before
        # the old incarnation is fenced everywhere it names its instance id
        assert coord.heartbeat("g", gen, follower.member_id, iid) == ErrorCode.FENCED_INSTANCE_ID
        assert (await coord.sync(SyncRequest("g", gen, follower.member_id, (), iid))).error_code \
            == ErrorCode.FENCED_INSTANCE_ID
        assert [e.error_code for e in coord.offset_commit("g", gen, follower.member_id, [CommitOffset("t", 0, 1)],
                                                          iid)] == [ErrorCode.FENCED_INSTANCE_ID]
        assert coord.leave("g", [LeavingMember(follower.member_id, iid)]).members[0].error_code \
            == ErrorCode.FENCED_INSTANCE_ID
        assert coord.describe(["g"])[0].state == "Stable"


async def test_restarted_leader_rejoins_as_follower_without_rebalance(
        coord: GroupCoordinator, autojump_clock: trio.testing.MockClock) -> None:
    async with running(coord):
        joined = await _form_static(coord, 2)
        gen, leader = joined[0].generation_id, joined[0].leader
        iid = leader.rsplit("-", 5)[0]
        before = _assignment_of(coord, iid)
        # a restarted consumer may send another subscription (no owned partitions): still no rebalance
        again = await coord.join(join_request(instance_id=iid, protocols=(("range", b"sub-v2"),)))
        # answered with the old leader id and no member list: it must not run the assignor
        assert again.error_code == ErrorCode.NONE and again.leader == leader != again.member_id
        assert again.generation_id == gen and again.members == ()
        synced = await coord.sync(SyncRequest("g", gen, again.member_id, (), iid))
        assert synced.assignment == before
        d = coord.describe(["g"])[0]
        assert d.state == "Stable" and {m.group_instance_id for m in d.members} == {"i0", "i1"}


async def test_static_rejoin_with_another_protocol_rebalances(
        coord: GroupCoordinator, autojump_clock: trio.testing.MockClock) -> None:
    async with running(coord):
        joined = await _form_static(coord, 1)
        gen = joined[0].generation_id
        # it now prefers another assignor: the group's choice changes, so the group rebalances
        res = await coord.join(join_request(instance_id="i0", protocols=(("roundrobin", b"s"), ("range", b"s"))))
        assert res.error_code == ErrorCode.NONE and res.generation_id == gen + 1 and res.leader == res.member_id
        assert res.protocol_name == "roundrobin"


async def test_unknown_instance_id_is_unknown_member(coord: GroupCoordinator,
                                                     autojump_clock: trio.testing.MockClock) -> None:
    async with running(coord):
        joined = await _form_static(coord, 1)
        j = joined[0]
        assert coord.heartbeat("g", j.generation_id, j.member_id, "nobody") == ErrorCode.UNKNOWN_MEMBER_ID
        assert coord.leave("g", [LeavingMember("", "nobody")]).members[0].error_code == ErrorCode.UNKNOWN_MEMBER_ID


async def test_absent_static_member_survives_a_rebalance_then_expires(
        coord: GroupCoordinator, autojump_clock: trio.testing.MockClock) -> None:
    async with running(coord):
        # sessions longer than the rebalance timeout: b is still a member when the rebalance ends
        joined = await _form_static(coord, 2, session_ms=LONG_SESSION_MS)
        a, b = joined[0], joined[1]          # b goes silent from now on
        gen = a.generation_id
        results: dict[str, JoinResult] = {}

        async def newcomer() -> None:
            results["c"] = await join(coord, client_id="dyn")

        async with trio.open_nursery() as nursery:
            nursery.start_soon(newcomer)
            await trio.sleep(0.1)
            assert coord.heartbeat("g", gen, a.member_id, "i0") == ErrorCode.REBALANCE_IN_PROGRESS
            results["a"] = await coord.join(join_request(a.member_id, instance_id="i0",
                                                         session_ms=LONG_SESSION_MS))
        # the rebalance waited for b up to the rebalance timeout, then completed keeping it
        assert results["a"].generation_id == gen + 1
        listed = {m.member_id for m in (results["a"].members or results["c"].members)}
        assert b.member_id in listed and len(listed) == 3
        synced = await sync_all(coord, [results["a"], results["c"]])
        assert all(x.error_code == ErrorCode.NONE for x in synced.values())
        assert {m.group_instance_id for m in coord.describe(["g"])[0].members} == {"i0", "i1", None}
        # b never comes back: it is removed and the others are asked to rebalance
        c_id, told = results["c"].member_id, ErrorCode.NONE
        for _ in range(40):
            await trio.sleep(3)
            assert coord.heartbeat("g", gen + 1, c_id) in (ErrorCode.NONE, ErrorCode.REBALANCE_IN_PROGRESS)
            told = coord.heartbeat("g", gen + 1, a.member_id, "i0")
            if told != ErrorCode.NONE:
                break
        assert told == ErrorCode.REBALANCE_IN_PROGRESS
        assert {m.group_instance_id for m in coord.describe(["g"])[0].members} == {"i0", None}
        assert coord.heartbeat("g", gen + 1, b.member_id, "i1") == ErrorCode.UNKNOWN_MEMBER_ID


async def test_static_member_session_timeout_rebalances_the_rest(
        coord: GroupCoordinator, autojump_clock: trio.testing.MockClock) -> None:
    async with running(coord):
        joined = await _form_static(coord, 2)
        a = joined[0]
        gen = a.generation_id
        told = ErrorCode.NONE
        for _ in range(20):
            await trio.sleep(3)
            told = coord.heartbeat("g", gen, a.member_id, "i0")
            if told != ErrorCode.NONE:
                break
        assert told == ErrorCode.REBALANCE_IN_PROGRESS
        again = await coord.join(join_request(a.member_id, instance_id="i0"))
        assert again.generation_id == gen + 1 and [m.member_id for m in again.members] == [a.member_id]
