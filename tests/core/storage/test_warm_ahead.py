"""CommitLog warm-ahead: the range just past the write offset enters the page cache while the store is
quiet, bounded by the window, following the writer into new segments; stored bytes never change.

Residency is read with mincore(2) (storage_helpers.cached_pages) on the segment file.
"""

from __future__ import annotations

import mmap
import os
import time
from pathlib import Path

import pytest
from rokka.core.config import BrokerConfig
from rokka.core.storage import warmer
from rokka.core.storage.engine import DiskStore
from storage_helpers import cached_pages, fs_type, msg, page_cache_is_droppable, small_config

from interop.harness import wait_until

MIB = 1 << 20
SEGMENT = 32 * MIB
PAGE = mmap.PAGESIZE

pytestmark = pytest.mark.skipif(not warmer.available, reason="the native _cwarm extension was not built")


def _needs_real_page_cache(path: Path) -> None:
    if not page_cache_is_droppable(path):
        pytest.skip(f"{path} is on {fs_type(path)}: reading a hole there caches nothing")


def _open(tmp_path: Path, ahead: int) -> DiskStore:
    return DiskStore(small_config(tmp_path, commitlog_file_size=SEGMENT, warm_ahead_bytes=ahead,
                                  consumequeue_file_size=20 * 100_000)).open()


def _mostly(cached: int, pages: int) -> bool:
    """Nearly every page of a warmed range is cached (the kernel may already have reclaimed a few clean ones)."""
    return pages * 0.9 <= cached <= pages


def _seg_path(tmp_path: Path, offset: int) -> Path:
    return tmp_path / "commitlog" / f"{offset - offset % SEGMENT:020d}"


def _tasks() -> int:
    return len(os.listdir("/proc/self/task"))


def test_pages_past_the_tail_are_cached_within_the_window(tmp_path: Path) -> None:
    _needs_real_page_cache(tmp_path)
    tasks = _tasks()
    s = _open(tmp_path, 16 * MIB)
    assert _tasks() == tasks + 1                       # the native warmer thread
    assert s.put_messages([msg(i, body=b"a" * 1000) for i in range(100)]).status.name == "PUT_OK"
    w = s.clog.warmer
    assert w is not None
    tail = s.clog.write_offset
    first = _seg_path(tmp_path, 0)
    # the first request covers the starting window (4 MiB) past the tail
    wait_until(lambda: w.progress() >= tail + warmer.START_WINDOW - PAGE, 10, "the warmer's reads", 0.02)
    lo = (tail + PAGE - 1) // PAGE * PAGE
    hi = (tail + warmer.START_WINDOW - PAGE) // PAGE * PAGE
    assert _mostly(cached_pages(first, lo, hi), (hi - lo) // PAGE)
    assert cached_pages(first, tail + 8 * MIB, SEGMENT) == 0      # nothing beyond what was asked for
    # writing past half the window asks for more, twice as far
    while s.clog.write_offset < tail + warmer.START_WINDOW // 2 + MIB:
        assert s.put_messages([msg(i, body=b"b" * 1000) for i in range(500)]).status.name == "PUT_OK"
    tail2 = s.clog.write_offset
    assert w.window == 2 * warmer.START_WINDOW
    assert tail2 + MIB < w.requested_to <= tail2 + w.window
    wait_until(lambda: w.progress() >= w.requested_to, 10, "the warmer's reads", 0.02)
    assert _mostly(cached_pages(first, tail2, w.requested_to), -(-w.requested_to // PAGE) - tail2 // PAGE)
    assert cached_pages(first, w.requested_to + PAGE, SEGMENT) == 0
    # stored bytes are what was written, and past the tail the file is still zeros
    recs = s.get_messages("T", 0, 0, 100).records
    assert len(recs) == 100 and all(b"a" * 1000 in r for r in recs)
    with open(first, "rb") as f:
        f.seek(tail2)
        assert f.read(w.window) == bytes(w.window)
    s.close()
    assert _tasks() == tasks                           # close joined the thread
    s = _open(tmp_path, 0)
    assert s.clog.write_offset == tail2 and s.clog.warmer is None
    assert s.get_messages("T", 0, 0, 100).records == recs
    s.close()


def test_the_warmer_follows_the_writer_into_the_next_segment(tmp_path: Path) -> None:
    _needs_real_page_cache(tmp_path)
    s = _open(tmp_path, 8 * MIB)
    body = b"c" * 4000
    while s.clog.write_offset < SEGMENT + MIB:          # roll into the second segment
        assert s.put_messages([msg(i, body=body) for i in range(256)]).status.name == "PUT_OK"
    tail = s.clog.write_offset
    w = s.clog.warmer
    assert w is not None
    second = _seg_path(tmp_path, tail)
    assert second.name != "00000000000000000000"
    wait_until(lambda: w.progress() >= tail + 2 * MIB, 10, "the warmer's reads", 0.02)
    lo = (tail + PAGE - 1) // PAGE * PAGE
    assert _mostly(cached_pages(second, lo - SEGMENT, lo - SEGMENT + 2 * MIB), 2 * MIB // PAGE)
    s.close()


def test_the_native_thread_waits_for_quiet_and_reads_only_what_was_asked(tmp_path: Path) -> None:
    _needs_real_page_cache(tmp_path)
    from rokka.core.storage._cwarm import Warmer

    path = tmp_path / "sparse"
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        os.ftruncate(fd, 16 * MIB)
        busy = Warmer(3600.0)             # "quiet" means an hour without touch(): never, in this test
        busy.touch()
        assert busy.request(fd, 0, 1 * MIB, 3 * MIB)
        time.sleep(0.2)
        assert busy.progress() == (0, 1 * MIB) and cached_pages(path) == 0
        busy.close()
        idle = Warmer(0.0)
        assert idle.request(fd, 0, 1 * MIB, 3 * MIB)
        wait_until(lambda: idle.progress() == (0, 3 * MIB), 10, "the warmer's reads", 0.02)
        assert _mostly(cached_pages(path, 1 * MIB, 3 * MIB), 2 * MIB // PAGE)
        assert cached_pages(path) <= 2 * MIB // PAGE                 # no readahead past the range
        assert idle.request(fd, 0, 2 * MIB, 5 * MIB)                 # same key: extended
        wait_until(lambda: idle.progress() == (0, 5 * MIB), 10, "the warmer's reads", 0.02)
        os.close(fd)                      # the thread reads through its own descriptor
        fd = -1
        assert idle.request(os.open(path, os.O_RDONLY), 7, 0, MIB) is True
        wait_until(lambda: idle.progress() == (7, MIB), 10, "the warmer's reads", 0.02)
        idle.close()
        assert open(path, "rb").read() == bytes(16 * MIB)            # nothing was written
    finally:
        if fd >= 0:
            os.close(fd)


def test_warm_ahead_setting() -> None:
    cfg = BrokerConfig()
    assert cfg.store_config().warm_ahead_bytes == 0            # off unless the operator asks for it
    cfg.commit_log_warm_ahead = 256 * MIB
    assert cfg.store_config().warm_ahead_bytes == 256 * MIB
    cfg.commit_log_warm_ahead = -1
    with pytest.raises(ValueError, match="commitLogWarmAhead"):
        cfg.validate()


def test_warm_ahead_off_starts_no_thread(tmp_path: Path) -> None:
    tasks = _tasks()
    s = _open(tmp_path, 0)
    assert s.clog.warmer is None and _tasks() == tasks
    s.put_messages([msg(0)])
    s.close()
