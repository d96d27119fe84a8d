"""Produce: v2 record batches -> core Messages, acks 0/1/all.

Theory of operation
-------------------
Each partition's ``records`` must hold exactly one magic-2 batch (otherwise
87 INVALID_RECORD) with a valid CRC (else 2 CORRUPT_MESSAGE), or a legacy
magic 0/1 message set (Produce v0-v2 from old clients; decompressed and
stored one message per record, never idempotent).
Records are mapped by ``rokka.compat.kafka_records`` and appended through the
broker's send pipeline (``Broker.append``, then ``wait_durable``: under
SYNC_FLUSH it waits for fsync, which is what acks=all means on one node).
A batch whose records all lack headers and have no key or text keys is
walked natively and stored as one run (``Broker.append_uniform``).  base_offset in the reply
is the ConsumeQueue offset of the first record.  Produce never auto-creates
topics (3 UNKNOWN_TOPIC_OR_PARTITION).  acks=0: the server sends no reply.

Idempotent producers (producer id >= 0): the batch's sequence range is
checked against ``rokka.core.producer_state`` *before* appending: a duplicate of
one of the last five batches is answered with its original base offset and
not written again; a gap gets OUT_OF_ORDER_SEQUENCE_NUMBER (45), an old
epoch INVALID_PRODUCER_EPOCH (47).  Check, append and record happen with no
await in between; only the fsync wait (acks=all under SYNC_FLUSH) follows.

Transactional batches (attribute bit 0x10): the transaction coordinator
(``rokka.core.kafka_txn``) first checks that the producer's transaction is open
and holds this partition (else 48 INVALID_TXN_STATE; a fenced epoch gets
47, an unknown producer id 49); the sequence check above still applies;
the records are then stored as *half messages* (``append_halves``), which
no consumer of either protocol sees until EndTxn commits them.  Their
produce response carries base_offset -1: the records have no offset in the
partition until the commit re-puts them.  Clients accept -1 (librdkafka
reports offset -1001 "invalid", kafka-python's RecordMetadata.offset -1,
kafkajs baseOffset "-1"; none of them use it for sequencing).  Check,
half append and record happen with no await in between.

Delay (``rocketmq.DELAY`` / ``rocketmq.DELIVER_AT`` headers, see
``rokka.compat.kafka_records``): delayed records are parked by the core's send
pipeline and appear in the partition when due; their produce response
carries base_offset -1 (unknown), which Kafka clients accept.
"""

from __future__ import annotations

import structlog
from rokka.compat.kafka_records import (
    PROP_KAFKA_HEADERS,
    apply_delay,
    message_from_record,
    messages_from_batch,
    plain_run,
    plain_span_run,
)
from rokka.core.broker import now_ms
from rokka.core.kafka_txn import TxnOutcome
from rokka.core.model import Message, UniformBatch
from rokka.core.producer_state import SequenceOutcome, last_sequence
from rokka.gateway.kafka.codec import Struct
from rokka.gateway.kafka.codec import records as R
from rokka.gateway.kafka.codec.legacy import decode_legacy_message_set
from rokka.gateway.kafka.codec.primitives import DecodeError
from rokka.gateway.kafka.errors import ErrorCode as E
from rokka.gateway.kafka.handlers.common import KafkaEnv, ensure_routes, local_queue, partition_error, resolve
from rokka.gateway.kafka.server import KafkaRequestContext

log = structlog.get_logger(__name__)

_TXN_CODES = {TxnOutcome.INVALID_PRODUCER_EPOCH: E.INVALID_PRODUCER_EPOCH,
              TxnOutcome.INVALID_TXN_STATE: E.INVALID_TXN_STATE,
              TxnOutcome.INVALID_PRODUCER_ID_MAPPING: E.INVALID_PRODUCER_ID_MAPPING}


