"""Kafka -> store -> RocketMQ -> store -> Kafka: key, value and headers come back exactly (issue 6).

kafka-python produces records with text, binary and null keys, duplicate / empty / binary / null
headers and a null value (kafka-python sends no null header values); rokka's RocketMQ client pulls them and re-sends each with its body and
properties to a second topic; kafka-python reads the second topic and must see the same records.
"""

from __future__ import annotations

import time

import pytest
import trio

from interop import harness
from interop.kafka_common import topic_name

RECORDS = [
    (b"text-key", b"v1", [("h", b"1")]),
    (b"\x00\xffbin", b"v2", [("dup", b"a"), ("dup", b"b"), ("empty", b""), ("bin", b"\x01\x02\xff")]),
    (None, b"v3", []),
    (b"k4", None, [("h4", b"four")]),
    (b"with space", b"", [("\u00fcml", "\u00df".encode())]),
]


async def _relay(namesrv: str, src: str, dst: str, n: int) -> None:
    from rokka.net.remoting.client import (
        MessageQueue,
        NamesrvClient,
        OutMessage,
        Producer,
        PullConsumer,
        RemotingClient,
    )

    with trio.fail_after(30):
        async with RemotingClient() as rc:
            ns = NamesrvClient(rc, [namesrv])
            route = await ns.get_route(src)
            broker = route.broker_datas[0].broker_name
            consumer, producer = PullConsumer(rc, ns, "relay"), Producer(rc, ns, "relay-pg")
            res = await consumer.pull(MessageQueue(src, broker, 0), 0, max_nums=32)
            assert len(res.messages) == n
            for m in res.messages:
                props = {k: v for k, v in m.properties.items() if k not in ("UNIQ_KEY", "CLUSTER")}
                await producer.send(dst, OutMessage(m.body, properties=props), queue=0)


@pytest.mark.timeout(120)
def test_kafka_rocketmq_kafka_keeps_key_value_headers(rokka: harness.ServerProcess) -> None:
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition
    from kafka.admin import KafkaAdminClient, NewTopic

    src, dst = topic_name("rt-src"), topic_name("rt-dst")
    admin = KafkaAdminClient(bootstrap_servers=rokka.kafka)
    admin.create_topics([NewTopic(src, 1, 1), NewTopic(dst, 1, 1)])
    admin.close()
    p = KafkaProducer(bootstrap_servers=rokka.kafka)
    for key, value, headers in RECORDS:
        p.send(src, key=key, value=value, headers=headers, partition=0).get(timeout=10)
    p.close()
    trio.run(_relay, rokka.namesrv, src, dst, len(RECORDS))
    c = KafkaConsumer(bootstrap_servers=rokka.kafka, enable_auto_commit=False)
    c.assign([TopicPartition(dst, 0)])
    c.seek_to_beginning()
    got = []
    deadline = time.monotonic() + 20
    while len(got) < len(RECORDS) and time.monotonic() < deadline:
        got += [(r.key, r.value, list(r.headers)) for rs in c.poll(timeout_ms=500).values() for r in rs]
    c.close()
    assert got == [(k, v, list(h)) for k, v, h in RECORDS]
