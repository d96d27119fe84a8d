"""``df.write.format("rokka")`` / ``df.writeStream.format("rokka")``: send rows as RocketMQ messages.

Theory of operation
-------------------
Columns: ``body`` (binary or string, required), ``tags`` (string), ``keys`` (string, or array of
strings), ``properties`` (map<string,string>), ``queue_id`` (int: send to that queue; otherwise
messages are spread round-robin over the topic's writable queues).  Other columns are ignored.
Rows are sent in SEND_BATCH_MESSAGE requests of ``batchSize`` messages, grouped by queue.

Guarantee: **at-least-once**.  A task that fails after some of its requests succeeded is retried
by Spark and resends them; a streaming batch that is replayed after a crash resends it all.  To
let readers drop those duplicates, every message gets a *deterministic* ``UNIQ_KEY`` (RocketMQ's
client message id, the ``msg_id`` column of a rokka read) derived from::

    (streaming query id, batch id, partition id, row index in the partition)   # streaming
    (write id chosen on the driver, partition id, row index in the partition)  # batch

so a retried task or a replayed micro-batch produces the same ids, provided its input is
deterministic (Spark's own sources and this connector's reads are).  A row whose ``properties``
already hold ``UNIQ_KEY`` keeps it.  Deduplicate downstream on ``msg_id`` (e.g.
``dropDuplicatesWithinWatermark("msg_id")``).
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyspark.sql.datasource as _ds
import structlog
import trio
from pyspark import TaskContext
from pyspark.sql.datasource import DataSourceArrowWriter, WriterCommitMessage
from pyspark.sql.types import ArrayType, BinaryType, StringType, StructType
from rokka.core.model import PROP_UNIQ_KEY
from rokka.net.remoting.client import OutMessage, RemotingClient
from rokka.pipeline.options import SinkOptions
from rokka.pipeline.rmq import run_with_client, send_all

log = structlog.get_logger(__name__)

# Arrow batches for streaming writes need PySpark >= 4.1 (DataSourceStreamArrowWriter).
_StreamWriterBase = getattr(_ds, "DataSourceStreamArrowWriter", _ds.DataSourceStreamWriter)
_STREAM_ARROW = _StreamWriterBase is not _ds.DataSourceStreamWriter

# Spark's local properties naming the running micro-batch (set for every task of that batch).
QUERY_ID_PROPERTY = "sql.streaming.queryId"
BATCH_ID_PROPERTY = "streaming.sql.batchId"
FLUSH_ROWS = 16384  # rows per trio.run in a write task
SEND_CONCURRENCY = 4  # batches in flight per write task
# Stamped by the broker on store; dropped when rows read from rokka are written back.
BROKER_PROPERTIES = frozenset({"CLUSTER", "MIN_OFFSET", "MAX_OFFSET"})


@dataclass(frozen=True)
class RokkaCommitMessage(WriterCommitMessage):
    partition_id: int
    messages: int


def uniq_key(scope: str, partition: int, row: int) -> str:
    """Deterministic 32-hex-char UNIQ_KEY for one output row."""
    return hashlib.md5(f"{scope}/{partition}/{row}".encode(), usedforsecurity=False).hexdigest().upper()


def check_sink_schema(schema: StructType) -> None:
    """ValueError unless ``body`` is there and the optional columns have usable types."""
    fields = {f.name: f.dataType for f in schema.fields}
    if "body" not in fields:
        raise ValueError("writing to rokka needs a 'body' column (binary or string)")
    if not isinstance(fields["body"], BinaryType | StringType):
        raise ValueError(f"column body must be binary or string, got {fields['body'].simpleString()}")
    for name in ("tags",):
        if name in fields and not isinstance(fields[name], StringType):
            raise ValueError(f"column {name} must be a string")
    if "keys" in fields and not isinstance(fields["keys"], StringType | ArrayType):
        raise ValueError("column keys must be a string or an array of strings")


def row_message(row: Any, cols: frozenset[str], uniq: str) -> tuple[int | None, OutMessage]:
    """(queue id or None, message) of one Spark Row."""
    def get(name: str) -> Any:
        return row[name] if name in cols else None

    return message_of(row["body"], get("tags"), get("keys"), get("properties"), get("queue_id"), uniq)


def message_of(body: Any, tags: str | None, keys: Any, properties: Any, queue: int | None,
               uniq: str) -> tuple[int | None, OutMessage]:
    """(queue id or None, message) of one row's values; ``properties`` is a dict (Row) or a list of
    (key, value) pairs (Arrow's ``to_pylist`` of a map)."""
    if body is None:
        body = b""
    elif isinstance(body, str):
        body = body.encode("utf-8")
    pairs = properties.items() if isinstance(properties, dict) else (properties or ())
    props = {str(k): str(v) for k, v in pairs if v is not None and k not in BROKER_PROPERTIES}
    props.setdefault(PROP_UNIQ_KEY, uniq)
    if isinstance(keys, list):
        keys = [k for k in keys if k]
    return (None if queue is None else int(queue)), OutMessage(
        bytes(body), tags=tags or None, keys=keys or None, properties=props)


def batch_messages(batch: pa.RecordBatch, scope: str, partition: int, first_row: int,
                   ) -> list[tuple[int | None, OutMessage]]:
    """Messages of one Arrow batch (rows ``first_row ..`` of the task), column by column."""
    n = batch.num_rows
    names = set(batch.schema.names)

    def col(name: str) -> list[Any]:
        return batch.column(name).to_pylist() if name in names else [None] * n

    return [message_of(b, t, k, p, q, uniq_key(scope, partition, first_row + i))
            for i, (b, t, k, p, q) in enumerate(zip(col("body"), col("tags"), col("keys"), col("properties"),
                                                    col("queue_id"), strict=True))]


class _Writer:
    """What the batch and streaming writers share: rows -> batched sends."""

    def __init__(self, opts: SinkOptions, schema: StructType) -> None:
        check_sink_schema(schema)
        self.opts = opts
        self.cols = frozenset(schema.fieldNames())
        self.write_id = uuid.uuid4().hex  # chosen once on the driver, pickled to every task

    def _scope(self, ctx: TaskContext | None) -> str:
        if ctx is not None:
            query, batch = ctx.getLocalProperty(QUERY_ID_PROPERTY), ctx.getLocalProperty(BATCH_ID_PROPERTY)
            if query and batch:
                return f"{query}/{batch}"
        return self.write_id

    def write_rows(self, iterator: Iterator[Any]) -> RokkaCommitMessage:
        ctx = TaskContext.get()
        partition = ctx.partitionId() if ctx is not None else 0
        scope = self._scope(ctx)
        pending: list[tuple[int | None, OutMessage]] = []
        sent = 0
        for i, row in enumerate(iterator):
            pending.append(row_message(row, self.cols, uniq_key(scope, partition, i)))
            if len(pending) >= FLUSH_ROWS:
                sent += self._flush(pending)
                pending = []
        sent += self._flush(pending)
        return RokkaCommitMessage(partition, sent)

    def write_batches(self, iterator: Iterator[pa.RecordBatch]) -> RokkaCommitMessage:
        """The Arrow form of ``write_rows`` (same messages, same UNIQ_KEYs)."""
        ctx = TaskContext.get()
        partition = ctx.partitionId() if ctx is not None else 0
        scope = self._scope(ctx)
        pending: list[tuple[int | None, OutMessage]] = []
        rows = sent = 0
        for batch in iterator:
            pending += batch_messages(batch, scope, partition, rows)
            rows += batch.num_rows
            if len(pending) >= FLUSH_ROWS:
                sent += self._flush(pending)
                pending = []
        sent += self._flush(pending)
        return RokkaCommitMessage(partition, sent)

    def _flush(self, pending: list[tuple[int | None, OutMessage]]) -> int:
        """Send ``pending`` in batches of ``batchSize`` per queue, up to SEND_CONCURRENCY in flight."""
        by_queue: dict[int | None, list[OutMessage]] = {}
        for queue, msg in pending:
            by_queue.setdefault(queue, []).append(msg)
        size = self.opts.batch_size
        groups = [(q, msgs[i:i + size]) for q, msgs in by_queue.items() for i in range(0, len(msgs), size)]
        if not groups:
            return 0
        o = self.opts

        async def go(rc: RemotingClient) -> None:
            async with trio.open_nursery() as nursery:
                for k in range(SEND_CONCURRENCY):
                    nursery.start_soon(send_all, rc, o.namesrv, o.producer_group, o.topic,
                                       groups[k::SEND_CONCURRENCY], o.retry_s)
        run_with_client(go, timeout_s=max(120.0, o.retry_s * 4), credentials=o.credentials)
        return len(pending)


class RokkaBatchWriter(_Writer, DataSourceArrowWriter):
    """``df.write.format("rokka")`` (at-least-once, deterministic UNIQ_KEYs); Spark hands it Arrow
    batches, not Rows."""

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriterCommitMessage:
        return self.write_batches(iterator)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        pass  # every message is already stored (acknowledged SEND_OK) when its task ends

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        log.warning("pipeline.write_aborted", topic=self.opts.topic)


class RokkaStreamWriter(_Writer, _StreamWriterBase):  # type: ignore[misc,valid-type]
    """``writeStream.format("rokka")`` (at-least-once, UNIQ_KEY from query id + batch id); Arrow
    batches on PySpark >= 4.1, Rows before."""

    def write(self, iterator: Iterator[Any]) -> WriterCommitMessage:
        if _STREAM_ARROW:
            return self.write_batches(iterator)
        return self.write_rows(iterator)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:  # noqa: N803
        pass  # every message is already stored (acknowledged SEND_OK) when its task ends

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:  # noqa: N803
        log.warning("pipeline.stream_batch_aborted_will_replay",
                    topic=self.opts.topic, batch=batchId)
