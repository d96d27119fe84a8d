"""Runs of stored records -> Kafka record payloads: the Fetch hot path, for every record shape.

Theory of operation
-------------------
A run (``MessageStore.get_runs``) is walked by ``_cfetch.plain_records`` (C, when built) or its
Python twin ``_plain_records_py``, and the leading records it can map become one Kafka records
payload (``PlainPiece``: keys, null values and headers included).  It maps a record by a byte
comparison when its properties blob is a known *plain* one (``_PLAIN_PROPS``: "no key, no headers,
a value, CreateTime", bounded to ``_MAX_PLAIN_PROPS``), else by ``kafka_records``' rules read from
the blob itself (``FETCH_TABLE``: key, KAFKA_HEADERS JSON, a RocketMQ producer's properties as
headers, null values, the envelope) -- for the canonical forms of these; the first record it leaves
(a compressed body, LogAppendTime, a Kafka control entry, a non-canonical blob) is mapped by
``kafka_records.kafka_rows`` and the walk resumes after it.  What a record *means* is defined once,
in ``kafka_records``; the walker and its twin only read it faster (tests compare all three).
"""

from __future__ import annotations

import base64
import json
import re
import struct
from typing import NamedTuple

from rokka.compat.kafka_records import (
    DEFAULT_INFLATE_LIMIT,
    FETCH_TABLE,
    HEADER_KEYS,
    PROP_KAFKA_HEADERS,
    KafkaRow,
    kafka_row,
    props_view,
)
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
_PLAIN_PROPS: tuple[bytes, ...] = (layout.encode_properties({PROP_KAFKA_HEADERS: "[]"}),)   # Kafka's plain record
FetchTable = tuple[bytes, tuple[bytes, ...], tuple[bytes, ...], tuple[bytes, ...]]


class PlainPiece(NamedTuple):
    """Consecutive records mapped by the walker as a Kafka v2 records payload (offset deltas from 0)."""

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


def _plain_records_py(data: bytes, start: int, count: int, accepted: tuple[bytes, ...],
                      table: FetchTable | None = None) -> tuple[bytes, int, int, int, int]:
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
        props, body = bytes(data[pos + q:pos + total]), bytes(data[pos + h:pos + h + body_len])
        mapped = (None, body, b"\x00") if props in accepted else None if table is None else _map_py(props, body, table)
        if mapped is None:
            break
        ts = layout.INT64.unpack_from(data, pos + off_born)[0]
        if n == 0:
            first_ts = max_ts = ts
        max_ts = max(max_ts, ts)
        key, value, headers = mapped
        rec = b"".join((b"\x00", _zz_varint(ts - first_ts), _zz_varint(n), _varbytes(key), _varbytes(value), headers))
        parts += (_zz_varint(len(rec)), rec)
        pos += total
        n += 1
    return b"".join(parts), n, pos - start, first_ts, max_ts


def _varbytes(b: bytes | None) -> bytes:
    return b"\x01" if b is None else _zz_varint(len(b)) + b


# -- the Python twin of _cfetch's mapper: the canonical forms only (its header comment) -----------
_MAX_ITEMS = 64
_B64 = r"(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?"
_B64_RE = re.compile(_B64)
_ITEM = r'\["(?:[^"\\\x00-\x1f]|\\["\\/bfnrt]|\\u[0-9a-fA-F]{4})*",(?:null|"' + _B64 + r'")\]'
_HEADERS_RE = re.compile(rf"\[(?:{_ITEM}(?:,{_ITEM})*)?\]")
_ENVELOPE_RE = re.compile(r"(?:-1|[0-9]{1,9}),[0-9]{1,9}")


def _split_strict(props: bytes) -> list[tuple[bytes, bytes]] | None:
    if not props:
        return []
    try:
        props.decode("utf-8")
    except UnicodeDecodeError:
        return None
    items = []
    for item in (props[:-1] if props[-1] == 2 else props).split(b"\x02"):
        name, sep, value = item.partition(b"\x01")
        if not sep or not name or not value or len(items) == _MAX_ITEMS:
            return None
        items.append((name, value))
    return items


def _json_headers(raw: bytes, ascii_only: bool) -> tuple[bytes, list[str]] | None:
    """Kafka header entries (count first) of compact KAFKA_HEADERS JSON and the names, or None."""
    text = raw.decode("ascii" if ascii_only else "utf-8", "strict") if not ascii_only or raw.isascii() else ""
    if not _HEADERS_RE.fullmatch(text):
        return None
    out = [_zz_varint(0)]
    items = json.loads(text)
    for name, value in items:
        try:
            out.append(_varbytes(name.encode("utf-8", "surrogateescape")))
        except UnicodeEncodeError:
            return None
        out.append(_varbytes(None if value is None else base64.b64decode(value)))
    out[0] = _zz_varint((len(out) - 1) // 2)
    return b"".join(out), [name for name, _ in items]


def _map_py(props: bytes, body: bytes, table: FetchTable) -> tuple[bytes | None, bytes | None, bytes] | None:
    """(key, value, encoded headers) of a record by ``kafka_records``' rules, None where _cfetch
    leaves the record to the per-record Python path."""
    prefix, system, internal, (n_key, n_headers, n_null, n_ts, n_env, n_ctrl, n_keys) = table
    items = _split_strict(props)
    if items is None:
        return None
    last = dict(items)
    if n_ctrl in last or last.get(n_ts) == b"1":
        return None
    null_value = last.get(n_null) == b"1"
    if n_env in last:
        env = last[n_env].decode("utf-8")
        if not _ENVELOPE_RE.fullmatch(env):
            return None
        klen, hlen = (int(x) for x in env.split(","))
        start = max(klen, 0)
        if start + hlen > len(body):
            return None, None if null_value else body, _zz_varint(0)
        parsed = _json_headers(body[start:start + hlen], True) if hlen else (_zz_varint(0), [])
        if parsed is None:
            return None
        return None if klen < 0 else body[:klen], None if null_value else body[start + hlen:], parsed[0]
    key: bytes | None = None
    if n_key in last:
        b64 = last[n_key].decode("utf-8")[1:]
        if not _B64_RE.fullmatch(b64):
            return None
        key = base64.b64decode(b64)
    elif n_keys in last:
        key = last[n_keys]
    value = None if null_value else body
    raw_headers = last.get(n_headers)
    if raw_headers == b"[]":
        return key, value, _zz_varint(0)
    if raw_headers is not None:
        parsed = _json_headers(raw_headers, False)
        if parsed is None or (n_key not in last and key is not None and HEADER_KEYS in parsed[1]):
            return None     # a text key beside rocketmq.KEYS headers (they append to KEYS): Python
        return key, value, parsed[0]
    if len(last) != len(items):
        return None     # duplicate names on a RocketMQ producer's record: the Python path
    out = [_varbytes((prefix if name in system else b"") + name) + _varbytes(v)
           for name, v in items if name not in internal]
    return key, value, _zz_varint(len(out)) + b"".join(out)


def _plain_records(data: bytes, start: int, count: int, native: bool) -> tuple[bytes, int, int, int, int]:
    if native and _cfetch is not None:
        return _cfetch.plain_records(data, start, count, _PLAIN_PROPS, _FETCH_LAYOUT,  # type: ignore[no-any-return]
                                     FETCH_TABLE)
    return _plain_records_py(data, start, count, _PLAIN_PROPS, FETCH_TABLE)


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
