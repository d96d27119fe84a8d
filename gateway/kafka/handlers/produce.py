"""Produce: v2 record batches -> core Messages, acks 0/1/all.

Theory of operation
-------------------
Each partition's ``records`` must hold exactly one magic-2 batch (otherwise
87 INVALID_RECORD) with a valid CRC (else 2 CORRUPT_MESSAGE, retriable: the
bytes were damaged on the way), or a legacy magic 0/1 message set (Produce
v0-v2 from old clients; decompressed and stored one message per record, never
idempotent).  A batch whose CRC holds but whose records do not parse was sent
that way: 87 INVALID_RECORD (not retriable), with ``record_errors`` naming the
first bad record (Produce v8+) and the reason in ``error_message``.

Per-topic configs (``topic_configs``, kept by ``rokka.core.topic_retention``) are
checked before anything is stored: acks=all on a topic whose
``min.insync.replicas`` exceeds the ISR (this broker and its in-sync slaves,
``rokka.gateway.kafka.replicas``) gets 19 NOT_ENOUGH_REPLICAS; acks=all then waits
for an in-sync slave's ack (``_isr_acked``) and answers 20 NOT_ENOUGH_REPLICAS_AFTER_APPEND
when the ISR shrank below it meanwhile; a
compacted topic (``cleanup.policy`` with ``compact``) refuses a batch holding records
without a key with 87 INVALID_RECORD (one record error per keyless record, as Kafka's
LogValidator; nothing of the batch stored); a
batch larger than the topic's ``max.message.bytes`` gets 10 MESSAGE_TOO_LARGE
(RecordTooLargeException); ``message.timestamp.type=LogAppendTime`` stamps the
records with the append time (``log_append_time_ms`` in the reply, LogAppendTime
batches on fetch).  A record the store refuses as too large (its body over
``maxMessageSize``) is MESSAGE_TOO_LARGE too; KAFKA_STORAGE_ERROR (retriable) is
kept for the store's own failures (disk full, flush timeout).  Keys and headers
of any size are stored (``rokka.compat.kafka_records``: the envelope).
Records are mapped by ``rokka.compat.kafka_records`` and appended through the
broker's send pipeline (``Broker.append``, then ``wait_durable``: under
SYNC_FLUSH it waits for fsync, which is what acks=all means on one node).
A batch whose records all lack headers and have no key or text keys is
walked natively and stored as one run (``Broker.append_uniform``); any other CreateTime batch
(binary or empty keys, null values, headers) is mapped natively in one pass
(``_crecords.mapped_spans``: each record's properties byte for byte as
``rokka.compat.kafka_records.message_from_record`` writes them) and stored as one run too, unless
a record needs the Python rules (``rocketmq.*`` headers, non-ASCII header names, the envelope); a
compacted topic's batch takes it when every record has a non-empty key (else the Python rows check).
base_offset in the reply is the ConsumeQueue offset of the first record.  Produce never auto-creates
topics (3 UNKNOWN_TOPIC_OR_PARTITION).  acks=0: the server sends no reply.

A request is taken in three steps, so that its partitions share one append: each topic is looked up
once (``_target``: a view's source, its configs), each partition checked and parsed (``_parse``),
then every parsed batch admitted (``_admit``: the delay, transaction and idempotence checks below)
and all appended together -- the runs with one CommitLog write (``Broker.append_uniforms``) --
before any answer awaits durability (``_answer``).  A keyed producer spreads each request over many
partitions, and a separate append per partition cost ~40 us of fixed work each (BENCHMARKS.md,
session 22).  A request that names one queue twice (a partition twice, or a view beside its
source) is taken one batch after the other, so each admission sees the appends before it.

Idempotent producers (producer id >= 0): the batch's sequence range is
checked against ``rokka.gateway.kafka.producers.state`` *before* appending: a duplicate of
one of the last five batches is answered with its original base offset and
not written again; a gap gets OUT_OF_ORDER_SEQUENCE_NUMBER (45), an old
epoch INVALID_PRODUCER_EPOCH (47).  Check, append and record happen with no
await in between; only the fsync wait (acks=all under SYNC_FLUSH) follows.

Transactional batches (attribute bit 0x10): the transaction coordinator
(``rokka.gateway.kafka.txn.coordinator``) first checks that the producer's transaction is open
and holds this partition (else 48 INVALID_TXN_STATE; a fenced epoch gets
47, an unknown producer id 49); the sequence check above still applies;
the records are then stored as *half messages* (``append_halves``), which
no consumer of either protocol sees until EndTxn commits them; a batch the native walkers
take stays one run (the broker moves the run to the half topic as a whole).  Their
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

import dataclasses
from collections.abc import Iterable

import structlog
from rokka.compat.kafka_records import (
    MAPPING_BUDGET,
    MAPPING_SYSTEM_NAMES,
    PROP_KAFKA_ENVELOPE,
    PROP_KAFKA_HEADERS,
    apply_delay,
    mapped_span_run,
    message_from_record,
    messages_from_batch,
    plain_run,
    plain_span_run,
)
from rokka.core.broker import now_ms
from rokka.core.model import Message, UniformBatch
from rokka.core.storage import PutResult, PutStatus
from rokka.core.topic_retention import compaction_policy
from rokka.core.topics import TopicConfig
from rokka.gateway.kafka.codec import Struct
from rokka.gateway.kafka.codec import records as R
from rokka.gateway.kafka.codec.legacy import decode_legacy_message_set
from rokka.gateway.kafka.codec.primitives import DecodeError
from rokka.gateway.kafka.context import KafkaRequestContext
from rokka.gateway.kafka.errors import ErrorCode as E
from rokka.gateway.kafka.handlers.common import (
    KafkaEnv,
    ensure_routes,
    partition_error,
    queue_of,
    resolve,
    topic_config,
)
from rokka.gateway.kafka.handlers.topic_configs import MAX_MESSAGE_BYTES, MIN_INSYNC, TIMESTAMP_TYPE
from rokka.gateway.kafka.producers.state import SequenceOutcome, last_sequence
from rokka.gateway.kafka.txn.coordinator import TxnOutcome

try:
    from rokka.gateway.kafka.codec import _crecords
except ImportError:     # pragma: no cover - depends on the build
    _crecords = None  # type: ignore[assignment]

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


# A refusal's (record_errors as (batch index, message) pairs, error_message).
Refusal = tuple[tuple[tuple[int, str], ...], str]
Parsed = tuple[int, "list[Message] | UniformBatch", "R.BatchHeader | None", "Refusal | None"]


def _too_large(topic: str, partition: int, exc: R.InflateLimitError) -> Parsed:
    """RECORD_TOO_LARGE for compressed records that inflate past maxMessageSize (a decompression bomb)."""
    log.warning("kafka.produce_inflate_limit", topic=topic, partition=partition, codec=exc.codec, limit=exc.limit)
    return E.MESSAGE_TOO_LARGE, [], None, ((), f"the records inflate past maxMessageSize ({exc.limit} bytes)")


def _keyless(compacted: str | None, keys: Iterable[bytes | None]) -> Parsed | None:
    """INVALID_RECORD for a compacted topic's batch holding records without a key (LogValidator's
    validateKey: one record error per keyless record, nothing of the batch stored); ``compacted``:
    the "topic-partition" label of a compacted topic's partition, None for any other topic."""
    if compacted is None:
        return None
    why = f"Compacted topic cannot accept message without key in topic partition {compacted}."
    errors = tuple((i, why) for i, key in enumerate(keys) if key is None)
    if not errors:
        return None
    shown = ", ".join(f"RecordError(batchIndex={i}, message='{m}')" for i, m in errors[:3])
    log.info("kafka.produce_keyless_compacted", partition=compacted, records=len(errors))
    return E.INVALID_RECORD, [], None, (errors, f"One or more records have been rejected due to {len(errors)} "
                                                f"record errors in total, and only showing the first three "
                                                f"errors at most: [{shown}]")


