"""The CommitLog cache window: flushed bytes far enough below the tail leave the page cache, and stay readable.

Residency is read with mincore(2) (storage_helpers.cached_pages).
"""

from __future__ import annotations

import mmap
from pathlib import Path

import pytest
from rokka.core.config import BrokerConfig
from rokka.core.storage.engine import DiskStore
from storage_helpers import cached_pages, fs_type, msg, page_cache_is_droppable, small_config

SEGMENT = 64 * 1024
BODY = 4000


def _fill(tmp_path: Path, window: int) -> tuple[DiskStore, list[bytes]]:
    s = DiskStore(small_config(tmp_path, commitlog_file_size=SEGMENT, cache_window_bytes=window)).open()
    bodies = [bytes([i]) * BODY for i in range(60)]       # ~4 segments
    assert s.put_messages([msg(i, body=b) for i, b in enumerate(bodies)]).status.name == "PUT_OK"
    return s, bodies


def test_flush_releases_pages_beyond_the_window_and_reads_fault_them_back(tmp_path: Path) -> None:
    if not page_cache_is_droppable(tmp_path):
        pytest.skip(f"{tmp_path} is on {fs_type(tmp_path)}: its pages are the file and cannot be dropped")
    s, bodies = _fill(tmp_path, SEGMENT)
    first = tmp_path / "commitlog" / "00000000000000000000"
    before = s.get_messages("T", 0, 0, 60).records    # also maps every page through the store's own mmap
    assert len(before) == 60 and all(b in r for b, r in zip(bodies, before, strict=True))
    assert cached_pages(first) == SEGMENT // mmap.PAGESIZE
    s.flush()
    tail = s.flushed_offset
    assert tail - SEGMENT >= 2 * SEGMENT              # the first two segments are wholly outside the window
    assert cached_pages(first) == 0
    assert cached_pages(tmp_path / "commitlog" / f"{SEGMENT:020d}") == 0
    last = tmp_path / "commitlog" / f"{tail - tail % SEGMENT:020d}"
    assert cached_pages(last) > 0                    # inside the window: untouched
    assert s.get_messages("T", 0, 0, 60).records == before   # read back from disk, byte for byte
    assert cached_pages(first) > 0
    s.close()
    s = DiskStore(small_config(tmp_path, commitlog_file_size=SEGMENT)).open()
    assert s.get_messages("T", 0, 0, 60).records == before
    s.close()


def test_window_zero_leaves_the_page_cache_alone(tmp_path: Path) -> None:
    s, _ = _fill(tmp_path, 0)
    s.flush()
    assert s.clog.release_cold() == 0
    assert cached_pages(tmp_path / "commitlog" / "00000000000000000000") == SEGMENT // mmap.PAGESIZE
    s.close()


def test_cache_window_setting() -> None:
    cfg = BrokerConfig()
    assert cfg.store_config().cache_window_bytes == 0          # off unless the operator bounds it
    cfg.commit_log_cache_window = 256 << 20
    assert cfg.store_config().cache_window_bytes == 256 << 20
    cfg.commit_log_cache_window = -1
    with pytest.raises(ValueError, match="commitLogCacheWindow"):
        cfg.validate()
