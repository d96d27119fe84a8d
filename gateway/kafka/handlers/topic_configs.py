"""Kafka topic configs: which rokka applies per topic, which it accepts, which it refuses.

Theory of operation
-------------------
rokka's topics live in one shared CommitLog whose segment size and flushing
are store-wide (``mapedFileSizeCommitLog``, ``flushDiskType``), so some per-topic
Kafka configs cannot take effect.  Kafka refuses an unknown config name
(``INVALID_CONFIG``, "Unknown topic config name"); rokka does the same.

Applied per topic (``APPLIED``; kept in ``rokka.core.topic_retention``, set by
CreateTopics, AlterConfigs and IncrementalAlterConfigs, shown by DescribeConfigs):

* ``retention.ms`` / ``retention.bytes``: the log start moves past records older
  / beyond the size (``rokka.core.topic_retention``); the store-wide retention
  still removes whole segments first when it is shorter.
* ``max.message.bytes``: a produced batch larger than it gets MESSAGE_TOO_LARGE.
* ``message.timestamp.type``: ``LogAppendTime`` makes the broker stamp every
  produced batch with its append time (consumers see LOG_APPEND_TIME).
* ``min.insync.replicas``: acks=all on a topic asking for more replicas than the
  ISR (the broker and its caught-up slaves, ``rokka.gateway.kafka.replicas``)
  answers NOT_ENOUGH_REPLICAS (as Kafka with a shrunken ISR).
* ``segment.bytes`` / ``segment.ms``: accepted, stored and shown, *not applied*
  (the CommitLog's segments hold every topic: ``mapedFileSizeCommitLog``).
* ``cleanup.policy`` (``delete``, ``compact`` or both), ``delete.retention.ms``,
  ``min.compaction.lag.ms``: a topic with ``compact`` is compacted
  (``rokka.core.storage.compaction``: latest record per key kept, tombstones
  removed after delete.retention.ms, offsets kept); with ``compact`` alone its
  retention.ms / retention.bytes are not applied, as in Kafka.  This module
  registers how a stored record's Kafka key and null value are read
  (``compaction.set_key_reader``, ``record_key``).

Every other known Kafka topic config is accepted by CreateTopics and logged as
not applied, and refused by AlterConfigs / IncrementalAlterConfigs (an
explicit request to change behaviour) unless its value is the one in force.
``rokka.view.*`` configs create a view (``rokka.compat.views``).
"""

from __future__ import annotations

from rokka.compat.kafka_records import KafkaControl, kafka_row
from rokka.core.storage import set_key_reader

#: Topic config names of Kafka 3.x/4.x (``LogConfig``), the names clients may legitimately send.
KAFKA_TOPIC_CONFIGS = frozenset({
    "cleanup.policy", "compression.type", "compression.gzip.level", "compression.lz4.level",
    "compression.zstd.level", "delete.retention.ms", "file.delete.delay.ms", "flush.messages", "flush.ms",
    "follower.replication.throttled.replicas", "index.interval.bytes",
    "leader.replication.throttled.replicas", "local.retention.bytes", "local.retention.ms",
    "max.compaction.lag.ms", "max.message.bytes", "message.downconversion.enable",
    "message.format.version", "message.timestamp.after.max.ms", "message.timestamp.before.max.ms",
    "message.timestamp.difference.max.ms", "message.timestamp.type", "min.cleanable.dirty.ratio",
    "min.compaction.lag.ms", "min.insync.replicas", "preallocate", "remote.log.copy.disable",
    "remote.log.delete.on.disable", "remote.storage.enable", "retention.bytes", "retention.ms",
    "segment.bytes", "segment.index.bytes", "segment.jitter.ms", "segment.ms",
    "unclean.leader.election.enable",
})
VIEW_PREFIX = "rokka.view."
RETENTION_MS = "retention.ms"
RETENTION_BYTES = "retention.bytes"
MAX_MESSAGE_BYTES = "max.message.bytes"
TIMESTAMP_TYPE = "message.timestamp.type"
MIN_INSYNC = "min.insync.replicas"
CLEANUP_POLICY = "cleanup.policy"
DELETE_RETENTION_MS = "delete.retention.ms"
MIN_COMPACTION_LAG_MS = "min.compaction.lag.ms"
POLICIES = ("compact", "delete")
#: name -> (smallest value, largest value) of the integer configs rokka keeps per topic.
_INT_RANGES = {RETENTION_MS: (-1, 2**63 - 1), RETENTION_BYTES: (-1, 2**63 - 1), MAX_MESSAGE_BYTES: (0, 2**31 - 1),
               MIN_INSYNC: (1, 2**31 - 1), "segment.bytes": (14, 2**31 - 1), "segment.ms": (1, 2**63 - 1),
               DELETE_RETENTION_MS: (0, 2**63 - 1), MIN_COMPACTION_LAG_MS: (0, 2**63 - 1)}
