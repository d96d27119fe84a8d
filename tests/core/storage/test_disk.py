"""DiskStore on-disk behaviour: file formats, segment roll, restarts, corruption, retention.

Rules: every test builds its own store under ``tmp_path`` with tiny files
(64 KiB CommitLog segments unless stated) and checks bytes on disk against
facts from the RocketMQ 4.9 reference, not against our own encoder.
"""

from __future__ import annotations

import os
import struct
import time
from dataclasses import replace
from pathlib import Path

import pytest
import structlog
from rokka.core.model import UniformBatch
from rokka.core.storage import layout
from rokka.core.storage.api import GetStatus, PutStatus, StoreConfig
from rokka.core.storage.engine import DiskStore, StoreLocked
from rokka.core.storage.index import key_hash
from rokka.core.storage.recovery import StoreCorrupt
from storage_helpers import msg, small_config


def _open(cfg: StoreConfig, **kw: bool) -> DiskStore:
    return DiskStore(cfg, **kw).open()


def _crash(s: DiskStore) -> None:
    """Simulate SIGKILL: drop the process state without close() (abort marker stays)."""
    s._close_files()
    s._unlock()
    s._writable = False


def test_file_names_and_cq_unit_bytes(tmp_path: Path) -> None:
    cfg = small_config(tmp_path)
    s = _open(cfg)
    res = s.put_messages([msg(0, TAGS="TagA"), msg(1)])
    s.close()
    clog = tmp_path / "commitlog" / "00000000000000000000"
    assert clog.stat().st_size == 64 * 1024
    cq = (tmp_path / "consumequeue" / "T" / "0" / "00000000000000000000").read_bytes()
    a0, a1 = res.appended
    assert cq[:40] == (struct.pack(">qiq", 0, a0.size, 2598919) + struct.pack(">qiq", a1.commitlog_offset,
                                                                                a1.size, 0))
    assert cq[40:60] == bytes(20)
    assert (tmp_path / "checkpoint").stat().st_size == 4096 and not (tmp_path / "abort").exists()


def test_index_file_layout(tmp_path: Path) -> None:
    cfg = small_config(tmp_path, index_hash_slots=8, index_max_entries=4)
    s = _open(cfg)
    res = s.put_messages([replace(msg(0, KEYS="k"), store_timestamp=5_000)])
    s.close()
    (f,) = list((tmp_path / "index").iterdir())
    assert len(f.name) == 17 and f.name.isdigit()
    raw = f.read_bytes()
    assert len(raw) == 40 + 8 * 4 + 4 * 20
    assert struct.unpack_from(">qqqqii", raw, 0) == (5_000, 5_000, 0, 0, 1, 2)
    h = key_hash("T#k")
    assert h == abs(layout.java_hash("T#k"))
    assert struct.unpack_from(">i", raw, 40 + (h % 8) * 4)[0] == 1
    assert struct.unpack_from(">iqii", raw, 40 + 32 + 20) == (h, res.appended[0].commitlog_offset, 0, 0)


def test_index_rolls_when_full(tmp_path: Path) -> None:
    cfg = small_config(tmp_path, index_hash_slots=4, index_max_entries=3)
    s = _open(cfg)
    offs = [s.put_messages([msg(i, KEYS="same")]).appended[0].commitlog_offset for i in range(7)]
    assert len(list((tmp_path / "index").iterdir())) == 4      # 2 entries per file (entry 0 unused)
    assert sorted(s.query_by_key("T", "same", 100, 0, 2**62)) == offs
    s.close()
    s = _open(cfg)
    assert sorted(s.query_by_key("T", "same", 100, 0, 2**62)) == offs
    s.close()


def test_segment_roll_writes_blank_filler(tmp_path: Path) -> None:
    cfg = small_config(tmp_path, commitlog_file_size=4096)
    s = _open(cfg)
    res = s.put_messages([msg(i, body=bytes(700)) for i in range(12)])
    offs = [a.commitlog_offset for a in res.appended]
    size = res.appended[0].size
    per_seg = (4096 - 8) // size
    assert offs[per_seg] == 4096
    seg0 = (tmp_path / "commitlog" / "00000000000000000000").read_bytes()
    end0 = per_seg * size
    assert struct.unpack_from(">iI", seg0, end0) == (4096 - end0, layout.BLANK_MAGIC)
    assert sorted(os.listdir(tmp_path / "commitlog"))[1] == "00000000000000004096"
    g = s.get_messages("T", 0, 0, 32)
    assert len(g.records) == 12
    s.close()
    s = _open(cfg)
    assert s.max_offset("T", 0) == 12 and s.commitlog_max_offset == res.end_offset
    assert s.put_messages([msg(99)]).appended[0].commitlog_offset == res.end_offset
    s.close()