def _legacy_messages(topic: str, partition: int, data: bytes, append_time: bool, limit: int,
                     compacted: str | None) -> Parsed:
    """Produce v0-v2 (and old clients): a magic 0/1 message set, decompressed and flattened."""
    try:
        legacy = decode_legacy_message_set(data, limit=limit)
    except R.InflateLimitError as exc:
        return _too_large(topic, partition, exc)
    except DecodeError:
        return E.CORRUPT_MESSAGE, [], None, None
    if not legacy:
        return E.INVALID_RECORD, [], None, ((), "empty message set")
    if (refused := _keyless(compacted, (m.key for m in legacy))) is not None:
        return refused
    now = now_ms()
    msgs = [message_from_record(topic, partition, key=m.key, value=m.value, headers=(),
                                timestamp=now if append_time or m.attributes & 0x08 else m.timestamp,
                                log_append_time=append_time or bool(m.attributes & 0x08)) for m in legacy]
    stamps = [m.timestamp for m in legacy]
    # A header with no producer id / sequence: legacy sets are never idempotent or transactional.
    header = R.BatchHeader(0, len(data), -1, legacy[0].magic, 0, 0, len(legacy) - 1, stamps[0], max(stamps),
                           -1, -1, -1, len(legacy))
    return 0, msgs, header, None