#: Configs kept per topic and shown by DescribeConfigs (segment.* are kept and shown, not applied).
APPLIED = frozenset({*_INT_RANGES, TIMESTAMP_TYPE, CLEANUP_POLICY})
NOT_APPLIED = frozenset({"segment.bytes", "segment.ms"})
TIMESTAMP_TYPES = ("CreateTime", "LogAppendTime")
#: Values that are what rokka does anyway (accepted by AlterConfigs).
IN_FORCE: dict[str, str] = {}
#: Deprecated configs Kafka 3.x accepts and ignores (message.format.version is ignored since
#: inter.broker.protocol.version 3.0): AlterConfigs accepts them, nothing is applied or shown.
IGNORED_DEPRECATED = frozenset({"message.format.version", "message.downconversion.enable"})


def record_key(raw: bytes) -> tuple[bytes, bool] | None:
    """A stored record's Kafka key and whether it is a tombstone (null value); None for a record
    compaction must keep (no key, a transaction marker or aborted placeholder, unreadable)."""
    try:
        row = kafka_row(raw)
    except (ValueError, KeyError, IndexError):
        return None
    if isinstance(row[2], KafkaControl) or row[3] is None:
        return None
    return row[3], row[4] is None


set_key_reader(record_key)


def parse_config(name: str, value: str | None) -> str | None:
    """The normalised value of a config rokka keeps per topic (None: unset, from a null value or
    ``-1`` for the retentions); ValueError with Kafka's wording when the value is invalid."""
    if value is None:
        return None
    if name == CLEANUP_POLICY:
        return _parse_policy(value)
    if name == TIMESTAMP_TYPE:
        if value.strip() not in TIMESTAMP_TYPES:
            raise ValueError(f"Invalid value {value} for configuration {name}: String must be one of: "
                             f"{', '.join(TIMESTAMP_TYPES)}")
        return value.strip()
    low, high = _INT_RANGES[name]
    try:
        n = int(value.strip())
    except ValueError:
        raise ValueError(f"Invalid value {value} for configuration {name}: not a number") from None
    if not low <= n <= high:
        raise ValueError(f"Invalid value {value} for configuration {name}: must be >= {low}")
    return None if n == -1 and name in (RETENTION_MS, RETENTION_BYTES) else str(n)


def parse_retention_ms(value: str | None) -> int | None:
    """``retention.ms`` -> ms (None: no per-topic limit, from -1 or a null value); ValueError
    when it is not an integer >= -1."""
    parsed = parse_config(RETENTION_MS, value)
    return None if parsed is None else int(parsed)


def _parse_policy(value: str) -> str:
    """``cleanup.policy`` normalised: "compact", "delete" or "compact,delete" (an empty list: delete)."""
    policy = {p.strip().lower() for p in value.split(",")} - {""}
    if policy - set(POLICIES):
        raise ValueError(f"Invalid value {value} for configuration cleanup.policy: String must be one of: "
                         f"{', '.join(POLICIES)}")
    return ",".join(p for p in POLICIES if p in policy) or "delete"


def alter_refusal(name: str, value: str | None) -> str | None:
    """Why AlterConfigs may not set topic config ``name`` to ``value`` (None: it may)."""
    if name.startswith(VIEW_PREFIX):
        return "a view's configs are fixed when it is created"
    if name not in KAFKA_TOPIC_CONFIGS:
        return f"Unknown topic config name: {name}"
    if name in APPLIED:
        try:
            parse_config(name, value)
        except ValueError as exc:
            return str(exc)
        return None
    if value is None or IN_FORCE.get(name, "").lower() == value.strip().lower() or name in IGNORED_DEPRECATED:
        return None
    return (f"{name} is not applied per topic by rokka (flushing and the other store settings are store-wide: "
            f"see broker.conf); per topic rokka applies {', '.join(sorted(APPLIED - NOT_APPLIED))}")


def check_topic_configs(configs: dict[str, str | None]) -> tuple[str | None, list[str]]:
    """(why the configs are refused or None, the names accepted but not applied)."""
    for name in configs:
        if name not in KAFKA_TOPIC_CONFIGS and not name.startswith(VIEW_PREFIX):
            return f"Unknown topic config name: {name}", []
    for name in APPLIED & configs.keys():
        try:
            parse_config(name, configs[name])
        except ValueError as exc:
            return str(exc), []
    ignored = sorted(n for n in configs if not n.startswith(VIEW_PREFIX) and (n not in APPLIED or n in NOT_APPLIED))
    return None, ignored
