"""RocketMQ 4.9 CommitLog record layout, defined once.

Theory of operation
-------------------
``FIELDS`` below is the single description of a CommitLog record (the same
bytes are a PULL body element and a QUERY/VIEW body).  Everything else in
this module is *derived* from it: the fixed-header ``struct.Struct`` for each
of the four host-form variants (IPv4/IPv6 born host x store host, chosen by
sysflag bits 0x10 / 0x20), the byte offsets of QUEUEOFFSET, PHYSICALOFFSET
and STORETIMESTAMP, ``record_size``, ``encode_record`` and ``decode_record``.

Layout (IPv4 hosts; upstream: rocketmq ``CommitLog.DefaultAppendMessageCallback``
and ``MessageDecoder``)::

    0  TOTALSIZE int32        4  MAGICCODE 0xDAA320A7   8  BODYCRC (crc32 & 0x7FFFFFFF)
   12  QUEUEID int32         16  FLAG int32            20  QUEUEOFFSET int64
   28  PHYSICALOFFSET int64  36  SYSFLAG int32         40  BORNTIMESTAMP int64
   48  BORNHOST 4+4 (16+4 if sysflag&0x10)             56  STORETIMESTAMP int64
   64  STOREHOST 4+4 (16+4 if sysflag&0x20)            72  RECONSUMETIMES int32
   76  PREPARED_TRANSACTION_OFFSET int64               84  BODYLENGTH int32, BODY
       TOPICLENGTH int8 (V1: 1 byte, <= 127), TOPIC, PROPERTIESLENGTH int16, PROPERTIES

Rules for editors:
  * Add or move a field only in ``FIELDS``; the structs and offsets follow.
  * The encoder derives the V6 sysflag bits from the actual host address
    family (an IPv6 literal contains ":"); callers never set them by hand.
  * All structs are big-endian and precompiled; the hot path is
    ``encode_record`` -> one ``pack`` + a bytes join.
  * Properties: ``name 0x01 value 0x02 ...``; we write no trailing 0x02 (as
    Java 4.9.7) and accept one; empty keys or values are dropped, as Java's
    ``MessageDecoder.string2messageProperties`` does.
"""

from __future__ import annotations

import functools
import ipaddress
import mmap
import socket
import struct
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from operator import methodcaller

from rokka.core.model import (
    BORNHOST_V6_FLAG,
    STOREHOST_V6_FLAG,
    HostPort,
    Message,
    PackedBodies,
    StoredMessage,
    java_hash,
)

try:    # the append hot path in C (core/storage/_cstore.c); absent when the extension was not built
    import rokka.core.storage._cstore as _cstore
except ImportError:     # pragma: no cover - depends on the build
    _cstore = None  # type: ignore[assignment]
NATIVE = _cstore is not None
#: zlib.crc32, or the same function from the native module (libdeflate's when it was linked: ~10x
#: faster on a 100-byte body).  BODYCRC is ``crc32(body) & 0x7FFFFFFF``.
crc32 = _cstore.crc32 if _cstore is not None else zlib.crc32

MESSAGE_MAGIC = 0xDAA320A7
BLANK_MAGIC = 0xCBD43194
MAX_TOPIC_BYTES = 127
MAX_PROPERTIES_BYTES = 32767
BLANK_SIZE = 8  # TOTALSIZE + MAGICCODE of the end-of-file filler

NAME_VALUE_SEP = "\x01"
PROPERTY_SEP = "\x02"


Buffer = bytes | bytearray | memoryview | mmap.mmap


class RecordError(ValueError):
    """A byte range is not a well-formed CommitLog record."""


@dataclass(frozen=True, slots=True)
class Field:
    """One layout field: ``fmt`` is a struct code, "host" or a length-prefixed blob."""

    name: str
    fmt: str            # struct code, "host", or "blob"
    v6_flag: int = 0    # for hosts: sysflag bit that selects the 16-byte form
    len_fmt: str = ""   # for blobs: struct code of the length prefix


