"""Bounded zlib inflation of RocketMQ bodies (sysFlag COMPRESSED): no decompression bombs.

Theory of operation
-------------------
A RocketMQ producer compresses a body with zlib and sets ``COMPRESSED_FLAG``; the broker stores it
as sent and only the readers inflate it (RocketMQ consumers in the client, Kafka consumers in
rokka's Fetch).  RocketMQ checks only the compressed size against ``maxMessageSize``, so a 1 MiB
body could inflate to 1 GiB in every reader.  rokka refuses such a body at send time
(``compressed_body_error``: MESSAGE_ILLEGAL with that remark), and every inflation in the broker
goes through ``inflate_zlib``, which stops one byte past its limit (``zlib.decompressobj`` with
``max_length``), so nothing much larger than the limit is ever allocated -- also for bodies stored
before the check existed.  Data too small to reach the limit even at deflate's highest ratio
(1032:1) is inflated with one plain call (the common case; the bounded path costs ~1 us more).
A body that does not inflate at all (corrupt zlib) is left to the readers, as RocketMQ does.
"""

from __future__ import annotations

import zlib

import structlog
from rokka.core.model import COMPRESSED_FLAG

__all__ = ["compressed_body_error", "inflate_zlib"]

log = structlog.get_logger(__name__)
#: Deflate inflates at most 1032:1 (a 258-byte match per ~2 bits); with margin.  Data this many times
#: smaller than the limit is inflated in one call.
_DEFLATE_MAX_RATIO = 1100


def inflate_zlib(data: bytes | memoryview, limit: int) -> bytes | None:
    """``data`` inflated (zlib, or gzip/raw deflate as zlib's auto-detection reads them), or None
    when it would inflate past ``limit`` bytes.

    Raises:
        zlib.error: the data is not a complete zlib stream.
    """
    if len(data) * _DEFLATE_MAX_RATIO <= limit:     # cannot inflate past the limit: the plain call
        return zlib.decompress(data)
    d = zlib.decompressobj()
    out = d.decompress(data, limit + 1)
    if len(out) > limit:
        return None
    if not d.eof:
        raise zlib.error("incomplete or truncated zlib stream")
    return out


def compressed_body_error(body: bytes | None, sysflag: int, limit: int) -> str | None:
    """The refusal remark for a send whose COMPRESSED body inflates past ``limit`` (maxMessageSize),
    logged once; None when the body is not compressed, fits, or does not inflate at all."""
    if not body or not sysflag & COMPRESSED_FLAG or len(body) * _DEFLATE_MAX_RATIO <= limit:
        return None
    if not _inflates_past(body, limit):
        return None
    log.warning("rocketmq.send_inflate_limit", compressed=len(body), limit=limit)
    return f"the compressed body inflates past maxMessageSize {limit}"


def _inflates_past(data: bytes, limit: int, chunk: int = 64 * 1024) -> bool:
    """Whether ``data`` inflates to more than ``limit`` bytes, counted ``chunk`` by ``chunk`` (no
    output kept; the input fed in 16 KiB pieces); False for data that is not zlib at all."""
    d = zlib.decompressobj()
    size = 0
    view = memoryview(data)
    try:
        for start in range(0, len(data), 16 * 1024):
            rest: bytes | memoryview = view[start:start + 16 * 1024]
            while rest and not d.eof:
                size += len(d.decompress(rest, chunk))
                if size > limit:
                    return True
                rest = d.unconsumed_tail
            if d.eof:
                break
    except zlib.error:
        return False
    return False
