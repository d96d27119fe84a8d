"""Shared pieces of the Kafka request handlers: environment, topic checks, batch building.

Theory of operation
-------------------
``KafkaEnv`` is what every handler closes over: the core ``Broker`` plus the
identity this node advertises (node id, host, port, cluster id).  Kafka
topic = core topic, partition = queue id, Kafka offset = ConsumeQueue offset.
Leader epoch is the constant 0 everywhere (kafka-wire.md §7.7).

Names a Kafka client may use: ordinary topics; views (``rokka.compat.views``:
resolved to their source topic plus a filter); and RocketMQ's own retry,
DLQ and schedule topics by their RocketMQ names (``%RETRY%g``, ``%DLQ%g``,
``SCHEDULE_TOPIC_XXXX``) when they exist — readable, never auto-created.
``topic_config`` and ``resolve`` are the one place that decides this.
Topic names follow Kafka's rule (``rokka.core.names``: ``[a-zA-Z0-9._-]``,
at most 249 characters, not "." or ".."); ``refused_topic_name`` is the check
for names a client asks to create (CreateTopics, Metadata auto-create), with
its ``kafka.bad_name`` log line.  Group ids are free strings, as in Kafka.

In a cluster (``rokka.gateway.kafka.cluster``) a topic's partitions are spread
over the brokers: ``local_queue`` is the one translation from a Kafka
partition to this broker's queue id (None when another broker owns it:
``partition_error`` then answers NOT_LEADER_OR_FOLLOWER so the client
refreshes its metadata).  Without a cluster view, partition = queue id.
Async handlers call ``ensure_routes`` first so the layout is fresh.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from rokka.compat.kafka_pieces import PlainPiece, kafka_pieces
from rokka.compat.kafka_records import KafkaControl, KafkaRow, kafka_rows
from rokka.compat.views import ViewRegistry
from rokka.core import names
from rokka.core.broker import Broker
from rokka.core.filter import ExpressionFilter
from rokka.core.model import DLQ_PREFIX, RETRY_PREFIX, TOPIC_SCHEDULE
from rokka.core.storage import RecordRun, release_runs
from rokka.core.topics import TopicConfig, is_system_topic
from rokka.gateway.kafka.codec import records as R
from rokka.gateway.kafka.codec.primitives import Pieces
from rokka.gateway.kafka.codec.stored_records import walk as stored_walk
from rokka.gateway.kafka.errors import ErrorCode as E
from rokka.gateway.kafka.producers.state import ProducerStateManager
from rokka.gateway.kafka.txn.coordinator import KafkaTxnCoordinator

if TYPE_CHECKING:
    from rokka.gateway.kafka.cluster import ClusterView

LEADER_EPOCH = 0


@dataclass
class KafkaEnv:
    broker: Broker
    node_id: int
    host: str
    port: int
    cluster_id: str = "rokka"
    producers: ProducerStateManager | None = None  # idempotent-producer state (None: not enforced)
    transactions: KafkaTxnCoordinator | None = None  # transactional batches (None: refused with 48)
    views: ViewRegistry = field(default_factory=lambda: ViewRegistry(None))
    cluster: ClusterView | None = None  # multi-broker layout (None: a single node, partition = queue)


def invalid_topic_name(name: str | None) -> bool:
    """Not a name Kafka allows (no log line: also used to filter listings)."""
    return names.topic_problem(name, kafka=True) is not None


def refused_topic_name(name: str | None, api: str) -> str | None:
    """Kafka's reason when a client may not create ``name`` (logged once as ``kafka.bad_name``), or None."""
    why = names.topic_problem(name, kafka=True)
    if why is not None:
        names.refused("kafka", "topic", name, why, api=api)
    return why


def kafka_topics(env: KafkaEnv) -> dict[str, TopicConfig]:
    """Topics visible to Kafka clients: no RocketMQ system, retry or DLQ topics."""
    return {n: tc for n, tc in env.broker.topics.all().items()
            if not is_system_topic(n) and not invalid_topic_name(n)}


def partition_count(tc: TopicConfig) -> int:
    return tc.read_queue_nums


def is_rocketmq_readable(name: str) -> bool:
    return name.startswith((RETRY_PREFIX, DLQ_PREFIX)) or name == TOPIC_SCHEDULE


def resolve(env: KafkaEnv, name: str) -> tuple[str, ExpressionFilter | None]:
    """(source topic, filter) for a Kafka topic name: a view's source and filter, else (name, None)."""
    view = env.views.get(name)
    if view is None:
        return name, None
    return view.topic, env.views.filter_of(name)