FIELDS: tuple[Field, ...] = (
    Field("total_size", "i"),
    Field("magic", "I"),
    Field("body_crc", "i"),
    Field("queue_id", "i"),
    Field("flag", "i"),
    Field("queue_offset", "q"),
    Field("commitlog_offset", "q"),
    Field("sysflag", "i"),
    Field("born_timestamp", "q"),
    Field("born_host", "host", v6_flag=BORNHOST_V6_FLAG),
    Field("store_timestamp", "q"),
    Field("store_host", "host", v6_flag=STOREHOST_V6_FLAG),
    Field("reconsume_times", "i"),
    Field("prepared_transaction_offset", "q"),
    Field("body", "blob", len_fmt="i"),
    Field("topic", "blob", len_fmt="b"),
    Field("properties", "blob", len_fmt="h"),
)


def _header_format(sysflag: int) -> str:
    """Struct format of everything before BODY (incl. BODYLENGTH) for a host variant."""
    fmt = ">"
    for f in FIELDS:
        if f.fmt == "host":
            fmt += ("16s" if sysflag & f.v6_flag else "4s") + "i"
        elif f.fmt == "blob":
            return fmt + f.len_fmt
        else:
            fmt += f.fmt
    raise AssertionError("layout has no blob field")


def _field_offset(name: str, sysflag: int = 0) -> int:
    fmt = ">"
    for f in FIELDS:
        if f.name == name:
            return struct.calcsize(fmt)
        if f.fmt == "host":
            fmt += ("16s" if sysflag & f.v6_flag else "4s") + "i"
        elif f.fmt == "blob":
            break
        else:
            fmt += f.fmt
    raise KeyError(name)


_V6_BITS = BORNHOST_V6_FLAG | STOREHOST_V6_FLAG
# Header struct per (sysflag & 0x30).
HEADERS: dict[int, struct.Struct] = {bits: struct.Struct(_header_format(bits))
                                     for bits in (0, BORNHOST_V6_FLAG, STOREHOST_V6_FLAG, _V6_BITS)}
HEADER_V4 = HEADERS[0]
_TAIL_FMTS = [f.len_fmt for f in FIELDS if f.fmt == "blob"]
TOPIC_LEN = struct.Struct(">" + _TAIL_FMTS[1])
PROPS_LEN = struct.Struct(">" + _TAIL_FMTS[2])
# Fixed part of a record = header + topic length + properties length.
FIXED_SIZE = {bits: s.size + TOPIC_LEN.size + PROPS_LEN.size for bits, s in HEADERS.items()}

OFF_TOTAL_SIZE = _field_offset("total_size")
OFF_MAGIC = _field_offset("magic")
OFF_BODY_CRC = _field_offset("body_crc")
OFF_QUEUE_ID = _field_offset("queue_id")
OFF_QUEUE_OFFSET = _field_offset("queue_offset")
OFF_PHYSICAL_OFFSET = _field_offset("commitlog_offset")
OFF_SYSFLAG = _field_offset("sysflag")
OFF_BORN_HOST = _field_offset("born_host")
STORE_TS_OFFSET = {bits: _field_offset("store_timestamp", bits) for bits in (0, BORNHOST_V6_FLAG)}
_PREPARED_OFFSET = {bits: _field_offset("prepared_transaction_offset", bits) for bits in HEADERS}
_INT64 = struct.Struct(">q")
#: Per host variant ((sysflag & 0x30) >> 4): the byte offsets ``_cstore.scan_runs`` reads a record by:
#: header size, queue id, queue offset, physical offset, sysflag, store timestamp, body length, body crc.
SCAN_LAYOUTS = tuple((HEADERS[v << 4].size, *(_field_offset(n, v << 4) for n in (
    "queue_id", "queue_offset", "commitlog_offset", "sysflag", "store_timestamp", "body", "body_crc")))
    for v in range(4))

INT32 = struct.Struct(">i")
UINT32 = struct.Struct(">I")
INT64 = struct.Struct(">q")
SIZE_MAGIC = struct.Struct(">iI")
_OFFSETS_PAIR = struct.Struct(">qq")
_BLANK = struct.Struct(">iI")

assert OFF_QUEUE_OFFSET + 8 == OFF_PHYSICAL_OFFSET  # rewrite_offsets packs them together


# -- hosts ------------------------------------------------------------------

@functools.lru_cache(maxsize=1024)
def host_bytes(ip: str) -> tuple[bytes, bool]:
    """``"127.0.0.1"`` -> (4 bytes, False); an IPv6 literal -> (16 bytes, True)."""
    if ":" in ip:
        return socket.inet_pton(socket.AF_INET6, ip), True
    return socket.inet_pton(socket.AF_INET, ip), False


