"""Options of the ``rokka`` Spark data source, parsed once into frozen values.

Theory of operation
-------------------
Spark hands a data source its options as a case-insensitive ``str -> str`` mapping.  Everything
the connector understands is parsed here, on the driver, into ``SourceOptions`` / ``SinkOptions``;
a bad value raises ``ValueError`` with the option's name, which Spark shows to the user as the
query's failure.  The parsed values are plain data, pickled to the Python workers with the reader.

Offsets are named per queue as ``"<brokerName>:<queueId>"`` (a queue lives on exactly one broker)
inside a per-topic object, the same shape used for Spark checkpoint offsets::

    {"OrderEvents": {"broker-a:0": 12, "broker-a:1": -2}}

In a JSON ``startingOffsets`` / ``endingOffsets`` value, ``-2`` means earliest and ``-1`` latest
(Kafka's convention); queues not named fall back to earliest (start) or latest (end).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

EARLIEST = -2
LATEST = -1
DEFAULT_READ_GROUP = "rokka_spark_reader"
DEFAULT_WRITE_GROUP = "rokka_spark_writer"

QueueKey = str  # "<brokerName>:<queueId>"
Offsets = dict[str, dict[QueueKey, int]]  # topic -> queue key -> offset


def queue_key(broker_name: str, queue_id: int) -> QueueKey:
    return f"{broker_name}:{queue_id}"


def split_queue_key(key: QueueKey) -> tuple[str, int]:
    """``"broker-a:3"`` -> ("broker-a", 3); ValueError on anything else."""
    broker, sep, qid = key.rpartition(":")
    if not sep or not broker or not qid.lstrip("-").isdigit():
        raise ValueError(f"bad queue key {key!r}, expected '<brokerName>:<queueId>'")
    return broker, int(qid)


@dataclass(frozen=True, slots=True)
class OffsetSpec:
    """Where a read starts or ends: ``kind`` is earliest | latest | timestamp | json."""

    kind: str
    timestamp_ms: int = 0
    per_queue: Offsets = field(default_factory=dict)

    def for_queue(self, topic: str, key: QueueKey, default: int) -> int:
        """EARLIEST / LATEST / an absolute offset for one queue (json kind only)."""
        return self.per_queue.get(topic, {}).get(key, default)


def parse_offset_spec(name: str, raw: str | None, default: str, timestamp: str | None = None) -> OffsetSpec:
    """Parse ``startingOffsets`` / ``endingOffsets`` (plus ``startingTimestamp``).

    Raises:
        ValueError: naming the option, for anything that is not earliest, latest or valid JSON.
    """
    if timestamp is not None:
        try:
            return OffsetSpec("timestamp", timestamp_ms=int(timestamp))
        except ValueError:
            raise ValueError(f"{name.replace('Offsets', 'Timestamp')} must be epoch milliseconds, "
                             f"got {timestamp!r}") from None
    value = (raw or default).strip()
    if value.lower() in ("earliest", "latest"):
        return OffsetSpec(value.lower())
    try:
        obj = json.loads(value)
    except ValueError:
        raise ValueError(f"{name} must be earliest, latest or JSON like "
                         f"{{\"Topic\":{{\"broker-a:0\":12}}}}, got {value!r}") from None
    return OffsetSpec("json", per_queue=check_offsets(obj, name))


def check_offsets(obj: Any, what: str = "offsets") -> Offsets:
    """Validate a ``{"topic": {"broker:qid": int}}`` object (JSON offsets, checkpoint offsets)."""
    if not isinstance(obj, Mapping):
        raise ValueError(f"{what}: expected a JSON object of topics")
    out: Offsets = {}
    for topic, queues in obj.items():
        if not isinstance(queues, Mapping):
            raise ValueError(f"{what}: topic {topic!r} must map queue keys to offsets")
        per: dict[QueueKey, int] = {}
        for key, off in queues.items():
            split_queue_key(str(key))
            if isinstance(off, bool) or not isinstance(off, int) or off < EARLIEST:
                raise ValueError(f"{what}: offset of {topic}/{key} must be an integer >= -2, got {off!r}")
            per[str(key)] = off
        out[str(topic)] = per
    return out


def _int_opt(options: Mapping[str, str], name: str, default: int | None, minimum: int = 1) -> int | None:
    raw = options.get(name)
    if raw is None:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ValueError(f"option {name} must be an integer, got {raw!r}") from None
    if value < minimum:
        raise ValueError(f"option {name} must be >= {minimum}, got {value}")
    return value


def _bool_opt(options: Mapping[str, str], name: str, default: bool) -> bool:
    raw = options.get(name)
    if raw is None:
        return default
    if raw.strip().lower() not in ("true", "false"):
        raise ValueError(f"option {name} must be true or false, got {raw!r}")
    return raw.strip().lower() == "true"


def _credentials(options: Mapping[str, str]) -> tuple[str, str] | None:
    """``accessKey`` + ``secretKey`` (brokers with aclEnable sign-check every request), or None."""
    access, secret = options.get("accessKey") or "", options.get("secretKey") or ""
    if bool(access) != bool(secret):
        raise ValueError("options accessKey and secretKey go together (RocketMQ ACL credentials)")
    return (access, secret) if access else None


def _namesrv(options: Mapping[str, str]) -> str:
    addr = options.get("namesrv") or options.get("namesrvAddr")
    if not addr:
        raise ValueError("option namesrv (name server address, host:port[;host:port]) is required")
    return addr


@dataclass(frozen=True, slots=True)
class SourceOptions:
    """Everything a read needs (batch or streaming)."""

    namesrv: str
    topics: tuple[str, ...]
    expression: str
    expression_type: str
    starting: OffsetSpec
    ending: OffsetSpec
    max_per_trigger: int | None
    consumer_group: str | None
    read_group: str
    pull_batch: int
    max_partition_messages: int
    fail_on_data_loss: bool
    retry_s: float
    credentials: tuple[str, str] | None = None

    @classmethod
    def parse(cls, options: Mapping[str, str], *, streaming: bool = False) -> SourceOptions:
        """Raises ValueError naming the bad option.  Streams start at latest by default, batches at
        earliest (as Spark's Kafka source does)."""
        topics = tuple(t.strip() for t in (options.get("topic") or options.get("topics") or "").split(",")
                       if t.strip())
        if not topics:
            raise ValueError("option topic is required (comma-separated topics allowed)")
        etype = (options.get("subscriptionType") or "TAG").strip().upper()
        if etype not in ("TAG", "SQL92"):
            raise ValueError(f"option subscriptionType must be TAG or SQL92, got {etype!r}")
        expression = (options.get("subscription") or "*").strip() or "*"
        if etype == "SQL92" and expression == "*":
            raise ValueError("option subscription must hold the SQL92 expression when subscriptionType=SQL92")
        group = options.get("consumerGroup") or None
        return cls(
            namesrv=_namesrv(options), topics=topics, expression=expression, expression_type=etype,
            starting=parse_offset_spec("startingOffsets", options.get("startingOffsets"),
                                       "latest" if streaming else "earliest",
                                       options.get("startingTimestamp")),
            ending=parse_offset_spec("endingOffsets", options.get("endingOffsets"), "latest"),
            max_per_trigger=_int_opt(options, "maxMessagesPerTrigger", None),
            consumer_group=group, read_group=group or DEFAULT_READ_GROUP,
            pull_batch=min(_int_opt(options, "pullBatchSize", 1024) or 1024, 1024),
            max_partition_messages=_int_opt(options, "maxMessagesPerPartition", 250_000) or 250_000,
            fail_on_data_loss=_bool_opt(options, "failOnDataLoss", True),
            retry_s=float(_int_opt(options, "retrySeconds", 60, minimum=0) or 0),
            credentials=_credentials(options))


@dataclass(frozen=True, slots=True)
class SinkOptions:
    """Everything a write needs."""

    namesrv: str
    topic: str
    producer_group: str
    batch_size: int
    retry_s: float
    credentials: tuple[str, str] | None = None

    @classmethod
    def parse(cls, options: Mapping[str, str]) -> SinkOptions:
        topic = (options.get("topic") or "").strip()
        if not topic or "," in topic:
            raise ValueError("option topic (exactly one topic) is required for writing")
        return cls(namesrv=_namesrv(options), topic=topic,
                   producer_group=options.get("producerGroup") or DEFAULT_WRITE_GROUP,
                   batch_size=_int_opt(options, "batchSize", 256) or 256,
                   retry_s=float(_int_opt(options, "retrySeconds", 60, minimum=0) or 0),
                   credentials=_credentials(options))