def _zigzag(buf: bytes, pos: int) -> tuple[int, int]:
    """A zigzag varint at ``pos``: (value, position after it)."""
    shift = z = 0
    while True:
        if pos >= len(buf) or shift > 28:
            raise DecodeError("bad record length varint")
        b = buf[pos]
        z |= (b & 0x7F) << shift
        pos += 1
        if b < 0x80:
            return (z >> 1) ^ -(z & 1), pos
        shift += 7


def _bad_record(payload: bytes, count: int, exc: DecodeError) -> Refusal:
    """INVALID_RECORD's record_errors: the first record of the batch that does not parse (none when the
    records parse one by one and the batch around them is wrong), and the reason."""
    pos = 0
    for i in range(count):
        try:
            length, start = _zigzag(payload, pos)
            if length < 0 or start + length > len(payload):
                raise DecodeError(f"record length {length} invalid")
            R.read_record_fields(payload[pos:start + length], 1)
        except DecodeError as bad:
            return ((i, f"record {i}: {bad}"),), f"record {i}: {bad}"
        pos = start + length
    return (), str(exc)


def _messages(topic: str, partition: int, data: bytes | None, append_time: bool, limit: int,
              compacted: str | None = None) -> Parsed:
    """The batch's messages (or a run), its header; ``append_time``: the topic's LogAppendTime;
    ``limit``: the most bytes compressed records may inflate to (maxMessageSize); ``compacted``:
    the "topic-partition" label when the topic is compacted (its records must all have keys)."""
    if not data:
        return E.INVALID_RECORD, [], None, ((), "no records")
    if len(data) > 16 and data[16] in (0, 1):  # the magic byte sits at offset 16 in both formats
        return _legacy_messages(topic, partition, data, append_time, limit, compacted)
    try:
        batches, trailing = R.split_batches(data)
    except DecodeError:
        return E.CORRUPT_MESSAGE, [], None, None
    if len(batches) != 1 or trailing:
        return E.INVALID_RECORD, [], None, ((), "a produce request holds exactly one record batch per partition")
    batch = batches[0]
    if not batch.crc_ok():
        return E.CORRUPT_MESSAGE, [], None, None
    h = batch.header
    try:
        view = batch.payload_view(limit)    # the records in place (uncompressed) for the native walker
    except R.InflateLimitError as exc:
        return _too_large(topic, partition, exc)
    except DecodeError:
        return E.CORRUPT_MESSAGE, [], None, None
    append_time = append_time or h.log_append_time
    payload: bytes | memoryview = view
    try:
        native = not append_time
        uniform = native and compacted is None
        spans = None
        if native:
            # Stored as one run (Broker.append_uniform), the values left in the payload, when the native
            # walkers are built: no keys and no headers (the shared properties), else keys of any bytes and
            # headers mapped per record in one pass (text keys too: cheaper than the keyed plain run).  A
            # compacted topic's batch (Kafka Streams' changelogs) takes the mapped run when every record
            # has an index key -- mapped_spans gives them for all records or for none, and each is a
            # non-empty key -- else the rows below find its keyless records (LogValidator's check).
            spans = R.plain_spans(view, h) if uniform else None
            if spans is not None and (run := plain_span_run(topic, partition, view, *spans)) is not None:
                return 0, run, h, None
            if _crecords is not None and (mapped := _crecords.mapped_spans(
                    view, h.record_count, h.base_timestamp, MAPPING_SYSTEM_NAMES, MAPPING_BUDGET)) is not None \
                    and (uniform or mapped[4] is not None):
                return 0, mapped_span_run(topic, partition, view, mapped), h, None
        payload = bytes(view) if type(view) is memoryview else view     # the Python paths slice bytes
        if uniform and spans is None:
            plain = R.plain_values(payload, h) or R.plain_values(payload, h, keyed=True)
            run = plain_run(topic, partition, *plain) if plain is not None else None
            if run is not None:
                return 0, run, h, None
        rows = batch.record_fields(payload)
    except DecodeError as exc:
        why = _bad_record(bytes(payload), h.record_count, exc)
        log.info("kafka.produce_invalid_record", topic=topic, partition=partition,
                 record=why[0][0][0] if why[0] else None, reason=why[1])
        return E.INVALID_RECORD, [], None, why
    if (refused := _keyless(compacted, (row[3] for row in rows))) is not None:
        return refused
    msgs = messages_from_batch(topic, partition, rows, base_timestamp=h.base_timestamp,
                               log_append_time=append_time, now=now_ms())
    return 0, msgs, h, None


