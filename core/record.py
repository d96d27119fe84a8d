"""The CommitLog record format: the door code outside ``core`` uses to read and write records.

Theory of operation
-------------------
A RocketMQ 4.9 CommitLog record is one byte layout everywhere: in the store's files, as an element
of a PULL body, and as a QUERY/VIEW answer.  ``rokka.core.storage.layout`` defines it once
(``FIELDS``) and derives the structs and offsets; this module is its public face, so the gateway,
``compat``, the pipeline and the client never import the store's insides.  It re-exports (never
copies) the layout's codec and adds named-field views of the fixed header:

* ``HEADER_FIELDS``: the 17 values of the fixed header, in layout order, by name (a host is two
  values, ``born_host`` / ``born_port``; ``body_length`` is the BODY's length prefix).
* ``RecordHeader`` and ``decode_header(buf, offset)``: all 17 by name, for any host form.
* ``header_reader(*names, sysflag=0)``: a precompiled ``unpack_from`` that returns only the named
  fields (layout order; the others are skipped as pad bytes), for hot loops that would otherwise
  destructure all 17 by position.  The tuple it returns is as cheap as the full unpack.
* the layout itself, for code that derives its own views of it: ``FIELDS`` (the single description),
  ``HEADERS`` (the fixed-header struct per host form, keyed by ``sysflag & 0x30``), ``HEADER_V4``, the
  offsets ``OFF_SYSFLAG`` / ``OFF_BORN_TIMESTAMP``, ``SIZE_MAGIC`` (TOTALSIZE + MAGICCODE), ``INT32``.
* ``TAIL_SIZE``: bytes of the TOPICLENGTH and PROPERTIESLENGTH prefixes after a body; with
  ``PROPS_LEN`` it walks the variable tail.
* ``RecordView`` / ``record_view(raw)``: a whole record's fields with its properties still encoded (what
  a copy of the record needs: a transaction's commit), cheaper than ``decode_record``.

Message ids (offsetMsgId) and the properties codec are part of the format too, and are here.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import NamedTuple

from rokka.core.model import BORNHOST_V6_FLAG, STOREHOST_V6_FLAG, HostPort
from rokka.core.storage.layout import (
    BLANK_MAGIC,
    FIELDS,
    HEADER_V4,
    HEADERS,
    INT32,
    MAX_PROPERTIES_BYTES,
    MAX_TOPIC_BYTES,
    MESSAGE_MAGIC,
    OFF_BORN_TIMESTAMP,
    OFF_SYSFLAG,
    PROPS_LEN,
    SIZE_MAGIC,
    TOPIC_LEN,
    Buffer,
    RecordError,
    body_crc,
    decode_offset_msg_id,
    decode_properties,
    decode_record,
    encode_offset_msg_id,
    encode_properties,
    encode_record,
    host_str,
    iter_records,
    msg_id_prefix,
    properties_of,
    topic_of,
)

__all__ = [
    "BLANK_MAGIC", "Buffer", "FIELDS", "HEADERS", "HEADER_FIELDS", "HEADER_V4", "INT32", "MAX_PROPERTIES_BYTES",
    "MAX_TOPIC_BYTES", "MESSAGE_MAGIC", "OFF_BORN_TIMESTAMP", "OFF_SYSFLAG", "PROPS_LEN", "RecordError",
    "RecordHeader", "RecordView", "SIZE_MAGIC", "TAIL_SIZE", "TOPIC_LEN", "body_crc", "decode_header",
    "decode_offset_msg_id", "decode_properties", "decode_record", "encode_offset_msg_id", "encode_properties",
    "encode_record", "header_reader", "header_size", "host_str", "iter_records", "msg_id_prefix", "properties_of",
    "record_view", "topic_of",
]

_V6_BITS = BORNHOST_V6_FLAG | STOREHOST_V6_FLAG  # the sysflag bits that choose the host forms


def _header_codes(sysflag: int) -> list[tuple[str, str]]:
    """(name, struct code) of each fixed-header value, in layout order, for one host form."""
    out: list[tuple[str, str]] = []
    for f in FIELDS:
        if f.fmt == "host":
            out.append((f.name, "16s" if sysflag & f.v6_flag else "4s"))
            out.append((f.name.replace("_host", "_port"), "i"))
        elif f.fmt == "blob":
            out.append((f"{f.name}_length", f.len_fmt))
            break
        else:
            out.append((f.name, f.fmt))
    return out


#: The fixed header's values by name, in layout order (what ``HEADER_V4.unpack_from`` returns).
HEADER_FIELDS: tuple[str, ...] = tuple(name for name, _ in _header_codes(0))
#: TOPICLENGTH + PROPERTIESLENGTH: the fixed bytes between a body and the end of a record, besides
#: the topic and the properties themselves.
TAIL_SIZE = TOPIC_LEN.size + PROPS_LEN.size

assert struct.calcsize(">" + "".join(code for _, code in _header_codes(0))) == HEADER_V4.size


class RecordHeader(NamedTuple):
    """The 17 fixed-header values of one record, by name (hosts as raw address bytes)."""

    total_size: int
    magic: int
    body_crc: int
    queue_id: int
    flag: int
    queue_offset: int
    commitlog_offset: int
    sysflag: int
    born_timestamp: int
    born_host: bytes
    born_port: int
    store_timestamp: int
    store_host: bytes
    store_port: int
    reconsume_times: int
    prepared_transaction_offset: int
    body_length: int


assert RecordHeader._fields == HEADER_FIELDS, "RecordHeader must follow the layout"
_SYSFLAG = struct.Struct(">i")


def decode_header(buf: Buffer, offset: int = 0) -> RecordHeader:
    """The fixed header of the record at ``buf[offset:]`` by name (IPv4 or IPv6 hosts per sysflag).

    Checks nothing but that the bytes are there (``check_record`` in the store validates).
    Raises:
        RecordError: the buffer ends inside the header.
    """
    try:
        sysflag = _SYSFLAG.unpack_from(buf, offset + OFF_SYSFLAG)[0]
        return RecordHeader._make(HEADERS[sysflag & _V6_BITS].unpack_from(buf, offset))
    except struct.error as exc:
        raise RecordError(f"truncated record header at {offset}: {exc}") from exc


def header_reader(*names: str, sysflag: int = 0) -> Callable[[Buffer, int], tuple[int | bytes, ...]]:
    """``unpack_from(buf, offset)`` returning only ``names`` (in layout order) of a header whose host
    form is ``sysflag``'s (IPv4 hosts by default: check the sysflag's 0x30 bits before trusting it).

    The struct skips the other fields as pad bytes and covers the whole header, so the body starts
    ``header_size(sysflag)`` bytes after the record.

    Raises:
        ValueError: an unknown name, or names out of layout order.
    """
    codes = _header_codes(sysflag)
    position = {name: i for i, (name, _) in enumerate(codes)}
    unknown = [n for n in names if n not in position]
    if unknown:
        raise ValueError(f"not header fields: {unknown}; the fields are {HEADER_FIELDS}")
    if [position[n] for n in names] != sorted(position[n] for n in names) or len(set(names)) != len(names):
        raise ValueError(f"header fields must be named once each, in layout order: {HEADER_FIELDS}")
    wanted = set(names)
    fmt = ">" + "".join(code if name in wanted else f"{struct.calcsize('>' + code)}x" for name, code in codes)
    return struct.Struct(fmt).unpack_from


def header_size(sysflag: int = 0) -> int:
    """Bytes of the fixed header (everything before BODY) for ``sysflag``'s host form."""
    return HEADERS[sysflag & _V6_BITS].size


