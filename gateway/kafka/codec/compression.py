"""Kafka record-batch compression: the codec ids of the batch attributes and their byte formats.

Theory of operation
-------------------
Attribute bits 0-2 of a v2 batch (and of a legacy wrapper message) name the codec of the records
blob: 0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd.  Compression goes through ``cramjam`` (one maintained
library with every codec).

Snappy: Java and kafka-python write the xerial framing (magic
``82 53 4E 41 50 50 59 00``, two int32 versions, then int32-length raw blocks);
librdkafka writes raw snappy.  We read both and write xerial, which every
client reads.  LZ4 is the LZ4 *frame* format (independent blocks).

Bounded inflation (decompression bombs): ``decompress(codec, data, limit)`` never produces, nor
allocates, much more than ``limit`` bytes; past it, it raises ``InflateLimitError`` (a
``DecodeError``: Produce answers RECORD_TOO_LARGE).  Each codec is read with an output bound:
gzip through ``zlib.decompressobj`` with ``max_length`` (member after member), raw snappy blocks
after checking the length their preamble declares (the decoder refuses output that differs from
it), lz4 frames through ``lz4.frame.LZ4FrameDecompressor`` with ``max_length``, zstd through a
``zstandard`` stream reader read up to ``limit + 1`` bytes (across frames).
"""

from __future__ import annotations

import struct
import zlib

import cramjam
import lz4.frame
import zstandard
from rokka.gateway.kafka.codec.primitives import DecodeError, EncodeError, Reader

__all__ = ["NONE", "GZIP", "SNAPPY", "LZ4", "ZSTD", "DEFAULT_INFLATE_LIMIT", "InflateLimitError",
           "compress", "decompress"]

NONE, GZIP, SNAPPY, LZ4, ZSTD = 0, 1, 2, 3, 4
_XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_BLOCK = 32 * 1024
#: The bound when the caller gives none: rokka's default maxMessageSize.
DEFAULT_INFLATE_LIMIT = 4 * 1024 * 1024
_ZSTD = zstandard.ZstdDecompressor()


class InflateLimitError(DecodeError):
    """The data inflates past the allowed size (a decompression bomb, or a batch over the limit)."""

    def __init__(self, codec: int, limit: int) -> None:
        super().__init__(f"records inflate past {limit} bytes (codec {codec})")
        self.codec = codec
        self.limit = limit


def compress(codec: int, data: bytes) -> bytes:
    if codec == GZIP:
        return bytes(cramjam.gzip.compress(data))
    if codec == SNAPPY:
        return _xerial_compress(data)
    if codec == LZ4:
        c = cramjam.lz4.Compressor(content_checksum=False, block_linked=False)
        c.compress(data)
        return bytes(c.finish())
    if codec == ZSTD:
        return bytes(cramjam.zstd.compress(data))
    if codec == NONE:
        return data
    raise EncodeError(f"unknown compression codec {codec}")


def decompress(codec: int, data: bytes, limit: int = DEFAULT_INFLATE_LIMIT) -> bytes:
    """``data`` inflated, at most ``limit`` bytes of it.

    Raises:
        InflateLimitError: it would inflate past ``limit`` (nothing much past it was allocated).
        DecodeError: an unknown codec or corrupt data.
    """
    if codec == NONE:
        return data
    try:
        if codec == GZIP:
            out = _gzip(data, limit)
        elif codec == SNAPPY:
            out = _snappy_decompress(data, limit)
        elif codec == LZ4:
            out = _lz4(data, limit)
        elif codec == ZSTD:
            out = _zstd(data, limit)
        else:
            raise DecodeError(f"unknown compression codec {codec}")
    except (cramjam.DecompressionError, zlib.error, RuntimeError, zstandard.ZstdError) as e:
        raise DecodeError(f"cannot decompress (codec {codec}): {e}") from None
    if out is None:
        raise InflateLimitError(codec, limit)
    return out


def _gzip(data: bytes, limit: int) -> bytes | None:
    """Every gzip member of ``data`` (Java's GZIPInputStream reads concatenated members too).

    Fast path: the trailer's ISIZE (the last member's size mod 2**32, untrusted) sizes an output
    buffer of at most ``limit`` bytes for cramjam, which refuses to write past it; anything else
    (several members, a lying trailer, corrupt data) takes the bounded zlib path, which decides."""
    isize = int.from_bytes(data[-4:], "little") if len(data) >= 18 else limit + 1
    if isize <= limit:
        buf = bytearray(isize)
        try:
            if cramjam.gzip.decompress_into(data, buf) == isize:
                return bytes(buf)
        except cramjam.DecompressionError:
            pass
    out = bytearray()
    rest = data
    while rest:
        d = zlib.decompressobj(wbits=31)
        out += d.decompress(rest, limit + 1 - len(out))
        if len(out) > limit or (d.unconsumed_tail and not d.eof):
            return None
        if not d.eof:
            raise DecodeError("truncated gzip data")
        rest = d.unused_data
    return bytes(out)


def _lz4(data: bytes, limit: int) -> bytes | None:
    out = bytearray()
    rest = data
    while rest:
        d = lz4.frame.LZ4FrameDecompressor()
        out += d.decompress(rest, max_length=limit + 1 - len(out))
        if len(out) > limit or not d.needs_input:
            return None
        if not d.eof:
            raise DecodeError("truncated lz4 frame")
        rest = d.unused_data
    return bytes(out)


def _zstd(data: bytes, limit: int) -> bytes | None:
    parts: list[bytes] = []
    got = 0
    with _ZSTD.stream_reader(data, read_across_frames=True) as reader:
        while got <= limit:
            chunk = reader.read(limit + 1 - got)
            if not chunk:
                break
            parts.append(chunk)
            got += len(chunk)
    return b"".join(parts) if got <= limit else None


def _xerial_compress(data: bytes) -> bytes:
    out = bytearray(_XERIAL_MAGIC + struct.pack(">ii", 1, 1))
    for i in range(0, max(len(data), 1), _XERIAL_BLOCK):
        block = bytes(cramjam.snappy.compress_raw(data[i : i + _XERIAL_BLOCK]))
        out += struct.pack(">i", len(block)) + block
    return bytes(out)


def _raw_snappy(block: bytes | memoryview, room: int) -> bytes | None:
    """One raw snappy block, or None if its declared length is over ``room`` (checked before any
    output is allocated; the decoder refuses a block whose output differs from that length)."""
    if cramjam.snappy.decompress_raw_len(block) > room:
        return None
    return bytes(cramjam.snappy.decompress_raw(block))


def _snappy_decompress(data: bytes, limit: int) -> bytes | None:
    if not data.startswith(_XERIAL_MAGIC):
        return _raw_snappy(data, limit)
    r = Reader(data, 16)
    out = bytearray()
    while r.remaining():
        block = _raw_snappy(r.read_raw(r.int32()), limit - len(out))
        if block is None:
            return None
        out += block
    return bytes(out)