def test_too_large_for_segment_is_illegal(tmp_path: Path) -> None:
    s = _open(small_config(tmp_path, commitlog_file_size=4096))
    assert s.put_messages([msg(0, body=bytes(4096))]).status.name == "MESSAGE_ILLEGAL"
    s.close()


def test_clean_restart_keeps_everything(tmp_path: Path) -> None:
    cfg = small_config(tmp_path, consumequeue_file_size=200)
    s = _open(cfg)
    res = s.put_messages([msg(i, queue_id=i % 3, KEYS=f"k{i}") for i in range(100)])
    s.set_min_offset("T", 1, 5)
    bodies = s.get_messages("T", 0, 0, 10).body
    s.close()
    s = _open(cfg)
    assert [s.max_offset("T", q) for q in range(3)] == [34, 33, 33]
    assert s.min_offset("T", 1) == 5
    assert s.get_messages("T", 0, 0, 10).body == bodies
    assert s.query_by_key("T", "k42", 5, 0, 2**62) == [res.appended[42].commitlog_offset]
    assert s.put_messages([msg(100)]).appended[0].queue_offset == 34
    s.close()


def test_unclean_restart_rebuilds_missing_queue_and_index(tmp_path: Path) -> None:
    cfg = small_config(tmp_path, consumequeue_file_size=200)
    s = _open(cfg)
    res = s.put_messages([msg(i, KEYS=f"k{i}") for i in range(30)])
    _crash(s)
    assert (tmp_path / "abort").exists()
    # lose the ConsumeQueue and index entirely (as if never written back)
    for p in (tmp_path / "consumequeue" / "T" / "0").iterdir():
        p.unlink()
    for p in (tmp_path / "index").iterdir():
        p.unlink()
    s = _open(cfg)
    assert s.max_offset("T", 0) == 30
    assert s.get_messages("T", 0, 25, 32).queue_offsets == (25, 26, 27, 28, 29)
    assert s.query_by_key("T", "k7", 5, 0, 2**62) == [res.appended[7].commitlog_offset]
    s.close()


def test_cq_entries_past_commitlog_end_are_cut(tmp_path: Path) -> None:
    cfg = small_config(tmp_path)
    s = _open(cfg)
    res = s.put_messages([msg(i) for i in range(10)])
    _crash(s)
    # the CommitLog loses its last 3 records (never reached the disk); the CQ still has them
    seg = tmp_path / "commitlog" / "00000000000000000000"
    with open(seg, "r+b") as f:
        f.seek(res.appended[7].commitlog_offset)
        f.write(bytes(res.end_offset - res.appended[7].commitlog_offset))
    s = _open(cfg)
    assert s.max_offset("T", 0) == 7 and s.commitlog_max_offset == res.appended[7].commitlog_offset
    assert s.put_messages([msg(7)]).appended[0].queue_offset == 7
    s.close()


def _flip(path: Path, pos: int) -> None:
    with open(path, "r+b") as f:
        f.seek(pos)
        b = f.read(1)
        f.seek(pos)
        f.write(bytes([b[0] ^ 0xFF]))


def test_corrupt_middle_refuses_then_repair(tmp_path: Path) -> None:
    cfg = small_config(tmp_path)
    s = _open(cfg)
    res = s.put_messages([msg(i, body=bytes(50)) for i in range(20)])
    s.close()
    seg = tmp_path / "commitlog" / "00000000000000000000"
    _flip(seg, res.appended[5].commitlog_offset + layout.HEADER_V4.size + 3)   # a body byte
    with structlog.testing.capture_logs() as logs, pytest.raises(StoreCorrupt, match="BODYCRC") as exc:
        _open(cfg)
    assert str(seg) in str(exc.value) and str(res.appended[5].commitlog_offset) in str(exc.value)
    err = [e for e in logs if e["log_level"] == "error"]
    assert err and err[0]["offset"] == res.appended[5].commitlog_offset and err[0]["path"] == str(seg)
    # the refusal changed nothing on disk
    assert s.read_record is not None and seg.stat().st_size == 64 * 1024
    with pytest.raises(StoreCorrupt):
        _open(cfg)
    s = _open(cfg, repair=True)
    assert s.max_offset("T", 0) == 5
    s.close()


