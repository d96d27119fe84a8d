"""Bounded zlib inflation of RocketMQ COMPRESSED bodies (issue 19 item 2)."""

from __future__ import annotations

import tracemalloc
import zlib

import pytest
from rokka.core.inflate import compressed_body_error, inflate_zlib
from rokka.core.model import COMPRESSED_FLAG

MiB = 1 << 20


def test_inflate_stops_one_byte_past_the_limit_without_allocating_the_bomb() -> None:
    bomb = zlib.compress(bytes(256 * MiB), 9)
    tracemalloc.start()
    try:
        assert inflate_zlib(bomb, MiB) is None
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 4 * MiB
    assert inflate_zlib(bomb, 256 * MiB) == bytes(256 * MiB)


def test_small_data_exact_limits_and_corrupt_streams() -> None:
    text = b"hello " * 1000
    packed = zlib.compress(text)
    assert inflate_zlib(packed, len(text)) == text                  # the one-call path
    assert inflate_zlib(packed, 100) is None                        # the bounded path
    assert inflate_zlib(zlib.compress(bytes(10_000)), 9_999) is None
    for bad in (b"not zlib", packed[:-3]):
        with pytest.raises(zlib.error):
            inflate_zlib(bad, MiB)


def test_compressed_body_error_only_for_compressed_bodies_past_the_limit() -> None:
    bomb = zlib.compress(bytes(8 * MiB), 9)
    assert "maxMessageSize" in (compressed_body_error(bomb, COMPRESSED_FLAG, MiB) or "")
    assert compressed_body_error(bomb, 0, MiB) is None                              # not flagged
    assert compressed_body_error(zlib.compress(b"x" * 100), COMPRESSED_FLAG, MiB) is None
    assert compressed_body_error(b"garbage", COMPRESSED_FLAG, MiB) is None           # left to readers
    assert compressed_body_error(b"", COMPRESSED_FLAG, MiB) is None
