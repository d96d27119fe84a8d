"""Shared helpers for the group-coordinator tests.

Rules for these tests: every test runs under trio's autojump MockClock (the
``autojump_clock`` fixture), so timeouts elapse in virtual time and the
tests never sleep for real; the coordinator's ``run`` task is always started
through ``running``; tests assert on outcomes and order, never on speed.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path

import trio
from rokka.core.offsets import ConsumerOffsetManager
from rokka.gateway.kafka.groups import (
    ErrorCode,
    GroupConfig,
    GroupCoordinator,
    JoinRequest,
    JoinResult,
    SyncRequest,
    SyncResult,
)

SESSION_MS = 10_000
REBALANCE_MS = 30_000


def make_coordinator(tmp_path: Path, *, delay_ms: int = 1000, persist: bool = False,
                     **kwargs: object) -> GroupCoordinator:
    cfg = GroupConfig(config_dir=tmp_path if persist else None, initial_rebalance_delay_ms=delay_ms)
    return GroupCoordinator(cfg, ConsumerOffsetManager(tmp_path), **kwargs)  # type: ignore[arg-type]


@asynccontextmanager
async def running(coord: GroupCoordinator) -> AsyncIterator[trio.Nursery]:
    async with trio.open_nursery() as nursery:
        await nursery.start(coord.run)
        yield nursery
        nursery.cancel_scope.cancel()


def join_request(member_id: str = "", *, group: str = "g",
                 protocols: Sequence[tuple[str, bytes]] = (("range", b"sub"),),
                 session_ms: int = SESSION_MS, rebalance_ms: int = REBALANCE_MS,
                 instance_id: str | None = None, require_known: bool = True,
                 client_id: str = "client", protocol_type: str = "consumer") -> JoinRequest:
    return JoinRequest(group_id=group, member_id=member_id, protocol_type=protocol_type,
                       protocols=tuple(protocols), session_timeout_ms=session_ms,
                       rebalance_timeout_ms=rebalance_ms, group_instance_id=instance_id,
                       client_id=client_id, client_host="/127.0.0.1",
                       require_known_member_id=require_known)


async def join(coord: GroupCoordinator, member_id: str = "", **kwargs: object) -> JoinResult:
    """JoinGroup the way clients do it: retry once with the id MEMBER_ID_REQUIRED hands out."""
    res = await coord.join(join_request(member_id, **kwargs))  # type: ignore[arg-type]
    if res.error_code == ErrorCode.MEMBER_ID_REQUIRED:
        res = await coord.join(join_request(res.member_id, **kwargs))  # type: ignore[arg-type]
    return res


async def join_all(coord: GroupCoordinator, n: int, **kwargs: object) -> list[JoinResult]:
    """n new members join concurrently; results in start order."""
    results: list[JoinResult | None] = [None] * n

    async def one(i: int) -> None:
        results[i] = await join(coord, client_id=f"c{i}", **kwargs)

    async with trio.open_nursery() as nursery:
        for i in range(n):
            nursery.start_soon(one, i)
    return [r for r in results if r is not None]


async def rejoin_all(coord: GroupCoordinator, member_ids: Sequence[str],
                     **kwargs: object) -> list[JoinResult]:
    results: dict[str, JoinResult] = {}

    async def one(mid: str) -> None:
        results[mid] = await join(coord, mid, **kwargs)

    async with trio.open_nursery() as nursery:
        for mid in member_ids:
            nursery.start_soon(one, mid)
    return [results[mid] for mid in member_ids]


async def sync_all(coord: GroupCoordinator, joined: Sequence[JoinResult], group: str = "g",
                   ) -> dict[str, SyncResult]:
    """Every member syncs concurrently; the leader assigns ``b"assign-<member_id>"``."""
    results: dict[str, SyncResult] = {}

    async def one(j: JoinResult) -> None:
        assignments = [(m.member_id, f"assign-{m.member_id}".encode()) for m in j.members]
        results[j.member_id] = await coord.sync(SyncRequest(group, j.generation_id, j.member_id, assignments))

    async with trio.open_nursery() as nursery:
        for j in joined:
            nursery.start_soon(one, j)
    return results


async def form_group(coord: GroupCoordinator, n: int, **kwargs: object) -> list[JoinResult]:
    joined = await join_all(coord, n, **kwargs)
    synced = await sync_all(coord, joined, group=str(kwargs.get("group", "g")))
    assert all(s.error_code == ErrorCode.NONE for s in synced.values())
    return joined
