"""Value types of the client library (frozen dataclasses)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from rokka.core.model import StoredMessage
from rokka.core.routing import PERM_READ, PERM_WRITE, QueueData

MASTER_ID = 0


@dataclass(frozen=True, slots=True, order=True)
class MessageQueue:
    """A queue of a topic on one broker (sorts as clients sort: topic, broker, id)."""

    topic: str
    broker_name: str
    queue_id: int

    def to_json(self) -> dict[str, Any]:
        return {"brokerName": self.broker_name, "queueId": self.queue_id, "topic": self.topic}

    @classmethod
    def from_json(cls, obj: dict[str, Any] | str) -> MessageQueue:
        """From a MessageQueue JSON object (or its text, as object-typed keys are kept)."""
        if isinstance(obj, str):
            obj = json.loads(obj)
        assert isinstance(obj, dict)
        return cls(str(obj["topic"]), str(obj["brokerName"]), int(obj["queueId"]))


@dataclass(frozen=True, slots=True)
class BrokerData:
    cluster: str
    broker_name: str
    addrs: dict[int, str]

    @property
    def master_addr(self) -> str | None:
        return self.addrs.get(MASTER_ID)


@dataclass(frozen=True, slots=True)
class TopicRoute:
    """Decoded TopicRouteData."""

    topic: str
    queue_datas: tuple[QueueData, ...]
    broker_datas: tuple[BrokerData, ...]
    raw: dict[str, Any] = field(default_factory=dict, compare=False)

    @classmethod
    def from_json(cls, topic: str, obj: dict[str, Any]) -> TopicRoute:
        qds = tuple(QueueData.from_json(q) for q in obj.get("queueDatas") or [])
        bds = tuple(BrokerData(str(b.get("cluster", "")), str(b["brokerName"]),
                               {int(k): str(v) for k, v in (b.get("brokerAddrs") or {}).items()})
                    for b in obj.get("brokerDatas") or [])
        return cls(topic, qds, bds, obj)

    def broker(self, broker_name: str) -> BrokerData | None:
        return next((b for b in self.broker_datas if b.broker_name == broker_name), None)

    def master_addr(self, broker_name: str) -> str | None:
        b = self.broker(broker_name)
        return b.master_addr if b else None

    def publish_queues(self, topic: str | None = None, cap: int | None = None) -> list[MessageQueue]:
        """Writable queues on brokers with a master (clients' publish set)."""
        out = []
        for qd in sorted(self.queue_datas, key=lambda q: q.broker_name):
            if qd.perm & PERM_WRITE and self.master_addr(qd.broker_name):
                n = qd.write_queue_nums if cap is None else min(cap, qd.read_queue_nums)
                out += [MessageQueue(topic or self.topic, qd.broker_name, i) for i in range(n)]
        return out

    def subscribe_queues(self, topic: str | None = None) -> list[MessageQueue]:
        """Readable queues (clients' subscribe set)."""
        return [MessageQueue(topic or self.topic, qd.broker_name, i)
                for qd in sorted(self.queue_datas, key=lambda q: q.broker_name) if qd.perm & PERM_READ
                for i in range(qd.read_queue_nums)]


@dataclass(frozen=True, slots=True)
class OutMessage:
    """A message to send."""

    body: bytes
    tags: str | None = None
    keys: str | list[str] | None = None
    properties: dict[str, str] = field(default_factory=dict)
    flag: int = 0
    delay_level: int = 0


@dataclass(frozen=True, slots=True)
class SendResult:
    """Outcome of a send: ``status`` is SEND_OK / FLUSH_DISK_TIMEOUT / FLUSH_SLAVE_TIMEOUT /
    SLAVE_NOT_AVAILABLE; ``msg_id`` is the client UNIQ_KEY (comma-joined for a batch),
    ``offset_msg_id`` the broker's id(s)."""

    status: str
    msg_id: str
    offset_msg_id: str
    queue: MessageQueue
    queue_offset: int
    region_id: str | None = None
    transaction_id: str | None = None


@dataclass(frozen=True, slots=True)
class PullResult:
    """Outcome of a pull.  ``code``: 0 FOUND, 19 NO_NEW_MSG, 20 NO_MATCHED_MSG, 21 OFFSET_ILLEGAL."""

    code: int
    next_begin_offset: int
    min_offset: int
    max_offset: int
    suggest_which_broker_id: int
    messages: tuple[StoredMessage, ...]
    remark: str | None = None

    @property
    def found(self) -> bool:
        return self.code == 0
