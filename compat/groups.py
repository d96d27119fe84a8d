"""One consumer group name, two protocols: who may be live, and where offsets live.

Theory of operation
-------------------
Committed offsets need no translation: a Kafka offset *is* a ConsumeQueue
offset and both protocols commit into the core's ``ConsumerOffsetManager``
under the same group name.  What needs a rule is liveness: a group may not
have live members on both protocols at once (their rebalances know nothing
of each other, so both would consume the same queues).  The second
protocol's join is refused with a clear error: Kafka gets
``INCONSISTENT_GROUP_PROTOCOL`` (23) on JoinGroup, RocketMQ gets a
SYSTEM_ERROR remark on its heartbeat.  ``allow_mixed=True`` (config
``kafkaRocketmqGroupSharing``) turns the rule off.
"""

from __future__ import annotations

from collections.abc import Callable

KAFKA_INCONSISTENT_GROUP_PROTOCOL = 23


class GroupOwnership:
    def __init__(self, rocketmq_live: Callable[[str], bool], kafka_live: Callable[[str], bool], *,
                 allow_mixed: bool = False) -> None:
        self._rocketmq_live = rocketmq_live
        self._kafka_live = kafka_live
        self.allow_mixed = allow_mixed

    def refuse_rocketmq(self, group: str) -> str | None:
        """Remark for a RocketMQ heartbeat of ``group`` when Kafka members are live, else None."""
        if self.allow_mixed or not self._kafka_live(group):
            return None
        return (f"consumer group {group} is live on the Kafka protocol; stop its Kafka consumers "
                "before consuming it with RocketMQ clients")

    def refuse_kafka(self, group: str) -> int:
        """Kafka error code for a JoinGroup of ``group`` when RocketMQ consumers are live, else 0."""
        if self.allow_mixed or not self._rocketmq_live(group):
            return 0
        return KAFKA_INCONSISTENT_GROUP_PROTOCOL
