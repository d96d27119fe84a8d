"""Group membership driven through the coordinator's async API (see helpers.py for the rules)."""

from __future__ import annotations

from pathlib import Path

import trio
import trio.lowlevel
import trio.testing
from rokka.gateway.kafka.groups import ErrorCode, GroupState, LeavingMember, SyncRequest

from tests.gateway.kafka_groups.helpers import (
    REBALANCE_MS,
    SESSION_MS,
    form_group,
    join,
    join_all,
    join_request,
    make_coordinator,
    rejoin_all,
    running,
    sync_all,
)


async def _heartbeat_until(coord, gen: int, mid: str, stop: ErrorCode, every_s: float = 3.0) -> float:
    """Heartbeat every ``every_s`` until the answer is ``stop``; returns the virtual time it came."""
    while True:
        code = coord.heartbeat("g", gen, mid)
        if code == stop:
            return trio.current_time()
        assert code in (ErrorCode.NONE, ErrorCode.REBALANCE_IN_PROGRESS), code
        await trio.sleep(every_s)


async def test_three_join_sync_one_leaves_rest_rebalance(tmp_path: Path,
                                                         autojump_clock: trio.testing.MockClock) -> None:
    coord = make_coordinator(tmp_path, delay_ms=3000)
    async with running(coord):
        joined = await join_all(coord, 3)
        # the initial delay gathers all three into one generation
        assert {j.error_code for j in joined} == {ErrorCode.NONE}
        assert {j.generation_id for j in joined} == {1}
        leader = joined[0].leader
        assert {j.leader for j in joined} == {leader}
        by_id = {j.member_id: j for j in joined}
        assert len(by_id[leader].members) == 3
        assert all(not j.members for j in joined if j.member_id != leader)
        assert {j.protocol_name for j in joined} == {"range"}

        synced = await sync_all(coord, joined)
        for mid, s in synced.items():
            assert s.error_code == ErrorCode.NONE
            assert s.assignment == f"assign-{mid}".encode()
        assert coord.describe(["g"])[0].state == "Stable"

        leaving = next(mid for mid in by_id if mid != leader)
        result = coord.leave("g", [LeavingMember(leaving)])
        assert result.single_error == ErrorCode.NONE
        rest = [mid for mid in by_id if mid != leaving]
        for mid in rest:
            assert coord.heartbeat("g", 1, mid) == ErrorCode.REBALANCE_IN_PROGRESS
        assert coord.heartbeat("g", 1, leaving) == ErrorCode.UNKNOWN_MEMBER_ID

        rejoined = await rejoin_all(coord, rest)
        assert {j.generation_id for j in rejoined} == {2}
        assert {j.leader for j in rejoined} == {leader}     # the old leader rejoined and stays leader
        synced = await sync_all(coord, rejoined)
        assert set(synced) == set(rest)
        described = coord.describe(["g"])[0]
        assert described.state == "Stable" and {m.member_id for m in described.members} == set(rest)


async def test_member_missing_rebalance_timeout_is_evicted(tmp_path: Path,
                                                           autojump_clock: trio.testing.MockClock) -> None:
    coord = make_coordinator(tmp_path)
    async with running(coord):
        a = await join(coord, client_id="a")
        await sync_all(coord, [a])
        got: dict[str, object] = {}

        async def b_joins() -> None:
            got["b"] = await join(coord, client_id="b")

        async def a_heartbeats_but_never_rejoins() -> None:
            got["a_evicted_at"] = await _heartbeat_until(coord, 1, a.member_id, ErrorCode.UNKNOWN_MEMBER_ID)

        start = trio.current_time()
        async with trio.open_nursery() as nursery:
            nursery.start_soon(b_joins)
            await trio.sleep(1)
            assert coord.heartbeat("g", 1, a.member_id) == ErrorCode.REBALANCE_IN_PROGRESS
            nursery.start_soon(a_heartbeats_but_never_rejoins)
        b = got["b"]
        assert b.error_code == ErrorCode.NONE and b.generation_id == 2  # type: ignore[attr-defined]
        assert [m.member_id for m in b.members] == [b.member_id]  # type: ignore[attr-defined]
        # a stayed alive by heartbeats, so it was the rebalance timeout that evicted it
        assert got["a_evicted_at"] >= start + REBALANCE_MS / 1000  # type: ignore[operator]
        assert [m.member_id for m in coord.describe(["g"])[0].members] == [b.member_id]  # type: ignore[attr-defined]


