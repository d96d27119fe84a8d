"""Kafka topic configs given to CreateTopics: which rokka honours, refuses or only notes.

Theory of operation
-------------------
rokka's topics live in one shared CommitLog whose retention, segment size and
flushing are store-wide (``fileReservedTime``, ``mapedFileSizeCommitLog``,
``flushDiskType``), so most per-topic Kafka configs cannot take effect.  Kafka
refuses an unknown config name (``INVALID_CONFIG``, "Unknown topic config
name"); rokka does the same, and also refuses the configs whose meaning a
client relies on and rokka cannot give:

* ``cleanup.policy`` with ``compact``: records are never compacted, so a
  compacted topic's "latest value per key" contract would silently break
  (and retention would delete keys a compacted topic keeps forever);
* ``message.timestamp.type=LogAppendTime``: the broker does not rewrite
  record timestamps per topic (a producer's LogAppendTime batch is honoured).

``retention.ms`` is applied (``rokka.core.topic_retention``): a topic keeps its
records for at most that long; the store-wide retention still removes whole
segments, so a longer value (or -1, "forever") cannot lengthen it and is
logged as such.  Every other known Kafka topic config is accepted and not
applied; the handler logs them, and DescribeConfigs shows the values that do
apply.  ``rokka.view.*`` configs create a view (``rokka.compat.views``).

AlterConfigs / IncrementalAlterConfigs (``alter_refusal``) are an explicit
request to change behaviour, so there every config rokka does not apply is
refused (INVALID_CONFIG with the reason) unless its value is the one that
applies anyway.
"""

from __future__ import annotations

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
#: Values that are what rokka does anyway (accepted by AlterConfigs).
IN_FORCE = {"cleanup.policy": "delete", "message.timestamp.type": "CreateTime"}


def parse_retention_ms(value: str | None) -> int | None:
    """``retention.ms`` -> ms (None: no per-topic limit, from -1 or a null value); ValueError
    when it is not an integer >= -1."""
    if value is None:
        return None
    try:
        ms = int(value.strip())
    except ValueError:
        raise ValueError(f"Invalid value {value} for configuration retention.ms: not a number") from None
    if ms < -1:
        raise ValueError(f"Invalid value {value} for configuration retention.ms: must be >= -1")
    return None if ms == -1 else ms


def alter_refusal(name: str, value: str | None) -> str | None:
    """Why AlterConfigs may not set topic config ``name`` to ``value`` (None: it may)."""
    if name.startswith(VIEW_PREFIX):
        return "a view's configs are fixed when it is created"
    if name not in KAFKA_TOPIC_CONFIGS:
        return f"Unknown topic config name: {name}"
    if name == RETENTION_MS:
        try:
            parse_retention_ms(value)
        except ValueError as exc:
            return str(exc)
        return None
    if value is None or IN_FORCE.get(name, "").lower() == value.strip().lower():
        return None
    refused, _ = check_topic_configs({name: value})
    return refused or (f"{name} is not applied per topic by rokka (retention, segments and flushing "
                       f"are store-wide: see broker.conf); only retention.ms can be changed")


def check_topic_configs(configs: dict[str, str | None]) -> tuple[str | None, list[str]]:
    """(why the configs are refused or None, the names accepted but not applied)."""
    for name in configs:
        if name not in KAFKA_TOPIC_CONFIGS and not name.startswith(VIEW_PREFIX):
            return f"Unknown topic config name: {name}", []
    policy = {p.strip().lower() for p in (configs.get("cleanup.policy") or "").split(",")}
    if "compact" in policy:
        return ("cleanup.policy=compact is not supported: rokka never compacts a topic (records stay "
                "until the store's retention, fileReservedTime, removes them)"), []
    if (configs.get("message.timestamp.type") or "").strip().lower() == "logappendtime":
        return ("message.timestamp.type=LogAppendTime is not supported per topic: records keep the "
                "producer's timestamp (a LogAppendTime batch is honoured)"), []
    if RETENTION_MS in configs:
        try:
            parse_retention_ms(configs[RETENTION_MS])
        except ValueError as exc:
            return str(exc), []
    ignored = sorted(n for n in configs if not n.startswith(VIEW_PREFIX) and n != RETENTION_MS
                     and not (n == "cleanup.policy" and policy == {"delete"})
                     and not (n == "message.timestamp.type" and configs[n] == "CreateTime"))
    return None, ignored
