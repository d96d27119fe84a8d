"""Kafka record batches (magic 2) and control records (codecs: ``compression.py``; legacy sets: ``legacy.py``).

Theory of operation
-------------------
RecordBatch v2 layout (kafka-wire.md §2.1; upstream DefaultRecordBatch.java)::

    off size field                   off size field
     0   8   base_offset              35  8   max_timestamp
     8   4   batch_length (after it)  43  8   producer_id
    12   4   partition_leader_epoch   51  2   producer_epoch
    16   1   magic = 2                53  4   base_sequence
    17   4   crc (CRC-32C of 21..end) 57  4   record count
    21   2   attributes               61  ... records (one compressed blob if compressed)
    23   4   last_offset_delta
    27   8   base_timestamp

attributes: bits 0-2 compression (0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd),
bit 3 timestamp type (1 = LogAppendTime), bit 4 transactional, bit 5 control.

Record (§2.2), all varints zig-zag::

    length varint | attributes int8 | timestamp_delta varlong | offset_delta varint
    | key_len varint (-1 null) key | value_len varint (-1 null) value
    | header_count varint | (key_len varint, key utf-8, value_len varint (-1 null), value)*

A ``RecordBatch`` keeps its exact bytes (``raw``): the broker passes batches
through untouched except for base_offset and partition_leader_epoch, which lie
outside the CRC (``with_base_offset``).  ``records()`` decompresses and parses
on demand.  ``encode_batch`` builds a batch from records; feeding it the
header fields of a decoded uncompressed batch reproduces it byte for byte.

Header keys are decoded with ``surrogateescape`` so that non-UTF-8 keys survive
a round trip.  Null keys/values stay ``None``, distinct from ``b""``.

Legacy MessageSets (magic 0/1, §2.5) are decoded only (Produce from pinned
old clients); we never advertise Fetch versions that would need them.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

import crc32c
from rokka.gateway.kafka.codec import primitives as p
from rokka.gateway.kafka.codec.compression import (
    DEFAULT_INFLATE_LIMIT,
    GZIP,
    LZ4,
    NONE,
    SNAPPY,
    ZSTD,
    InflateLimitError,
    compress,
    decompress,
)
from rokka.gateway.kafka.codec.primitives import DecodeError, EncodeError, Reader

__all__ = [
    "NONE", "GZIP", "SNAPPY", "LZ4", "ZSTD", "CONTROL_ABORT", "CONTROL_COMMIT", "InflateLimitError",
    "BATCH_HEADER_SIZE", "BatchHeader", "Header", "Record", "RecordBatch",
    "compress", "decompress", "plain_spans", "plain_values", "wrap_records", "batch_header", "encode_batch",
    "encode_rows_batch",
    "encode_control_batch",
    "parse_control_record",
    "read_batch_header", "read_record_fields", "RecordFields", "split_batches",
]

COMPRESSION_MASK = 0x07
TIMESTAMP_TYPE_BIT = 0x08
TRANSACTIONAL_BIT = 0x10
CONTROL_BIT = 0x20
CONTROL_ABORT, CONTROL_COMMIT = 0, 1

BATCH_HEADER_SIZE = 61
_HEADER = struct.Struct(">qiibIhiqqqhii")
_CRC_START = 21


@dataclass(frozen=True)
class Header:
    key: str
    value: bytes | None


@dataclass(frozen=True)
class Record:
    offset_delta: int
    timestamp_delta: int
    key: bytes | None
    value: bytes | None
    headers: tuple[Header, ...] = ()
    attributes: int = 0


class BatchHeader(NamedTuple):
    """The 61-byte header's fields in wire order (a tuple: made per produced batch, cheaply)."""

    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    record_count: int

    @property
    def size(self) -> int:
        return self.batch_length + 12

    @property
    def compression(self) -> int:
        return self.attributes & COMPRESSION_MASK

    @property
    def log_append_time(self) -> bool:
        return bool(self.attributes & TIMESTAMP_TYPE_BIT)

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_BIT)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_BIT)

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta


def read_batch_header(buf: bytes, pos: int = 0) -> BatchHeader:
    """Parse the 61-byte v2 batch header at ``pos``.

    Raises:
        DecodeError: fewer than 61 bytes, magic != 2, or an impossible length.
    """
    if len(buf) - pos < BATCH_HEADER_SIZE:
        raise DecodeError("record batch shorter than its 61-byte header")
    h = BatchHeader(*_HEADER.unpack_from(buf, pos))
    if h.magic != 2:
        raise DecodeError(f"record batch magic {h.magic}, expected 2")
    if h.batch_length < BATCH_HEADER_SIZE - 12:
        raise DecodeError(f"record batch length {h.batch_length} too small")
    return h


class RecordBatch(NamedTuple):
    """One whole v2 batch: its parsed header and its bytes (``raw``, the header included)."""

    header: BatchHeader
    raw: bytes

    def crc_ok(self) -> bool:
        with memoryview(self.raw) as raw:       # no copy of the batch to checksum it
            return crc32c.crc32c(raw[_CRC_START:]) == self.header.crc

    def records(self) -> list[Record]:
        """Decompress and parse every record.  Raises DecodeError on corruption."""
        return [Record(off, ts, key, value, tuple(Header(k, v) for k, v in headers), attrs)
                for attrs, ts, off, key, value, headers in self.record_fields()]

    def record_fields(self, payload: bytes | None = None) -> list[RecordFields]:
        """Like ``records`` but plain tuples ``(attributes, timestamp_delta, offset_delta, key,
        value, headers)`` with headers as ``((key, value), ...)``: the produce hot path.
        ``payload``: the already decompressed records, if the caller has them."""
        body = self.payload() if payload is None else payload
        return read_record_fields(body, _checked_count(self.header.record_count, len(body)))

    def payload(self, limit: int = DEFAULT_INFLATE_LIMIT) -> bytes:
        """The records' bytes, decompressed: at most ``limit`` bytes are inflated.

        Raises:
            InflateLimitError: compressed records that inflate past ``limit``.
            DecodeError: corrupt compressed data.
        """
        body = self.raw[BATCH_HEADER_SIZE:]
        return body if self.header.compression == NONE else decompress(self.header.compression, body, limit)

    def payload_view(self, limit: int = DEFAULT_INFLATE_LIMIT) -> bytes | memoryview:
        """``payload``, as a memoryview into ``raw`` when uncompressed (no copy of the records)."""
        if self.header.compression == NONE:
            return memoryview(self.raw)[BATCH_HEADER_SIZE:]
        return self.payload(limit)

    def with_base_offset(self, base_offset: int, leader_epoch: int | None = None) -> RecordBatch:
        """The same batch with base_offset (and leader epoch) rewritten; the CRC stays valid."""
        head = bytearray(self.raw[:16])
        struct.pack_into(">q", head, 0, base_offset)
        epoch = self.header.partition_leader_epoch if leader_epoch is None else leader_epoch
        struct.pack_into(">i", head, 12, epoch)
        header = self.header._replace(base_offset=base_offset, partition_leader_epoch=epoch)
        return RecordBatch(header, bytes(head) + self.raw[16:])


PlainValues = tuple[list[bytes], list[int], list[bytes] | None]


def plain_values(payload: bytes, header: BatchHeader, *, keyed: bool = False,
                 native: bool = True) -> PlainValues | None:
    """``(values, CreateTimes, keys)`` of a batch's records (``payload`` decompressed) when every
    record is plain -- attributes 0, a null key (``keyed``: a non-null key, returned in ``keys``;
    else ``keys`` is None), a value, no headers -- else None (also for a malformed payload:
    ``read_record_fields`` reports that).  ``native`` picks the C walker (``_crecords.c``)."""
    if native and _crecords is not None:
        return _crecords.plain_values(payload, header.record_count, header.base_timestamp,  # type: ignore[no-any-return]
                                      keyed)
    try:
        rows = read_record_fields(payload, _checked_count(header.record_count, len(payload)))
    except DecodeError:
        return None
    base = header.base_timestamp
    values: list[bytes] = []
    stamps: list[int] = []
    keys: list[bytes] = []
    for attrs, ts_delta, _, key, value, headers in rows:
        if attrs or (key is None) is keyed or value is None or headers:
            return None
        values.append(value)
        stamps.append(base + ts_delta)
        if key is not None:
            keys.append(key)
    return values, stamps, keys if keyed else None