def topic_config(env: KafkaEnv, name: str) -> TopicConfig | None:
    """The topic a Kafka name reads (views resolved; RocketMQ retry/DLQ/schedule names allowed)."""
    source, _ = resolve(env, name)
    tc = env.broker.topics.get(source)
    if tc is None:
        return None
    if source != name or is_rocketmq_readable(source):
        return tc
    return tc if not is_system_topic(source) and not invalid_topic_name(source) else None


def local_queue(env: KafkaEnv, topic: str, partition: int) -> int | None:
    """This broker's queue id for Kafka ``partition`` of ``topic`` (views resolved), or None when
    the partition does not exist or another broker of the cluster owns it."""
    return queue_of(env, resolve(env, topic)[0], topic_config(env, topic), partition)


def queue_of(env: KafkaEnv, source: str, tc: TopicConfig | None, partition: int) -> int | None:
    """``local_queue`` with the topic already resolved: ``source`` the stored topic, ``tc`` its
    ``topic_config`` (None: no such topic)."""
    if tc is None:
        return None
    if env.cluster is None:
        return partition if 0 <= partition < partition_count(tc) else None
    return env.cluster.local_queue(source, partition)


def partition_error(env: KafkaEnv, topic: str, partition: int) -> int:
    """The error for a partition ``local_queue`` refused: NOT_LEADER_OR_FOLLOWER when another
    broker owns it, else UNKNOWN_TOPIC_OR_PARTITION."""
    if env.cluster is not None and partition >= 0:
        lay = env.cluster.layout(resolve(env, topic)[0])
        if lay is not None and partition < lay.total:
            return E.NOT_LEADER_OR_FOLLOWER
    return E.UNKNOWN_TOPIC_OR_PARTITION


def has_partition(env: KafkaEnv, topic: str, partition: int) -> bool:
    return local_queue(env, topic, partition) is not None


async def ensure_routes(env: KafkaEnv, topics: Iterable[str], force: bool = False) -> None:
    """Refresh the cluster layout of these topics if stale, or at once with ``force`` (no-op on a
    single node)."""
    if env.cluster is not None:
        await env.cluster.ensure((resolve(env, t)[0] for t in topics), force=force)


def read_records(env: KafkaEnv, topic: str, partition: int, offset: int, max_bytes: int,
                 max_msgs: int = 1000, message_filter: ExpressionFilter | None = None,
                 ) -> tuple[list[KafkaRow], int]:
    """Kafka records (``KafkaRow`` tuples) from ``offset`` (at least one if any exists), about
    ``max_bytes`` of store data, and no more values than the first past ``max_bytes`` (inflated
    bodies).

    Returns the records and the next offset to read (past everything scanned, matching or not).
    """
    res = env.broker.store.get_messages(topic, partition, offset, max_msgs, max_bytes=max(max_bytes, 1),
                                        message_filter=message_filter)
    rows = kafka_rows(res.records, env.broker.cfg.max_message_size, max_bytes)
    return rows, (res.next_begin_offset if len(rows) == len(res.records) else rows[-1][0] + 1)


def read_batches(env: KafkaEnv, topic: str, partition: int, offset: int, max_bytes: int,
                 max_msgs: int = 1000) -> tuple[Pieces, int]:
    """``build_batches(read_records(...))`` without a filter, from the store's runs: plain stretches
    become one batch each straight from the CommitLog bytes (``rokka.compat.kafka_pieces``).

    ``max_bytes`` counts Kafka bytes, as the client meant it.  The store counts stored bytes, more
    per record (RocketMQ's header, topic and properties: ~2.2x a 100 B Kafka record), so a first
    read stops well short; a second one asks for what is left, scaled by the first read's stored to
    Kafka ratio (less 5 %, so the limit holds for records of similar size).

    Returns the batches, as ``Pieces`` (each batch header apart from the records it wraps, so the
    response goes out without a copy of them: ``primitives.Gather``), and how many offsets they cover:
    the records, and the holes of a compacted topic among them (``rokka.core.storage.compaction``).
    A read that finds only holes answers with an empty control batch past them, so consumers move on.
    """
    store = env.broker.store
    parts: list[bytes | memoryview] = []
    count = nbytes = 0
    at = offset
    budget = max(max_bytes, 1)      # stored bytes to ask for: never more Kafka bytes than that
    for _ in range(2):
        runs, scanned = store.get_runs(topic, partition, at, max_msgs - count, budget, views=True)
        try:
            pieces, n = _batches_of(runs, env.broker.cfg.max_message_size, max_bytes - nbytes)
            stored = sum(len(run.data) for run in runs)
            after = _after(runs, n, scanned)
            holes_only = not runs
        finally:
            release_runs(runs)     # the runs' data were lent by the store (memoryviews into its map)
        if not n:
            if holes_only and at == offset and scanned > at:    # holes only: step the consumer past them
                parts.append(skip_marker(scanned - 1))
                at = scanned
            break
        parts += pieces.parts
        count += n
        at = after
        nbytes += pieces.nbytes
        left = max_bytes - nbytes
        if count >= max_msgs or left <= 0 or at >= store.max_offset(topic, partition):
            break
        budget = int(left * 0.95 * stored / pieces.nbytes)
        if budget <= 0:
            break
    return Pieces(parts), at - offset


