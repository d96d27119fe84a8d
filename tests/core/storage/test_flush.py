"""FlushService: group commit under SYNC_FLUSH, background flush under ASYNC_FLUSH, timeouts.

Rules: real DiskStore under tmp_path, every test bounded by ``trio.fail_after``;
no timing assertions beyond "eventually" (bounded) and "False on timeout".
"""

from __future__ import annotations

from pathlib import Path

import trio
from rokka.core.storage.api import FlushDiskType
from rokka.core.storage.engine import DiskStore
from rokka.core.storage.flush import FlushService
from rokka.core.storage.memory import MemoryStore
from storage_helpers import msg, small_config


async def test_sync_flush_group_commit(tmp_path: Path) -> None:
    s = DiskStore(small_config(tmp_path, flush_disk_type=FlushDiskType.SYNC_FLUSH)).open()
    flusher = FlushService(s)
    results: list[bool] = []
    with trio.fail_after(20):
        async with trio.open_nursery() as nursery:
            await nursery.start(flusher.run)

            async def one(i: int) -> None:
                res = s.put_messages([msg(i)])
                results.append(await flusher.wait_durable(res.end_offset))

            async with trio.open_nursery() as inner:
                for i in range(50):
                    inner.start_soon(one, i)
            nursery.cancel_scope.cancel()
    assert results == [True] * 50
    assert s.flushed_offset == s.commitlog_max_offset
    stats = flusher.statistics()
    assert 1 <= stats.flushes < 50 and stats.waiters == 0   # many waiters share an fsync
    s.close()


async def test_wait_durable_times_out_without_flusher(tmp_path: Path) -> None:
    s = DiskStore(small_config(tmp_path, flush_disk_type=FlushDiskType.SYNC_FLUSH,
                               sync_flush_timeout_ms=50)).open()
    flusher = FlushService(s)          # run() deliberately not started: the disk "hangs"
    res = s.put_messages([msg(0)])
    with trio.fail_after(10):
        assert await flusher.wait_durable(res.end_offset) is False
        assert await flusher.wait_durable(0) is True
    s.close()


async def test_async_flush_in_background(tmp_path: Path) -> None:
    s = DiskStore(small_config(tmp_path, flush_interval_ms=10)).open()
    flusher = FlushService(s)
    with trio.fail_after(20):
        async with trio.open_nursery() as nursery:
            await nursery.start(flusher.run)
            res = s.put_messages([msg(i) for i in range(10)])
            while s.flushed_offset < res.end_offset:  # noqa: ASYNC110 - polling the store is the point
                await trio.sleep(0.01)
            nursery.cancel_scope.cancel()
    s.close()


async def test_memory_store_is_always_durable(tmp_path: Path) -> None:
    s = MemoryStore(small_config(tmp_path))
    res = s.put_messages([msg(0)])
    with trio.fail_after(5):
        assert await FlushService(s).wait_durable(res.end_offset)