def host_str(raw: bytes) -> str:
    if len(raw) == 4:
        return socket.inet_ntop(socket.AF_INET, raw)
    return str(ipaddress.IPv6Address(raw))


# -- properties -------------------------------------------------------------

def encode_properties(props: Mapping[str, str]) -> bytes:
    """dict -> ``k 0x01 v 0x02 k 0x01 v`` (UTF-8, no trailing 0x02)."""
    if not props:
        return b""
    return "\x02".join(map("\x01".join, props.items())).encode("utf-8")


_split_pair = methodcaller("split", "\x01", 1)


def decode_properties(raw: Buffer) -> dict[str, str]:
    """Parse a properties blob; accepts a trailing 0x02, drops empty keys/values (Java)."""
    if not raw:
        return {}
    text = bytes(raw).decode("utf-8", "replace")
    try:    # fast path: every item is "key 0x01 value" with both non-empty
        out = dict(map(_split_pair, (text[:-1] if text[-1] == "\x02" else text).split("\x02")))
        if "" not in out and "" not in out.values():
            return out
    except ValueError:
        pass
    out = {}
    for item in text.split("\x02"):
        key, sep, value = item.partition("\x01")
        if sep and key and value:
            out[key] = value
    return out


@functools.lru_cache(maxsize=4096)
def tags_hash(tags: str) -> int:
    """Cached ConsumeQueue tags code for a non-empty TAGS value."""
    return java_hash(tags)


# -- records ----------------------------------------------------------------

def body_crc(body: bytes | memoryview) -> int:
    return crc32(body) & 0x7FFFFFFF


def record_size(body_len: int, topic_len: int, props_len: int, sysflag: int = 0) -> int:
    """TOTALSIZE of a record with these blob lengths (bytes) and host forms."""
    return FIXED_SIZE[sysflag & _V6_BITS] + body_len + topic_len + props_len


@functools.lru_cache(maxsize=4096)
def topic_blob(topic: str) -> bytes:
    """TOPICLENGTH + TOPIC bytes.  Raises RecordError if longer than 127 bytes."""
    raw = topic.encode("utf-8")
    if len(raw) > MAX_TOPIC_BYTES or not raw:
        raise RecordError(f"topic length {len(raw)} not in 1..{MAX_TOPIC_BYTES}")
    return TOPIC_LEN.pack(len(raw)) + raw


def encode_record(msg: Message, *, queue_offset: int, commitlog_offset: int,
                  store_timestamp: int, store_host: HostPort,
                  props: bytes | None = None) -> bytes:
    """Encode ``msg`` as one CommitLog record.

    ``props`` may carry the already-encoded properties (saves a re-encode).
    Raises:
        RecordError: topic > 127 bytes or properties > 32767 bytes.
    """
    if props is None:
        props = encode_properties(msg.properties)
    if len(props) > MAX_PROPERTIES_BYTES:
        raise RecordError(f"properties length {len(props)} > {MAX_PROPERTIES_BYTES}")
    tblob = topic_blob(msg.topic)
    born_ip, born6 = host_bytes(msg.born_host[0])
    store_ip, store6 = host_bytes(store_host[0])
    sysflag = (msg.sysflag & ~_V6_BITS) | (BORNHOST_V6_FLAG if born6 else 0) | (
        STOREHOST_V6_FLAG if store6 else 0)
    header = HEADERS[sysflag & _V6_BITS]
    body = msg.body
    total = header.size + len(body) + len(tblob) + PROPS_LEN.size + len(props)
    return b"".join((
        header.pack(total, MESSAGE_MAGIC, crc32(body) & 0x7FFFFFFF, msg.queue_id, msg.flag,
                    queue_offset, commitlog_offset, sysflag, msg.born_timestamp, born_ip,
                    msg.born_host[1], store_timestamp, store_ip, store_host[1],
                    msg.reconsume_times, msg.prepared_transaction_offset, len(body)),
        body, tblob, PROPS_LEN.pack(len(props)), props))


