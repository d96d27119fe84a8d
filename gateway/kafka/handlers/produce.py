"""Produce: v2 record batches -> core Messages, acks 0/1/all.

Theory of operation
-------------------
Each partition's ``records`` must hold exactly one magic-2 batch (Produce
v3+; otherwise 87 INVALID_RECORD) with a valid CRC (else 2 CORRUPT_MESSAGE).
Records are mapped by ``compat.kafka_records`` and appended through
``Broker.put`` (the shared send pipeline; under SYNC_FLUSH it waits for
fsync, which is what acks=all means on one node).  base_offset in the reply
is the ConsumeQueue offset of the first record.  Produce never auto-creates
topics (3 UNKNOWN_TOPIC_OR_PARTITION).  acks=0: the server sends no reply.

Idempotent producers (producer id >= 0): the batch's sequence range is
checked against ``core.producer_state`` *before* appending: a duplicate of
one of the last five batches is answered with its original base offset and
not written again; a gap gets OUT_OF_ORDER_SEQUENCE_NUMBER (45), an old
epoch INVALID_PRODUCER_EPOCH (47).  Check, append and record happen with no
await in between; only the fsync wait (acks=all under SYNC_FLUSH) follows.

Delay (``rocketmq.DELAY`` / ``rocketmq.DELIVER_AT`` headers, see
``compat.kafka_records``): delayed records are parked by the core's send
pipeline and appear in the partition when due; their produce response
carries base_offset -1 (unknown), which Kafka clients accept.
"""

from __future__ import annotations

import structlog

from compat.kafka_records import apply_delay, message_from_record
from core.broker import now_ms
from core.producer_state import SequenceOutcome, last_sequence
from gateway.kafka.codec import Struct
from gateway.kafka.codec import records as R
from gateway.kafka.codec.primitives import DecodeError
from gateway.kafka.errors import ErrorCode as E
from gateway.kafka.handlers.common import KafkaEnv, has_partition, resolve
from gateway.kafka.server import KafkaRequestContext

log = structlog.get_logger(__name__)


def _messages(topic: str, partition: int, data: bytes | None) -> tuple[int, list, R.BatchHeader | None]:  # type: ignore[type-arg]
    if not data:
        return E.INVALID_RECORD, [], None
    try:
        batches, trailing = R.split_batches(data)
    except DecodeError:
        return E.CORRUPT_MESSAGE, [], None
    if len(batches) != 1 or trailing:
        return E.INVALID_RECORD, [], None
    batch = batches[0]
    if not batch.crc_ok():
        return E.CORRUPT_MESSAGE, [], None
    try:
        recs = batch.records()
    except DecodeError:
        return E.CORRUPT_MESSAGE, [], None
    h = batch.header
    now = now_ms()
    msgs = [message_from_record(
        topic, partition, key=r.key, value=r.value, headers=tuple((x.key, x.value) for x in r.headers),
        timestamp=now if h.log_append_time else h.base_timestamp + r.timestamp_delta,
        log_append_time=h.log_append_time) for r in recs]
    return 0, msgs, h


async def _produce_partition(env: KafkaEnv, topic: str, p: Struct) -> Struct:
    out = Struct(index=p.index, error_code=0, base_offset=-1, log_append_time_ms=-1, log_start_offset=-1)
    if not has_partition(env, topic, p.index):
        out.error_code = E.UNKNOWN_TOPIC_OR_PARTITION
        return out
    topic = resolve(env, topic)[0]  # producing to a view writes its source topic
    err, msgs, header = _messages(topic, p.index, p.records)
    if err or header is None:
        out.error_code = err
        return out
    now = now_ms()
    msgs = [apply_delay(m, env.broker.delay_levels_ms, now) for m in msgs]
    delayed = any(m.properties.get("DELAY") for m in msgs)
    producers = env.producers
    idempotent = producers is not None and header.producer_id >= 0 and header.base_sequence >= 0
    if idempotent:
        last_seq = last_sequence(header.base_sequence, header.last_offset_delta)
        verdict = producers.check_batch(header.producer_id, header.producer_epoch, topic, p.index,
                                        header.base_sequence, last_seq)
        if verdict.outcome is SequenceOutcome.DUPLICATE:
            out.base_offset = verdict.base_offset if verdict.base_offset is not None else -1
            out.log_start_offset = env.broker.store.min_offset(topic, p.index)
            return out
        if verdict.outcome is not SequenceOutcome.APPEND:
            out.error_code = (E.OUT_OF_ORDER_SEQUENCE_NUMBER if verdict.outcome is SequenceOutcome.OUT_OF_ORDER
                              else E.INVALID_PRODUCER_EPOCH)
            return out
    result = env.broker.append(msgs)
    if idempotent and result.ok:
        producers.record_batch(header.producer_id, header.producer_epoch, topic, p.index, header.base_sequence,
                               last_seq, result.appended[0].queue_offset, result.appended[-1].queue_offset)
    result = await env.broker.wait_durable(result)
    if not result.ok:
        log.warning("kafka.produce_failed", topic=topic, partition=p.index, status=result.status.name,
                    remark=result.remark)
        too_large = result.status.name == "MESSAGE_ILLEGAL"
        out.error_code = E.MESSAGE_TOO_LARGE if too_large else E.KAFKA_STORAGE_ERROR
        return out
    # A delayed record is parked in SCHEDULE_TOPIC_XXXX: it has no offset in this partition yet.
    out.base_offset = -1 if delayed else result.appended[0].queue_offset
    out.log_start_offset = env.broker.store.min_offset(topic, p.index)
    return out


async def handle_produce(env: KafkaEnv, ctx: KafkaRequestContext, req: Struct) -> Struct | None:
    bad_acks = req.acks not in (-1, 0, 1)
    responses = []
    for t in req.topic_data:
        if bad_acks:
            parts = [Struct(index=p.index, error_code=E.INVALID_REQUIRED_ACKS, base_offset=-1)
                     for p in t.partition_data]
        else:
            parts = [await _produce_partition(env, t.name, p) for p in t.partition_data]
        responses.append(Struct(name=t.name, partition_responses=parts))
    return None if req.acks == 0 else Struct(responses=responses, throttle_time_ms=0)
