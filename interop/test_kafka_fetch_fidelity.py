"""Fetch fidelity with real clients (issue 26 items 1 and 2, issue 19 item 2).

* A consumer whose committed offset fell off the log (DeleteRecords, as retention does) gets
  OFFSET_OUT_OF_RANGE with an empty record set, resets per ``auto.offset.reset`` and moves on
  (confluent-kafka / librdkafka: it refused a null record set and refetched forever; kafka-python).
* A small ``fetch.max.bytes`` over many partitions: every response stays within it (librdkafka drops
  the connection when a response exceeds ``receive.message.max.bytes``) and the consumer reads
  everything -- Kafka-produced records and RocketMQ-produced zlib-compressed bodies (stored small,
  inflated for Kafka readers).
* A compressed batch that inflates past ``maxMessageSize`` is refused with RECORD_TOO_LARGE, which
  librdkafka reports as a permanent delivery error (no retry loop).
"""

from __future__ import annotations

import time
import zlib
from typing import Any

import harness
import pytest
import trio
from kafka_common import confluent_poll, topic_name, wait_until

ck = pytest.importorskip("confluent_kafka", reason="confluent-kafka is not installed (interop/install.sh)")
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

T = 20.0
FETCH_MAX = 6000


def create_topic(srv: harness.ServerProcess, partitions: int) -> str:
    name = topic_name("ff")
    a = AdminClient({"bootstrap.servers": srv.kafka})
    a.create_topics([NewTopic(name, num_partitions=partitions, replication_factor=1)],
                    operation_timeout=T, request_timeout=T)[name].result(timeout=T)
    wait_until(lambda: name in a.list_topics(timeout=T).topics, 15, f"{name} in metadata")
    return name


def produce(srv: harness.ServerProcess, topic: str, values: list[tuple[int, bytes]], **conf: Any) -> list[Any]:
    """(partition, value) pairs; returns the delivery errors (None for each success)."""
    p = Producer({"bootstrap.servers": srv.kafka, "message.timeout.ms": int(T * 1000), **conf})
    errors: list[Any] = []
    for part, value in values:
        p.produce(topic, value=value, partition=part, on_delivery=lambda err, _m: errors.append(err))
        p.poll(0)
    assert p.flush(T) == 0
    return errors


def _at_eof(m: Any) -> bool:
    assert m is None or m.error() is not None, "a record before the reset to the end"
    return m is not None and m.error().code() == KafkaError._PARTITION_EOF


def delete_records(srv: harness.ServerProcess, topic: str, before: int) -> None:
    a = AdminClient({"bootstrap.servers": srv.kafka})
    futs = a.delete_records([TopicPartition(topic, 0, before)], request_timeout=T, operation_timeout=T)
    for f in futs.values():
        assert f.result(timeout=T).low_watermark == before


@pytest.mark.timeout(120)
@pytest.mark.parametrize("reset", ["earliest", "latest"])
def test_confluent_resets_when_its_committed_offset_fell_off_the_log(rokka: harness.ServerProcess,
                                                                      reset: str) -> None:
    topic = create_topic(rokka, 1)
    assert produce(rokka, topic, [(0, b"v%d" % i) for i in range(10)]) == [None] * 10
    group = topic_name("g")
    c = Consumer({"bootstrap.servers": rokka.kafka, "group.id": group, "enable.auto.commit": False})
    c.commit(offsets=[TopicPartition(topic, 0, 3)], asynchronous=False)
    c.close()
    delete_records(rokka, topic, 8)                     # offset 3 is gone, as retention would do
    c = Consumer({"bootstrap.servers": rokka.kafka, "group.id": group, "enable.auto.commit": False,
                  "auto.offset.reset": reset, "enable.partition.eof": True})
    try:
        c.subscribe([topic])
        if reset == "latest":   # the consumer sits at the end (it says so with a partition EOF): feed it
            wait_until(lambda: _at_eof(c.poll(0.2)), 30, "the reset to the log end")
            assert produce(rokka, topic, [(0, b"new")]) == [None]
            got = confluent_poll(c, 1)
            assert [(m.offset(), m.value()) for m in got] == [(10, b"new")]
        else:
            got = confluent_poll(c, 2)
            assert [(m.offset(), m.value()) for m in got] == [(8, b"v8"), (9, b"v9")]
    finally:
        c.close()