#: ``(spans, timestamps, keys, longest)``: native int32 (offset, length) pairs of the values in the
#: payload, native int64 CreateTimes (both bytes), the keys (``keyed``) or None, the longest value.
PlainSpans = tuple[bytes, bytes, list[bytes] | None, int]


def plain_spans(payload: bytes, header: BatchHeader, *, keyed: bool = False) -> PlainSpans | None:
    """``plain_values`` without a Python object per value or timestamp (the produce hot path; see
    ``_crecords.c``); None when the batch is not plain or the native walker is not built."""
    if _crecords is None:
        return None
    return _crecords.plain_spans(payload, header.record_count, header.base_timestamp,  # type: ignore[no-any-return]
                                 keyed)


def _checked_count(n: int, available: int) -> int:
    if n < 0 or n > available:  # every record takes at least one byte
        raise DecodeError(f"record count {n} impossible for {available} bytes")
    return n


def split_batches(data: bytes) -> tuple[list[RecordBatch], int]:
    """Split a records blob into whole v2 batches.

    Returns:
        (batches, trailing): ``trailing`` counts bytes of an incomplete last batch
        (Kafka may truncate a fetch mid-batch; producers never should).
    Raises:
        DecodeError: a complete batch has a bad header.
    """
    batches, pos = [], 0
    while len(data) - pos >= 17:
        length = int.from_bytes(data[pos + 8 : pos + 12], "big", signed=True)
        if pos + 12 + length > len(data):
            break
        header = read_batch_header(data, pos)
        batches.append(RecordBatch(header, data[pos : pos + header.size]))
        pos += header.size
    return batches, len(data) - pos


try:    # the plain-record walker in C (gateway/kafka/codec/_crecords.c); absent when not built
    from rokka.gateway.kafka.codec import _crecords
except ImportError:     # pragma: no cover - depends on the build
    _crecords = None  # type: ignore[assignment]
NATIVE = _crecords is not None

RecordFields = tuple[int, int, int, bytes | None, bytes | None, tuple[tuple[str, bytes | None], ...]]

# Zig-zag value of every one-byte varint (0x00-0x7F): the common case, decoded by one lookup.
_ZZ1 = tuple((b >> 1) ^ -(b & 1) for b in range(0x80))


def varint_at(buf: bytes, pos: int, max_bytes: int) -> tuple[int, int]:
    """(zig-zag value, new pos) of a multi-byte varint at ``pos``; 5 bytes for int32, 10 for int64."""
    result = shift = 0
    for i in range(max_bytes):
        b = buf[pos + i]
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            if result > (0xFFFFFFFF if max_bytes == 5 else 0xFFFFFFFFFFFFFFFF):
                raise DecodeError("varint out of range")
            return (result >> 1) ^ -(result & 1), pos + i + 1
        shift += 7
    raise DecodeError("varint too long")