def _any_delay_header(msgs: list[Message]) -> bool:
    """Could a message carry rocketmq.DELAY / DELIVER_AT?  Only Kafka headers set them."""
    return any(m.properties.get(PROP_KAFKA_HEADERS, "[]") != "[]" or PROP_KAFKA_ENVELOPE in m.properties
               for m in msgs)


def _int(value: str | None, default: int = 0) -> int:
    """A kept config's integer (validated when set; ``default`` if the file was edited by hand)."""
    try:
        return int(value) if value is not None else default
    except ValueError:
        return default


def _isr_size(env: KafkaEnv) -> int:
    return env.cluster.replicas.hooks.isr_size() if env.cluster is not None else 1


def _topic_refusal(topic: str, queue: int, own: dict[str, str], acks: int, size: int,
                   isr: int) -> tuple[int, str] | None:
    """NOT_ENOUGH_REPLICAS / MESSAGE_TOO_LARGE from the topic's own configs, before anything is stored."""
    if acks == -1 and _int(own.get(MIN_INSYNC)) > isr:
        why = (f"The size of the current ISR {isr} is insufficient to satisfy the min.isr requirement of "
               f"{own[MIN_INSYNC]} for partition {topic}-{queue}")
        return E.NOT_ENOUGH_REPLICAS, why
    limit = own.get(MAX_MESSAGE_BYTES)
    if limit is not None and size > _int(limit, size):
        return E.MESSAGE_TOO_LARGE, (f"The record batch size ({size} bytes) is larger than the topic's "
                                     f"max.message.bytes ({limit})")
    return None


