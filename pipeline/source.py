"""``spark.read.format("rokka")`` / ``spark.readStream.format("rokka")``: the Python data source.

Theory of operation
-------------------
``RokkaDataSource`` is a PySpark (>= 4) Python data source; ``register(spark)`` makes the short
name ``rokka`` known to a session.  No jar is involved: the driver plans with the RocketMQ
protocol (routes from the name server, min/max offsets from each queue's broker) and the Python
workers pull the messages (``rokka.pipeline.rmq``) and hand Spark Arrow record batches
(``rokka.pipeline.rows``).

Partitions: one Spark partition per queue and offset range; a queue with more than
``maxMessagesPerPartition`` messages in the range is split into several ranges.  Each partition
knows its broker by name and is read from that broker's current master (routes are looked up by
the worker, so a multi-broker cluster reads in parallel from every broker).

Streaming (``RokkaStreamReader``) is exactly-once with Spark checkpoints: an offset is the
``{"topic": {"broker:queueId": next_offset}}`` object; Spark journals each micro-batch's end
offset in the checkpoint before running it and asks for ``partitions(start, end)`` again on
restart, and a range read is deterministic (same offsets, same filter -> same rows).  The
consumer group (``consumerGroup``) is only *informed* of progress in ``commit()``, after Spark
committed the batch; it is never read back.  ``maxMessagesPerTrigger`` caps a micro-batch,
spread over queues in proportion to their backlog; Trigger.AvailableNow is supported.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import structlog
from pyspark.sql.datasource import DataSource, DataSourceReader, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import StructType
from rokka.net.remoting.client import ClientError, MessageQueue, RemotingClient
from rokka.pipeline.columns import PullBatchBuilder
from rokka.pipeline.options import Offsets, SinkOptions, SourceOptions, check_offsets, queue_key, split_queue_key
from rokka.pipeline.rmq import (
    PullSpec,
    QueueRange,
    commit_group_offsets,
    pull_range,
    queue_ranges,
    resolve_offsets,
    run_with_client,
)
from rokka.pipeline.rows import SCHEMA, SCHEMA_DDL

log = structlog.get_logger(__name__)

CHUNK_MESSAGES = 16384  # messages per trio.run inside a partition read
ROWS_PER_BATCH = 4096  # rows per Arrow record batch handed to Spark


@dataclass(frozen=True)
class RokkaPartition(InputPartition):
    """A range ``[start, end)`` of one queue, to be read by one Spark task."""

    topic: str
    broker_name: str
    queue_id: int
    start: int
    end: int

    @property
    def mq(self) -> MessageQueue:
        return MessageQueue(self.topic, self.broker_name, self.queue_id)


def pull_spec(opts: SourceOptions) -> PullSpec:
    return PullSpec(opts.namesrv, opts.read_group, opts.expression, opts.expression_type, opts.pull_batch,
                    opts.fail_on_data_loss, opts.retry_s, opts.credentials)


def split_ranges(starts: Offsets, ends: Offsets, max_per_partition: int) -> list[RokkaPartition]:
    """Partitions for every queue with ``end > start`` (queues missing from ``starts`` start at 0)."""
    parts = []
    for topic in sorted(ends):
        for key in sorted(ends[topic], key=split_queue_key):
            broker, qid = split_queue_key(key)
            lo, hi = starts.get(topic, {}).get(key, 0), ends[topic][key]
            for s in range(lo, hi, max_per_partition):
                parts.append(RokkaPartition(topic, broker, qid, s, min(hi, s + max_per_partition)))
    return parts


def read_partition(spec: PullSpec, part: RokkaPartition) -> Iterator[pa.RecordBatch]:
    """Arrow batches of one partition, pulled chunk by chunk (one ``trio.run`` per chunk)."""
    offset = part.start
    while offset < part.end:
        builder = PullBatchBuilder(part.broker_name)
        ready: list[pa.RecordBatch] = []

        def sink(body: bytes, stop: int, builder: PullBatchBuilder = builder,
                 ready: list[pa.RecordBatch] = ready) -> None:
            builder.add(body, stop)
            if len(builder) >= ROWS_PER_BATCH:
                ready.append(builder.build())

        async def chunk(rc: RemotingClient, start: int = offset) -> int:
            return await pull_range(rc, spec, part.mq, start, part.end, CHUNK_MESSAGES, sink)

        offset = run_with_client(chunk, timeout_s=max(120.0, spec.retry_s * 4), credentials=spec.credentials)
        if len(builder):
            ready.append(builder.build())
        yield from ready


def offsets_of(ranges: Sequence[QueueRange], resolved: dict[MessageQueue, int]) -> Offsets:
    out: Offsets = {}
    for r in ranges:
        out.setdefault(r.mq.topic, {})[queue_key(r.mq.broker_name, r.mq.queue_id)] = resolved[r.mq]
    return out


def plan(opts: SourceOptions, *, start_only: bool = False) -> tuple[Offsets, Offsets, list[QueueRange]]:
    """(start offsets, end offsets, queue ranges) of the options' topics, resolved on the brokers."""
    async def go(rc: RemotingClient) -> tuple[Offsets, Offsets, list[QueueRange]]:
        ranges = await queue_ranges(rc, opts.namesrv, opts.topics, opts.retry_s, opts.read_group)
        start = await resolve_offsets(rc, opts.namesrv, ranges, opts.starting, default=-2,
                                      retry_s=opts.retry_s, group=opts.read_group)
        end = start if start_only else await resolve_offsets(
            rc, opts.namesrv, ranges, opts.ending, default=-1, retry_s=opts.retry_s, group=opts.read_group)
        return offsets_of(ranges, start), offsets_of(ranges, end), ranges
    return run_with_client(go, credentials=opts.credentials)


