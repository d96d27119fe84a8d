"""Fetch (long poll), ListOffsets, OffsetForLeaderEpoch, DeleteRecords.

Theory of operation
-------------------
Offsets of a partition (kafka-wire.md §7.1) on one node: log start =
ConsumeQueue min offset, HW = LEO = LSO = ConsumeQueue max offset: a Kafka
transaction's records enter their queue only when it ends, followed by its
COMMIT/ABORT marker (``rokka.gateway.kafka.txn.coordinator``), so no transaction is ever open
in a queue.  Markers and the placeholders of aborted records are sent as
control batches at their offsets (``common.build_batches``); consumers skip
them and move their position past them, as in Kafka.  Aborted data are never
sent (to read_uncommitted consumers either), so there is never an aborted
transaction to list (``aborted_transactions`` null).

Fetch: read every requested partition in order, within partition_max_bytes
and the response max_bytes budget, as Kafka does (KIP-74): only the first
partition that returns data may exceed them, by its first record; every
later partition gets only whole records that fit what is left.  What the
store read past the limit (it reads stored bytes, and a RocketMQ body it
inflates may be much larger than stored) is cut at a record boundary
(``fetch_limits.truncate_batches``).  An errored partition carries an empty record
set, never null (Kafka's FetchResponse; librdkafka rejects a null one and
would refetch forever instead of applying ``auto.offset.reset``).  Records are re-encoded as
uncompressed v2 batches starting exactly at the fetch offset.  Every
requested partition appears in the reply; session_id is always 0.  Once the
reply is sent, partitions that returned records and have more are read ahead
for the connection's next Fetch (``readahead``).

Fewer than min_bytes and max_wait_ms > 0: the request parks, as Kafka's
delayed fetch does (``DelayedFetch``), until the requested partitions hold
min_bytes (each counted up to its partition_max_bytes, the whole up to
max_bytes) or max_wait_ms is over, then answers with what there is; an
error found on a read answers at once.  It subscribes to arrivals on the
requested partitions; on a wake it estimates what a read would return (the
bytes already read, plus the records that arrived since, at the bytes per
record of that read) and reads again only when the estimate reaches
min_bytes, so a consumer with a large fetch.min.bytes behind a trickle of
small records is not re-read at every arrival.  Records that arrived but
were not read are read before the answer at max_wait_ms.

A view (``rokka.compat.views``) reads its source topic through its filter: the
batches carry only matching records (offset gaps), and a range that was
scanned past the last returned record ends with a control record
(``skip_marker``) so the consumer's position moves past the non-matching
records instead of re-fetching them forever.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import trio
from rokka.compat.kafka_records import record_from_message
from rokka.core.record import decode_record
from rokka.gateway.kafka.codec import Struct
from rokka.gateway.kafka.codec.fetch_limits import truncate_batches
from rokka.gateway.kafka.context import KafkaRequestContext
from rokka.gateway.kafka.errors import ErrorCode as E
from rokka.gateway.kafka.handlers import readahead
from rokka.gateway.kafka.handlers.common import (
    LEADER_EPOCH,
    KafkaEnv,
    build_batches,
    ensure_routes,
    local_queue,
    partition_error,
    read_batches,
    read_records,
    resolve,
    skip_marker,
    topic_config,
)
from rokka.gateway.kafka.handlers.readahead import Plan, ReadAhead

LATEST, EARLIEST, MAX_TIMESTAMP = -1, -2, -3
SCAN_CHUNK = 256
MIN_READ_RECORDS, MAX_READ_RECORDS = 1000, 32768  # per partition and read


def _max_records(limit: int) -> int:
    """Records to ask the store for: enough that ``limit`` bytes, not a count, ends the read (as in
    Kafka, which has no record limit); a stored record takes at least ~100 bytes."""
    return max(MIN_READ_RECORDS, min(limit // 100, MAX_READ_RECORDS))


def _epoch_error(current_leader_epoch: int) -> int:
    if current_leader_epoch == -1 or current_leader_epoch == LEADER_EPOCH:
        return 0
    return E.FENCED_LEADER_EPOCH if current_leader_epoch < LEADER_EPOCH else E.UNKNOWN_LEADER_EPOCH


def _fetch_partition(env: KafkaEnv, name: str, p: Any, budget: int, must_return: bool,
                     ra: ReadAhead | None) -> tuple[Struct, int, Plan | None, int]:
    """The partition's response, its size toward the budget, what to read ahead for the next
    Fetch (None: nothing, e.g. the partition is at its end), and how many records it holds."""
    out = Struct(partition_index=p.partition, error_code=0, high_watermark=-1, last_stable_offset=-1,
                 log_start_offset=-1, aborted_transactions=None, preferred_read_replica=-1, records=b"")
    queue = local_queue(env, name, p.partition)  # this broker's queue (partition - its base in a cluster)
    if queue is None:
        out.error_code = partition_error(env, name, p.partition)
        return out, 0, None, 0
    if err := _epoch_error(p.current_leader_epoch):
        out.error_code = err
        return out, 0, None, 0
    topic, message_filter = resolve(env, name)
    store = env.broker.store
    lo, hw = store.min_offset(topic, queue), store.max_offset(topic, queue)
    out.high_watermark = out.last_stable_offset = hw
    out.log_start_offset = lo
    if not lo <= p.fetch_offset <= hw:
        out.error_code = E.OFFSET_OUT_OF_RANGE
        return out, 0, None, 0
    limit = min(p.partition_max_bytes, budget)
    if p.fetch_offset == hw or (limit <= 0 and not must_return):
        return out, 0, None, 0
    plan = None
    if message_filter is None:
        limit = max(limit, 1)
        config = topic_config(env, name)
        kept = ra.take(name, p.partition, p.fetch_offset, limit, config) if ra is not None else None
        data, count = kept if kept is not None else read_batches(env, topic, queue, p.fetch_offset, limit,
                                                                 max_msgs=_max_records(limit))
        if len(data) > limit:
            data, count = truncate_batches(bytes(data), limit, min_one=must_return)
        if count and p.fetch_offset + count < hw and config is not None:
            plan = Plan(name, p.partition, topic, queue, p.fetch_offset + count, limit, _max_records(limit), config)
    else:
        recs, next_offset = read_records(env, topic, queue, p.fetch_offset, max(limit, 1),
                                         max_msgs=_max_records(limit), message_filter=message_filter)
        data, count = build_batches(recs), len(recs)
        if len(data) > limit:
            data, count = truncate_batches(data, limit, min_one=must_return)
        scanned_to = max(next_offset, p.fetch_offset)
        if count == len(recs) and scanned_to > (recs[-1][0] + 1 if recs else p.fetch_offset):
            marker = skip_marker(scanned_to - 1)
            if len(data) + len(marker) <= limit or (must_return and not count):
                data += marker
    out.records = data
    return out, len(data), plan, count


@dataclass
class _Read:
    """One read of every requested partition: the response's topics, its bytes, the read-ahead
    plans, and how many records they hold."""

    topics: list[Struct]
    total: int
    plans: list[Plan]
    records: int


def _fetch_all(env: KafkaEnv, req: Struct, ra: ReadAhead | None) -> _Read:
    budget, total, records, topics, plans = req.max_bytes, 0, 0, [], []
    for t in req.topics:
        parts = []
        for p in t.partitions:
            part, n, plan, count = _fetch_partition(env, t.topic, p, budget - total, total == 0, ra)
            total += n
            records += count
            parts.append(part)
            if plan is not None:
                plans.append(plan)
        topics.append(Struct(topic=t.topic, partitions=parts))
    return _Read(topics, total, plans, records)


async def handle_fetch(env: KafkaEnv, ctx: KafkaRequestContext, req: Struct) -> Struct:
    await ensure_routes(env, [t.topic for t in req.topics])
    read = _fetch_all(env, req, readahead.previous(ctx))
    if read.total < req.min_bytes and req.max_wait_ms > 0 and not _any_error(read.topics):
        read = await _delayed(env, req, read)
    readahead.schedule(env, ctx, read.plans)
    return Struct(throttle_time_ms=0, error_code=0, session_id=0, responses=read.topics)


async def _delayed(env: KafkaEnv, req: Struct, read: _Read) -> _Read:
    """Kafka's delayed fetch: the read once the partitions hold ``min_bytes`` (as ``_estimate``
    counts them), or at ``max_wait_ms`` with what there is (see the module docstring)."""
    hub, store = env.broker.arrivals, env.broker.store
    woken = [trio.Event()]

    def wake(*_: Any) -> None:
        woken[0].set()

    where = [(resolve(env, t.topic)[0], local_queue(env, t.topic, p.partition)) for t in req.topics
             for p in t.partitions]
    tokens = [hub.subscribe(topic, queue, wake) for topic, queue in where if queue is not None]
    deadline = trio.current_time() + req.max_wait_ms / 1000
    unread = False      # records arrived that no read has seen yet
    try:
        while read.total < req.min_bytes:
            with trio.move_on_at(deadline):
                await woken[0].wait()
            if not woken[0].is_set():
                break
            woken[0] = trio.Event()
            ends = [store.max_offset(topic, queue) if queue is not None else -1 for topic, queue in where]
            if _estimate(req, read, ends) < req.min_bytes:
                unread = True
                continue
            read, unread = _fetch_all(env, req, None), False
            if _any_error(read.topics):
                break
        if unread:
            read = _fetch_all(env, req, None)
    finally:
        for tok in tokens:
            hub.unsubscribe(tok)
    return read


def _estimate(req: Struct, read: _Read, ends: list[int]) -> int:
    """What a read now would return, counted as Kafka counts it (each partition up to its
    partition_max_bytes, the whole up to max_bytes): the bytes ``read`` got per partition plus the
    records past the high watermark it saw (``ends``: each partition's end now) at ``read``'s bytes
    per record.  ``min_bytes`` itself when ``read`` holds no record to measure by (read now)."""
    if not read.records:
        return int(req.min_bytes)
    per_record = read.total / read.records
    est, i = 0.0, 0
    for t, rt in zip(req.topics, read.topics, strict=True):
        for p, part in zip(t.partitions, rt.partitions, strict=True):
            grown = max(0, ends[i] - part.high_watermark) if part.high_watermark >= 0 else 0
            est += min(p.partition_max_bytes, len(part.records) + grown * per_record)
            i += 1
    return int(min(est, req.max_bytes))


def _any_error(topics: list[Struct]) -> bool:
    return any(p.error_code for t in topics for p in t.partitions)


def _scan(env: KafkaEnv, topic: str, partition: int, want_ts: int | None) -> tuple[int, int]:
    """(offset, timestamp): first record with ts >= want_ts, or (want_ts None) the max-timestamp record."""
    store = env.broker.store
    offset, hw = store.min_offset(topic, partition), store.max_offset(topic, partition)
    best = (-1, -1)
    while offset < hw:
        res = store.get_messages(topic, partition, offset, SCAN_CHUNK, max_bytes=4 << 20)
        if not res.records:
            break
        for raw in res.records:
            rec = record_from_message(decode_record(raw))
            if want_ts is not None and rec.timestamp >= want_ts:
                return rec.offset, rec.timestamp
            if want_ts is None and rec.timestamp > best[1]:
                best = (rec.offset, rec.timestamp)
        offset = res.next_begin_offset
    return best


async def handle_list_offsets(env: KafkaEnv, ctx: KafkaRequestContext, req: Struct) -> Struct:
    await ensure_routes(env, [t.name for t in req.topics])
    store = env.broker.store
    topics = []
    for t in req.topics:
        parts = []
        for p in t.partitions:
            out = Struct(partition_index=p.partition_index, error_code=0, timestamp=-1, offset=-1,
                         leader_epoch=LEADER_EPOCH)
            queue = local_queue(env, t.name, p.partition_index)
            if queue is None:
                out.error_code = partition_error(env, t.name, p.partition_index)
            elif err := _epoch_error(p.current_leader_epoch):
                out.error_code = err
            elif p.timestamp == LATEST:
                out.offset = store.max_offset(resolve(env, t.name)[0], queue)
            elif p.timestamp == EARLIEST:
                out.offset = store.min_offset(resolve(env, t.name)[0], queue)
            elif p.timestamp == MAX_TIMESTAMP:
                out.offset, out.timestamp = _scan(env, resolve(env, t.name)[0], queue, None)
            elif p.timestamp >= 0:
                out.offset, out.timestamp = _scan(env, resolve(env, t.name)[0], queue, p.timestamp)
            else:
                out.error_code = E.INVALID_REQUEST
            parts.append(out)
        topics.append(Struct(name=t.name, partitions=parts))
    return Struct(throttle_time_ms=0, topics=topics)


async def handle_offset_for_leader_epoch(env: KafkaEnv, ctx: KafkaRequestContext, req: Struct) -> Struct:
    await ensure_routes(env, [t.topic for t in req.topics])
    topics = []
    for t in req.topics:
        parts = []
        for p in t.partitions:
            out = Struct(error_code=0, partition=p.partition, leader_epoch=-1, end_offset=-1)
            queue = local_queue(env, t.topic, p.partition)
            if queue is None:
                out.error_code = partition_error(env, t.topic, p.partition)
            elif err := _epoch_error(p.current_leader_epoch):
                out.error_code = err
            elif p.leader_epoch == LEADER_EPOCH:
                out.leader_epoch = LEADER_EPOCH
                out.end_offset = env.broker.store.max_offset(resolve(env, t.topic)[0], queue)
            parts.append(out)
        topics.append(Struct(topic=t.topic, partitions=parts))
    return Struct(throttle_time_ms=0, topics=topics)


async def handle_delete_records(env: KafkaEnv, ctx: KafkaRequestContext, req: Struct) -> Struct:
    await ensure_routes(env, [t.name for t in req.topics])
    store = env.broker.store
    topics = []
    for t in req.topics:
        parts = []
        for p in t.partitions:
            out = Struct(partition_index=p.partition_index, low_watermark=-1, error_code=0)
            queue = local_queue(env, t.name, p.partition_index)
            if queue is None:
                out.error_code = partition_error(env, t.name, p.partition_index)
            else:
                topic = resolve(env, t.name)[0]
                hw = store.max_offset(topic, queue)
                target = hw if p.offset == -1 else p.offset
                if not 0 <= target <= hw:
                    out.error_code = E.OFFSET_OUT_OF_RANGE
                else:
                    if target > store.min_offset(topic, queue):
                        store.set_min_offset(topic, queue, target)
                    out.low_watermark = store.min_offset(topic, queue)
            parts.append(out)
        topics.append(Struct(name=t.name, partitions=parts))
    return Struct(throttle_time_ms=0, topics=topics)