def _store_error(result_status: str) -> int:
    """The produce error for a store refusal: the client's mistakes are not retriable."""
    if result_status == "MESSAGE_ILLEGAL":
        return E.MESSAGE_TOO_LARGE
    if result_status == "PROPERTIES_SIZE_EXCEEDED":
        return E.INVALID_RECORD
    if result_status == "SLAVE_NOT_AVAILABLE":      # SYNC_MASTER: stored here, no slave has it (gateway/ha)
        return E.NOT_ENOUGH_REPLICAS_AFTER_APPEND
    if result_status == "FLUSH_SLAVE_TIMEOUT":      # SYNC_MASTER: no slave acked within syncFlushTimeout
        return E.REQUEST_TIMED_OUT
    return E.KAFKA_STORAGE_ERROR


@dataclasses.dataclass(slots=True)
class _Target:
    """What every partition of one topic of a Produce request shares, looked up once per topic: the
    stored topic (a view's source), its TopicConfig and own configs, and what those say."""
    name: str
    topic: str
    tc: TopicConfig | None      # None: no such topic
    own: dict[str, str] | None
    append_time: bool
    compacted: bool
    min_isr: int                # acks=all's min.insync.replicas (0: not acks=all)


def _target(env: KafkaEnv, name: str, acks: int) -> _Target:
    topic = resolve(env, name)[0]  # producing to a view writes its source topic
    tc = topic_config(env, name)
    own = env.broker.retention.configs(topic)
    min_isr = (_int(own.get(MIN_INSYNC), 1) if own is not None else 1) if acks == -1 else 0
    return _Target(name, topic, tc, own,
                   own is not None and own.get(TIMESTAMP_TYPE) == "LogAppendTime",
                   compaction_policy(own) is not None, min_isr)


@dataclasses.dataclass(slots=True)
class _Parsed:
    """A partition's batch that passed the topic's checks and parsed, and what its answer needs."""
    topic: str
    queue: int
    msgs: list[Message] | UniformBatch
    header: R.BatchHeader
    out: Struct
    append_time: bool
    min_isr: int                # acks=all's min.insync.replicas (0: not acks=all)
    delayed: bool = False
    idempotent: bool = False
    last_seq: int = -1
    intent: tuple[int, int, int] | None = None      # journaled (first, last offset, intent stamp)


def _parse(env: KafkaEnv, target: _Target, p: Struct, acks: int) -> Struct | _Parsed:
    """A partition of the request: its answer when refused here, else its parsed batch."""
    out = Struct(index=p.index, error_code=0, base_offset=-1, log_append_time_ms=-1, log_start_offset=-1,
                 record_errors=[], error_message=None)
    queue = queue_of(env, target.topic, target.tc, p.index)  # this broker's queue (partition - its base)
    if queue is None:
        out.error_code = partition_error(env, target.name, p.index)
        return out
    topic, own = target.topic, target.own
    if own is not None and (refusal := _topic_refusal(topic, queue, own, acks, len(p.records or b""),
                                                      _isr_size(env) if acks == -1 else 1)):
        out.error_code, out.error_message = refusal
        log.info("kafka.produce_refused", topic=topic, partition=queue, error=int(refusal[0]), reason=refusal[1])
        return out
    append_time = target.append_time
    err, msgs, header, why = _messages(topic, queue, p.records, append_time, env.broker.cfg.max_message_size,
                                       f"{target.name}-{p.index}" if target.compacted else None)
    if err or header is None:
        out.error_code = err
        if why is not None:
            out.error_message = why[1]
            out.record_errors = [Struct(batch_index=i, batch_index_error_message=m) for i, m in why[0]]
        return out
    return _Parsed(topic, queue, msgs, header, out, append_time, target.min_isr)


async def _isr_acked(env: KafkaEnv, result: PutResult, min_isr: int) -> PutResult:
    """acks=all on a master that answers sends at once: wait for an in-sync slave's ack
    (``rokka.gateway.kafka.replicas``; a SYNC_MASTER waited in ``wait_durable`` already), then the ISR
    must still hold ``min.insync.replicas`` (else NOT_ENOUGH_REPLICAS_AFTER_APPEND, as Kafka)."""
    view = env.cluster
    if not result.ok or view is None or env.broker.replica_wait is not None:
        return result
    hooks = view.replicas.hooks
    if hooks.isr_wait is not None and (status := await hooks.isr_wait(result.end_offset)) is not None:
        return dataclasses.replace(result, status=status)
    if min_isr > hooks.isr_size():
        return dataclasses.replace(result, status=PutStatus.SLAVE_NOT_AVAILABLE)
    return result


