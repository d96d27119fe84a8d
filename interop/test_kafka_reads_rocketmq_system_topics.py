"""Kafka consumers read RocketMQ's retry, DLQ and schedule topics by their RocketMQ names (issue 6)."""

from __future__ import annotations

import time

import pytest
import trio

from interop import harness

GROUP = "sysread"


async def _park_messages(namesrv: str) -> None:
    """A retry copy (send-back), a dead letter (send-back with delayLevel -1) and a delayed message."""
    from rokka.net.remoting.client import Admin, NamesrvClient, Producer, RemotingClient

    with trio.fail_after(30):
        async with RemotingClient() as rc:
            ns = NamesrvClient(rc, [namesrv])
            producer = Producer(rc, ns, "sysread-pg")
            admin = Admin(rc, ns)
            retry = await producer.send("SysReadT", b"to-retry", queue=0)
            dead = await producer.send("SysReadT", b"to-dlq", queue=0)
            await producer.send("SysReadT", b"delayed", queue=0, delay_level=18)  # 2 h: stays parked
            broker = (await ns.get_route("SysReadT")).broker_datas[0].addrs[0]
            await admin.send_msg_back(broker, offset=_offset(retry.offset_msg_id), group=GROUP, delay_level=0)
            await admin.send_msg_back(broker, offset=_offset(dead.offset_msg_id), group=GROUP, delay_level=-1)


def _offset(offset_msg_id: str) -> int:
    from rokka.core.storage.layout import decode_offset_msg_id

    return decode_offset_msg_id(offset_msg_id)[2]


def _read(bootstrap: str, topic: str, partition: int, want: int) -> list[tuple[bytes, dict[str, bytes]]]:
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "sysread-kafka", "enable.auto.commit": False})
    c.assign([TopicPartition(topic, partition, 0)])
    out: list[tuple[bytes, dict[str, bytes]]] = []
    deadline = time.monotonic() + 20
    while len(out) < want and time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is not None and not m.error():
            out.append((m.value(), dict(m.headers() or [])))
    c.close()
    return out


@pytest.mark.timeout(120)
def test_retry_dlq_and_schedule_topics_by_rocketmq_name(rokka: harness.ServerProcess) -> None:
    trio.run(_park_messages, rokka.namesrv)
    deadline = time.monotonic() + 20
    retry: list[tuple[bytes, dict[str, bytes]]] = []
    while not retry and time.monotonic() < deadline:  # the retry copy is delayed (level 3 = 10 s)
        retry = _read(rokka.kafka, f"%RETRY%{GROUP}", 0, 1)
    assert [v for v, _ in retry] == [b"to-retry"]
    assert retry[0][1]["rocketmq.RETRY_TOPIC"] == b"SysReadT"
    dlq = _read(rokka.kafka, f"%DLQ%{GROUP}", 0, 1)
    assert [v for v, _ in dlq] == [b"to-dlq"]
    parked = _read(rokka.kafka, "SCHEDULE_TOPIC_XXXX", 17, 1)  # level 18 -> queue 17
    assert [v for v, _ in parked] == [b"delayed"]
    assert parked[0][1]["rocketmq.REAL_TOPIC"] == b"SysReadT"