def test_corrupt_tail_is_truncated(tmp_path: Path) -> None:
    cfg = small_config(tmp_path)
    s = _open(cfg)
    res = s.put_messages([msg(i, body=bytes(50)) for i in range(20)])
    _crash(s)
    seg = tmp_path / "commitlog" / "00000000000000000000"
    # a torn last record: its second half never made it
    last = res.appended[-1]
    with open(seg, "r+b") as f:
        f.seek(last.commitlog_offset + last.size // 2)
        f.write(bytes(last.size // 2 + 1))
    with structlog.testing.capture_logs() as logs:
        s = _open(cfg)
    assert any(e["log_level"] == "error" and e.get("offset") == last.commitlog_offset for e in logs)
    assert s.max_offset("T", 0) == 19 and s.commitlog_max_offset == last.commitlog_offset
    assert seg.read_bytes()[last.commitlog_offset:last.commitlog_offset + last.size] == bytes(last.size)
    g = s.get_messages("T", 0, 0, 32)
    assert len(g.records) == 19 and all(layout.check_record(r) for r in g.records)
    s.close()


def test_truncated_cq_file_is_reported_and_rebuilt(tmp_path: Path) -> None:
    cfg = small_config(tmp_path, consumequeue_file_size=200)
    s = _open(cfg)
    s.put_messages([msg(i) for i in range(25)])
    s.close()
    cq = tmp_path / "consumequeue" / "T" / "0" / "00000000000000000200"
    os.truncate(cq, 45)      # keeps 2 whole units and part of a third
    with structlog.testing.capture_logs() as logs:
        s = _open(cfg)
    assert any(e["log_level"] == "error" and e.get("path") == str(cq) for e in logs)
    assert s.max_offset("T", 0) == 25
    assert s.get_messages("T", 0, 10, 32).queue_offsets == tuple(range(10, 20))
    assert len(s.get_messages("T", 0, 20, 32).records) == 5
    s.close()


def test_garbage_index_file_is_moved_aside_and_rebuilt(tmp_path: Path) -> None:
    cfg = small_config(tmp_path)
    s = _open(cfg)
    res = s.put_messages([msg(i, KEYS=f"k{i}") for i in range(10)])
    s.close()
    (idx,) = list((tmp_path / "index").iterdir())
    idx.write_bytes(os.urandom(idx.stat().st_size))
    with structlog.testing.capture_logs() as logs:
        s = _open(cfg)
    assert any(e["log_level"] == "error" and e.get("path") == str(idx) for e in logs)
    assert (tmp_path / "index" / (idx.name + ".corrupt")).exists()
    assert s.query_by_key("T", "k3", 5, 0, 2**62) == [res.appended[3].commitlog_offset]
    s.close()


def test_garbage_commitlog_segment_after_end_refused(tmp_path: Path) -> None:
    cfg = small_config(tmp_path)
    s = _open(cfg)
    s.put_messages([msg(i) for i in range(3)])
    s.close()
    seg = tmp_path / "commitlog" / "00000000000000000000"
    with open(seg, "r+b") as f:
        f.seek(0)
        f.write(os.urandom(16))
    with pytest.raises(StoreCorrupt, match="valid records follow"):
        _open(cfg)


def test_second_open_is_locked(tmp_path: Path) -> None:
    cfg = small_config(tmp_path)
    s = _open(cfg)
    with pytest.raises(StoreLocked):
        _open(cfg)
    s.close()


def test_put_after_close_is_refused(tmp_path: Path) -> None:
    s = _open(small_config(tmp_path))
    s.close()
    assert s.put_messages([msg(0)]).status.name == "SERVICE_NOT_AVAILABLE"


@pytest.mark.parametrize(("blocks", "free", "available", "expired", "deleted"), [
    (1000, 700, 200, 2, 0),     # 30 % in use as df counts it (total - available would say 80 %): not the hour
    (1000, 200, 200, 0, 0),     # 80 %: over diskMaxUsedSpaceRatio, nothing expired, nothing goes
    (1000, 200, 200, 2, 2),     # 80 %: the expired segments go at any hour
    (1000, 100, 50, 0, 1),      # 95 % (over 85 %): the oldest segment goes although nothing expired
])                              # (cleanFileForciblyEnable=true; the default keeps it: test_disk_full.py)
def test_retention_disk_pressure_counts_like_df(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, blocks: int,
                                                free: int, available: int, expired: int, deleted: int) -> None:
    cfg = small_config(tmp_path, commitlog_file_size=4096, file_reserved_time_hours=1, delete_when="04",
                       disk_max_used_space_ratio=75, clean_file_forcibly_enable=True)
    s = _open(cfg)
    s.put_messages([msg(i, body=bytes(300)) for i in range(40)])
    s.flush()
    old = time.time() - 2 * 3600
    for p in sorted((tmp_path / "commitlog").iterdir())[:expired]:
        os.utime(p, (old, old))
    monkeypatch.setattr(os, "statvfs", lambda _path: os.statvfs_result(
        (4096, 4096, blocks, free, available, 0, 0, 0, 0, 255)))
    lt = time.localtime()
    not_four = int(time.mktime((lt.tm_year, lt.tm_mon, lt.tm_mday, 5 if lt.tm_hour == 4 else lt.tm_hour,
                                0, 0, 0, 0, -1)) * 1000)
    assert (s.run_retention(not_four) > 0) == bool(deleted)
    assert s.commitlog_min_offset == deleted * 4096
    s.close()


def test_full_disk_refuses_puts_until_space_returns(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    s = _open(small_config(tmp_path, commitlog_file_size=4096))
    assert s.put_messages([msg(0)]).ok
    used = {"free": 50}     # of 1000 blocks, all available: 95 % in use
    monkeypatch.setattr(os, "statvfs", lambda _path: os.statvfs_result(
        (4096, 4096, 1000, used["free"], used["free"], 0, 0, 0, 0, 255)))
    s.run_retention(int(time.time() * 1000))
    end = s.clog.write_offset
    for put in (lambda: s.put_messages([msg(1)]),
                lambda: s.put_uniform(UniformBatch("T", 0, [b"a", b"b"], 1000))):
        res = put()
        assert res.status is PutStatus.SERVICE_NOT_AVAILABLE and "disk is full" in res.remark
    assert s.clog.write_offset == end and s.max_offset("T", 0) == 1      # nothing written
    used["free"] = 500
    s.run_retention(int(time.time() * 1000))
    assert s.put_messages([msg(1)]).ok and s.max_offset("T", 0) == 2
    s.close()


def test_retention_deletes_expired_segments(tmp_path: Path) -> None:
    cfg = small_config(tmp_path, commitlog_file_size=4096, consumequeue_file_size=100,
                       file_reserved_time_hours=1, delete_when="04", disk_max_used_space_ratio=100)
    s = _open(cfg)
    res = s.put_messages([msg(i, body=bytes(300), KEYS=f"k{i}") for i in range(60)])
    s.flush()
    segs = sorted((tmp_path / "commitlog").iterdir())
    assert len(segs) > 4
    old = time.time() - 2 * 3600
    for p in segs[:3]:
        os.utime(p, (old, old))
    now = int(time.time() * 1000)
    not_four = next(h for h in range(24) if h != 4)
    lt = time.localtime(now / 1000)
    wrong_hour = int(time.mktime((lt.tm_year, lt.tm_mon, lt.tm_mday, not_four, 0, 0, 0, 0, -1)) * 1000)
    assert s.run_retention(wrong_hour) == 0
    removed = s.run_retention(now, force=True)
    assert removed >= 3
    assert s.commitlog_min_offset == 3 * 4096
    lo = s.min_offset("T", 0)
    first_kept = next(i for i, a in enumerate(res.appended) if a.commitlog_offset >= 3 * 4096)
    assert lo == first_kept
    g = s.get_messages("T", 0, 0, 32)
    assert g.status is GetStatus.OFFSET_TOO_SMALL and g.next_begin_offset == lo
    assert s.get_messages("T", 0, lo, 1).queue_offsets == (lo,)
    assert s.query_by_key("T", "k0", 5, 0, 2**62) == []
    assert s.run_retention(now, force=True) == 0       # the rest is not expired
    s.close()
    s = _open(cfg)
    assert s.commitlog_min_offset == 3 * 4096 and s.min_offset("T", 0) == lo
    s.close()
