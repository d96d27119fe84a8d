"""OffsetCommit metadata and leader epochs through the coordinator (Kafka's OffsetFetch answers)."""

from __future__ import annotations

from pathlib import Path

import trio.testing
from rokka.core.offsets import ConsumerOffsetManager
from rokka.gateway.kafka.groups import CommitOffset, ErrorCode, GroupConfig, GroupCoordinator

from tests.gateway.kafka_groups.helpers import make_coordinator, running


async def test_fetch_returns_what_was_committed(tmp_path: Path, autojump_clock: trio.testing.MockClock) -> None:
    coord = make_coordinator(tmp_path)
    async with running(coord):
        errs = coord.offset_commit("g", -1, "", [CommitOffset("t", 0, 5, "checkpoint", 4),
                                                  CommitOffset("t", 1, 6, None, -1)])
        assert [e.error_code for e in errs] == [0, 0]
        got = {(p.partition): (p.offset, p.metadata, p.leader_epoch)
               for p in coord.offset_fetch("g", [("t", 0), ("t", 1), ("t", 2)]).partitions}
        assert got == {0: (5, "checkpoint", 4), 1: (6, "", -1), 2: (-1, "", -1)}
        every = coord.offset_fetch("g", None).partitions
        assert [(p.partition, p.metadata, p.leader_epoch) for p in every] == [(0, "checkpoint", 4), (1, "", -1)]


async def test_metadata_limit_is_kafkas(tmp_path: Path, autojump_clock: trio.testing.MockClock) -> None:
    coord = GroupCoordinator(GroupConfig(max_metadata_bytes=8), ConsumerOffsetManager(tmp_path))
    async with running(coord):
        errs = coord.offset_commit("g", -1, "", [CommitOffset("t", 0, 1, "x" * 8), CommitOffset("t", 1, 1, "x" * 9),
                                                  CommitOffset("t", 2, 1, "é" * 8), CommitOffset("t", 3, 1, "😀" * 5)])
        # Java's String.length(): é counts 1, an astral character 2 (UTF-16)
        assert [e.error_code for e in errs] == [0, ErrorCode.OFFSET_METADATA_TOO_LARGE, 0,
                                                ErrorCode.OFFSET_METADATA_TOO_LARGE]
        assert coord.offset_fetch("g", [("t", 1)]).partitions[0].offset == -1   # nothing stored


async def test_metadata_survives_a_restart(tmp_path: Path, autojump_clock: trio.testing.MockClock) -> None:
    coord = make_coordinator(tmp_path)
    async with running(coord):
        coord.offset_commit("g", -1, "", [CommitOffset("t", 0, 5, "m", 2)])
    coord = make_coordinator(tmp_path)       # a new coordinator over the file (durable commits)
    async with running(coord):
        p = coord.offset_fetch("g", [("t", 0)]).partitions[0]
        assert (p.offset, p.metadata, p.leader_epoch) == (5, "m", 2)