async def test_rebalance_waits_for_rejoin_then_completes(tmp_path: Path,
                                                         autojump_clock: trio.testing.MockClock) -> None:
    coord = make_coordinator(tmp_path)
    async with running(coord):
        first = await form_group(coord, 1)
        a = first[0].member_id
        done: dict[str, object] = {}

        async def b_joins() -> None:
            done["b"] = await join(coord, client_id="b")

        async with trio.open_nursery() as nursery:
            nursery.start_soon(b_joins)
            await trio.sleep(5)     # b is parked: a has not rejoined yet
            assert "b" not in done
            assert coord.describe(["g"])[0].state == "PreparingRebalance"
            assert coord.heartbeat("g", 1, a) == ErrorCode.REBALANCE_IN_PROGRESS
            a_again = await join(coord, a)
        b_res = done["b"]
        assert a_again.generation_id == 2 and b_res.generation_id == 2  # type: ignore[attr-defined]
        assert len(a_again.members) == 2 and a_again.leader == a


async def test_session_expiry_removes_member(tmp_path: Path, autojump_clock: trio.testing.MockClock) -> None:
    coord = make_coordinator(tmp_path)
    async with running(coord):
        joined = await form_group(coord, 2, session_ms=SESSION_MS)
        a, b = joined[0].member_id, joined[1].member_id
        # a keeps heartbeating, b goes silent: after b's session timeout a is told to rejoin
        t0 = trio.current_time()
        told = await _heartbeat_until(coord, 1, a, ErrorCode.REBALANCE_IN_PROGRESS)
        assert told - t0 >= SESSION_MS / 1000 - 3
        assert coord.heartbeat("g", 1, b) == ErrorCode.UNKNOWN_MEMBER_ID
        again = await join(coord, a)
        assert again.generation_id == 2 and [m.member_id for m in again.members] == [a]


async def test_last_member_expiring_empties_group(tmp_path: Path,
                                                  autojump_clock: trio.testing.MockClock) -> None:
    coord = make_coordinator(tmp_path)
    async with running(coord):
        await form_group(coord, 1)
        await trio.sleep(SESSION_MS / 1000 + 1)
        d = coord.describe(["g"])[0]
        assert d.state == "Empty" and not d.members
        assert [g.state for g in coord.list_groups()] == ["Empty"]


async def test_heartbeat_answers_by_state(tmp_path: Path, autojump_clock: trio.testing.MockClock) -> None:
    coord = make_coordinator(tmp_path)
    async with running(coord):
        a = await join(coord, client_id="a")
        # CompletingRebalance: heartbeats are fine, SyncGroup pending
        assert coord.describe(["g"])[0].state == "CompletingRebalance"
        assert coord.heartbeat("g", 1, a.member_id) == ErrorCode.NONE
        await sync_all(coord, [a])
        assert coord.heartbeat("g", 1, a.member_id) == ErrorCode.NONE
        async with trio.open_nursery() as nursery:
            nursery.start_soon(join, coord, "", )   # a second member triggers a rebalance
            await trio.sleep(1)
            assert coord.describe(["g"])[0].state == "PreparingRebalance"
            assert coord.heartbeat("g", 1, a.member_id) == ErrorCode.REBALANCE_IN_PROGRESS
            assert coord.heartbeat("g", 0, a.member_id) == ErrorCode.ILLEGAL_GENERATION
            await join(coord, a.member_id)


