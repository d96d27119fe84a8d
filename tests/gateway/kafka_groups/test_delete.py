"""DeleteGroups and OffsetDelete through the coordinator, over the real shared offset table."""

from __future__ import annotations

import struct
from pathlib import Path

import trio
import trio.testing
from rokka.core.offsets import ConsumerOffsetManager
from rokka.gateway.kafka.groups import CommitOffset, ErrorCode, GroupConfig, GroupCoordinator, LeavingMember
from rokka.gateway.kafka.groups.group import subscription_topics

from tests.gateway.kafka_groups.helpers import form_group, running


def subscription(*topics: str, version: int = 1) -> bytes:
    """A ConsumerProtocolSubscription as Java and librdkafka send it (user data null, no owned
    partitions)."""
    out = struct.pack(">hi", version, len(topics))
    for t in topics:
        out += struct.pack(">h", len(t)) + t.encode()
    out += struct.pack(">i", -1)
    return out + (struct.pack(">i", 0) if version >= 1 else b"")


def coordinator(tmp_path: Path, **kwargs: object) -> tuple[GroupCoordinator, ConsumerOffsetManager]:
    offsets = ConsumerOffsetManager(tmp_path)
    cfg = GroupConfig(config_dir=None, initial_rebalance_delay_ms=1000)
    return GroupCoordinator(cfg, offsets, **kwargs), offsets  # type: ignore[arg-type]


def commit(coord: GroupCoordinator, group: str, *parts: tuple[str, int, int]) -> None:
    errors = coord.offset_commit(group, -1, "", [CommitOffset(t, p, o) for t, p, o in parts])
    assert {e.error_code for e in errors} == {ErrorCode.NONE}


def test_subscription_topics_parses_every_version_and_refuses_garbage() -> None:
    assert subscription_topics(subscription("a", "bb", version=0)) == {"a", "bb"}
    assert subscription_topics(subscription("t", version=3)) == {"t"}
    assert subscription_topics(subscription(version=1)) == set()
    for bad in (b"", b"sub", b"\x00\x00\x00\x00\x00\x02\x00\x01a", b"\x00\x00\xff\xff\xff\xff",
                b"\x00\x00\x00\x00\x00\x01\x00\x02\xff\xfe"):
        assert subscription_topics(bad) is None, bad


async def test_delete_group_takes_its_offsets_and_only_when_empty(
        tmp_path: Path, autojump_clock: trio.testing.MockClock) -> None:
    deleted: list[str] = []
    coord, offsets = coordinator(tmp_path, on_group_deleted=deleted.append)
    async with running(coord):
        j = (await form_group(coord, 1))[0]
        assert coord.offset_commit("g", 1, j.member_id, [CommitOffset("t", 0, 7)])[0].error_code == 0
        offsets.commit("other", "t", 0, 3)
        assert coord.delete_group("g") == ErrorCode.NON_EMPTY_GROUP
        assert offsets.query("g", "t", 0) == 7 and deleted == []
        coord.leave("g", [LeavingMember(j.member_id)])
        assert coord.check_delete("g") == ErrorCode.NONE
        assert coord.delete_group("g") == ErrorCode.NONE
        assert deleted == ["g"]
        assert offsets.query("g", "t", 0) is None and offsets.topics_of_group("g") == set()
        assert offsets.query("other", "t", 0) == 3                      # other groups untouched
        assert coord.delete_group("g") == ErrorCode.GROUP_ID_NOT_FOUND
        assert coord.delete_group("") == ErrorCode.INVALID_GROUP_ID
        assert coord.describe(["g"])[0].state == "Dead"
    # durable: a fresh table read from disk has no trace of the group either
    assert ConsumerOffsetManager(tmp_path).topics_of_group("g") == set()


async def test_group_with_only_offsets_is_deletable_unless_live_on_rocketmq(
        tmp_path: Path, autojump_clock: trio.testing.MockClock) -> None:
    live = {"rmq"}
    coord, offsets = coordinator(tmp_path, live_elsewhere=live.__contains__)
    async with running(coord):
        offsets.commit("rmq", "t", 1, 5)       # a RocketMQ consumer group: offsets, no Kafka metadata
        assert coord.delete_group("rmq") == ErrorCode.NON_EMPTY_GROUP
        assert coord.delete_offsets("rmq", [("t", 1)]) == (ErrorCode.NON_EMPTY_GROUP, [])
        live.clear()
        assert coord.delete_group("rmq") == ErrorCode.NONE
        assert offsets.query("rmq", "t", 1) is None
        assert coord.delete_group("never") == ErrorCode.GROUP_ID_NOT_FOUND


async def test_offset_delete_of_an_empty_group(tmp_path: Path, autojump_clock: trio.testing.MockClock) -> None:
    coord, offsets = coordinator(tmp_path, partition_exists=lambda t, p: t in ("t", "u") and 0 <= p < 4)
    async with running(coord):
        commit(coord, "g", ("t", 0, 10), ("t", 1, 11), ("u", 0, 20))
        error, parts = coord.delete_offsets("g", [("t", 0), ("u", 0), ("nope", 0), ("t", 9)])
        assert error == ErrorCode.NONE
        assert [(p.topic, p.partition, p.error_code) for p in parts] == [
            ("t", 0, ErrorCode.NONE), ("u", 0, ErrorCode.NONE),
            ("nope", 0, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION), ("t", 9, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)]
        assert offsets.offsets("g", "t") == {1: 11} and offsets.offsets("g", "u") == {}
        assert coord.delete_offsets("x", [("t", 0)]) == (ErrorCode.GROUP_ID_NOT_FOUND, [])
        assert coord.delete_offsets("", [("t", 0)]) == (ErrorCode.INVALID_GROUP_ID, [])
    assert ConsumerOffsetManager(tmp_path).offsets("g", "t") == {1: 11}


async def test_offset_delete_keeps_subscribed_topics_of_a_live_group(
        tmp_path: Path, autojump_clock: trio.testing.MockClock) -> None:
    coord, offsets = coordinator(tmp_path)
    async with running(coord):
        members = await form_group(coord, 2, protocols=(("range", subscription("t")),))
        commit_parts = [CommitOffset("t", 0, 1), CommitOffset("old", 0, 2)]
        assert {e.error_code for e in coord.offset_commit("g", 1, members[0].member_id, commit_parts)} == {0}
        error, parts = coord.delete_offsets("g", [("t", 0), ("old", 0)])
        assert error == ErrorCode.NONE
        assert [p.error_code for p in parts] == [ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC, ErrorCode.NONE]
        assert offsets.query("g", "t", 0) == 1 and offsets.query("g", "old", 0) is None


async def test_offset_delete_assumes_subscribed_when_metadata_does_not_parse(
        tmp_path: Path, autojump_clock: trio.testing.MockClock) -> None:
    coord, offsets = coordinator(tmp_path)
    async with running(coord):
        await form_group(coord, 1, group="g")                                   # metadata b"sub"
        await form_group(coord, 1, group="c", protocol_type="connect")
        offsets.commit("g", "x", 0, 4)
        error, parts = coord.delete_offsets("g", [("x", 0)])
        assert (error, parts[0].error_code) == (ErrorCode.NONE, ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC)
        assert offsets.query("g", "x", 0) == 4
        assert coord.delete_offsets("c", [("x", 0)]) == (ErrorCode.NON_EMPTY_GROUP, [])