@pytest.mark.timeout(120)
@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_kafka_python_resets_when_its_offset_fell_off_the_log(rokka: harness.ServerProcess) -> None:
    from kafka import KafkaConsumer
    from kafka import TopicPartition as KTP

    topic = create_topic(rokka, 1)
    assert produce(rokka, topic, [(0, b"v%d" % i) for i in range(10)]) == [None] * 10
    delete_records(rokka, topic, 6)
    c = KafkaConsumer(bootstrap_servers=rokka.kafka, enable_auto_commit=False, auto_offset_reset="earliest",
                      request_timeout_ms=10_000)
    try:
        tp = KTP(topic, 0)
        c.assign([tp])
        c.seek(tp, 2)
        got: list[tuple[int, bytes]] = []
        deadline = time.monotonic() + 30
        while len(got) < 4 and time.monotonic() < deadline:
            got += [(r.offset, r.value) for rs in c.poll(timeout_ms=500).values() for r in rs]
        assert got == [(6, b"v6"), (7, b"v7"), (8, b"v8"), (9, b"v9")]
    finally:
        c.close()


def small_fetch_consumer(srv: harness.ServerProcess, group: str, fetch_max: int = FETCH_MAX) -> Consumer:
    """A small fetch.max.bytes; a response larger than that by more than the per-partition overhead
    (receive.message.max.bytes) makes librdkafka drop the connection and refetch the same."""
    return Consumer({"bootstrap.servers": srv.kafka, "group.id": topic_name(group), "enable.auto.commit": False,
                     "auto.offset.reset": "earliest", "message.max.bytes": 1000, "fetch.max.bytes": fetch_max,
                     "receive.message.max.bytes": fetch_max + 1536})


@pytest.mark.timeout(180)
def test_confluent_small_fetch_max_bytes_over_many_partitions(rokka: harness.ServerProcess) -> None:
    topic = create_topic(rokka, 8)
    values = [(i % 8, b"%04d-" % i + b"x" * 2500) for i in range(8 * 10)]     # three records exceed the limit
    assert produce(rokka, topic, values, **{"linger.ms": 50}) == [None] * len(values)
    c = small_fetch_consumer(rokka, "small")
    try:
        c.subscribe([topic])
        got = confluent_poll(c, len(values), timeout=90)
    finally:
        c.close()
    assert sorted(m.value() for m in got) == sorted(v for _, v in values)


async def _send_compressed(namesrv: str, topic: str, queues: int, per: int, body: bytes) -> None:
    from rokka.core.model import COMPRESSED_FLAG
    from rokka.net.remoting.client import NamesrvClient, Producer, RemotingClient

    with trio.fail_after(60):
        async with RemotingClient() as rc:
            producer = Producer(rc, NamesrvClient(rc, [namesrv]), "ff-pg")
            for q in range(queues):
                for i in range(per):
                    await producer.send(topic, zlib.compress(body % (q, i)), queue=q, sys_flag=COMPRESSED_FLAG)


@pytest.mark.timeout(180)
def test_confluent_small_fetch_max_bytes_reads_rocketmq_compressed_bodies(rokka: harness.ServerProcess) -> None:
    topic = create_topic(rokka, 4)
    body = b"queue %d message %d\n" + b"".join(b"line %06d of a compressible body\n" % i for i in range(3000))
    trio.run(_send_compressed, rokka.namesrv, topic, 4, 6, body)    # ~105 KB inflated, ~10 KB stored
    c = small_fetch_consumer(rokka, "rz", 250_000)
    try:
        c.subscribe([topic])
        got = confluent_poll(c, 24, timeout=90)
    finally:
        c.close()
    assert sorted(m.value() for m in got) == sorted(body % (q, i) for q in range(4) for i in range(6))


@pytest.mark.timeout(120)
def test_confluent_gzip_batch_inflating_past_the_limit_is_a_permanent_error(configured_rokka: Any) -> None:
    srv = configured_rokka({"maxMessageSize": str(1 << 20)}, {})
    topic = create_topic(srv, 1)
    big = [(0, b"%d" % i + bytes(200 << 10)) for i in range(8)]      # 1.6 MiB in one batch, ~2 KB gzipped
    errors = produce(srv, topic, big, **{"compression.type": "gzip", "linger.ms": 1000, "batch.size": 8 << 20,
                                         "message.max.bytes": 16 << 20, "batch.num.messages": 100})
    assert {e.code() if e is not None else None for e in errors} == {KafkaError.MSG_SIZE_TOO_LARGE}
    assert produce(srv, topic, [(0, b"small")], **{"compression.type": "gzip"}) == [None]
    c = Consumer({"bootstrap.servers": srv.kafka, "group.id": topic_name("g"), "auto.offset.reset": "earliest"})
    try:
        c.subscribe([topic])
        assert [m.value() for m in confluent_poll(c, 1)] == [b"small"]
    finally:
        c.close()