async def test_illegal_generation_everywhere(tmp_path: Path, autojump_clock: trio.testing.MockClock) -> None:
    coord = make_coordinator(tmp_path)
    async with running(coord):
        joined = await form_group(coord, 1)
        mid = joined[0].member_id
        assert coord.heartbeat("g", 7, mid) == ErrorCode.ILLEGAL_GENERATION
        res = await coord.sync(SyncRequest("g", 7, mid))
        assert res.error_code == ErrorCode.ILLEGAL_GENERATION
        from rokka.gateway.kafka.groups import CommitOffset
        errs = coord.offset_commit("g", 7, mid, [CommitOffset("t", 0, 5)])
        assert [e.error_code for e in errs] == [ErrorCode.ILLEGAL_GENERATION]


async def test_stale_member_gets_unknown_member_id(tmp_path: Path,
                                                   autojump_clock: trio.testing.MockClock) -> None:
    coord = make_coordinator(tmp_path)
    async with running(coord):
        joined = await form_group(coord, 2)
        stale = joined[1].member_id
        coord.leave("g", [LeavingMember(stale)])
        await join(coord, joined[0].member_id)
        assert (await coord.join(join_request(stale))).error_code == ErrorCode.UNKNOWN_MEMBER_ID
        assert (await coord.sync(SyncRequest("g", 2, stale))).error_code == ErrorCode.UNKNOWN_MEMBER_ID
        assert coord.heartbeat("g", 2, stale) == ErrorCode.UNKNOWN_MEMBER_ID
        assert coord.heartbeat("nope", 1, stale) == ErrorCode.UNKNOWN_MEMBER_ID
        assert (await coord.sync(SyncRequest("nope", 1, stale))).error_code == ErrorCode.UNKNOWN_MEMBER_ID


async def test_member_id_required_and_legacy_join(tmp_path: Path,
                                                  autojump_clock: trio.testing.MockClock) -> None:
    coord = make_coordinator(tmp_path)
    async with running(coord):
        first = await coord.join(join_request(client_id="rdkafka"))
        assert first.error_code == ErrorCode.MEMBER_ID_REQUIRED
        assert first.member_id.startswith("rdkafka-") and first.generation_id == -1
        assert coord.statistics().pending_members == 1
        # JoinGroup v0-v3: the id is assigned and the member added at once
        legacy = await coord.join(join_request(require_known=False, client_id="old"))
        assert legacy.error_code == ErrorCode.NONE and legacy.member_id.startswith("old-")
        # the pending id expires after its session timeout if never used
        await trio.sleep(SESSION_MS / 1000 + 1)
        assert coord.statistics().pending_members == 0


async def test_pending_member_blocks_completion_until_it_joins(
        tmp_path: Path, autojump_clock: trio.testing.MockClock) -> None:
    coord = make_coordinator(tmp_path)
    async with running(coord):
        a = (await form_group(coord, 1))[0].member_id
        pending = await coord.join(join_request(client_id="b"))
        assert pending.error_code == ErrorCode.MEMBER_ID_REQUIRED
        out: dict[str, object] = {}

        async def a_rejoins() -> None:
            out["a"] = await join(coord, a)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(a_rejoins)
            # a's rejoin alone started nothing: the group was Stable and a is the leader
            await trio.sleep(1)
            assert "a" not in out
            b = await join(coord, pending.member_id, client_id="b")
        assert b.generation_id == 2 and len(out["a"].members) == 2  # type: ignore[attr-defined]


async def test_protocol_selection_and_inconsistency(tmp_path: Path,
                                                    autojump_clock: trio.testing.MockClock) -> None:
    coord = make_coordinator(tmp_path, delay_ms=1000)
    async with running(coord):
        results: list[object] = [None, None, None]
        lists = [(("range", b"1"), ("roundrobin", b"1")),
                 (("roundrobin", b"2"), ("range", b"2")),
                 (("cooperative-sticky", b"3"), ("roundrobin", b"3"))]

        async def one(i: int) -> None:
            results[i] = await join(coord, client_id=f"c{i}", protocols=lists[i])

        async with trio.open_nursery() as nursery:
            for i in range(3):
                nursery.start_soon(one, i)
        assert {r.protocol_name for r in results} == {"roundrobin"}  # type: ignore[attr-defined]
        leader = next(r for r in results if r.members)  # type: ignore[attr-defined]
        assert {m.metadata for m in leader.members} == {b"1", b"2", b"3"}  # type: ignore[attr-defined]
        bad = await coord.join(join_request(protocols=(("sticky", b""),)))
        assert bad.error_code == ErrorCode.INCONSISTENT_GROUP_PROTOCOL
        bad = await coord.join(join_request(protocol_type="connect"))
        assert bad.error_code == ErrorCode.INCONSISTENT_GROUP_PROTOCOL
        bad = await coord.join(join_request(group="other", protocols=()))
        assert bad.error_code == ErrorCode.INCONSISTENT_GROUP_PROTOCOL


