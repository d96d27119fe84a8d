"""Stored CommitLog records -> Kafka v2 records payloads (the Fetch hot path), native and its twin.

Theory of operation
-------------------
``walk(data, start, count, accepted, layout, table)`` walks CommitLog records lying back to back in
``data`` from byte ``start`` and encodes the leading ones it can map as one Kafka records payload
(offset delta = i, timestamp delta = BORNTIMESTAMP - the first record's); it returns ``(payload,
records, bytes_read, first_timestamp, max_timestamp)``, ``records`` 0 when the first record is not
mapped here.  ``_cstored.stored_records`` (C, when built) and ``walk_py`` give the same bytes.

What the records mean is not decided here: the caller (``rokka.compat.kafka_pieces``) hands over the
record layout (``layout``: magic, SYSFLAG and BORNTIMESTAMP offsets, the four header sizes by host
bits, the compressed flag) and its mapping table (``table``: the header prefix, the property names
that get it, the internal names never shown, and the names of key, headers JSON, null value,
timestamp type, envelope, control entry and KEYS), and ``accepted`` property blobs it knows to mean
"no key, no headers" (compared byte for byte).  The walker maps the canonical forms of that mapping
-- a UTF-8 blob of non-empty names and values (duplicate names only beside a headers property),
compact headers JSON ``[[name, base64-or-null], ...]``, strict base64, an envelope
``<-1|digits>,<digits>`` -- and stops at any other record (compressed, LogAppendTime, a control
entry, a text key beside ``<prefix>KEYS`` headers, anything else): the caller maps that one in
Python and resumes after it, so there is one meaning, the caller's.
"""

from __future__ import annotations

import base64
import json
import re
import struct
from collections.abc import Callable

__all__ = ["NATIVE", "MappingTable", "StoredLayout", "Walker", "walk", "walk_native", "walk_py"]

try:
    from rokka.gateway.kafka.codec import _cstored
except ImportError:     # pragma: no cover - depends on the build
    _cstored = None  # type: ignore[assignment]

#: (magic, offset of SYSFLAG, offset of BORNTIMESTAMP, header sizes by host bits 0-3, compressed flag)
StoredLayout = tuple[int, int, int, tuple[int, int, int, int], int]
#: (header prefix, prefixed names, internal names, (key, headers, null value, ts type, envelope, control, KEYS))
MappingTable = tuple[bytes, tuple[bytes, ...], tuple[bytes, ...], tuple[bytes, ...]]
Walked = tuple[bytes, int, int, int, int]
Walker = Callable[[bytes | memoryview, int, int, tuple[bytes, ...], StoredLayout, MappingTable], Walked]

_SIZE_MAGIC = struct.Struct(">iI")
_INT32, _UINT32, _UINT16, _INT64 = struct.Struct(">i"), struct.Struct(">I"), struct.Struct(">H"), struct.Struct(">q")


def _zz_varint(v: int) -> bytes:
    z = (v << 1) ^ (v >> 63)
    out = bytearray()
    while z >= 0x80:
        out.append((z & 0x7F) | 0x80)
        z >>= 7
    out.append(z)
    return bytes(out)


def walk_py(data: bytes | memoryview, start: int, count: int, accepted: tuple[bytes, ...], layout: StoredLayout,
            table: MappingTable | None = None) -> Walked:
    """Python twin of ``_cstored.stored_records`` (same result, see the module doc)."""
    magic, off_sysflag, off_born, sizes, compressed = layout
    parts: list[bytes] = []
    pos, n, first_ts, max_ts = start, 0, 0, 0
    while n < count and len(data) - pos >= 8:
        total, got_magic = _SIZE_MAGIC.unpack_from(data, pos)
        if got_magic != magic or not off_born + 8 <= total <= len(data) - pos:
            break
        sysflag = _INT32.unpack_from(data, pos + off_sysflag)[0]
        h = sizes[(sysflag >> 4) & 3]
        if sysflag & compressed or total < h + 1:
            break
        body_len = _UINT32.unpack_from(data, pos + h - 4)[0]
        if body_len > total - h - 1:
            break
        q = h + body_len
        q += 1 + data[pos + q]
        if q + 2 > total:
            break
        plen = _UINT16.unpack_from(data, pos + q)[0]
        q += 2
        if q + plen != total:
            break
        props, body = bytes(data[pos + q:pos + total]), bytes(data[pos + h:pos + h + body_len])
        mapped = (None, body, b"\x00") if props in accepted else None if table is None else _map_py(props, body, table)
        if mapped is None:
            break
        ts = _INT64.unpack_from(data, pos + off_born)[0]
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


# -- the mapping, canonical forms only (module doc) ------------------------------------------------
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


def _map_py(props: bytes, body: bytes, table: MappingTable) -> tuple[bytes | None, bytes | None, bytes] | None:
    """(key, value, encoded headers) of a record by the mapping (module doc), None where the walker
    leaves the record to the caller."""
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
        if parsed is None or (n_key not in last and key is not None and (prefix + n_keys).decode() in parsed[1]):
            return None     # a text key beside <prefix>KEYS headers (they append to KEYS): the caller
        return key, value, parsed[0]
    if len(last) != len(items):
        return None     # duplicate names on a RocketMQ producer's record: the caller
    out = [_varbytes((prefix if name in system else b"") + name) + _varbytes(v)
           for name, v in items if name not in internal]
    return key, value, _zz_varint(len(out)) + b"".join(out)


walk_native: Walker | None = _cstored.stored_records if _cstored is not None else None
walk: Walker = walk_native or walk_py
NATIVE = walk_native is not None
