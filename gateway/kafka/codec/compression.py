"""Kafka record-batch compression: the codec ids of the batch attributes and their byte formats.

Theory of operation
-------------------
Attribute bits 0-2 of a v2 batch (and of a legacy wrapper message) name the codec of the records
blob: 0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd.  All of them go through ``cramjam`` (one maintained
library with every codec).

Snappy: Java and kafka-python write the xerial framing (magic
``82 53 4E 41 50 50 59 00``, two int32 versions, then int32-length raw blocks);
librdkafka writes raw snappy.  We read both and write xerial, which every
client reads.  LZ4 is the LZ4 *frame* format (independent blocks).
"""

from __future__ import annotations

import struct

import cramjam
from rokka.gateway.kafka.codec.primitives import DecodeError, EncodeError, Reader

__all__ = ["NONE", "GZIP", "SNAPPY", "LZ4", "ZSTD", "compress", "decompress"]

NONE, GZIP, SNAPPY, LZ4, ZSTD = 0, 1, 2, 3, 4
_XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_BLOCK = 32 * 1024


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


def decompress(codec: int, data: bytes) -> bytes:
    """Raises DecodeError for an unknown codec or corrupt data."""
    try:
        if codec == GZIP:
            return bytes(cramjam.gzip.decompress(data))
        if codec == SNAPPY:
            return _snappy_decompress(data)
        if codec == LZ4:
            return bytes(cramjam.lz4.decompress(data))
        if codec == ZSTD:
            return bytes(cramjam.zstd.decompress(data))
        if codec == NONE:
            return data
    except cramjam.DecompressionError as e:
        raise DecodeError(f"cannot decompress (codec {codec}): {e}") from None
    raise DecodeError(f"unknown compression codec {codec}")


def _xerial_compress(data: bytes) -> bytes:
    out = bytearray(_XERIAL_MAGIC + struct.pack(">ii", 1, 1))
    for i in range(0, max(len(data), 1), _XERIAL_BLOCK):
        block = bytes(cramjam.snappy.compress_raw(data[i : i + _XERIAL_BLOCK]))
        out += struct.pack(">i", len(block)) + block
    return bytes(out)


def _snappy_decompress(data: bytes) -> bytes:
    if not data.startswith(_XERIAL_MAGIC):
        return bytes(cramjam.snappy.decompress_raw(data))
    r = Reader(data, 16)
    out = bytearray()
    while r.remaining():
        out += cramjam.snappy.decompress_raw(r.read_raw(r.int32()))
    return bytes(out)