async def test_join_validation(tmp_path: Path, autojump_clock: trio.testing.MockClock) -> None:
    coord = make_coordinator(tmp_path, admit_group=lambda g: 30 if g == "rocket" else 0)
    async with running(coord):
        assert (await coord.join(join_request(group=""))).error_code == ErrorCode.INVALID_GROUP_ID
        res = await coord.join(join_request(session_ms=1000))
        assert res.error_code == ErrorCode.INVALID_SESSION_TIMEOUT
        assert (await coord.join(join_request(group="rocket"))).error_code == 30
        errs = coord.offset_commit("rocket", -1, "", [])
        assert errs == []


async def test_leader_sync_distributes_and_followers_wait(tmp_path: Path,
                                                          autojump_clock: trio.testing.MockClock) -> None:
    coord = make_coordinator(tmp_path, delay_ms=1000)
    async with running(coord):
        joined = await join_all(coord, 2)
        leader = next(j for j in joined if j.members)
        follower = next(j for j in joined if not j.members)
        got: dict[str, object] = {}

        async def follower_sync() -> None:
            got["f"] = await coord.sync(SyncRequest("g", 1, follower.member_id, (),
                                                    protocol_type="consumer", protocol_name="range"))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(follower_sync)
            await trio.sleep(2)
            assert "f" not in got
            # the leader forgets the follower: it gets empty bytes
            res = await coord.sync(SyncRequest("g", 1, leader.member_id, [(leader.member_id, b"L")]))
            assert res.assignment == b"L" and res.protocol_name == "range"
        assert got["f"].error_code == ErrorCode.NONE and got["f"].assignment == b""  # type: ignore[attr-defined]
        # Stable: a late SyncGroup gets the stored assignment at once; a wrong protocol name is refused
        again = await coord.sync(SyncRequest("g", 1, leader.member_id))
        assert again.assignment == b"L"
        bad = await coord.sync(SyncRequest("g", 1, leader.member_id, protocol_name="roundrobin"))
        assert bad.error_code == ErrorCode.INCONSISTENT_GROUP_PROTOCOL


async def test_leader_never_syncs_followers_told_to_rejoin(tmp_path: Path,
                                                           autojump_clock: trio.testing.MockClock) -> None:
    coord = make_coordinator(tmp_path, delay_ms=1000)
    async with running(coord):
        joined = await join_all(coord, 2)
        leader = next(j for j in joined if j.members)
        follower = next(j for j in joined if not j.members)
        res = await coord.sync(SyncRequest("g", 1, follower.member_id))
        assert res.error_code == ErrorCode.REBALANCE_IN_PROGRESS   # after the sync deadline
        assert coord.heartbeat("g", 1, leader.member_id) == ErrorCode.UNKNOWN_MEMBER_ID
        again = await join(coord, follower.member_id)
        assert again.generation_id == 2 and again.leader == follower.member_id


async def test_sync_refused_while_preparing(tmp_path: Path, autojump_clock: trio.testing.MockClock) -> None:
    coord = make_coordinator(tmp_path)
    async with running(coord):
        a = (await form_group(coord, 1))[0]
        async with trio.open_nursery() as nursery:
            nursery.start_soon(join, coord)
            await trio.sleep(1)
            res = await coord.sync(SyncRequest("g", 1, a.member_id))
            assert res.error_code == ErrorCode.REBALANCE_IN_PROGRESS
            await join(coord, a.member_id)


