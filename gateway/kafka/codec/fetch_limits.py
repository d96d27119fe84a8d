"""Cutting Fetch responses to their byte limits at record boundaries (KIP-74).

Theory of operation
-------------------
Fetch builds uncompressed v2 batches; when they exceed ``max_bytes`` / ``partition_max_bytes``,
``truncate_batches`` keeps the longest prefix that fits, cutting the batch that crosses the limit
after its last whole record and rewriting that batch's header (count, last offset delta, max
timestamp) with ``records.batch_header``.  The first partition of a response may exceed the limit
by its first record (``min_one``), as Kafka lets it.  The batch format itself is ``records``'.
"""

from __future__ import annotations

from rokka.gateway.kafka.codec.compression import NONE
from rokka.gateway.kafka.codec.primitives import DecodeError
from rokka.gateway.kafka.codec.records import BATCH_HEADER_SIZE, RecordBatch, batch_header, split_batches, varint_at

__all__ = ["truncate_batches"]


def truncate_batches(data: bytes, max_bytes: int, *, min_one: bool) -> tuple[bytes, int]:
    """The longest prefix of ``data`` (uncompressed v2 batches, as Fetch builds them) within
    ``max_bytes``, cut at a record boundary (the batch that crosses the limit loses its tail, its
    header rewritten), and how many records it holds.  ``min_one``: keep at least the first record
    even if it alone is larger (KIP-74: the first partition of a Fetch response may exceed the
    limits by one record; Kafka returns its whole first batch).

    Raises:
        DecodeError: ``data`` is not a sequence of whole uncompressed batches.
    """
    batches, trailing = split_batches(data)
    if trailing:
        raise DecodeError(f"{trailing} bytes after the last whole batch")
    pos = count = 0
    for batch in batches:
        h = batch.header
        if pos + h.size <= max_bytes:
            pos += h.size
            count += h.record_count
            continue
        if h.compression != NONE:
            raise DecodeError("cannot cut a compressed batch")
        cut = _cut_batch(batch, max_bytes - pos, min_one and pos == 0)
        if cut is not None:
            return data[:pos] + cut[0], count + cut[1]
        break
    if pos == 0 and min_one and batches:      # a first batch we could not cut: the whole of it
        return data[:batches[0].header.size], batches[0].header.record_count
    return data[:pos], count


def _cut_batch(batch: RecordBatch, room: int, min_one: bool) -> tuple[bytes, int] | None:
    """The batch's first records that fit in ``room`` bytes with their header (at least one if
    ``min_one``), re-headed; None when not even one fits."""
    h = batch.header
    payload = batch.raw[BATCH_HEADER_SIZE:]
    budget = room - BATCH_HEADER_SIZE
    pos = kept = 0
    max_ts_delta = last_off = 0
    try:
        for _ in range(h.record_count):
            length, start = varint_at(payload, pos, 5)
            end = start + length
            if length < 3 or end > len(payload):
                raise DecodeError(f"record length {length} invalid")
            if end > budget and (kept or not min_one):
                break
            ts, q = varint_at(payload, start + 1, 10)     # after the attributes byte
            last_off, _ = varint_at(payload, q, 5)
            max_ts_delta = max(max_ts_delta, ts) if kept else ts
            pos, kept = end, kept + 1
    except IndexError:
        raise DecodeError("truncated record") from None
    if not kept:
        return None
    body = payload[:pos]
    head = batch_header(body, base_offset=h.base_offset, last_offset_delta=last_off, count=kept,
                        base_timestamp=h.base_timestamp, max_timestamp=h.base_timestamp + max_ts_delta,
                        partition_leader_epoch=h.partition_leader_epoch, attributes=h.attributes)
    return head + body, kept
