"""Keys and headers larger than RocketMQ's properties allow (issue 26 item 3): a 1 MiB key and
large headers round-trip byte-exactly through confluent-kafka and kafka-python, and rokka's RocketMQ
client sees the documented envelope (``KAFKA_ENVELOPE=<key length>,<headers length>``; body = key +
headers JSON + value).  Before, such a record was refused with KAFKA_STORAGE_ERROR, which producers
retry until their timeout.

Everything on 127.0.0.1 with free ports; every client call and wait is bounded.
"""

from __future__ import annotations

import base64
import json
import os
import time
from typing import Any

import pytest
import trio

from interop import harness
from interop.kafka_common import topic_name

KEY = os.urandom(1 << 20)
HEADERS = [("big", os.urandom(200_000)), ("empty", b""), ("text", b"plain")]
VALUE = b"the value"


async def _pull(namesrv: str, topic: str) -> list[tuple[bytes, dict[str, str]]]:
    from rokka.net.remoting.client import MessageQueue, NamesrvClient, PullConsumer, RemotingClient

    with trio.fail_after(30):
        async with RemotingClient() as rc:
            ns = NamesrvClient(rc, [namesrv])
            route = await ns.get_route(topic)
            consumer = PullConsumer(rc, ns, "big-keys")
            res = await consumer.pull(MessageQueue(topic, route.broker_datas[0].broker_name, 0), 0, max_nums=8)
            return [(m.body, dict(m.properties)) for m in res.messages]


def _check_rocketmq_view(rokka: harness.ServerProcess, topic: str, n: int) -> None:
    got = trio.run(_pull, rokka.namesrv, topic)
    assert len(got) == n
    for body, props in got:
        klen, hlen = (int(x) for x in props["KAFKA_ENVELOPE"].split(","))
        assert (klen, body[:klen]) == (len(KEY), KEY)
        headers = [(k, base64.b64decode(v)) for k, v in json.loads(body[klen:klen + hlen])]
        assert headers == HEADERS
        assert body[klen + hlen:] == VALUE                      # the value, where a RocketMQ reader finds it
        assert props["text"] == "plain"                          # small text headers are still properties


@pytest.mark.timeout(180)
def test_confluent_kafka(rokka: harness.ServerProcess) -> None:
    ck = pytest.importorskip("confluent_kafka", reason="confluent-kafka is not installed")
    from confluent_kafka.admin import AdminClient, NewTopic

    topic = topic_name("bigkey")
    admin = AdminClient({"bootstrap.servers": rokka.kafka})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(20)
    reports: list[object] = []
    p = ck.Producer({"bootstrap.servers": rokka.kafka, "message.max.bytes": 8 << 20, "message.timeout.ms": 60000})
    p.produce(topic, VALUE, KEY, partition=0, headers=HEADERS, on_delivery=lambda err, msg: reports.append(err))
    assert p.flush(30) == 0
    assert reports == [None]
    c = ck.Consumer({"bootstrap.servers": rokka.kafka, "group.id": topic_name("g"), "fetch.max.bytes": 8 << 20,
                     "receive.message.max.bytes": 16 << 20})
    try:
        c.assign([ck.TopicPartition(topic, 0, 0)])
        msg = None
        deadline = time.monotonic() + 20
        while msg is None and time.monotonic() < deadline:
            msg = c.poll(1)
        assert msg is not None and msg.error() is None
        assert (msg.key(), msg.value(), msg.headers()) == (KEY, VALUE, HEADERS)
    finally:
        c.close()
    _check_rocketmq_view(rokka, topic, 1)


@pytest.mark.timeout(180)
def test_kafka_python(rokka: harness.ServerProcess) -> None:
    pytest.importorskip("kafka", reason="kafka-python is not installed")
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition
    from kafka.admin import KafkaAdminClient, NewTopic

    topic = topic_name("bigkey")
    admin = KafkaAdminClient(bootstrap_servers=rokka.kafka)
    admin.create_topics([NewTopic(topic, 1, 1)])
    admin.close()
    p = KafkaProducer(bootstrap_servers=rokka.kafka, max_request_size=8 << 20, retries=0)
    try:
        assert p.send(topic, key=KEY, value=VALUE, headers=HEADERS, partition=0).get(timeout=20).offset == 0
    finally:
        p.close(timeout=10)
    c = KafkaConsumer(bootstrap_servers=rokka.kafka, enable_auto_commit=False, fetch_max_bytes=8 << 20,
                      max_partition_fetch_bytes=8 << 20)
    try:
        c.assign([TopicPartition(topic, 0)])
        c.seek_to_beginning()
        got = []
        deadline = time.monotonic() + 20
        while not got and time.monotonic() < deadline:
            got += [(r.key, r.value, list(r.headers)) for rs in c.poll(timeout_ms=500).values() for r in rs]
    finally:
        c.close()
    assert got == [(KEY, VALUE, HEADERS)]
    _check_rocketmq_view(rokka, topic, 1)


@pytest.mark.timeout(180)
@pytest.mark.usefixtures("need_cpp")
def test_rocketmq_cpp_pull_consumer_sees_the_envelope(rokka: harness.ServerProcess, workdir: Any) -> None:
    """The RocketMQ C++ client (pull consumer) gets the documented envelope of a record with a 1 MiB
    text key (text, so the script's JSON output carries the body exactly)."""
    pytest.importorskip("kafka", reason="kafka-python is not installed")
    from kafka import KafkaProducer
    from kafka.admin import KafkaAdminClient, NewTopic

    from interop import rmq_cpp

    topic = topic_name("bigkey")
    key, headers = b"K" * (1 << 20), [("note", b"n" * 40_000)]
    admin = KafkaAdminClient(bootstrap_servers=rokka.kafka)
    admin.create_topics([NewTopic(topic, 1, 1)])
    admin.close()
    p = KafkaProducer(bootstrap_servers=rokka.kafka, max_request_size=8 << 20, retries=0)
    try:
        p.send(topic, key=key, value=VALUE, headers=headers, partition=0).get(timeout=20)
    finally:
        p.close(timeout=10)
    msgs, _ = rmq_cpp.pull_all(rokka.namesrv, workdir, topic, props=["KAFKA_ENVELOPE", "KAFKA_KEY", "KAFKA_HEADERS"])
    assert len(msgs) == 1
    props, body = msgs[0]["props"], msgs[0]["body"].encode()
    assert not props["KAFKA_KEY"] and not props["KAFKA_HEADERS"]      # absent ("" from the C++ client)
    klen, hlen = (int(x) for x in props["KAFKA_ENVELOPE"].split(","))
    assert body[:klen] == key and body[klen + hlen:] == VALUE
    assert [(k, base64.b64decode(v)) for k, v in json.loads(body[klen:klen + hlen])] == headers