def _txn_error(env: KafkaEnv, topic: str, partition: int, header: R.BatchHeader) -> int:
    """0 if this transactional batch may be stored as halves now, else the produce error code."""
    txns = env.transactions
    if txns is None or header.producer_id < 0:
        log.warning("kafka.transactional_batch_refused", topic=topic, partition=partition,
                    producer_id=header.producer_id, reason="no transaction coordinator or producer id")
        return E.INVALID_TXN_STATE
    outcome = txns.check_produce(header.producer_id, header.producer_epoch, topic, partition)
    if outcome is TxnOutcome.OK:
        return 0
    log.info("kafka.transactional_batch_refused", topic=topic, partition=partition,
             producer_id=header.producer_id, epoch=header.producer_epoch, outcome=outcome.value)
    return _TXN_CODES.get(outcome, E.INVALID_TXN_STATE)


def _legacy_messages(topic: str, partition: int, data: bytes,
                     limit: int) -> tuple[int, list, R.BatchHeader | None]:  # type: ignore[type-arg]
    """Produce v0-v2 (and old clients): a magic 0/1 message set, decompressed and flattened."""
    try:
        legacy = decode_legacy_message_set(data, limit=limit)
    except R.InflateLimitError as exc:
        return _too_large(topic, partition, exc), [], None
    except DecodeError:
        return E.CORRUPT_MESSAGE, [], None
    if not legacy:
        return E.INVALID_RECORD, [], None
    now = now_ms()
    msgs = [message_from_record(topic, partition, key=m.key, value=m.value, headers=(),
                                timestamp=now if m.attributes & 0x08 else m.timestamp,
                                log_append_time=bool(m.attributes & 0x08)) for m in legacy]
    stamps = [m.timestamp for m in legacy]
    # A header with no producer id / sequence: legacy sets are never idempotent or transactional.
    header = R.BatchHeader(0, len(data), -1, legacy[0].magic, 0, 0, len(legacy) - 1, stamps[0], max(stamps),
                           -1, -1, -1, len(legacy))
    return 0, msgs, header


def _too_large(topic: str, partition: int, exc: R.InflateLimitError) -> int:
    log.warning("kafka.produce_inflate_limit", topic=topic, partition=partition, codec=exc.codec, limit=exc.limit)
    return E.MESSAGE_TOO_LARGE


def _messages(topic: str, partition: int, data: bytes | None,
              limit: int) -> tuple[int, list[Message] | UniformBatch, R.BatchHeader | None]:
    """``limit``: the most bytes compressed records may inflate to (maxMessageSize), else RECORD_TOO_LARGE."""
    if not data:
        return E.INVALID_RECORD, [], None
    if len(data) > 16 and data[16] in (0, 1):  # the magic byte sits at offset 16 in both formats
        return _legacy_messages(topic, partition, data, limit)
    try:
        batches, trailing = R.split_batches(data)
    except DecodeError:
        return E.CORRUPT_MESSAGE, [], None
    if len(batches) != 1 or trailing:
        return E.INVALID_RECORD, [], None
    batch = batches[0]
    if not batch.crc_ok():
        return E.CORRUPT_MESSAGE, [], None
    h = batch.header
    try:
        view = batch.payload_view(limit)    # the records in place (uncompressed) for the native walker
        uniform = not h.log_append_time and not h.is_transactional
        spans = None
        if uniform:
            # The common cases (no key, or text keys; no headers): stored as one run (Broker.append_uniform),
            # the values left in the payload when the native walker is built.
            spans = R.plain_spans(view, h) or R.plain_spans(view, h, keyed=True)
            if spans is not None and (run := plain_span_run(topic, partition, view, *spans)) is not None:
                return 0, run, h
        payload = bytes(view) if type(view) is memoryview else view     # the Python paths slice bytes
        if uniform and spans is None:
            plain = R.plain_values(payload, h) or R.plain_values(payload, h, keyed=True)
            run = plain_run(topic, partition, *plain) if plain is not None else None
            if run is not None:
                return 0, run, h
        rows = batch.record_fields(payload)
    except R.InflateLimitError as exc:
        return _too_large(topic, partition, exc), [], None
    except DecodeError:
        return E.CORRUPT_MESSAGE, [], None
    msgs = messages_from_batch(topic, partition, rows, base_timestamp=h.base_timestamp,
                               log_append_time=h.log_append_time, now=now_ms())
    return 0, msgs, h


def _any_delay_header(msgs: list[Message]) -> bool:
    """Could a message carry rocketmq.DELAY / DELIVER_AT?  Only Kafka headers set them."""
    return any(m.properties.get(PROP_KAFKA_HEADERS, "[]") != "[]" for m in msgs)