def encode_batch(msgs: Sequence[Message], props_list: Sequence[bytes], queue_offsets: Sequence[int],
                 timestamps: Sequence[int], start: int, store_host: HostPort) -> tuple[bytes, list[int]]:
    """Encode consecutive records from CommitLog offset ``start``: ``(all bytes, size of each)``.

    Same bytes as ``encode_record`` per message (``props_list`` already encoded and checked, topics
    already validated) with one join for the whole batch -- the append hot path.
    """
    store_ip, store6 = host_bytes(store_host[0])
    store_port = store_host[1]
    store_bit = STOREHOST_V6_FLAG if store6 else 0
    plen = PROPS_LEN.pack
    parts: list[bytes] = []
    sizes: list[int] = []
    pos = start
    topic: str | None = None
    born: str | None = None
    for m, props, qoff, ts in zip(msgs, props_list, queue_offsets, timestamps, strict=True):
        if m.topic != topic:            # a batch is usually one topic from one host
            topic = m.topic
            tblob = topic_blob(topic)
        bh = m.born_host
        if bh[0] != born:
            born = bh[0]
            born_ip, born6 = host_bytes(born)
            v6_bits = (BORNHOST_V6_FLAG if born6 else 0) | store_bit
            header = HEADERS[v6_bits]
        body = m.body
        body_len = len(body)
        total = header.size + body_len + len(tblob) + 2 + len(props)
        parts += (header.pack(total, MESSAGE_MAGIC, crc32(body) & 0x7FFFFFFF, m.queue_id, m.flag, qoff,
                              pos, (m.sysflag & ~_V6_BITS) | v6_bits, m.born_timestamp, born_ip, bh[1], ts,
                              store_ip, store_port, m.reconsume_times, m.prepared_transaction_offset,
                              body_len),
                  body, tblob, plen(len(props)), props)
        sizes.append(total)
        pos += total
    return b"".join(parts), sizes


OFF_BORN_TIMESTAMP = _field_offset("born_timestamp")
_UNIT = "qiq"   # ConsumeQueue unit: commitlog offset, size, tags code


