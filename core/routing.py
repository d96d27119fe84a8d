"""RocketMQ route values shared by the name server and the client: permission bits and QueueData.

Theory of operation
-------------------
One definition of Java's ``PermName`` bits (a topic's or a broker's ``perm``) and of
``QueueData`` (one broker's queues of a topic in a TopicRouteData), so the name server's
registry (``rokka.core.namesrv.routes``), the topic table (``rokka.core.topics``) and the
RocketMQ client (``rokka.net.remoting.client.types``) cannot drift apart.  ``QueueData``
is frozen: the registry replaces an entry to change its ``perm``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["PERM_INHERIT", "PERM_PRIORITY", "PERM_READ", "PERM_WRITE", "QueueData"]

PERM_PRIORITY = 8
PERM_READ = 4
PERM_WRITE = 2
PERM_INHERIT = 1


@dataclass(frozen=True, slots=True)
class QueueData:
    """One broker's queues of a topic (Java ``QueueData``)."""

    broker_name: str
    read_queue_nums: int
    write_queue_nums: int
    perm: int
    topic_sys_flag: int = 0

    def to_json(self) -> dict[str, Any]:
        return {"brokerName": self.broker_name, "perm": self.perm, "readQueueNums": self.read_queue_nums,
                "topicSysFlag": self.topic_sys_flag, "writeQueueNums": self.write_queue_nums}

    @classmethod
    def from_json(cls, q: dict[str, Any]) -> QueueData:
        """From a route's ``queueDatas`` entry (``topicSynFlag``: the field's old misspelling)."""
        return cls(str(q["brokerName"]), int(q.get("readQueueNums", 0)), int(q.get("writeQueueNums", 0)),
                   int(q.get("perm", 0)), int(q.get("topicSysFlag", q.get("topicSynFlag", 0)) or 0))
