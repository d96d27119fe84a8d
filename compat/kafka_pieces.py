"""Runs of stored records -> Kafka record payloads: the Fetch hot path, for every record shape.

Theory of operation
-------------------
A run (``MessageStore.get_runs``) is walked by the Kafka codec's walker, handed in by the gateway
(``rokka.gateway.kafka.codec.stored_records.walk``: C when built, else its Python twin): the
leading records it can map become one Kafka records payload (``PlainPiece``: keys, null values and
headers included).  This module tells it what the records mean -- the record layout
(``_FETCH_LAYOUT``, from ``core.storage.layout``), the mapping (``kafka_records.FETCH_TABLE``: key,
KAFKA_HEADERS JSON, a RocketMQ producer's properties as headers, null values, the envelope) and the
properties blobs known to be *plain* (``_PLAIN_PROPS``: "no key, no headers, a value, CreateTime",
bounded to ``_MAX_PLAIN_PROPS``, compared byte for byte).  The first record the walker leaves (a
compressed body, LogAppendTime, a Kafka control entry, a non-canonical blob) is mapped here by
``kafka_records.kafka_row`` and the walk resumes after it.  What a record *means* is defined once,
in ``kafka_records``; the walker only reads it faster (tests compare both with it).  compat writes
no Kafka wire bytes.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any, NamedTuple

from rokka.compat.kafka_records import (
    DEFAULT_INFLATE_LIMIT,
    FETCH_TABLE,
    PROP_KAFKA_HEADERS,
    KafkaRow,
    kafka_row,
    props_view,
)
from rokka.core import record as layout
from rokka.core.model import BORNHOST_V6_FLAG, COMPRESSED_FLAG, STOREHOST_V6_FLAG
from rokka.core.storage import RecordRun

__all__ = ["PlainPiece", "Walker", "kafka_pieces"]

_V6_BITS = BORNHOST_V6_FLAG | STOREHOST_V6_FLAG
_FETCH_LAYOUT = (layout.MESSAGE_MAGIC, layout.OFF_SYSFLAG, layout.OFF_BORN_TIMESTAMP,
                 tuple(layout.HEADERS[bits].size for bits in (0, BORNHOST_V6_FLAG, STOREHOST_V6_FLAG,
                                                                _V6_BITS)), COMPRESSED_FLAG)
assert BORNHOST_V6_FLAG >> 4 == 1 and STOREHOST_V6_FLAG >> 4 == 2  # the walker picks HEADERS by sysflag >> 4
_MAX_PLAIN_PROPS = 32
_PLAIN_PROPS: tuple[bytes, ...] = (layout.encode_properties({PROP_KAFKA_HEADERS: "[]"}),)   # Kafka's plain record
#: The codec's walker: (data, start, count, plain blobs, layout, mapping) -> (payload, records,
#: bytes read, first timestamp, max timestamp); see ``rokka.gateway.kafka.codec.stored_records``.
Walker = Callable[[Any, int, int, tuple[bytes, ...], Any, Any], tuple[bytes, int, int, int, int]]


class PlainPiece(NamedTuple):
    """Consecutive records mapped by the walker as a Kafka v2 records payload (offset deltas from 0)."""

    offset: int             # of the first record
    payload: bytes
    count: int
    first_timestamp: int
    max_timestamp: int


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


def kafka_pieces(run: RecordRun, *, walker: Walker | None, inflate_limit: int = DEFAULT_INFLATE_LIMIT,
                 max_bytes: int | None = None) -> list[PlainPiece | list[KafkaRow]]:
    """The Kafka view of a run, in order: ``PlainPiece`` s for what ``walker`` maps, ``kafka_rows``
    lists for the other records (every record when ``walker`` is None).  Raises RecordError for
    malformed record bytes (as ``kafka_rows``).  ``run.data`` may be a memoryview
    (``get_runs(views=True)``): nothing returned refers to it.  ``max_bytes``: stop (with a prefix
    of the run) once the pieces hold that many bytes of records."""
    out: list[PlainPiece | list[KafkaRow]] = []
    left = -1 if max_bytes is None else max(max_bytes, 1)
    data, sizes = run.data, run.sizes
    i, pos, n = 0, 0, len(sizes)
    while i < n:
        payload, count, used, first_ts, max_ts = (walker(data, pos, n - i, _PLAIN_PROPS, _FETCH_LAYOUT, FETCH_TABLE)
                                                  if walker is not None else (b"", 0, 0, 0, 0))
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
        if walker is not None and _learn_plain(raw):
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