def encode_uniform(topic: str, queue_id: int, bodies: Sequence[bytes], born_timestamps: Sequence[int] | int,
                   props: bytes, *, flag: int, sysflag: int, born_host: HostPort, store_timestamp: int,
                   store_host: HostPort, queue_offset: int, commitlog_offset: int, tags_code: int,
                   prefixes: Sequence[bytes] | None = None, prepared_offsets: Sequence[int] | None = None,
                   native: bool = NATIVE) -> tuple[bytes, bytes]:
    """Records sharing all but body and born timestamp, from ``commitlog_offset`` with consecutive
    queue offsets: ``(record bytes, ConsumeQueue units)``, the same bytes as ``encode_record`` per
    message (``props`` encoded and checked, topic validated by the caller).  ``bodies`` may be
    ``PackedBodies`` (spans of one buffer, encoded natively without a bytes object per body; then
    ``born_timestamps`` may be a buffer of native int64s).  ``born_timestamps`` is
    one int for all or one per body; ``prefixes`` (optional) are per-record property bytes put
    before ``props`` (a record's own ``KEYS\x01k\x02``; ``PackedBodies`` too: spans of one blob).
    ``prepared_offsets`` (optional, one per record: a transaction commit's halves) fill each record's
    PREPARED_TRANSACTION_OFFSET (written into the native encoder's output; no checksum covers it).
    ``native`` picks the C encoder when built.

    Raises:
        ValueError: a record's properties would exceed 32767 bytes (or mismatched lengths).
    """
    tblob = topic_blob(topic)
    born_ip, born6 = host_bytes(born_host[0])
    store_ip, store6 = host_bytes(store_host[0])
    v6_bits = (BORNHOST_V6_FLAG if born6 else 0) | (STOREHOST_V6_FLAG if store6 else 0)
    sysflag = (sysflag & ~_V6_BITS) | v6_bits
    header = HEADERS[v6_bits]
    if native and _cstore is not None:
        template = header.pack(0, MESSAGE_MAGIC, 0, queue_id, flag, 0, 0, sysflag, 0, born_ip, born_host[1],
                               store_timestamp, store_ip, store_host[1], 0, 0, 0)
        if isinstance(bodies, PackedBodies):
            pres = (prefixes.buffer, prefixes.spans) if isinstance(prefixes, PackedBodies) else prefixes
            data, units = _cstore.encode_spans(template, OFF_BODY_CRC, OFF_QUEUE_OFFSET, OFF_PHYSICAL_OFFSET,
                                               OFF_BORN_TIMESTAMP, bodies.buffer, bodies.spans, born_timestamps,
                                               tblob, props, pres, queue_offset, commitlog_offset, tags_code)
        else:
            data, units = _cstore.encode_uniform(template, OFF_BODY_CRC, OFF_QUEUE_OFFSET, OFF_PHYSICAL_OFFSET,
                                                 OFF_BORN_TIMESTAMP, bodies, born_timestamps, tblob, props, prefixes,
                                                 queue_offset, commitlog_offset, tags_code)
        if prepared_offsets is None:
            return data, units
        if len(prepared_offsets) != len(bodies):
            raise ValueError("bodies and prepared_offsets differ in length")
        patched = bytearray(data)
        at = _PREPARED_OFFSET[v6_bits] - commitlog_offset
        for pos, po in zip(unit_offsets(units), prepared_offsets, strict=True):
            _INT64.pack_into(patched, pos + at, po)
        return bytes(patched), units
    stamps = [born_timestamps] * len(bodies) if isinstance(born_timestamps, int) else born_timestamps
    pres = [b""] * len(bodies) if prefixes is None else prefixes
    prepared = [0] * len(bodies) if prepared_offsets is None else prepared_offsets
    if len(stamps) != len(bodies) or len(pres) != len(bodies) or len(prepared) != len(bodies):
        raise ValueError("bodies, born_timestamps, prefixes and prepared_offsets differ in length")
    if pres and len(props) + max(map(len, pres)) > MAX_PROPERTIES_BYTES:
        raise ValueError(f"properties longer than {MAX_PROPERTIES_BYTES} bytes")
    pack, fixed = header.pack, header.size + len(tblob) + PROPS_LEN.size
    plen = PROPS_LEN.pack
    parts: list[bytes] = []
    flat: list[int] = []
    pos, qoff = commitlog_offset, queue_offset
    for body, born, pre, po in zip(bodies, stamps, pres, prepared, strict=True):
        size = fixed + len(body) + len(pre) + len(props)
        parts += (pack(size, MESSAGE_MAGIC, crc32(body) & 0x7FFFFFFF, queue_id, flag, qoff, pos, sysflag, born,
                       born_ip, born_host[1], store_timestamp, store_ip, store_host[1], 0, po, len(body)),
                  body, tblob, plen(len(pre) + len(props)), pre, props)
        flat += (pos, size, tags_code)
        pos += size
        qoff += 1
    return b"".join(parts), struct.pack(">" + _UNIT * len(bodies), *flat)


def unit_offsets(units: bytes, *, native: bool = NATIVE) -> list[int]:
    """The CommitLog offset of each raw ConsumeQueue unit (``_UNIT``) in ``units``."""
    if native and _cstore is not None:
        return _cstore.unit_offsets(units)  # type: ignore[no-any-return]
    if len(units) % 20:
        raise ValueError("units must be whole 20-byte ConsumeQueue units")
    return [u[0] for u in struct.iter_unpack(">" + _UNIT, units)]


OFF_FLAG = _field_offset("flag")


def encode_elements(topic: str, queue_id: int, body: bytes, extra_props: bytes, *, sysflag: int,
                    born_timestamp: int, born_host: HostPort, reconsume_times: int, store_timestamp: int,
                    store_host: HostPort, queue_offset: int, commitlog_offset: int, max_body: int,
                    ) -> tuple[bytes, bytes, list[str], list[int]]:
    """A RocketMQ batch body as records (C only: callers check ``NATIVE``): ``(records, ConsumeQueue
    units, index keys, commitlog offset of each key's record)``; see ``_cstore.c`` ``encode_elements``.

    Raises:
        ValueError: with args ``(kind, message)``, kind "malformed", "body" (> ``max_body``) or
            "properties".
    """
    assert _cstore is not None
    born_ip, born6 = host_bytes(born_host[0])
    store_ip, store6 = host_bytes(store_host[0])
    v6_bits = (BORNHOST_V6_FLAG if born6 else 0) | (STOREHOST_V6_FLAG if store6 else 0)
    template = HEADERS[v6_bits].pack(0, MESSAGE_MAGIC, 0, queue_id, 0, 0, 0, (sysflag & ~_V6_BITS) | v6_bits,
                                     born_timestamp, born_ip, born_host[1], store_timestamp, store_ip,
                                     store_host[1], reconsume_times, 0, 0)
    return _cstore.encode_elements(body, template, OFF_BODY_CRC, OFF_FLAG, OFF_QUEUE_OFFSET,  # type: ignore[no-any-return]
                                   OFF_PHYSICAL_OFFSET, topic_blob(topic), extra_props, queue_offset,
                                   commitlog_offset, max_body, MAX_PROPERTIES_BYTES)