async def _produce_partition(env: KafkaEnv, topic: str, p: Struct) -> Struct:
    out = Struct(index=p.index, error_code=0, base_offset=-1, log_append_time_ms=-1, log_start_offset=-1)
    queue = local_queue(env, topic, p.index)  # this broker's queue (partition - its base in a cluster)
    if queue is None:
        out.error_code = partition_error(env, topic, p.index)
        return out
    topic = resolve(env, topic)[0]  # producing to a view writes its source topic
    err, msgs, header = _messages(topic, queue, p.records, env.broker.cfg.max_message_size)
    if err or header is None:
        out.error_code = err
        return out
    delayed = False
    if not isinstance(msgs, UniformBatch) and _any_delay_header(msgs):
        now = now_ms()
        msgs = [apply_delay(m, env.broker.delay_levels_ms, now) for m in msgs]
        delayed = any(m.properties.get("DELAY") for m in msgs)
    transactional = header.is_transactional
    if transactional and (err := _txn_error(env, topic, p.index, header)):
        out.error_code = err
        return out
    producers = env.producers
    idempotent = producers is not None and header.producer_id >= 0 and header.base_sequence >= 0
    if idempotent:
        last_seq = last_sequence(header.base_sequence, header.last_offset_delta)
        verdict = producers.check_batch(header.producer_id, header.producer_epoch, topic, queue,
                                        header.base_sequence, last_seq)
        if verdict.outcome is SequenceOutcome.DUPLICATE:
            out.base_offset = verdict.base_offset if verdict.base_offset is not None else -1
            out.log_start_offset = env.broker.store.min_offset(topic, queue)
            return out
        if verdict.outcome is not SequenceOutcome.APPEND:
            out.error_code = (E.OUT_OF_ORDER_SEQUENCE_NUMBER if verdict.outcome is SequenceOutcome.OUT_OF_ORDER
                              else E.INVALID_PRODUCER_EPOCH)
            return out
    if isinstance(msgs, UniformBatch):
        result = env.broker.append_uniform(msgs, stamp_cluster=False)
    elif transactional:
        assert env.transactions is not None
        result = env.transactions.append_halves(header.producer_id, header.producer_epoch, msgs)
    else:
        result = env.broker.append(msgs, stamp_cluster=False)
    if idempotent and result.ok:
        # A half's queue offset is not a partition offset: a duplicate is answered with -1 too.
        first, last = ((-1, -1) if transactional else
                       (result.appended[0].queue_offset, result.appended[-1].queue_offset))
        producers.record_batch(header.producer_id, header.producer_epoch, topic, queue,
                               header.base_sequence, last_seq, first, last)
    result = await env.broker.wait_durable(result)
    if not result.ok:
        log.warning("kafka.produce_failed", topic=topic, partition=queue, status=result.status.name,
                    remark=result.remark)
        too_large = result.status.name == "MESSAGE_ILLEGAL"
        out.error_code = E.MESSAGE_TOO_LARGE if too_large else E.KAFKA_STORAGE_ERROR
        return out
    # A delayed record is parked in SCHEDULE_TOPIC_XXXX, a transactional one in the half topic:
    # neither has an offset in this partition yet.
    out.base_offset = -1 if delayed or transactional else result.appended[0].queue_offset
    out.log_start_offset = env.broker.store.min_offset(topic, queue)
    return out


async def handle_produce(env: KafkaEnv, ctx: KafkaRequestContext, req: Struct) -> Struct | None:
    bad_acks = req.acks not in (-1, 0, 1)
    await ensure_routes(env, [t.name for t in req.topic_data])
    responses = []
    for t in req.topic_data:
        if bad_acks:
            parts = [Struct(index=p.index, error_code=E.INVALID_REQUIRED_ACKS, base_offset=-1)
                     for p in t.partition_data]
        else:
            parts = [await _produce_partition(env, t.name, p) for p in t.partition_data]
        responses.append(Struct(name=t.name, partition_responses=parts))
    return None if req.acks == 0 else Struct(responses=responses, throttle_time_ms=0)
