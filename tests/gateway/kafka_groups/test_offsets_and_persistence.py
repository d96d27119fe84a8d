"""OffsetCommit/OffsetFetch validation and group persistence across a re-created coordinator."""

from __future__ import annotations

from pathlib import Path

import pytest
import trio
import trio.testing
from rokka.core.offsets import ConsumerOffsetManager
from rokka.core.storage.metafile import MetadataCorrupt
from rokka.gateway.kafka.groups import CommitOffset, ErrorCode, GroupConfig, GroupCoordinator, SyncRequest
from rokka.gateway.kafka.groups.persist import FILE_NAME

from tests.gateway.kafka_groups.helpers import form_group, join, make_coordinator, running


async def test_simple_commit_only_while_group_has_no_members(
        tmp_path: Path, autojump_clock: trio.testing.MockClock) -> None:
    coord = make_coordinator(tmp_path)
    async with running(coord):
        # a standalone consumer (assign() + commit) on a group nobody joined
        errs = coord.offset_commit("g", -1, "", [CommitOffset("t", 0, 42), CommitOffset("t", 1, 7)])
        assert [e.error_code for e in errs] == [0, 0]
        assert coord.describe(["g"])[0].state == "Empty"
        fetched = coord.offset_fetch("g", [("t", 0), ("t", 1), ("t", 2)])
        assert [(p.partition, p.offset) for p in fetched.partitions] == [(0, 42), (1, 7), (2, -1)]
        everything = coord.offset_fetch("g", None)
        assert [(p.topic, p.partition, p.offset) for p in everything.partitions] == [
            ("t", 0, 42), ("t", 1, 7)]
        j = (await form_group(coord, 1))[0]
        errs = coord.offset_commit("g", -1, "", [CommitOffset("t", 0, 1)])
        assert [e.error_code for e in errs] == [ErrorCode.UNKNOWN_MEMBER_ID]
        errs = coord.offset_commit("g", j.generation_id, j.member_id, [CommitOffset("t", 0, 50)])
        assert [e.error_code for e in errs] == [0]
        assert coord.offset_fetch("g", [("t", 0)]).partitions[0].offset == 50
        # unknown group with a generation: refused, not created
        errs = coord.offset_commit("other", 3, "m", [CommitOffset("t", 0, 1)])
        assert [e.error_code for e in errs] == [ErrorCode.ILLEGAL_GENERATION]
        assert coord.describe(["other"])[0].state == "Dead"
        assert coord.offset_fetch("", None).error_code == ErrorCode.INVALID_GROUP_ID


async def test_commit_rules_during_rebalance(tmp_path: Path, autojump_clock: trio.testing.MockClock) -> None:
    coord = make_coordinator(tmp_path)
    async with running(coord):
        a = await join(coord)
        # CompletingRebalance: members must finish SyncGroup first
        errs = coord.offset_commit("g", 1, a.member_id, [CommitOffset("t", 0, 3)])
        assert [e.error_code for e in errs] == [ErrorCode.REBALANCE_IN_PROGRESS]
        await coord.sync(SyncRequest("g", 1, a.member_id, [(a.member_id, b"x")]))
        async with trio.open_nursery() as nursery:
            nursery.start_soon(join, coord)
            await trio.sleep(1)
            # PreparingRebalance: commits of the previous generation are still accepted
            errs = coord.offset_commit("g", 1, a.member_id, [CommitOffset("t", 0, 4)])
            assert [e.error_code for e in errs] == [0]
            await join(coord, a.member_id)
        assert coord.offset_fetch("g", [("t", 0)]).partitions[0].offset == 4


async def test_commit_per_partition_errors(tmp_path: Path, autojump_clock: trio.testing.MockClock) -> None:
    coord = make_coordinator(tmp_path, partition_exists=lambda t, p: t == "t" and p < 4)
    async with running(coord):
        errs = coord.offset_commit("g", -1, "", [
            CommitOffset("t", 0, 1, metadata="m" * 4097), CommitOffset("t", 9, 1),
            CommitOffset("nope", 0, 1), CommitOffset("t", 1, 11, metadata=None)])
        assert [e.error_code for e in errs] == [ErrorCode.OFFSET_METADATA_TOO_LARGE,
                                                ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                                ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, 0]
        assert coord.offset_fetch("g", [("t", 0), ("t", 1)]).partitions[1].offset == 11
        assert coord.offset_fetch("g", [("t", 0)]).partitions[0].offset == -1


async def test_offsets_share_the_rocketmq_table(tmp_path: Path,
                                                autojump_clock: trio.testing.MockClock) -> None:
    offsets = ConsumerOffsetManager(tmp_path)
    offsets.commit("shared", "t", 3, 99)          # as a RocketMQ consumer would
    coord = GroupCoordinator(GroupConfig(), offsets)
    async with running(coord):
        assert coord.offset_fetch("shared", [("t", 3)]).partitions[0].offset == 99
        coord.offset_commit("shared", -1, "", [CommitOffset("t", 3, 120)])
    # durable: the commit is in consumerOffset.json already
    assert ConsumerOffsetManager(tmp_path).query("shared", "t", 3) == 120


async def test_group_survives_restart_and_members_rejoin(tmp_path: Path,
                                                         autojump_clock: trio.testing.MockClock) -> None:
    coord = make_coordinator(tmp_path, persist=True)
    async with running(coord):
        joined = await form_group(coord, 2)
        gen = joined[0].generation_id
        ids = sorted(j.member_id for j in joined)
        coord.offset_commit("g", gen, ids[0], [CommitOffset("t", 0, 17)])
    assert (tmp_path / FILE_NAME).exists()

    again = make_coordinator(tmp_path, persist=True)
    async with running(again):
        d = again.describe(["g"])[0]
        assert d.state == "PreparingRebalance" and sorted(m.member_id for m in d.members) == ids
        # old members keep heartbeating with their generation and are told to rejoin
        for mid in ids:
            assert again.heartbeat("g", gen, mid) == ErrorCode.REBALANCE_IN_PROGRESS
        results: dict[str, object] = {}

        async def rejoin(mid: str) -> None:
            results[mid] = await join(again, mid)

        async with trio.open_nursery() as nursery:
            for mid in ids:
                nursery.start_soon(rejoin, mid)
        assert {r.generation_id for r in results.values()} == {gen + 1}  # type: ignore[attr-defined]
        assert again.offset_fetch("g", [("t", 0)]).partitions[0].offset == 17


async def test_restart_without_rejoin_evicts_after_rebalance_timeout(
        tmp_path: Path, autojump_clock: trio.testing.MockClock) -> None:
    coord = make_coordinator(tmp_path, persist=True)
    async with running(coord):
        await form_group(coord, 1)
    again = make_coordinator(tmp_path, persist=True)
    async with running(again):
        await trio.sleep(60)
        d = again.describe(["g"])[0]
        assert d.state == "Empty" and not d.members
    third = make_coordinator(tmp_path, persist=True)
    async with running(third):
        assert third.describe(["g"])[0].state == "Empty"
        j = await join(third)
        assert j.generation_id == 3          # 1 before the restart, 2 = emptied, 3 now


def test_corrupt_group_file_is_refused(tmp_path: Path) -> None:
    (tmp_path / FILE_NAME).write_bytes(b"\xc1 not msgpack")
    with pytest.raises(MetadataCorrupt):
        make_coordinator(tmp_path, persist=True)