def encode_blank(size: int) -> bytes:
    """End-of-segment filler: TOTALSIZE = ``size``, BLANK magic, zeros."""
    return _BLANK.pack(size, BLANK_MAGIC) + bytes(size - BLANK_SIZE)


def peek_total_size(buf: Buffer, offset: int = 0) -> int:
    return INT32.unpack_from(buf, offset)[0]


def rewrite_offsets(buf: bytearray | memoryview | mmap.mmap, offset: int, queue_offset: int,
                    commitlog_offset: int) -> None:
    """Overwrite QUEUEOFFSET and PHYSICALOFFSET of the record at ``buf[offset:]`` in place."""
    _OFFSETS_PAIR.pack_into(buf, offset + OFF_QUEUE_OFFSET, queue_offset, commitlog_offset)


def store_timestamp_of(buf: Buffer, offset: int = 0) -> int:
    sysflag = INT32.unpack_from(buf, offset + OFF_SYSFLAG)[0]
    return INT64.unpack_from(buf, offset + STORE_TS_OFFSET[sysflag & BORNHOST_V6_FLAG])[0]


@dataclass(frozen=True, slots=True)
class RecordHead:
    """The fixed fields of a record plus where its blobs are (for scans)."""

    total_size: int
    body_crc: int
    queue_id: int
    queue_offset: int
    commitlog_offset: int
    sysflag: int
    store_timestamp: int
    body_start: int
    body_len: int
    topic: bytes
    props_start: int
    props_len: int


def check_record(buf: Buffer, offset: int = 0, *,
                 limit: int | None = None, verify_crc: bool = True) -> RecordHead:
    """Validate the record at ``buf[offset:]`` (magic, sizes, CRC) and return its head.

    Raises:
        RecordError: anything inconsistent; the message says what.
    """
    end = len(buf) if limit is None else limit
    if offset + 8 > end:
        raise RecordError("truncated record header")
    total, magic = SIZE_MAGIC.unpack_from(buf, offset)
    if magic != MESSAGE_MAGIC:
        raise RecordError(f"bad magic 0x{magic:08X}")
    sysflag = INT32.unpack_from(buf, offset + OFF_SYSFLAG)[0]
    header = HEADERS[sysflag & _V6_BITS]
    if total < FIXED_SIZE[sysflag & _V6_BITS] or offset + total > end:
        raise RecordError(f"bad TOTALSIZE {total}")
    f = header.unpack_from(buf, offset)
    body_len = f[-1]
    body_start = offset + header.size
    topic_pos = body_start + body_len
    if body_len < 0 or topic_pos + 1 > offset + total:
        raise RecordError(f"bad BODYLENGTH {body_len}")
    tlen = buf[topic_pos]
    props_pos = topic_pos + 1 + tlen
    if tlen > MAX_TOPIC_BYTES or props_pos + 2 > offset + total:
        raise RecordError(f"bad TOPICLENGTH {tlen}")
    plen = PROPS_LEN.unpack_from(buf, props_pos)[0]
    if plen < 0 or props_pos + 2 + plen != offset + total:
        raise RecordError(f"bad PROPERTIESLENGTH {plen} for TOTALSIZE {total}")
    if verify_crc and crc32(memoryview(buf)[body_start:topic_pos]) & 0x7FFFFFFF != f[2]:
        raise RecordError("BODYCRC mismatch")
    return RecordHead(total, f[2], f[3], f[5], f[6], sysflag, f[11], body_start, body_len,
                      bytes(buf[topic_pos + 1:props_pos]), props_pos + 2, plen)


