"""Runs of stored records -> Kafka record payloads: the Fetch hot path.

Theory of operation
-------------------
A run (``MessageStore.get_runs``) is walked by ``_cfetch.plain_records`` (C, when built) or its
Python twin ``_plain_records_py``: the leading *plain* records -- properties blob known to mean "no
key, no headers, a value, CreateTime", body not compressed -- become one Kafka records payload
(``PlainPiece``); the first record that is not plain is mapped by ``kafka_records.kafka_rows`` and
the walk resumes after it.  A blob seen to be plain is remembered (``_PLAIN_PROPS``, bounded to
``_MAX_PLAIN_PROPS``), so a producer's records are recognised by a byte comparison from then on.
What a record *means* (properties -> key, headers, envelope) is defined once, in
``kafka_records``; this module only decides which records can skip that mapping.
"""

from __future__ import annotations

import struct
from typing import NamedTuple

from rokka.compat.kafka_records import DEFAULT_INFLATE_LIMIT, KafkaRow, kafka_row, props_view
from rokka.core.model import BORNHOST_V6_FLAG, COMPRESSED_FLAG, STOREHOST_V6_FLAG
from rokka.core.storage import layout
from rokka.core.storage.api import RecordRun

__all__ = ["NATIVE", "PlainPiece", "kafka_pieces"]

try:
    from rokka.compat import _cfetch
except ImportError:     # pragma: no cover - depends on the build
    _cfetch = None  # type: ignore[assignment]
NATIVE = _cfetch is not None

_V6_BITS = BORNHOST_V6_FLAG | STOREHOST_V6_FLAG
_FETCH_LAYOUT = (layout.MESSAGE_MAGIC, layout.OFF_SYSFLAG, layout.OFF_BORN_TIMESTAMP,
                 tuple(layout.HEADERS[bits].size for bits in (0, BORNHOST_V6_FLAG, STOREHOST_V6_FLAG,
                                                                _V6_BITS)), COMPRESSED_FLAG)
assert BORNHOST_V6_FLAG >> 4 == 1 and STOREHOST_V6_FLAG >> 4 == 2  # _cfetch picks HEADERS by sysflag >> 4
_MAX_PLAIN_PROPS = 32
_PLAIN_PROPS: tuple[bytes, ...] = ()


class PlainPiece(NamedTuple):
    """Consecutive plain records as a Kafka v2 records payload (offset deltas from 0)."""

    offset: int             # of the first record
    payload: bytes
    count: int
    first_timestamp: int
    max_timestamp: int


def _zz_varint(v: int) -> bytes:
    z = (v << 1) ^ (v >> 63)
    out = bytearray()
    while z >= 0x80:
        out.append((z & 0x7F) | 0x80)
        z >>= 7
    out.append(z)
    return bytes(out)


def _plain_records_py(data: bytes, start: int, count: int,
                      accepted: tuple[bytes, ...]) -> tuple[bytes, int, int, int, int]:
    """Python twin of ``_cfetch.plain_records`` (same result, see its header comment)."""
    magic, off_sysflag, off_born, sizes, compressed = _FETCH_LAYOUT
    parts: list[bytes] = []
    pos, n, first_ts, max_ts = start, 0, 0, 0
    while n < count and len(data) - pos >= 8:
        total, got_magic = layout.SIZE_MAGIC.unpack_from(data, pos)
        if got_magic != magic or not off_born + 8 <= total <= len(data) - pos:
            break
        sysflag = layout.INT32.unpack_from(data, pos + off_sysflag)[0]
        h = sizes[(sysflag >> 4) & 3]
        if sysflag & compressed or total < h + 1:
            break
        body_len = layout.UINT32.unpack_from(data, pos + h - 4)[0]
        if body_len > total - h - 1:
            break
        q = h + body_len
        q += 1 + data[pos + q]
        if q + 2 > total:
            break
        plen = layout.PROPS_LEN.unpack_from(data, pos + q)[0] & 0xFFFF
        q += 2
        if q + plen != total:
            break
        key = _plain_key(bytes(data[pos + q:pos + total]), accepted)
        if key is None:
            break
        ts = layout.INT64.unpack_from(data, pos + off_born)[0]
        if n == 0:
            first_ts = max_ts = ts
        max_ts = max(max_ts, ts)
        kb = b"\x01" if key is _NO_KEY else _zz_varint(len(key)) + key
        head = b"\x00" + _zz_varint(ts - first_ts) + _zz_varint(n) + kb + _zz_varint(body_len)
        parts += (_zz_varint(len(head) + body_len + 1), head, data[pos + h:pos + h + body_len], b"\x00")
        pos += total
        n += 1
    return b"".join(parts), n, pos - start, first_ts, max_ts


