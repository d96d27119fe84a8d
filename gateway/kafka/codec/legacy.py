"""Legacy Kafka message sets (magic 0 and 1), decoded for Produce v0-v2 from old producers.

Theory of operation
-------------------
Layout (kafka-wire.md §2.5): a sequence of entries, each int64 offset, int32 size, then the
message: uint32 CRC-32 (zlib) over the rest, int8 magic, int8 attributes (bits 0-2 codec, bit 3
timestamp type on magic 1), int64 timestamp (magic 1 only), key and value as int32-length bytes
(-1 = null).  A compressed "wrapper" message's value is itself a message set (one level deep).
rokka only decodes them: they become one stored message per inner message; Fetch always answers
with v2 batches.  Wrapper values inflate within one budget for the whole set (``limit``, the
message size limit): past it ``InflateLimitError`` (a decompression bomb).
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass

from rokka.gateway.kafka.codec.primitives import DecodeError, Reader
from rokka.gateway.kafka.codec.records import COMPRESSION_MASK, DEFAULT_INFLATE_LIMIT, NONE, decompress


@dataclass(frozen=True)
class LegacyMessage:
    """One inner message of a legacy set; ``offset`` as written by the producer."""

    offset: int
    magic: int
    attributes: int
    timestamp: int  # -1 for magic 0
    key: bytes | None
    value: bytes | None


def decode_legacy_message_set(data: bytes, *, limit: int = DEFAULT_INFLATE_LIMIT,
                               _depth: int = 0) -> list[LegacyMessage]:
    """Flatten a magic 0/1 message set, decompressing wrapper messages.

    Inner offsets of a v1 wrapper are relative (0..n-1); they are returned as-is
    (producers write 0..n-1 anyway; the broker assigns real offsets).
    Raises:
        InflateLimitError: the wrapper values together inflate past ``limit`` bytes.
        DecodeError: bad CRC, truncated message, unknown codec or nesting > 1.
    """
    inflated = 0
    r = Reader(data)
    out: list[LegacyMessage] = []
    while r.remaining() >= 12:
        offset, size = r.int64(), r.int32()
        if size < 14 or size > r.remaining():
            if size > r.remaining():
                break  # trailing partial message
            raise DecodeError(f"legacy message size {size} too small")
        msg = Reader(r.read_raw(size))
        crc = msg.uint32()
        if zlib.crc32(msg.buf[4:]) != crc:
            raise DecodeError("legacy message CRC mismatch")
        magic, attrs = msg.int8(), msg.int8()
        if magic not in (0, 1):
            raise DecodeError(f"legacy message magic {magic}")
        ts = msg.int64() if magic == 1 else -1
        key, value = msg.bytes_(False), msg.bytes_(False)
        codec = attrs & COMPRESSION_MASK
        if codec == NONE:
            out.append(LegacyMessage(offset, magic, attrs, ts, key, value))
            continue
        if _depth or value is None:
            raise DecodeError("nested or empty compressed legacy message")
        inner = decompress(codec, value, limit - inflated)
        inflated += len(inner)
        out.extend(decode_legacy_message_set(inner, limit=limit, _depth=1))
    return out