def read_record_fields(buf: bytes, count: int) -> list[RecordFields]:
    """Parse ``count`` records filling ``buf`` exactly (see the module doc for the layout).

    Varints are decoded inline (a table lookup for one byte, two shifts for two): this loop is what
    every produced record goes through.  Raises DecodeError on any inconsistency.
    """
    out: list[RecordFields] = []
    append = out.append
    zz1, slow = _ZZ1, varint_at
    pos, size = 0, len(buf)
    try:
        for _ in range(count):
            b = buf[pos]
            if b < 0x80:
                length, pos = zz1[b], pos + 1
            elif buf[pos + 1] < 0x80:
                v = (b & 0x7F) | buf[pos + 1] << 7
                length, pos = (v >> 1) ^ -(v & 1), pos + 2
            else:
                length, pos = slow(buf, pos, 5)
            end = pos + length
            if length < 0 or end > size:
                raise DecodeError(f"record length {length} invalid")
            attrs = buf[pos]
            attrs, pos = (attrs - 256 if attrs > 127 else attrs), pos + 1
            b = buf[pos]
            if b < 0x80:
                ts, pos = zz1[b], pos + 1
            else:
                ts, pos = slow(buf, pos, 10)
            b = buf[pos]
            if b < 0x80:
                off, pos = zz1[b], pos + 1
            elif buf[pos + 1] < 0x80:
                v = (b & 0x7F) | buf[pos + 1] << 7
                off, pos = (v >> 1) ^ -(v & 1), pos + 2
            else:
                off, pos = slow(buf, pos, 5)
            b = buf[pos]
            if b < 0x80:
                n, pos = zz1[b], pos + 1
            elif buf[pos + 1] < 0x80:
                v = (b & 0x7F) | buf[pos + 1] << 7
                n, pos = (v >> 1) ^ -(v & 1), pos + 2
            else:
                n, pos = slow(buf, pos, 5)
            if n == -1:
                key = None
            elif 0 <= n <= end - pos:
                key, pos = buf[pos : pos + n], pos + n
            else:
                raise DecodeError(f"record key length {n} invalid")
            b = buf[pos]
            if b < 0x80:
                n, pos = zz1[b], pos + 1
            elif buf[pos + 1] < 0x80:
                v = (b & 0x7F) | buf[pos + 1] << 7
                n, pos = (v >> 1) ^ -(v & 1), pos + 2
            else:
                n, pos = slow(buf, pos, 5)
            if n == -1:
                value = None
            elif 0 <= n <= end - pos:
                value, pos = buf[pos : pos + n], pos + n
            else:
                raise DecodeError(f"record value length {n} invalid")
            b = buf[pos]
            if b == 0:  # no headers
                headers: tuple[tuple[str, bytes | None], ...] = ()
                pos += 1
            else:
                headers, pos = _read_headers(buf, pos, end)
            if pos != end:
                raise DecodeError(f"record fields do not fill its length ({end - pos} bytes off)")
            append((attrs, ts, off, key, value, headers))
    except IndexError:
        raise DecodeError("truncated record") from None
    if pos != size:
        raise DecodeError(f"{size - pos} bytes after the last record of the batch")
    return out


def _read_headers(buf: bytes, pos: int, end: int) -> tuple[tuple[tuple[str, bytes | None], ...], int]:
    r = Reader(buf, pos, end)
    headers = []
    for _ in range(_checked_count(r.varint(), r.remaining())):
        hkey = _read_varbytes(r)
        if hkey is None:
            raise DecodeError("null record header key")
        headers.append((hkey.decode("utf-8", "surrogateescape"), _read_varbytes(r)))
    return tuple(headers), r.pos


def _read_varbytes(r: Reader) -> bytes | None:
    n = r.varint()
    if n < -1:
        raise DecodeError(f"negative length {n}")
    return None if n == -1 else r.read_raw(n)


def _write_varbytes(out: bytearray, v: bytes | None) -> None:
    if v is None:
        p.write_varint(out, -1)
    else:
        p.write_varint(out, len(v))
        out += v


def _write_record(out: bytearray, rec: Record) -> None:
    body = bytearray()
    p.write_int8(body, rec.attributes)
    p.write_varlong(body, rec.timestamp_delta)
    p.write_varint(body, rec.offset_delta)
    _write_varbytes(body, rec.key)
    _write_varbytes(body, rec.value)
    p.write_varint(body, len(rec.headers))
    for h in rec.headers:
        _write_varbytes(body, h.key.encode("utf-8", "surrogateescape"))
        _write_varbytes(body, h.value)
    p.write_varint(out, len(body))
    out += body


