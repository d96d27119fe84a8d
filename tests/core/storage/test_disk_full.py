"""A really full disk (issue 19, item 7): a small tmpfs mounted for the test, filled by a ballast
file as another process would fill it.

Before: the first ENOSPC left the store read-only until a restart, even with space freed, and a
write that failed half way left records behind the write offset that a recovery would find.
Now the failed put is rolled back and cleared, puts are refused with RocketMQ's remark, and
writes resume without a restart once space returns.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from rokka.core.config import BrokerConfig, apply_settings
from rokka.core.model import UniformBatch
from rokka.core.storage.api import PutStatus
from rokka.core.storage.engine import DiskStore
from rokka.core.storage.layout import decode_record
from storage_helpers import msg, small_config

from interop import tmpfs


@pytest.fixture
def small_fs(tmp_path: Path) -> Iterator[Path]:
    """A 6 MiB tmpfs (needs CAP_SYS_ADMIN: skipped where mounting is not allowed)."""
    with tmpfs.mounted_tmpfs(tmp_path / "fs", "6m") as mnt:
        yield mnt


def _crash(s: DiskStore) -> None:
    """Simulate SIGKILL: drop the process state without close() (abort marker stays)."""
    s._close_files()
    s._unlock()
    s._writable = False


def _bodies(s: DiskStore, n: int) -> list[bytes]:
    res = s.get_messages("T", 0, 0, n + 10)
    return [decode_record(r).body for r in res.records]


def test_enospc_refuses_then_resumes_without_restart(small_fs: Path) -> None:
    cfg = small_config(small_fs / "store", commitlog_file_size=256 * 1024)
    s = DiskStore(cfg).open()
    assert s.put_messages([msg(i) for i in range(3)]).ok
    ballast = small_fs / "ballast"
    tmpfs.fill(ballast, leave=12 * 1024)                    # room for part of the next put only
    end = s.clog.write_offset
    res = s.put_messages([msg(10 + i, body=bytes([65 + i]) * 3000) for i in range(10)])
    assert res.status is PutStatus.SERVICE_NOT_AVAILABLE
    assert "the broker's disk is full [CL:" in res.remark
    assert s.clog.write_offset == end and s.max_offset("T", 0) == 3
    seg = s.clog.files.find(end)
    assert seg is not None and os.pread(seg.fd, 40_000, end - seg.base) == bytes(40_000)   # cleared
    refused = s.put_uniform(UniformBatch("T", 0, [b"u1", b"u2"], 1000))
    assert refused.status is PutStatus.SERVICE_NOT_AVAILABLE          # refused while there is no room
    ballast.unlink()
    s.run_retention(int(time.time() * 1000))           # the periodic pass sees the space again
    assert s.write_error is None and not s.disk_full
    assert s.put_messages([msg(20, body=b"after")]).ok and s.max_offset("T", 0) == 4
    _crash(s)                                          # recovery must not find the failed put's records
    again = DiskStore(cfg).open()
    assert _bodies(again, 4) == [b"body-0", b"body-1", b"body-2", b"after"]
    again.close()


def test_put_path_rechecks_space_while_refusing(small_fs: Path) -> None:
    cfg = small_config(small_fs / "store", commitlog_file_size=256 * 1024)
    s = DiskStore(cfg).open()
    ballast = small_fs / "ballast"
    tmpfs.fill(ballast)
    assert s.put_messages([msg(0, body=bytes(8000))]).status is PutStatus.SERVICE_NOT_AVAILABLE
    ballast.unlink()
    s._recheck_at = 0.0                                # as if the 1 s re-check interval had passed
    assert s.put_messages([msg(1)]).ok                 # no retention pass, no restart
    s.close()


def test_full_disk_keeps_unexpired(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Default (cleanFileForciblyEnable=false): at 95 % nothing unexpired is deleted, writes are refused
    (before: the oldest segment was deleted, acknowledged records with it)."""
    cfg = small_config(tmp_path, commitlog_file_size=4096, file_reserved_time_hours=1, delete_when="04")
    s = DiskStore(cfg).open()
    s.put_messages([msg(i, body=bytes(300)) for i in range(40)])
    s.flush()
    monkeypatch.setattr(os, "statvfs", lambda _path: os.statvfs_result(
        (4096, 4096, 1000, 50, 50, 0, 0, 0, 0, 255)))                 # 95 % in use
    assert s.run_retention(int(time.time() * 1000)) == 0
    assert s.commitlog_min_offset == 0 and s.min_offset("T", 0) == 0
    res = s.put_messages([msg(99)])
    assert res.status is PutStatus.SERVICE_NOT_AVAILABLE and "the broker's disk is full [CL:" in res.remark
    s.close()


def test_clean_file_forcibly_enable_is_an_opt_in_key() -> None:
    cfg = BrokerConfig()
    assert cfg.clean_file_forcibly_enable is False and cfg.store_config().clean_file_forcibly_enable is False
    assert apply_settings(cfg, {"cleanFileForciblyEnable": "true"}) == []
    assert cfg.store_config().clean_file_forcibly_enable is True
