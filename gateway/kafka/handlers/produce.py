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

Idempotent/transactional producer state lives in ``gateway/kafka/groups``;
this handler accepts any producer id/sequence (kafka-wire.md §5.2 rule 5).
"""

from __future__ import annotations

import structlog

from compat.kafka_records import message_from_record
from core.broker import now_ms
from gateway.kafka.codec import Struct
from gateway.kafka.codec import records as R
from gateway.kafka.codec.primitives import DecodeError
from gateway.kafka.errors import ErrorCode as E
from gateway.kafka.handlers.common import KafkaEnv, has_partition
from gateway.kafka.server import KafkaRequestContext

log = structlog.get_logger(__name__)


def _messages(topic: str, partition: int, data: bytes | None) -> tuple[int, list]:  # type: ignore[type-arg]
    if not data:
        return E.INVALID_RECORD, []
    try:
        batches, trailing = R.split_batches(data)
    except DecodeError:
        return E.CORRUPT_MESSAGE, []
    if len(batches) != 1 or trailing:
        return E.INVALID_RECORD, []
    batch = batches[0]
    if not batch.crc_ok():
        return E.CORRUPT_MESSAGE, []
    try:
        recs = batch.records()
    except DecodeError:
        return E.CORRUPT_MESSAGE, []
    h = batch.header
    now = now_ms()
    msgs = [message_from_record(
        topic, partition, key=r.key, value=r.value, headers=tuple((x.key, x.value) for x in r.headers),
        timestamp=now if h.log_append_time else h.base_timestamp + r.timestamp_delta,
        log_append_time=h.log_append_time) for r in recs]
    return 0, msgs


async def _produce_partition(env: KafkaEnv, topic: str, p: Struct) -> Struct:
    out = Struct(index=p.index, error_code=0, base_offset=-1, log_append_time_ms=-1, log_start_offset=-1)
    if not has_partition(env, topic, p.index):
        out.error_code = E.UNKNOWN_TOPIC_OR_PARTITION
        return out
    err, msgs = _messages(topic, p.index, p.records)
    if err:
        out.error_code = err
        return out
    result = await env.broker.put(msgs)
    if not result.ok:
        log.warning("kafka.produce_failed", topic=topic, partition=p.index, status=result.status.name,
                    remark=result.remark)
        too_large = result.status.name == "MESSAGE_ILLEGAL"
        out.error_code = E.MESSAGE_TOO_LARGE if too_large else E.KAFKA_STORAGE_ERROR
        return out
    out.base_offset = result.appended[0].queue_offset
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