def encode_batch(
    records: Sequence[Record],
    *,
    base_offset: int = 0,
    partition_leader_epoch: int = -1,
    compression: int = NONE,
    attributes: int = 0,
    base_timestamp: int | None = None,
    max_timestamp: int | None = None,
    last_offset_delta: int | None = None,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
) -> bytes:
    """Build a v2 batch.  ``attributes`` carries the non-compression bits (0x08/0x10/0x20).

    ``base_timestamp`` defaults to 0-delta semantics (the caller gives absolute
    timestamps through the deltas); ``max_timestamp`` defaults to base + max delta.
    """
    if not records and last_offset_delta is None:
        raise EncodeError("an empty batch needs an explicit last_offset_delta")
    body = bytearray()
    for rec in records:
        _write_record(body, rec)
    payload = bytes(body) if compression == NONE else compress(compression, bytes(body))
    base_ts = 0 if base_timestamp is None else base_timestamp
    if max_timestamp is None:
        max_timestamp = base_ts + max((r.timestamp_delta for r in records), default=0)
    if last_offset_delta is None:
        last_offset_delta = records[-1].offset_delta
    attrs = (attributes & ~COMPRESSION_MASK) | compression
    tail = bytearray()
    tail += struct.pack(">hiqqqhii", attrs, last_offset_delta, base_ts, max_timestamp,
                        producer_id, producer_epoch, base_sequence, len(records))
    tail += payload
    crc = crc32c.crc32c(bytes(tail))
    head = struct.pack(">qiibI", base_offset, len(tail) + 9, partition_leader_epoch, 2, crc)
    return head + bytes(tail)


# Zig-zag varint bytes of 0..8191 (offset deltas, small timestamp deltas, value lengths).
_ZZ_BYTES_LIMIT = 1 << 13


def _varlong_bytes(v: int) -> bytes:
    out = bytearray()
    p.write_varlong(out, v)
    return bytes(out)


_ZZ_BYTES = tuple(_varlong_bytes(v) for v in range(_ZZ_BYTES_LIMIT))
_ZZ_NEG_BYTES = tuple(_varlong_bytes(-v) for v in range(_ZZ_BYTES_LIMIT))  # [k] = -k
_NULL = b"\x01"  # varint -1: null key / value
_NO_HEADERS = b"\x00"
_BATCH_TAIL = struct.Struct(">hiqqqhii")
_BATCH_HEAD = struct.Struct(">qiibI")


def _zz(v: int, long: bool) -> bytes:
    if -_ZZ_BYTES_LIMIT < v < _ZZ_BYTES_LIMIT:
        return _ZZ_BYTES[v] if v >= 0 else _ZZ_NEG_BYTES[-v]
    out = bytearray()
    (p.write_varlong if long else p.write_varint)(out, v)
    return bytes(out)


def _headers_bytes(headers: Sequence[tuple[str, bytes | None]]) -> bytes:
    out = bytearray()
    p.write_varint(out, len(headers))
    for k, v in headers:
        _write_varbytes(out, k.encode("utf-8", "surrogateescape"))
        _write_varbytes(out, v)
    return bytes(out)


