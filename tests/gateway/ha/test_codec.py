"""The HA codec against the byte layouts of RocketMQ 4.9's HAService / HAConnection."""

from __future__ import annotations

import pytest
from rokka.gateway.ha.codec import (
    HAProtocolError,
    OffsetMismatch,
    SlaveReports,
    TransferReader,
    encode_frame,
    encode_header,
    encode_report,
    first_transfer_offset,
)


def test_report_is_a_bare_big_endian_long() -> None:
    # HAClient.reportSlaveMaxOffset: ByteBuffer.putLong, 8 bytes, big endian.
    assert encode_report(0x0102030405060708) == bytes.fromhex("0102030405060708")
    assert encode_report(0) == bytes(8)
    with pytest.raises(ValueError):
        encode_report(-1)


def test_frame_header_is_offset_then_size() -> None:
    # WriteSocketService: putLong(thisOffset); putInt(size); then the CommitLog bytes.
    assert encode_header(1 << 30, 0) == bytes.fromhex("0000000040000000" "00000000")
    assert encode_frame(16, b"abc") == bytes.fromhex("0000000000000010" "00000003") + b"abc"


def test_empty_slave_starts_at_the_last_segment() -> None:
    seg = 1 << 30
    assert first_transfer_offset(0, 3 * seg + 77, seg) == 3 * seg
    assert first_transfer_offset(0, 0, seg) == 0
    assert first_transfer_offset(5000, 3 * seg + 77, seg) == 5000


def test_master_reads_the_newest_whole_report() -> None:
    r = SlaveReports()
    assert r.feed(encode_report(100)[:5]) is None
    assert r.feed(encode_report(100)[5:] + encode_report(200) + encode_report(300)[:3]) == 200
    # Java takes the newest whole long of the first processed read as the request offset.
    assert r.request_offset == 200 and r.ack_offset == 200
    assert r.feed(encode_report(300)[3:]) == 300
    assert r.request_offset == 200 and r.ack_offset == 300


def test_negative_report_is_a_protocol_error() -> None:
    with pytest.raises(HAProtocolError):
        SlaveReports().feed(b"\xff" * 8)


def test_slave_splits_frames_across_reads() -> None:
    stream = encode_frame(1000, b"x" * 10) + encode_frame(1010, b"") + encode_frame(1010, b"yz")
    reader = TransferReader()
    got = reader.feed(stream[:7], 1000)
    assert got == []
    got = reader.feed(stream[7:30], 1000)
    assert [(t.offset, t.data) for t in got] == [(1000, b"x" * 10)]
    got = reader.feed(stream[30:], 1010)
    assert [(t.offset, t.data, t.heartbeat) for t in got] == [(1010, b"", True), (1010, b"yz", False)]
    assert reader.buffered == 0


def test_slave_offset_mismatch_closes() -> None:
    reader = TransferReader()
    with pytest.raises(OffsetMismatch) as e:
        reader.feed(encode_header(2048, 0), 1024)
    assert e.value.slave_offset == 1024 and e.value.master_offset == 2048


def test_mismatch_is_seen_from_the_header_alone() -> None:
    # Java checks the offset as soon as the 12-byte header is there, before the body.
    with pytest.raises(OffsetMismatch):
        TransferReader().feed(encode_header(10, 100) + b"partial", 20)


def test_empty_slave_accepts_any_first_offset() -> None:
    reader = TransferReader()
    seg = 1 << 30
    got = reader.feed(encode_header(seg, 0) + encode_frame(seg, b"abc") + encode_frame(seg + 3, b"d"), 0)
    assert [(t.offset, t.data) for t in got] == [(seg, b""), (seg, b"abc"), (seg + 3, b"d")]


def test_bad_sizes_are_protocol_errors() -> None:
    with pytest.raises(HAProtocolError):
        TransferReader().feed(bytes.fromhex("0000000000000000" "ffffffff"), 0)
    with pytest.raises(HAProtocolError):
        TransferReader().feed(bytes.fromhex("0000000000000000" "7fffffff"), 0)