class RokkaBatchReader(DataSourceReader):
    """Batch read of ``[startingOffsets, endingOffsets)`` of every queue of the topics."""

    def __init__(self, opts: SourceOptions) -> None:
        self.opts = opts

    def partitions(self) -> Sequence[InputPartition]:
        start, end, _ = plan(self.opts)
        ends = {t: {k: max(v, start[t][k]) for k, v in qs.items()} for t, qs in end.items()}
        return split_ranges(start, ends, self.opts.max_partition_messages)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        if not isinstance(partition, RokkaPartition):  # Spark's stand-in when there are no partitions
            return iter(())
        return read_partition(pull_spec(self.opts), partition)


def cap_offsets(start: Offsets, latest: Offsets, max_rows: int) -> Offsets:
    """``latest`` limited to about ``max_rows`` new messages, spread over queues by backlog."""
    backlog = {(t, k): max(0, off - start.get(t, {}).get(k, 0)) for t, qs in latest.items() for k, off in qs.items()}
    total = sum(backlog.values())
    if total <= max_rows:
        return latest
    out: Offsets = {t: dict(start.get(t, {})) for t in latest}
    left = max_rows
    for (t, k), n in sorted(backlog.items()):
        take = min(n, left, max(1, n * max_rows // total)) if n else 0
        out[t][k] = start.get(t, {}).get(k, 0) + take
        left -= take
    return out


class RokkaStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Micro-batch reader; offsets live in Spark's checkpoint (see module doc)."""

    def __init__(self, opts: SourceOptions) -> None:
        self.opts = opts
        self._last_end: Offsets | None = None
        self._target: Offsets | None = None  # Trigger.AvailableNow

    def initialOffset(self) -> dict:
        start, _, _ = plan(self.opts, start_only=True)
        self._last_end = start
        return start

    def _latest(self) -> Offsets:
        async def go(rc: RemotingClient) -> list[QueueRange]:
            return await queue_ranges(rc, self.opts.namesrv, self.opts.topics, self.opts.retry_s,
                                      self.opts.read_group)
        ranges = run_with_client(go, credentials=self.opts.credentials)
        return offsets_of(ranges, {r.mq: r.max for r in ranges})

    def _latest_or(self, known: Offsets) -> Offsets:
        """``_latest()``; while a restarting broker has not re-registered its routes yet, ``known``
        (no new data this trigger) instead of failing the query."""
        try:
            return self._latest()
        except ClientError as exc:
            if not known or "no route" not in str(exc):
                raise
            log.warning("pipeline.topic_route_missing", error=str(exc))
            return known

    def getDefaultReadLimit(self) -> ReadLimit:
        n = self.opts.max_per_trigger
        return ReadMaxRows(n) if n else ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        self._target = self._latest()

    def latestOffset(self, start: dict | None = None, limit: ReadLimit | None = None) -> dict:
        """Next end offset; ``start`` / ``limit`` are None on Spark < 4.2 (then options + own state)."""
        begin = check_offsets(start, "start offset") if start is not None else (self._last_end or {})
        latest = self._target if self._target is not None else self._latest_or(begin)
        # never go backwards (a queue whose broker is briefly absent keeps its start)
        latest = {t: {k: max(v, begin.get(t, {}).get(k, 0)) for k, v in qs.items()} for t, qs in latest.items()}
        for t, qs in begin.items():
            for k, v in qs.items():
                latest.setdefault(t, {}).setdefault(k, v)
        max_rows = limit.max_rows if isinstance(limit, ReadMaxRows) else (
            self.opts.max_per_trigger if limit is None else None)
        end = cap_offsets(begin, latest, max_rows) if max_rows else latest
        self._last_end = end
        return end

    def partitions(self, start: dict, end: dict) -> Sequence[InputPartition]:
        self._last_end = check_offsets(end, "end offset")
        return split_ranges(check_offsets(start, "start offset"), self._last_end, self.opts.max_partition_messages)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        if not isinstance(partition, RokkaPartition):  # Spark's stand-in when there are no partitions
            return iter(())
        return read_partition(pull_spec(self.opts), partition)

    def commit(self, end: dict) -> None:
        group = self.opts.consumer_group
        if not group:
            return
        offsets = {MessageQueue(t, *split_queue_key(k)): v for t, qs in check_offsets(end).items()
                   for k, v in qs.items()}
        try:
            run_with_client(lambda rc: commit_group_offsets(rc, self.opts.namesrv, group, offsets, 10.0),
                            credentials=self.opts.credentials)
        except Exception as exc:  # noqa: BLE001 - informational only; Spark's checkpoint is the truth
            log.warning("pipeline.commit_progress_failed", group=group, error=repr(exc))


class RokkaDataSource(DataSource):
    """The ``rokka`` format (options: see pipeline/README.md)."""

    @classmethod
    def name(cls) -> str:
        return "rokka"

    def schema(self) -> StructType | str:
        return SCHEMA_DDL

    def reader(self, schema: StructType) -> DataSourceReader:
        _check_schema(schema)
        return RokkaBatchReader(SourceOptions.parse(self.options))

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        _check_schema(schema)
        return RokkaStreamReader(SourceOptions.parse(self.options, streaming=True))

    def writer(self, schema: StructType, overwrite: bool) -> Any:
        from rokka.pipeline.sink import RokkaBatchWriter

        return RokkaBatchWriter(SinkOptions.parse(self.options), schema)

    def streamWriter(self, schema: StructType, overwrite: bool) -> Any:
        from rokka.pipeline.sink import RokkaStreamWriter

        return RokkaStreamWriter(SinkOptions.parse(self.options), schema)


def _check_schema(schema: StructType) -> None:
    if schema != SCHEMA:
        raise ValueError(f"the rokka source has a fixed schema ({SCHEMA_DDL}); do not pass .schema(...)")


def register(spark: Any) -> None:
    """Make ``format("rokka")`` available in ``spark`` (a SparkSession)."""
    spark.dataSource.register(RokkaDataSource)