def encode_rows_batch(
    rows: Sequence[tuple[int, int, object, bytes | None, bytes | None, Sequence[tuple[str, bytes | None]]]],
    *, partition_leader_epoch: int = -1, attributes: int = 0,
) -> bytes:
    """An uncompressed v2 batch of ``(offset, timestamp, _, key, value, headers)`` rows (absolute
    offsets/timestamps, the first row is the base; the third item is ignored).  Same bytes as
    ``encode_batch`` with base_offset/base_timestamp of the first row and max_timestamp the max,
    built as one join of precomputed varints (the Fetch hot path).
    """
    if not rows:
        raise EncodeError("an empty batch needs an explicit last_offset_delta")
    base, base_ts = rows[0][0], rows[0][1]
    zzb, limit, zz = _ZZ_BYTES, _ZZ_BYTES_LIMIT, _zz
    parts: list[bytes] = []
    extend = parts.extend
    max_ts = base_ts
    for offset, ts, _, key, value, headers in rows:
        d = offset - base
        od = zzb[d] if 0 <= d < limit else zz(d, False)
        d = ts - base_ts
        td = zzb[d] if 0 <= d < limit else zz(d, True)
        if ts > max_ts:
            max_ts = ts
        if key is None:
            kb = _NULL
        else:
            n = len(key)
            kb = (zzb[n] if n < limit else zz(n, False)) + key
        hb = _NO_HEADERS if not headers else _headers_bytes(headers)
        if value is None:
            n = 2 + len(td) + len(od) + len(kb) + len(hb)
            extend((zzb[n] if n < limit else zz(n, False), b"\x00", td, od, kb, _NULL, hb))
            continue
        n = len(value)
        vb = zzb[n] if n < limit else zz(n, False)
        n += 1 + len(td) + len(od) + len(kb) + len(vb) + len(hb)
        extend((zzb[n] if n < limit else zz(n, False), b"\x00", td, od, kb, vb, value, hb))
    return wrap_records(b"".join(parts), base_offset=base, last_offset_delta=rows[-1][0] - base, count=len(rows),
                        base_timestamp=base_ts, max_timestamp=max_ts, partition_leader_epoch=partition_leader_epoch,
                        attributes=attributes)


def wrap_records(payload: bytes, *, base_offset: int, last_offset_delta: int, count: int, base_timestamp: int,
                 max_timestamp: int, partition_leader_epoch: int = -1, attributes: int = 0) -> bytes:
    """An uncompressed v2 batch around ``count`` already encoded records (no producer id/sequence)."""
    return batch_header(payload, base_offset=base_offset, last_offset_delta=last_offset_delta, count=count,
                        base_timestamp=base_timestamp, max_timestamp=max_timestamp,
                        partition_leader_epoch=partition_leader_epoch, attributes=attributes) + payload


def batch_header(payload: bytes, *, base_offset: int, last_offset_delta: int, count: int, base_timestamp: int,
                 max_timestamp: int, partition_leader_epoch: int = -1, attributes: int = 0) -> bytes:
    """The 61 bytes that ``wrap_records`` puts before ``payload`` (header + CRC-32C over it all), for
    senders that keep the payload apart (``primitives.Pieces``) instead of copying it after them."""
    tail = _BATCH_TAIL.pack(attributes & ~COMPRESSION_MASK, last_offset_delta, base_timestamp, max_timestamp,
                            -1, -1, -1, count)
    crc = crc32c.crc32c(payload, crc32c.crc32c(tail))
    return _BATCH_HEAD.pack(base_offset, len(tail) + len(payload) + 9, partition_leader_epoch, 2, crc) + tail


def encode_control_batch(
    *, producer_id: int, producer_epoch: int, commit: bool, base_offset: int = 0,
    timestamp: int = 0, coordinator_epoch: int = 0, partition_leader_epoch: int = -1,
) -> bytes:
    """A transaction marker batch (§2.4): attributes 0x30, one control record."""
    key = struct.pack(">hh", 0, CONTROL_COMMIT if commit else CONTROL_ABORT)
    value = struct.pack(">hi", 0, coordinator_epoch)
    return encode_batch(
        [Record(0, 0, key, value)], base_offset=base_offset, partition_leader_epoch=partition_leader_epoch,
        attributes=TRANSACTIONAL_BIT | CONTROL_BIT, base_timestamp=timestamp, max_timestamp=timestamp,
        producer_id=producer_id, producer_epoch=producer_epoch, base_sequence=-1,
    )


def parse_control_record(rec: Record) -> tuple[int, int]:
    """(type, coordinator_epoch) of a control record; type 0 ABORT, 1 COMMIT.

    Raises:
        DecodeError: key or value too short.
    """
    if rec.key is None or len(rec.key) < 4:
        raise DecodeError("control record key too short")
    _, ctype = struct.unpack_from(">hh", rec.key)
    epoch = -1
    if rec.value is not None and len(rec.value) >= 6:
        epoch = struct.unpack_from(">hi", rec.value)[1]
    return ctype, epoch