def _admit(env: KafkaEnv, b: _Parsed) -> Struct | _Parsed:
    """Delay, transaction and idempotence checks (module doc): the partition's answer when they
    settle it (a refusal, or a duplicate's original offset), else the batch ready to append, its
    intent journaled when idempotent."""
    header, out = b.header, b.out
    if not isinstance(b.msgs, UniformBatch) and _any_delay_header(b.msgs):
        now = now_ms()
        b.msgs = [apply_delay(m, env.broker.delay_levels_ms, now) for m in b.msgs]
        b.delayed = any(m.properties.get("DELAY") for m in b.msgs)
    transactional = header.is_transactional
    if transactional and (err := _txn_error(env, b.topic, out.index, header)):
        out.error_code = err
        return out
    producers = env.producers
    if producers is not None and header.producer_id >= 0 and header.base_sequence >= 0:
        b.idempotent = True
        b.last_seq = last_sequence(header.base_sequence, header.last_offset_delta)
        verdict = producers.check_batch(header.producer_id, header.producer_epoch, b.topic, b.queue,
                                        header.base_sequence, b.last_seq)
        if verdict.outcome is SequenceOutcome.DUPLICATE:
            out.base_offset = verdict.base_offset if verdict.base_offset is not None else -1
            out.log_start_offset = env.broker.store.min_offset(b.topic, b.queue)
            return out
        if verdict.outcome is not SequenceOutcome.APPEND:
            out.error_code = (E.OUT_OF_ORDER_SEQUENCE_NUMBER if verdict.outcome is SequenceOutcome.OUT_OF_ORDER
                              else E.INVALID_PRODUCER_EPOCH)
            return out
        # An idempotent batch bound for this partition is journaled *before* the append, with the
        # offsets it will get (nothing else is appended to its queue in between: the request's
        # batches go to distinct queues and no await comes before the append): a kill -9 after the
        # append but before the acknowledgement must still know it (rokka.gateway.kafka.producers.journal).
        if not transactional and not b.delayed:
            first = env.broker.store.max_offset(b.topic, b.queue)
            last = first + header.last_offset_delta
            b.intent = (first, last, producers.journal_intent(header.producer_id, header.producer_epoch, b.topic,
                                                              b.queue, header.base_sequence, b.last_seq, first, last))
    return b


def _append(env: KafkaEnv, batches: list[_Parsed]) -> list[PutResult]:
    """Append admitted batches, each to a queue of its own: the runs (``UniformBatch``) together
    (``Broker.append_uniforms``: one CommitLog write), halves and message lists one by one; then
    each idempotent batch's outcome is recorded (or its intent retracted)."""
    results: list[PutResult | None] = [None] * len(batches)
    runs = [i for i, b in enumerate(batches) if type(b.msgs) is UniformBatch and not b.header.is_transactional]
    if runs:
        stored = env.broker.append_uniforms([batches[i].msgs for i in runs], stamp_cluster=False)  # type: ignore[misc]
        for i, result in zip(runs, stored, strict=True):
            results[i] = result
    for i, b in enumerate(batches):
        if results[i] is None:
            if b.header.is_transactional:
                assert env.transactions is not None
                results[i] = env.transactions.append_halves(b.header.producer_id, b.header.producer_epoch, b.msgs)
            else:
                results[i] = env.broker.append(b.msgs, stamp_cluster=False)  # type: ignore[arg-type]
    for b, result in zip(batches, results, strict=True):
        if b.idempotent:
            _record(env, b, result)  # type: ignore[arg-type]
    return results  # type: ignore[return-value]