def _after(runs: list[RecordRun], taken: int, scanned: int) -> int:
    """The offset after the ``taken`` first records of ``runs`` (``scanned``, where the store's walk
    stopped, when all were taken)."""
    for run in runs:
        if taken < len(run.sizes):
            return run.queue_offset + taken
        taken -= len(run.sizes)
    return scanned


def _batches_of(runs: list[RecordRun], inflate_limit: int, max_bytes: int) -> tuple[Pieces, int]:
    """The runs' batches, stopping after the piece that takes them past ``max_bytes`` (a stored
    compressed body may inflate far beyond its stored size)."""
    out: list[bytes] = []
    count = nbytes = 0
    for run in runs:
        if count and nbytes >= max_bytes:
            break
        before = count
        for piece in kafka_pieces(run, walker=stored_walk, inflate_limit=inflate_limit,
                                  max_bytes=max_bytes - nbytes):
            if isinstance(piece, PlainPiece):
                out.append(R.batch_header(piece.payload, base_offset=piece.offset, last_offset_delta=piece.count - 1,
                                          count=piece.count, base_timestamp=piece.first_timestamp,
                                          max_timestamp=piece.max_timestamp, partition_leader_epoch=LEADER_EPOCH))
                out.append(piece.payload)
                count += piece.count
                nbytes += len(piece.payload)
            else:
                out.append(build_batches(piece))
                count += len(piece)
                nbytes += sum(len(row[4] or b"") for row in piece)
        if count - before < len(run.sizes):
            break       # cut short within the run: what follows must not be skipped
    return Pieces(out), count


def skip_marker(offset: int) -> bytes:
    """A control batch at ``offset``: consumers move past it and never show it (filtered-out ranges)."""
    return R.encode_control_batch(base_offset=offset, producer_id=-1, producer_epoch=-1, commit=True,
                                  timestamp=0, partition_leader_epoch=LEADER_EPOCH)


def build_batches(recs: Sequence[KafkaRow]) -> bytes:
    """Uncompressed v2 batches for consecutive records; a new batch whenever the timestamp type changes."""
    if not recs:
        return b""
    first_lat = recs[0][2]
    if all(r[2] == first_lat for r in recs):  # the usual case: one batch
        return _batch(recs, first_lat)
    out = []
    i = 0
    while i < len(recs):
        j = i
        while j + 1 < len(recs) and recs[j + 1][2] == recs[i][2]:
            j += 1
        out.append(_batch(recs[i : j + 1], recs[i][2]))
        i = j + 1
    return b"".join(out)


def _control_batch(row: KafkaRow) -> bytes:
    """A transaction's marker (its producer id, COMMIT/ABORT) or an aborted record's placeholder
    (as ``skip_marker``) at the row's offset: ``rokka.core.txn`` control entries."""
    mark = row[2]
    assert isinstance(mark, KafkaControl)
    if mark.kind not in ("C", "A"):
        return skip_marker(row[0])
    return R.encode_control_batch(base_offset=row[0], producer_id=mark.producer_id, producer_epoch=mark.epoch,
                                  commit=mark.kind == "C", timestamp=row[1], partition_leader_epoch=LEADER_EPOCH)


def _batch(run: Sequence[KafkaRow], log_append_time: object) -> bytes:
    if isinstance(log_append_time, KafkaControl):     # one control batch per entry
        return b"".join(_control_batch(row) for row in run)
    return R.encode_rows_batch(run, partition_leader_epoch=LEADER_EPOCH,
                               attributes=R.TIMESTAMP_TYPE_BIT if log_append_time else 0)