_NO_KEY = b""   # marker: a plain record without a key (compared by identity)


def _plain_key(props: bytes, accepted: tuple[bytes, ...]) -> bytes | None:
    """For a plain record's properties blob: ``_NO_KEY``, or its key (``KEYS 0x01 key 0x02`` + an
    accepted blob, the key UTF-8); None if the record is not plain."""
    if props in accepted:
        return _NO_KEY
    if props.startswith(b"KEYS\x01"):
        sep = props.find(b"\x02", 5)
        if sep > 5 and props[sep + 1:] in accepted:
            key = props[5:sep]
            try:
                key.decode("utf-8")
            except UnicodeDecodeError:
                return None
            return key
    return None


def _plain_records(data: bytes, start: int, count: int, native: bool) -> tuple[bytes, int, int, int, int]:
    if native and _cfetch is not None:
        return _cfetch.plain_records(data, start, count, _PLAIN_PROPS, _FETCH_LAYOUT)  # type: ignore[no-any-return]
    return _plain_records_py(data, start, count, _PLAIN_PROPS)


def _learn_plain(raw: bytes) -> bool:
    """Remember ``raw``'s properties blob if it is plain (see above); True if it is now known."""
    global _PLAIN_PROPS
    try:
        total, _ = layout.SIZE_MAGIC.unpack_from(raw)
        sysflag = layout.INT32.unpack_from(raw, layout.OFF_SYSFLAG)[0]
        h = _FETCH_LAYOUT[3][(sysflag >> 4) & 3]
        body_len = layout.INT32.unpack_from(raw, h - 4)[0]
        q = h + body_len
        q += 1 + raw[q]
        plen = layout.PROPS_LEN.unpack_from(raw, q)[0]
        props = bytes(raw[q + 2:q + 2 + plen])
    except (struct.error, IndexError):
        return False
    if sysflag & COMPRESSED_FLAG or q + 2 + plen != total or len(_PLAIN_PROPS) >= _MAX_PLAIN_PROPS:
        return False
    if props.startswith(b"KEYS\x01") and b"\x02" in props:   # a key of its own: learn the rest
        props = props[props.index(b"\x02") + 1:]
    if props in _PLAIN_PROPS:
        return False        # known already: this record is not plain for another reason
    key, null_value, headers, log_append, envelope = props_view(props)
    if key is not None or null_value or headers or log_append or envelope is not None:
        return False
    _PLAIN_PROPS = (*_PLAIN_PROPS, props)
    return True


def kafka_pieces(run: RecordRun, *, native: bool = True, inflate_limit: int = DEFAULT_INFLATE_LIMIT,
                 max_bytes: int | None = None) -> list[PlainPiece | list[KafkaRow]]:
    """The Kafka view of a run, in order: ``PlainPiece`` s for plain stretches, ``kafka_rows`` lists
    for the other records.  Raises RecordError for malformed record bytes (as ``kafka_rows``).
    ``run.data`` may be a memoryview (``get_runs(views=True)``): nothing returned refers to it.
    ``max_bytes``: stop (with a prefix of the run) once the pieces hold that many bytes of records."""
    out: list[PlainPiece | list[KafkaRow]] = []
    left = -1 if max_bytes is None else max(max_bytes, 1)
    data, sizes = run.data, run.sizes
    if not native and type(data) is memoryview:     # lent by the store: the Python walk slices bytes
        data = bytes(data)
    i, pos, n = 0, 0, len(sizes)
    while i < n:
        payload, count, used, first_ts, max_ts = _plain_records(data, pos, n - i, native)
        if count:
            out.append(PlainPiece(run.queue_offset + i, payload, count, first_ts, max_ts))
            i += count
            pos += used
            if left > 0:
                left -= len(payload)
                if left <= 0:
                    break
            continue
        raw = bytes(data[pos:pos + sizes[i]])      # data may be a memoryview lent by the store
        if _learn_plain(raw):
            continue        # walk again: the record is plain after all
        row = kafka_row(raw, inflate_limit)
        if out and isinstance(out[-1], list):
            out[-1].append(row)
        else:
            out.append([row])
        i += 1
        pos += sizes[i - 1]
        if left > 0:
            left -= len(row[4]) if row[4] is not None else 1
            if left <= 0:
                break
    return out
