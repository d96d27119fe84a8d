"""Replication of raw CommitLog bytes (core/storage/replica.py): master reads, slave appends + dispatches."""

from __future__ import annotations

from pathlib import Path

import pytest
from rokka.core.storage.engine import DiskStore
from rokka.core.storage.replica import ReplicaAppender, ReplicaError, read_transfer
from rokka.gateway.ha.codec import first_transfer_offset
from storage_helpers import msg, small_config


def _fill(store: DiskStore, n: int, start: int = 0) -> None:
    for i in range(start, start + n):
        r = store.put_messages([msg(i, queue_id=i % 2, body=b"x" * (300 + i % 50), KEYS=f"k{i}")])
        assert r.status.name == "PUT_OK"


def _copy(master: DiskStore, app: ReplicaAppender, batch: int) -> None:
    offset = app.max_offset if not app.empty else first_transfer_offset(0, master.clog.write_offset,
                                                                       master.clog.segment_size)
    offset = max(offset, app.expected_offset)
    while True:
        data = read_transfer(master, offset, batch)
        assert data is not None
        if not data:
            return
        app.append(offset, bytes(data))
        offset += len(data)


def _bodies(store: DiskStore, queue_id: int) -> list[bytes]:
    lo, hi = store.min_offset("T", queue_id), store.max_offset("T", queue_id)
    return list(store.get_messages("T", queue_id, lo, hi - lo, 1 << 30).records)


def test_empty_slave_starts_at_the_masters_last_segment_and_matches(tmp_path: Path) -> None:
    master = DiskStore(small_config(tmp_path / "m")).open()
    slave = DiskStore(small_config(tmp_path / "s")).open()
    try:
        _fill(master, 500)              # ~170 KiB: several 64 KiB segments
        base = master.clog.files.segments[-1].base
        assert base > 0
        app = ReplicaAppender(slave)
        _copy(master, app, 1000)        # odd batch size: frames end inside records
        assert slave.clog.min_offset == base and slave.clog.write_offset == master.clog.write_offset
        assert bytes(slave.clog.read_span(base, slave.clog.write_offset)) == \
            bytes(master.clog.read_span(base, master.clog.write_offset))
        for qid in (0, 1):
            got = _bodies(slave, qid)
            assert got and got == _bodies(master, qid)[-len(got):]
            assert slave.min_offset("T", qid) > 0
        _fill(master, 300, 500)         # rolls into new segments
        _copy(master, app, 32768)
        assert slave.clog.write_offset == master.clog.write_offset
        # every record the slave holds is found by its key as on the master (the slave writes a scanned
        # range's index entries together, natively: the same entries as one put per record)
        held = [f"k{i}" for i in range(800) if master.query_by_key("T", f"k{i}", 10, 0, 1 << 62)[0] >= base]
        assert len(held) > 300
        for key in held:
            assert slave.query_by_key("T", key, 10, 0, 1 << 62) == master.query_by_key("T", key, 10, 0, 1 << 62)
    finally:
        master.close()
        slave.close()


def test_restarted_slave_catches_up_from_its_own_offset(tmp_path: Path) -> None:
    master = DiskStore(small_config(tmp_path / "m")).open()
    slave = DiskStore(small_config(tmp_path / "s")).open()
    try:
        _fill(master, 400)
        _copy(master, ReplicaAppender(slave), 777)
        slave.close()
        slave = DiskStore(small_config(tmp_path / "s")).open()
        before = [_bodies(slave, q) for q in (0, 1)]
        _fill(master, 50, 400)
        app = ReplicaAppender(slave)
        assert not app.empty
        _copy(master, app, 5000)
        for qid in (0, 1):
            got = _bodies(slave, qid)
            assert got[:len(before[qid])] == before[qid]
            assert got == _bodies(master, qid)[-len(got):]
            assert got[-1] == _bodies(master, qid)[-1]
    finally:
        master.close()
        slave.close()


def test_bad_bytes_are_refused_and_nothing_is_kept(tmp_path: Path) -> None:
    master = DiskStore(small_config(tmp_path / "m")).open()
    slave = DiskStore(small_config(tmp_path / "s")).open()
    try:
        _fill(master, 10)
        app = ReplicaAppender(slave)
        data = bytearray(read_transfer(master, 0, 1 << 20) or b"")
        first = int.from_bytes(data[:4], "big")
        data[first + 200] ^= 0xFF          # a body byte of the second record: BODYCRC
        with pytest.raises(ReplicaError):
            app.append(0, bytes(data))
        assert slave.clog.write_offset == first
        assert slave.max_offset("T", 1) == 0
        with pytest.raises(ReplicaError):   # not where the slave is
            ReplicaAppender(slave).append(first + 5, b"\0" * 8)
    finally:
        master.close()
        slave.close()


def test_a_slave_store_refuses_puts_and_still_takes_replicated_bytes(tmp_path: Path) -> None:
    master = DiskStore(small_config(tmp_path / "m")).open()
    slave = DiskStore(small_config(tmp_path / "s")).open()
    try:
        slave.replica_only = True
        r = slave.put_messages([msg(1)])
        assert r.status.name == "SERVICE_NOT_AVAILABLE" and "put to the slave" in r.remark
        assert slave.clog.write_offset == 0
        _fill(master, 5)
        _copy(master, ReplicaAppender(slave), 100)
        assert slave.max_offset("T", 0) == 3 and slave.clog.write_offset == master.clog.write_offset
    finally:
        master.close()
        slave.close()
