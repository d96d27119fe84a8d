"""Topic configurations (RocketMQ TopicConfigManager), persisted as ``config/topics.json``.

Theory of operation
-------------------
Every topic the broker serves has a ``TopicConfig``: read/write queue counts,
permission bits and filter type.  The table is persisted in RocketMQ's
``TopicConfigSerializeWrapper`` JSON form together with a ``DataVersion``
(counter + timestamp) that is bumped on every change; the name server uses
the version to notice changes.  Listeners registered with ``on_change`` run
after every change (the broker re-registers with its name servers).

System topics are created at start: TBW102 (when auto-create is on, perm 7 =
RW + INHERIT so that clients can route unknown topics through it),
SCHEDULE_TOPIC_XXXX (one queue per delay level), the transaction topics,
SELF_TEST_TOPIC, OFFSET_MOVED_EVENT and, as RocketMQ does, topics named after
the cluster and the broker.  Retry topics (``%RETRY%<group>``) and DLQ topics
(``%DLQ%<group>``) are created on demand.

Names follow ``rokka.core.names`` (one rule set for both protocols; the
gateways check every name a client sends and answer the protocol's error).
The table checks again before it adds a topic: ``put`` / ``ensure`` /
``create_from_default`` raise ``InvalidNameError`` for a new name that no
protocol allows (e.g. ``..`` or ``a/b``); topics already in the table (loaded
from an older ``topics.json``) keep working.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import structlog
from rokka.core import names
from rokka.core.model import (
    DLQ_PREFIX,
    RETRY_PREFIX,
    TOPIC_DEFAULT,
    TOPIC_SCHEDULE,
    TOPIC_TRANS_HALF,
    TOPIC_TRANS_OP_HALF,
)
from rokka.core.routing import PERM_INHERIT, PERM_READ, PERM_WRITE
from rokka.core.storage.metafile import read_json, write_json_atomic

log = structlog.get_logger(__name__)

#: Most queues (Kafka partitions) a topic may have, whichever protocol creates or grows it.
MAX_QUEUE_NUMS = 1024
TOPIC_MAX_LENGTH = names.TOPIC_MAX_LENGTH

SYSTEM_TOPICS = frozenset({
    TOPIC_DEFAULT, TOPIC_SCHEDULE, "BenchmarkTest", TOPIC_TRANS_HALF, "RMQ_SYS_TRACE_TOPIC",
    TOPIC_TRANS_OP_HALF, "TRANS_CHECK_MAX_TIME_TOPIC", "SELF_TEST_TOPIC", "OFFSET_MOVED_EVENT",
})
# Topics a producer may not send to directly (RocketMQ's not-allowed-send set).
NOT_ALLOWED_SEND = frozenset({
    TOPIC_SCHEDULE, TOPIC_TRANS_HALF, TOPIC_TRANS_OP_HALF, "TRANS_CHECK_MAX_TIME_TOPIC",
    "SELF_TEST_TOPIC", "OFFSET_MOVED_EVENT",
})


def is_system_topic(topic: str) -> bool:
    return topic in SYSTEM_TOPICS or topic.startswith("rmq_sys_")


def validate_topic_name(topic: str, *, allow_dot: bool = False) -> str | None:
    """Return None when valid, else the RocketMQ-style error remark (``rokka.core.names.topic_problem``)."""
    return names.topic_problem(topic, allow_dot=allow_dot)


@dataclass
class TopicConfig:
    topic_name: str
    read_queue_nums: int = 16
    write_queue_nums: int = 16
    perm: int = PERM_READ | PERM_WRITE
    topic_filter_type: str = "SINGLE_TAG"
    topic_sys_flag: int = 0
    order: bool = False

    @property
    def queue_nums(self) -> int:
        return max(self.read_queue_nums, self.write_queue_nums)

    @property
    def readable(self) -> bool:
        return bool(self.perm & PERM_READ)

    @property
    def writable(self) -> bool:
        return bool(self.perm & PERM_WRITE)

    def to_json(self) -> dict[str, Any]:
        return {"order": self.order, "perm": self.perm, "readQueueNums": self.read_queue_nums,
                "topicFilterType": self.topic_filter_type, "topicName": self.topic_name,
                "topicSysFlag": self.topic_sys_flag, "writeQueueNums": self.write_queue_nums}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> TopicConfig:
        return cls(topic_name=str(d["topicName"]), read_queue_nums=int(d.get("readQueueNums", 16)),
                   write_queue_nums=int(d.get("writeQueueNums", 16)), perm=int(d.get("perm", 6)),
                   topic_filter_type=str(d.get("topicFilterType", "SINGLE_TAG")),
                   topic_sys_flag=int(d.get("topicSysFlag", d.get("topicSynFlag", 0))),
                   order=bool(d.get("order", False)))


@dataclass
class DataVersion:
    counter: int = 0
    timestamp: int = 0

    def bump(self) -> None:
        self.counter += 1
        self.timestamp = int(time.time() * 1000)

    def to_json(self) -> dict[str, int]:
        return {"counter": self.counter, "timestamp": self.timestamp}


class TopicManager:
    """The broker's topic table.  Synchronous; persists on every change."""

    def __init__(self, config_dir: Path, *, cluster: str, broker_name: str, auto_create: bool,
                 default_queue_nums: int, delay_levels: int, broker_perm: int = 6,
                 cluster_topic: bool = True, broker_topic: bool = True) -> None:
        self._path = config_dir / "topics.json"
        self._topics: dict[str, TopicConfig] = {}
        self.data_version = DataVersion()
        self.broker_perm = broker_perm
        self._listeners: list[Callable[[], None]] = []
        self._load()
        system = [TopicConfig(TOPIC_SCHEDULE, delay_levels, delay_levels, PERM_READ | PERM_WRITE),
                  TopicConfig(TOPIC_TRANS_HALF, 1, 1), TopicConfig(TOPIC_TRANS_OP_HALF, 1, 1),
                  TopicConfig("SELF_TEST_TOPIC", 1, 1), TopicConfig("OFFSET_MOVED_EVENT", 1, 1)]
        if auto_create:
            system.append(TopicConfig(TOPIC_DEFAULT, default_queue_nums, default_queue_nums,
                                      PERM_READ | PERM_WRITE | PERM_INHERIT))
        if cluster_topic:
            system.append(TopicConfig(cluster, 16, 16, PERM_INHERIT))
        if broker_topic:
            system.append(TopicConfig(broker_name, 1, 1, PERM_INHERIT | PERM_READ | PERM_WRITE))
        changed = False
        for tc in system:
            if tc.topic_name not in self._topics:
                self._topics[tc.topic_name] = tc
                changed = True
        if changed:
            self._persist()

    # -- persistence -------------------------------------------------------
    def _load(self) -> None:
        data = read_json(self._path)
        if not data:
            return
        for name, d in (data.get("topicConfigTable") or {}).items():
            self._topics[name] = TopicConfig.from_json(d)
        dv = data.get("dataVersion") or {}
        self.data_version = DataVersion(int(dv.get("counter", 0)), int(dv.get("timestamp", 0)))

    def serialize(self) -> dict[str, Any]:
        """TopicConfigSerializeWrapper JSON (also the body of GET_ALL_TOPIC_CONFIG / REGISTER_BROKER)."""
        return {"dataVersion": self.data_version.to_json(),
                "topicConfigTable": {n: tc.to_json() for n, tc in self._topics.items()}}

    def _persist(self) -> None:
        self.data_version.bump()
        write_json_atomic(self._path, self.serialize())
        for cb in list(self._listeners):
            cb()

    def on_change(self, callback: Callable[[], None]) -> None:
        self._listeners.append(callback)

    # -- queries -----------------------------------------------------------
    def get(self, topic: str) -> TopicConfig | None:
        return self._topics.get(topic)

    def all(self) -> dict[str, TopicConfig]:
        return dict(self._topics)

    def __contains__(self, topic: str) -> bool:
        return topic in self._topics

    # -- changes -----------------------------------------------------------
    def put(self, tc: TopicConfig) -> TopicConfig:
        """Add or replace ``tc``; a new name must pass ``names.store_topic_problem``."""
        if tc.topic_name not in self._topics and (why := names.store_topic_problem(tc.topic_name)):
            raise names.InvalidNameError(why)
        self._topics[tc.topic_name] = tc
        log.info("topics.config_updated", topic=tc.topic_name, read=tc.read_queue_nums,
                 write=tc.write_queue_nums, perm=tc.perm)
        self._persist()
        return tc

    def delete(self, topic: str) -> bool:
        if self._topics.pop(topic, None) is None:
            return False
        log.info("topics.deleted", topic=topic)
        self._persist()
        return True

    def create_from_default(self, topic: str, default_topic: str, queue_nums: int) -> TopicConfig | None:
        """Auto-create ``topic`` through ``default_topic`` (TBW102) as RocketMQ does, or None if not allowed."""
        existing = self._topics.get(topic)
        if existing:
            return existing
        default = self._topics.get(default_topic)
        if default is None or not (default.perm & PERM_INHERIT):
            return None
        n = max(1, min(queue_nums, default.write_queue_nums))
        return self.put(TopicConfig(topic, n, n, default.perm & ~PERM_INHERIT,
                                    default.topic_filter_type))

    def ensure(self, topic: str, queue_nums: int, perm: int = PERM_READ | PERM_WRITE) -> TopicConfig:
        """Create ``topic`` with ``queue_nums`` queues if it does not exist yet."""
        tc = self._topics.get(topic)
        if tc is None:
            tc = self.put(TopicConfig(topic, queue_nums, queue_nums, perm))
        return tc

    def ensure_retry(self, group: str, queue_nums: int = 1) -> TopicConfig:
        return self.ensure(RETRY_PREFIX + group, queue_nums)

    def ensure_dlq(self, group: str) -> TopicConfig:
        return self.ensure(DLQ_PREFIX + group, 1)
