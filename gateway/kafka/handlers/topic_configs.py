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

Every other known Kafka topic config is accepted and not applied; the
handler logs them, and DescribeConfigs shows the values that do apply.
``rokka.view.*`` configs create a view (``compat.views``).
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
    ignored = sorted(n for n in configs if not n.startswith(VIEW_PREFIX)
                     and not (n == "cleanup.policy" and policy == {"delete"})
                     and not (n == "message.timestamp.type" and configs[n] == "CreateTime"))
    return None, ignored