def decode_record(buf: Buffer, offset: int = 0) -> StoredMessage:
    """Decode the record at ``buf[offset:]`` (IPv4 or IPv6 hosts per sysflag).

    Does not verify the CRC (use ``check_record`` for that).
    Raises:
        RecordError: the bytes are not a well-formed record.
    """
    try:
        sysflag = INT32.unpack_from(buf, offset + OFF_SYSFLAG)[0]
        header = HEADERS[sysflag & _V6_BITS]
        (total, magic, crc, qid, flag, qoff, phys, sysflag, born_ts, born_ip, born_port,
         store_ts, store_ip, store_port, reconsume, pto, body_len) = header.unpack_from(buf, offset)
        pos = offset + header.size
        body = bytes(buf[pos:pos + body_len])
        pos += body_len
        tlen = buf[pos]
        topic = bytes(buf[pos + 1:pos + 1 + tlen]).decode("utf-8")
        pos += 1 + tlen
        plen = PROPS_LEN.unpack_from(buf, pos)[0]
        props = decode_properties(buf[pos + 2:pos + 2 + plen])
    except (struct.error, IndexError, UnicodeDecodeError) as exc:
        raise RecordError(f"malformed record at {offset}: {exc}") from exc
    if len(body) != body_len or pos + 2 + plen - offset != total or plen < 0:
        raise RecordError(f"malformed record at {offset}: sizes do not add up")
    return StoredMessage(
        topic=topic, queue_id=qid, body=body, properties=props, flag=flag, sysflag=sysflag,
        born_timestamp=born_ts, born_host=(host_str(born_ip), born_port),
        store_timestamp=store_ts, store_host=(host_str(store_ip), store_port),
        reconsume_times=reconsume, prepared_transaction_offset=pto, queue_offset=qoff,
        commitlog_offset=phys, body_crc=crc, size=total)


def properties_of(buf: Buffer, offset: int = 0) -> dict[str, str]:
    """Only the properties of the record at ``buf[offset:]`` (cheaper than decode_record)."""
    sysflag = INT32.unpack_from(buf, offset + OFF_SYSFLAG)[0]
    header = HEADERS[sysflag & _V6_BITS]
    pos = offset + header.size + INT32.unpack_from(buf, offset + header.size - 4)[0]
    pos += 1 + buf[pos]
    plen = PROPS_LEN.unpack_from(buf, pos)[0]
    return decode_properties(buf[pos + 2:pos + 2 + plen])


def topic_of(buf: Buffer, offset: int = 0) -> str:
    sysflag = INT32.unpack_from(buf, offset + OFF_SYSFLAG)[0]
    header = HEADERS[sysflag & _V6_BITS]
    pos = offset + header.size + INT32.unpack_from(buf, offset + header.size - 4)[0]
    return bytes(buf[pos + 1:pos + 1 + buf[pos]]).decode("utf-8", "replace")


def iter_records(buf: Buffer) -> list[StoredMessage]:
    """Decode a concatenation of records (a PULL body)."""
    out, pos = [], 0
    while pos < len(buf):
        msg = decode_record(buf, pos)
        out.append(msg)
        pos += msg.size
    return out


# -- message ids ------------------------------------------------------------

@functools.lru_cache(maxsize=64)
def msg_id_prefix(store_host: HostPort) -> str:
    """The first 16 (IPv4) or 40 (IPv6) hex chars of every offsetMsgId of ``store_host``."""
    ip, _ = host_bytes(store_host[0])
    return (ip + struct.pack(">i", store_host[1])).hex().upper()


def encode_offset_msg_id(store_host: HostPort, commitlog_offset: int) -> str:
    """offsetMsgId: IP + int32 port + int64 offset, uppercase hex (32 or 56 chars)."""
    return f"{msg_id_prefix(store_host)}{commitlog_offset & 0xFFFFFFFFFFFFFFFF:016X}"


def decode_offset_msg_id(msg_id: str) -> tuple[str, int, int]:
    """Inverse of ``encode_offset_msg_id``.  Raises ValueError on a malformed id."""
    if len(msg_id) not in (32, 56):
        raise ValueError(f"offsetMsgId must be 32 or 56 hex chars, got {len(msg_id)}")
    raw = bytes.fromhex(msg_id)
    iplen = len(raw) - 12
    port, offset = struct.unpack_from(">iq", raw, iplen)
    return host_str(raw[:iplen]), port, offset