def _record(env: KafkaEnv, b: _Parsed, result: PutResult) -> None:
    """An idempotent batch's appended offsets into the producer state (or its intent retracted)."""
    producers, header = env.producers, b.header
    assert producers is not None
    if result.ok:
        # A half's queue offset is not a partition offset: a duplicate is answered with -1 too.
        first, last = ((-1, -1) if header.is_transactional else
                       (result.appended[0].queue_offset, result.appended[-1].queue_offset))
        intent = b.intent
        producers.record_batch(header.producer_id, header.producer_epoch, b.topic, b.queue,
                               header.base_sequence, b.last_seq, first, last,
                               intent[2] if intent is not None else None,
                               journaled=intent is not None and (first, last) == intent[:2])
    elif b.intent is not None:
        producers.retract_intent(header.producer_id, header.producer_epoch, b.topic, b.queue,
                                 header.base_sequence, b.last_seq)


async def _answer(env: KafkaEnv, b: _Parsed, result: PutResult) -> Struct:
    """The partition's answer once its append is durable as acks asks (``wait_durable``, the ISR)."""
    out, topic, queue = b.out, b.topic, b.queue
    result = await env.broker.wait_durable(result)
    if b.min_isr:
        result = await _isr_acked(env, result, b.min_isr)
    if not result.ok:
        log.warning("kafka.produce_failed", topic=topic, partition=queue, status=result.status.name,
                    remark=result.remark)
        # a slave (or a controller-mode broker not yet named master) leads nothing: the client refreshes
        # its metadata and looks for the leader, as after Kafka's NOT_LEADER_OR_FOLLOWER
        out.error_code = (E.NOT_LEADER_OR_FOLLOWER if env.broker.store.replica_only
                          else _store_error(result.status.name))
        out.error_message = result.remark or None
        return out
    # A delayed record is parked in SCHEDULE_TOPIC_XXXX, a transactional one in the half topic:
    # neither has an offset in this partition yet.
    out.base_offset = -1 if b.delayed or b.header.is_transactional else result.appended[0].queue_offset
    if b.append_time and result.appended:
        out.log_append_time_ms = result.appended[0].store_timestamp
    out.log_start_offset = env.broker.store.min_offset(topic, queue)
    return out


async def _store_all(env: KafkaEnv, parsed: list[_Parsed]) -> None:
    """Admit, append and answer the request's parsed batches (each ``out`` filled in place). Batches
    for distinct queues are admitted, then appended together, with no await before the last
    append; a request naming one queue twice (a partition twice, or a view beside its source) is
    taken one batch after the other, so each admission sees the appends before it."""
    if len({(b.topic, b.queue) for b in parsed}) != len(parsed):
        for b in parsed:
            if type(admitted := _admit(env, b)) is _Parsed:
                await _answer(env, admitted, _append(env, [admitted])[0])
        return
    ready = [a for b in parsed if type(a := _admit(env, b)) is _Parsed]
    if ready:
        for b, result in zip(ready, _append(env, ready), strict=True):
            await _answer(env, b, result)


async def handle_produce(env: KafkaEnv, ctx: KafkaRequestContext, req: Struct) -> Struct | None:
    bad_acks = req.acks not in (-1, 0, 1)
    await ensure_routes(env, [t.name for t in req.topic_data])
    responses = []
    parsed: list[_Parsed] = []
    for t in req.topic_data:
        if bad_acks:
            parts = [Struct(index=p.index, error_code=E.INVALID_REQUIRED_ACKS, base_offset=-1)
                     for p in t.partition_data]
        else:
            target = _target(env, t.name, req.acks)
            parts = []
            for p in t.partition_data:
                got = _parse(env, target, p, req.acks)
                if type(got) is _Parsed:
                    parsed.append(got)
                    got = got.out       # filled in by _store_all
                parts.append(got)
        responses.append(Struct(name=t.name, partition_responses=parts))
    if parsed:
        await _store_all(env, parsed)
    return None if req.acks == 0 else Struct(responses=responses, throttle_time_ms=0)
