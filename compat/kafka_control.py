"""Kafka control entries in the RocketMQ store, and hiding them from RocketMQ readers.

Theory of operation
-------------------
When a Kafka transaction ends, its coordinator (``rokka.gateway.kafka.txn.coordinator``) writes, as
Kafka does, one *marker* per partition of the transaction (``KAFKA_CTRL`` = ``C:<pid>:<epoch>``
commit, ``A:<pid>:<epoch>`` abort) and, for an abort, one empty *aborted-record placeholder*
(``X:<pid>:<epoch>``) per record it drops, so queue offsets advance exactly as Kafka's do.  They
are ordinary CommitLog records carrying the ``KAFKA_CTRL`` property (``control_message`` builds
one).  The Kafka gateway shows them as control batches (``rokka.compat.kafka_records``);
RocketMQ readers never see them: ``without_control`` drops them from a PULL body and
``visible_result`` from a store read (``is_control_record`` for one record), the pull answering as
for filtered-out records.  Both look for the property's name in the bytes first, so a read
without any control entry costs one substring search.
"""

from __future__ import annotations

import dataclasses
import struct

from rokka.core.model import TRANSACTION_COMMIT_TYPE, TRANSACTION_MASK, Message, StoredMessage
from rokka.core.record import properties_of
from rokka.core.storage import GetResult, GetStatus

PROP_KAFKA_CTRL = "KAFKA_CTRL"  # "<kind>:<producer id>:<epoch>" on Kafka control entries (module doc)
CTRL_COMMIT, CTRL_ABORT, CTRL_ABORTED = "C", "A", "X"
_CTRL_NEEDLE = PROP_KAFKA_CTRL.encode("ascii") + b"\x01"
_RECORD_SIZE = struct.Struct(">i")


def control_message(topic: str, queue_id: int, kind: str, producer_id: int, epoch: int, born_ms: int,
                    born_host: tuple[str, int], *, half: StoredMessage | None = None) -> Message:
    """A Kafka control entry for queue ``queue_id`` of ``topic`` (module doc): a marker, or (``half``
    given) the placeholder of an aborted record, which points at its half as a commit does."""
    props = {PROP_KAFKA_CTRL: f"{kind}:{producer_id}:{epoch}"}
    if half is None:
        return Message(topic, queue_id, b"", props, born_timestamp=born_ms, born_host=born_host)
    sysflag = (half.sysflag & ~TRANSACTION_MASK) | TRANSACTION_COMMIT_TYPE
    return Message(topic, queue_id, b"", props, 0, sysflag, half.born_timestamp, half.born_host, 0,
                   half.commitlog_offset)


def parse_control(value: str) -> tuple[str, int, int] | None:
    """(kind, producer id, epoch) of a ``KAFKA_CTRL`` value, or None if malformed."""
    kind, _, rest = value.partition(":")
    pid, _, epoch = rest.partition(":")
    try:
        return (kind, int(pid), int(epoch)) if kind in (CTRL_COMMIT, CTRL_ABORT, CTRL_ABORTED) else None
    except ValueError:
        return None


def is_control_record(raw: bytes | memoryview, offset: int = 0) -> bool:
    """True if the CommitLog record at ``raw[offset:]`` is a Kafka control entry."""
    return PROP_KAFKA_CTRL in properties_of(raw, offset)


def without_control(body: bytes | memoryview) -> tuple[bytes | memoryview, int]:
    """``body`` (CommitLog records back to back, a PULL body) less its Kafka control entries, and
    how many were dropped.  A body without the property's name anywhere is returned as is."""
    if _CTRL_NEEDLE not in body:
        return body, 0
    kept: list[bytes | memoryview] = []
    pos = dropped = 0
    view = memoryview(body)
    while pos + 4 <= len(view):
        size = _RECORD_SIZE.unpack_from(view, pos)[0]
        if size <= 0:
            break
        if is_control_record(view, pos):
            dropped += 1
        else:
            kept.append(view[pos:pos + size])
        pos += size
    if not dropped:
        return body, 0
    return b"".join(kept), dropped


def visible_result(result: GetResult) -> GetResult:
    """``result`` (``get_messages``) less its Kafka control entries: NO_MATCHED_MESSAGE when only
    they were found (the reader moves on to ``next_begin_offset``, as past filtered-out records)."""
    if not result.records or not any(_CTRL_NEEDLE in r for r in result.records):
        return result
    keep = [(r, q) for r, q in zip(result.records, result.queue_offsets, strict=True) if not is_control_record(r)]
    if len(keep) == len(result.records):
        return result
    return dataclasses.replace(result, status=GetStatus.FOUND if keep else GetStatus.NO_MATCHED_MESSAGE,
                               records=tuple(r for r, _ in keep), queue_offsets=tuple(q for _, q in keep))
