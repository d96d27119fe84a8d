"""Kafka consumers with RocketMQ filters through views (issue 6), with kafka-python and confluent-kafka.

A view is created with the client's own admin API (CreateTopics + rokka.view.* configs); records are
produced tagged (Kafka header rocketmq.TAGS) and with a user property; the consumers of the view see
exactly the matching records, in offset order, and move past the non-matching ones.
"""

from __future__ import annotations

import time

import pytest

from interop import harness
from interop.kafka_common import topic_name

N = 30


def _produce_tagged(bootstrap: str, topic: str) -> list[bytes]:
    from kafka import KafkaProducer

    p = KafkaProducer(bootstrap_servers=bootstrap)
    want = []
    for i in range(N):
        tag = "red" if i % 3 == 0 else "blue"
        value = f"{tag}-{i}".encode()
        p.send(topic, value=value, partition=i % 2,
               headers=[("rocketmq.TAGS", tag.encode()), ("size", str(i).encode())]).get(timeout=10)
        if tag == "red":
            want.append(value)
    p.close()
    return want


def _create(bootstrap: str, topic: str, view: str, expr: str, kind: str) -> None:
    from kafka.admin import KafkaAdminClient, NewTopic

    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    admin.create_topics([NewTopic(topic, 2, 1)])
    admin.create_topics([NewTopic(view, -1, 1, topic_configs={
        "rokka.view.topic": topic, "rokka.view.filter": expr, "rokka.view.filter.type": kind})])
    admin.close()


def _consume_kafka_python(bootstrap: str, view: str, count: int) -> list[bytes]:
    from kafka import KafkaConsumer, TopicPartition

    c = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, fetch_max_wait_ms=200)
    c.assign([TopicPartition(view, 0), TopicPartition(view, 1)])
    c.seek_to_beginning()
    got: list[bytes] = []
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and len(got) < count:
        for recs in c.poll(timeout_ms=500).values():
            got += [r.value for r in recs]
    # the position moved to the end of each partition, past the filtered-out tail
    ends = c.end_offsets([TopicPartition(view, 0), TopicPartition(view, 1)])
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and any(c.position(tp) < end for tp, end in ends.items()):
        c.poll(timeout_ms=200)
    positions = {tp.partition: c.position(tp) for tp in ends}
    c.close()
    assert positions == {tp.partition: end for tp, end in ends.items()}
    return got


def _consume_confluent(bootstrap: str, view: str, count: int, group: str) -> list[bytes]:
    from confluent_kafka import Consumer

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                  "enable.auto.commit": False})
    c.subscribe([view])
    got: list[bytes] = []
    deadline = time.monotonic() + 40
    while time.monotonic() < deadline and len(got) < count:
        m = c.poll(0.5)
        if m is None or m.error():
            continue
        got.append(m.value())
    c.commit(asynchronous=False)
    c.close()
    return got


@pytest.mark.timeout(120)
def test_tag_view_kafka_python(rokka: harness.ServerProcess) -> None:
    topic, view = topic_name("views"), topic_name("red")
    _create(rokka.kafka, topic, view, "red", "TAG")
    want = _produce_tagged(rokka.kafka, topic)
    got = _consume_kafka_python(rokka.kafka, view, len(want))
    assert sorted(got) == sorted(want)


@pytest.mark.timeout(120)
def test_sql92_view_confluent(tmp_path) -> None:  # noqa: ANN001
    conf = tmp_path / "broker.conf"
    conf.write_text("enablePropertyFilter=true\n")
    data = tmp_path / "data"
    data.mkdir()
    base = harness.serve_argv(data, "json")
    server = harness.ServerProcess("rokka-serve", lambda ports: [*base(ports), "-c", str(conf)], tmp_path,
                                   data_dir=data).start()
    try:
        topic, view = topic_name("views"), topic_name("big")
        _create(server.kafka, topic, view, "size >= 20 AND TAGS = 'blue'", "SQL92")
        _produce_tagged(server.kafka, topic)
        want = [f"blue-{i}".encode() for i in range(20, N) if i % 3]
        got = _consume_confluent(server.kafka, view, len(want), topic_name("g"))
        assert sorted(got) == sorted(want)
    finally:
        server.stop()