class RecordView(NamedTuple):
    """A record's fields with its properties still encoded: what a copy of it needs, read without building
    a ``StoredMessage`` or a properties dict (``record_view``)."""

    topic: str
    queue_id: int
    body: bytes
    properties: bytes
    flag: int
    sysflag: int
    born_timestamp: int
    born_host: HostPort
    store_timestamp: int
    reconsume_times: int
    queue_offset: int
    commitlog_offset: int


def record_view(buf: bytes) -> RecordView:
    """The record ``buf`` holds (one whole record, as ``read_record`` returns it) as a ``RecordView``.

    Raises:
        RecordError: the bytes are not a well-formed record.
    """
    try:
        sysflag = INT32.unpack_from(buf, OFF_SYSFLAG)[0]
        header = HEADERS[sysflag & _V6_BITS]
        (total, _, _, qid, flag, qoff, phys, sysflag, born_ts, born_ip, born_port,
         store_ts, _, _, reconsume, _, body_len) = header.unpack_from(buf)
        pos = header.size + body_len
        tlen = buf[pos]
        ps = pos + 3 + tlen
        plen = PROPS_LEN.unpack_from(buf, ps - 2)[0]
        topic = buf[pos + 1:pos + 1 + tlen].decode("utf-8")
    except (struct.error, IndexError, UnicodeDecodeError) as exc:
        raise RecordError(f"malformed record: {exc}") from exc
    if ps + plen != total or total != len(buf) or plen < 0:
        raise RecordError("malformed record: sizes do not add up")
    return RecordView(topic, qid, buf[header.size:header.size + body_len], buf[ps:ps + plen], flag, sysflag, born_ts,
                      (host_str(born_ip), born_port), store_ts, reconsume, qoff, phys)