async def test_leave_batch_and_static_members(tmp_path: Path, autojump_clock: trio.testing.MockClock) -> None:
    coord = make_coordinator(tmp_path)
    async with running(coord):
        s1 = await coord.join(join_request(instance_id="inst-1", client_id="x"))
        assert s1.error_code == ErrorCode.NONE and s1.member_id.startswith("inst-1-")  # no 79
        await sync_all(coord, [s1])
        # the same instance restarts with an empty member id: the old id is fenced
        s1b = await coord.join(join_request(instance_id="inst-1", client_id="x"))
        assert s1b.error_code == ErrorCode.NONE and s1b.member_id != s1.member_id
        assert coord.heartbeat("g", s1b.generation_id, s1.member_id, "inst-1") == ErrorCode.FENCED_INSTANCE_ID
        await sync_all(coord, [s1b])
        # LeaveGroup v3+: by instance id, plus an unknown member
        res = coord.leave("g", [LeavingMember("", "inst-1"), LeavingMember("ghost")])
        assert res.error_code == ErrorCode.NONE
        assert [m.error_code for m in res.members] == [ErrorCode.NONE, ErrorCode.UNKNOWN_MEMBER_ID]
        await trio.lowlevel.checkpoint()
        assert coord.describe(["g"])[0].state == "Empty"
        assert coord.leave("nope", [LeavingMember("x")]).single_error == ErrorCode.UNKNOWN_MEMBER_ID


async def test_describe_list_find(tmp_path: Path, autojump_clock: trio.testing.MockClock) -> None:
    coord = make_coordinator(tmp_path)
    async with running(coord):
        j = (await form_group(coord, 1, group="g1"))[0]
        await join(coord, group="g2")
        d1, d2, unknown = coord.describe(["g1", "g2", "zzz"])
        assert (d1.state, d1.protocol_type, d1.protocol_data) == ("Stable", "consumer", "range")
        assert d1.members[0].member_id == j.member_id and d1.members[0].assignment.startswith(b"assign-")
        assert d1.members[0].metadata == b"sub" and d1.members[0].client_id == "c0"
        assert d2.state == "CompletingRebalance" and d2.protocol_data == "" and d2.members[0].metadata == b""
        assert (unknown.error_code, unknown.state, unknown.members) == (0, "Dead", ())
        listed = {g.group_id: g.state for g in coord.list_groups()}
        assert listed == {"g1": "Stable", "g2": "CompletingRebalance"}
        assert [g.group_id for g in coord.list_groups(["stable"])] == ["g1"]
        info = coord.find_coordinator("g1")
        assert (info.error_code, info.node_id, info.host, info.port) == (0, 0, "127.0.0.1", 9092)
        assert coord.find_coordinator("txn-1", 1).error_code == ErrorCode.NONE
        assert coord.find_coordinator("", 1).error_code == ErrorCode.INVALID_REQUEST
        assert coord.find_coordinator("x", 7).error_code == ErrorCode.INVALID_REQUEST


async def test_delete_group(tmp_path: Path, autojump_clock: trio.testing.MockClock) -> None:
    coord = make_coordinator(tmp_path)
    async with running(coord):
        j = (await form_group(coord, 1))[0]
        assert coord.delete_group("g") == ErrorCode.NON_EMPTY_GROUP
        coord.leave("g", [LeavingMember(j.member_id)])
        assert coord.delete_group("g") == ErrorCode.NONE
        assert coord.delete_group("g") == ErrorCode.GROUP_ID_NOT_FOUND
        assert coord.describe(["g"])[0].state == "Dead"
        assert coord.statistics().groups == 0


async def test_rejoin_in_completing_with_same_metadata_answers_at_once(
        tmp_path: Path, autojump_clock: trio.testing.MockClock) -> None:
    coord = make_coordinator(tmp_path)
    async with running(coord):
        a = await join(coord)
        assert coord.describe(["g"])[0].state == "CompletingRebalance"
        again = await join(coord, a.member_id)
        assert again.generation_id == a.generation_id and again.members == a.members
        changed = await join(coord, a.member_id, protocols=(("range", b"new"),))
        assert changed.generation_id == a.generation_id + 1
        assert changed.members[0].metadata == b"new"
        assert GroupState.COMPLETING_REBALANCE.value == coord.describe(["g"])[0].state
