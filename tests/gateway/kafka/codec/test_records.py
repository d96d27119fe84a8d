"""Record batch v2, control records, legacy message sets and codecs.

Cross-checks use aiokafka's own record implementation (a real third-party
codec, imported as a library, not a mock) in both directions.
"""

from __future__ import annotations

import struct
import zlib

import cramjam
import pytest
from aiokafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder
from hypothesis import given, settings
from hypothesis import strategies as st
from rokka.gateway.kafka.codec import records as R
from rokka.gateway.kafka.codec.legacy import decode_legacy_message_set
from rokka.gateway.kafka.codec.primitives import DecodeError

CODECS = [R.NONE, R.GZIP, R.SNAPPY, R.LZ4, R.ZSTD]

opt_bytes = st.none() | st.binary(max_size=30)
header_st = st.builds(R.Header, st.text(max_size=8), opt_bytes)


@st.composite
def record_lists(draw: st.DrawFn) -> list[R.Record]:
    n = draw(st.integers(1, 6))
    return [
        R.Record(i, draw(st.integers(-(2**40), 2**40)), draw(opt_bytes), draw(opt_bytes),
                 tuple(draw(st.lists(header_st, max_size=3))))
        for i in range(n)
    ]


@pytest.mark.parametrize("codec", CODECS)
@settings(max_examples=30, deadline=None)
@given(recs=record_lists(), base_ts=st.integers(0, 2**41), pid=st.integers(-1, 2**40))
def test_batch_roundtrip_all_codecs(codec: int, recs: list[R.Record], base_ts: int, pid: int) -> None:
    raw = R.encode_batch(recs, compression=codec, base_timestamp=base_ts, base_offset=7,
                         producer_id=pid, producer_epoch=0, base_sequence=3, attributes=R.TRANSACTIONAL_BIT)
    batches, trailing = R.split_batches(raw)
    assert trailing == 0 and len(batches) == 1
    b = batches[0]
    assert b.crc_ok()
    assert b.header.compression == codec and b.header.is_transactional and not b.header.is_control
    assert b.header.base_offset == 7 and b.header.producer_id == pid and b.header.record_count == len(recs)
    assert b.records() == recs
    if codec == R.NONE:  # byte-exact re-encode from the decoded header
        h = b.header
        again = R.encode_batch(b.records(), base_offset=h.base_offset, partition_leader_epoch=h.partition_leader_epoch,
                               attributes=h.attributes, base_timestamp=h.base_timestamp,
                               max_timestamp=h.max_timestamp, last_offset_delta=h.last_offset_delta,
                               producer_id=h.producer_id, producer_epoch=h.producer_epoch,
                               base_sequence=h.base_sequence)
        assert again == raw


@pytest.mark.parametrize("codec", CODECS)
def test_aiokafka_reads_ours_and_we_read_aiokafka(codec: int) -> None:
    recs = [R.Record(0, 0, None, b"v0", (R.Header("h", None),)), R.Record(1, 5, b"", None)]
    ours = R.encode_batch(recs, compression=codec, base_timestamp=1000, base_offset=10)
    theirs = list(DefaultRecordBatch(ours))
    assert [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in theirs] == [
        (10, 1000, None, b"v0", [("h", None)]), (11, 1005, b"", None, []),
    ]
    b = DefaultRecordBatchBuilder(2, codec, False, -1, -1, -1, 1 << 20)
    b.append(0, timestamp=2000, key=b"k", value=None, headers=[("a", b"1")])
    b.append(1, timestamp=2001, key=None, value=b"x" * 100, headers=[])
    batch = R.split_batches(bytes(b.build()))[0][0]
    assert batch.crc_ok()
    assert batch.records() == [R.Record(0, 0, b"k", None, (R.Header("a", b"1"),)), R.Record(1, 1, None, b"x" * 100)]


def test_with_base_offset_keeps_crc() -> None:
    raw = R.encode_batch([R.Record(0, 0, b"k", b"v")])
    b = R.split_batches(raw)[0][0].with_base_offset(12345, leader_epoch=0)
    assert b.crc_ok() and b.header.base_offset == 12345 and b.header.partition_leader_epoch == 0
    assert R.split_batches(b.raw)[0][0].header == b.header


def test_control_batch() -> None:
    raw = R.encode_control_batch(producer_id=5, producer_epoch=2, commit=True, base_offset=9, timestamp=77)
    b = R.split_batches(raw)[0][0]
    assert b.header.attributes == 0x30 and b.header.base_sequence == -1 and b.header.last_offset_delta == 0
    (rec,) = b.records()
    assert R.parse_control_record(rec) == (R.CONTROL_COMMIT, 0)
    assert rec.key == b"\x00\x00\x00\x01" and rec.value == b"\x00\x00\x00\x00\x00\x00"
    abort = R.split_batches(R.encode_control_batch(producer_id=5, producer_epoch=2, commit=False))[0][0]
    assert R.parse_control_record(abort.records()[0])[0] == R.CONTROL_ABORT


def test_snappy_reads_raw_and_xerial() -> None:
    data = b"hello snappy " * 50
    assert R.decompress(R.SNAPPY, bytes(cramjam.snappy.compress_raw(data))) == data
    xerial = R.compress(R.SNAPPY, data)
    assert xerial.startswith(b"\x82SNAPPY\x00") and R.decompress(R.SNAPPY, xerial) == data


def test_split_batches_trailing_partial_and_garbage() -> None:
    raw = R.encode_batch([R.Record(0, 0, b"k", b"v")])
    batches, trailing = R.split_batches(raw + raw[:30])
    assert len(batches) == 1 and trailing == 30
    bad = bytearray(raw)
    bad[16] = 1  # magic
    with pytest.raises(DecodeError):
        R.split_batches(bytes(bad))
    corrupt = bytearray(raw)
    corrupt[-1] ^= 0xFF
    assert not R.split_batches(bytes(corrupt))[0][0].crc_ok()


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=120))
def test_garbage_records_raise_decode_error_only(data: bytes) -> None:
    header = R.encode_batch([R.Record(0, 0, b"k", b"v")])[:R.BATCH_HEADER_SIZE]
    blob = bytearray(header + data)
    blob[8:12] = struct.pack(">i", len(blob) - 12)
    try:
        for b in R.split_batches(bytes(blob))[0]:
            b.records()
    except DecodeError:
        pass


def _legacy(offset: int, magic: int, attrs: int, key: bytes | None, value: bytes | None, ts: int = 0) -> bytes:
    body = struct.pack(">bb", magic, attrs) + (struct.pack(">q", ts) if magic == 1 else b"")
    for v in (key, value):
        body += struct.pack(">i", -1) if v is None else struct.pack(">i", len(v)) + v
    msg = struct.pack(">I", zlib.crc32(body)) + body
    return struct.pack(">qi", offset, len(msg)) + msg


def test_legacy_message_sets() -> None:
    inner = _legacy(0, 1, 0, b"a", b"1", ts=5) + _legacy(1, 1, 0, None, b"2", ts=6)
    wrapper = _legacy(1, 1, R.GZIP, None, R.compress(R.GZIP, inner), ts=6)
    plain = _legacy(0, 0, 0, b"k", None)
    msgs = decode_legacy_message_set(wrapper + plain)
    assert [(m.offset, m.timestamp, m.key, m.value) for m in msgs] == [
        (0, 5, b"a", b"1"), (1, 6, None, b"2"), (0, -1, b"k", None),
    ]
    bad = bytearray(plain)
    bad[-1] ^= 1
    with pytest.raises(DecodeError):
        decode_legacy_message_set(bytes(bad))
