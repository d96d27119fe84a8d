"""The row shape of a rokka read and the column-wise conversion of messages to Arrow.

Theory of operation
-------------------
A read yields ``pyarrow.RecordBatch`` objects (PySpark's fast path for Python data sources), so
messages are turned into columns here: one Python list per column, then one ``pa.array`` per
column with the exact Arrow type Spark expects (``to_arrow_schema(SCHEMA, timezone="UTC")``;
Spark rejects a batch whose schema differs in any way, nullability of map keys included).

Columns (see ``SCHEMA``): the RocketMQ view (topic, queue, offset, msg id, tags, keys, all
properties, body, timestamps, broker) plus the Kafka view (``key``, ``headers``) for records
that came in over Kafka.  A record is taken as Kafka-produced when it carries a ``KAFKA_*``
property or no ``UNIQ_KEY`` (every RocketMQ client stamps one; the Kafka path never does); its key
and headers are rebuilt by ``rokka.compat.kafka_records.record_from_message``.  ``msg_id`` is what
RocketMQ clients call the message id: the ``UNIQ_KEY`` when present, else the offsetMsgId.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import pyarrow as pa
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    LongType,
    MapType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)
from rokka.compat.kafka_records import record_from_message
from rokka.core.model import PROP_KEYS, PROP_TAGS, PROP_UNIQ_KEY, StoredMessage
from rokka.core.record import encode_offset_msg_id

SCHEMA_DDL = (
    "topic string, queue_id int, queue_offset bigint, msg_id string, tags string, keys string, "
    "properties map<string,string>, body binary, born_timestamp timestamp, store_timestamp timestamp, "
    "broker_name string, key binary, headers array<struct<key:string,value:binary>>"
)
_S, _B = StringType(), BinaryType()
SCHEMA = StructType([
    StructField("topic", _S), StructField("queue_id", IntegerType()), StructField("queue_offset", LongType()),
    StructField("msg_id", _S), StructField("tags", _S), StructField("keys", _S),
    StructField("properties", MapType(_S, _S)), StructField("body", _B),
    StructField("born_timestamp", TimestampType()), StructField("store_timestamp", TimestampType()),
    StructField("broker_name", _S), StructField("key", _B),
    StructField("headers", ArrayType(StructType([StructField("key", _S), StructField("value", _B)]))),
])  # the same as SCHEMA_DDL (a test checks), built without a running Spark
ARROW_SCHEMA: pa.Schema = to_arrow_schema(SCHEMA, timezone="UTC")
_MS = pa.timestamp("ms", tz="UTC")
_KAFKA_PREFIX = "KAFKA_"


def is_kafka_produced(props: dict[str, str]) -> bool:
    return PROP_UNIQ_KEY not in props or any(k.startswith(_KAFKA_PREFIX) for k in props)


def message_id(msg: StoredMessage) -> str:
    uniq = msg.properties.get(PROP_UNIQ_KEY)
    return uniq if uniq else encode_offset_msg_id(msg.store_host, msg.commitlog_offset)


class BatchBuilder:
    """Accumulates messages of one broker as columns; ``build()`` returns a RecordBatch."""

    def __init__(self, broker_name: str) -> None:
        self.broker_name = broker_name
        self._cols: list[list[object]] = [[] for _ in ARROW_SCHEMA.names]

    def __len__(self) -> int:
        return len(self._cols[0])

    def extend(self, messages: Iterable[StoredMessage]) -> None:
        (topic, qid, qoff, mid, tags, keys, props, body, born, store, broker, key,
         headers) = self._cols
        name = self.broker_name
        for m in messages:
            p = m.properties
            topic.append(m.topic)
            qid.append(m.queue_id)
            qoff.append(m.queue_offset)
            uniq = p.get(PROP_UNIQ_KEY)
            mid.append(uniq if uniq else encode_offset_msg_id(m.store_host, m.commitlog_offset))
            tags.append(p.get(PROP_TAGS))
            keys.append(p.get(PROP_KEYS))
            props.append(list(p.items()))
            body.append(m.body)
            born.append(m.born_timestamp)
            store.append(m.store_timestamp)
            broker.append(name)
            if uniq is None or any(k.startswith(_KAFKA_PREFIX) for k in p):
                rec = record_from_message(m)
                key.append(rec.key)
                body[-1] = rec.value if rec.value is not None else None
                headers.append([{"key": k, "value": v} for k, v in rec.headers])
            else:
                key.append(None)
                headers.append(None)

    def build(self) -> pa.RecordBatch:
        arrays = []
        for i, f in enumerate(ARROW_SCHEMA):
            col = self._cols[i]
            if f.name in ("born_timestamp", "store_timestamp"):
                arrays.append(pa.array(col, type=pa.int64()).cast(_MS).cast(f.type))
            else:
                arrays.append(pa.array(col, type=f.type))
        self._cols = [[] for _ in ARROW_SCHEMA.names]
        return pa.RecordBatch.from_arrays(arrays, schema=ARROW_SCHEMA)


def to_record_batches(broker_name: str, messages: Sequence[StoredMessage], rows_per_batch: int = 8192,
                      ) -> list[pa.RecordBatch]:
    """Messages -> RecordBatches of at most ``rows_per_batch`` rows (convenience for tests)."""
    out = []
    for i in range(0, len(messages), rows_per_batch):
        b = BatchBuilder(broker_name)
        b.extend(messages[i:i + rows_per_batch])
        out.append(b.build())
    return out
