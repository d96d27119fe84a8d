"""Compacted topics (``cleanup.policy=compact``) with real Kafka clients: the latest record per key
is kept, a tombstone goes after ``delete.retention.ms``, offsets never change (consumers see gaps:
a window of 2000 superseded records is stepped over), log start and end offsets stay, and all of it
holds across a rokka restart (hard kill included).  ``cleanResourceInterval=300`` runs the
compaction pass every 300 ms.

Everything on 127.0.0.1 with free ports; every client call and wait is bounded.
"""

from __future__ import annotations

import time
from typing import Any

import harness
import pytest
from kafka_common import topic_name

T = 20


def _read_all(bs: str, topic: str, start: int = 0, isolation: str = "read_committed",
              **props: Any) -> list[tuple[int, Any, Any]]:
    """(offset, key, value) of every record from ``start`` to the end offset (confluent-kafka)."""
    import confluent_kafka as ck

    c = ck.Consumer({"bootstrap.servers": bs, "group.id": topic_name("g"), "enable.auto.commit": False,
                     "isolation.level": isolation, "enable.partition.eof": True,
                     **{k.replace("_", "."): v for k, v in props.items()}})
    try:
        c.assign([ck.TopicPartition(topic, 0, start)])
        out: list[tuple[int, Any, Any]] = []
        deadline = time.monotonic() + T
        while time.monotonic() < deadline:
            m = c.poll(1.0)
            if m is None:
                continue
            if m.error() is not None:
                if m.error().code() == ck.KafkaError._PARTITION_EOF:
                    return out
                raise AssertionError(m.error())
            out.append((m.offset(), m.key(), m.value()))
        raise AssertionError(f"no end of partition within {T}s; read {out[-3:]}")
    finally:
        c.close()


def _settles(bs: str, topic: str, want: list[tuple[int, Any, Any]], timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    got: list[tuple[int, Any, Any]] = []
    while time.monotonic() < deadline:
        got = _read_all(bs, topic)
        if got == want:
            return
        time.sleep(0.3)
    assert got == want


@pytest.mark.timeout(150)
def test_confluent_compacted_topic(quick_rokka: harness.ServerProcess) -> None:
    ck = pytest.importorskip("confluent_kafka", reason="confluent-kafka is installed by make test (pyproject test extra)")
    from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic

    bs, topic = quick_rokka.kafka, topic_name("cmp")
    admin = AdminClient({"bootstrap.servers": bs})
    admin.create_topics([NewTopic(topic, 1, 1, config={"cleanup.policy": "compact", "delete.retention.ms": "1500",
                                                       "min.compaction.lag.ms": "0", "segment.bytes": "1048576",
                                                       "segment.ms": "600000"})],
                        operation_timeout=T, request_timeout=T)[topic].result(T)
    described = admin.describe_configs([ConfigResource("TOPIC", topic)])
    (cfg,) = [f.result(T) for f in described.values()]
    assert cfg["cleanup.policy"].value == "compact" and cfg["segment.bytes"].value == "1048576"
    p = ck.Producer({"bootstrap.servers": bs, "linger.ms": 5, "enable.idempotence": True})
    for i in range(2000):
        p.produce(topic, key=b"hot", value=b"v%d" % i)
    for key, value in [(b"a", b"a1"), (b"b", b"b1"), (b"a", b"a2"), (b"b", None), (b"c", b"c1")]:
        p.produce(topic, key=key, value=value)
    assert p.flush(T) == 0
    # the tombstone of b (2003) stays delete.retention.ms; everything superseded goes
    want = [(1999, b"hot", b"v1999"), (2002, b"a", b"a2"), (2004, b"c", b"c1")]
    _settles(bs, topic, want)
    c = ck.Consumer({"bootstrap.servers": bs, "group.id": topic_name("w")})
    try:
        assert c.get_watermark_offsets(ck.TopicPartition(topic, 0), timeout=T) == (0, 2005)   # never renumbered
    finally:
        c.close()
    assert _read_all(bs, topic, start=700, isolation="read_uncommitted") == want      # a fetch inside the holes
    # small fetches (1000 units a read): the first windows hold holes only and step the consumer on
    assert _read_all(bs, topic, max_partition_fetch_bytes=1000) == want
    quick_rokka.restart(hard=True)
    assert _read_all(bs, topic) == want
    p = ck.Producer({"bootstrap.servers": bs, "linger.ms": 5})
    p.produce(topic, key=b"a", value=b"a3")
    assert p.flush(T) == 0
    _settles(bs, topic, [(1999, b"hot", b"v1999"), (2004, b"c", b"c1"), (2005, b"a", b"a3")])
    quick_rokka.restart()
    assert _read_all(bs, topic) == [(1999, b"hot", b"v1999"), (2004, b"c", b"c1"), (2005, b"a", b"a3")]


@pytest.mark.timeout(120)
def test_kafka_python_reads_a_compacted_topic(quick_rokka: harness.ServerProcess) -> None:
    pytest.importorskip("kafka", reason="kafka-python is not installed")
    from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
    from kafka.admin import NewTopic

    bs, topic = quick_rokka.kafka, topic_name("cmpk")
    admin = KafkaAdminClient(bootstrap_servers=bs, request_timeout_ms=15000)
    try:
        admin.create_topics([NewTopic(topic, 1, 1, topic_configs={"cleanup.policy": "compact,delete"})])
    finally:
        admin.close()
    p = KafkaProducer(bootstrap_servers=bs)
    for i in range(1200):
        p.send(topic, key=b"k%d" % (i % 3), value=b"%d" % i)
    p.flush(timeout=T)
    p.close(timeout=10)
    want = [(1197, b"k0", b"1197"), (1198, b"k1", b"1198"), (1199, b"k2", b"1199")]
    _settles(bs, topic, want)
    tp = TopicPartition(topic, 0)
    c = KafkaConsumer(bootstrap_servers=bs, auto_offset_reset="earliest", consumer_timeout_ms=5000,
                      enable_auto_commit=False)
    try:
        c.assign([tp])
        c.seek(tp, 0)
        got = [(m.offset, m.key, m.value) for m in c]
        assert got == want and c.position(tp) == 1200
    finally:
        c.close()


@pytest.mark.timeout(150)
def test_kill9_while_compacting(quick_rokka: harness.ServerProcess) -> None:
    """rokka is killed (SIGKILL) while compaction passes run under a producer: afterwards every key's
    last acknowledged value is there, every record read is the one produced at its offset, and the
    topic compacts down to one record per key again."""
    ck = pytest.importorskip("confluent_kafka", reason="confluent-kafka is installed by make test (pyproject test extra)")
    from confluent_kafka.admin import AdminClient, NewTopic

    bs, topic = quick_rokka.kafka, topic_name("cmpx")
    admin = AdminClient({"bootstrap.servers": bs})
    admin.create_topics([NewTopic(topic, 1, 1, config={"cleanup.policy": "compact"})], operation_timeout=T,
                        request_timeout=T)[topic].result(T)
    produced: dict[int, tuple[bytes, bytes]] = {}

    def on_delivery(err: Any, msg: Any) -> None:
        assert err is None, err
        produced[msg.offset()] = (msg.key(), msg.value())

    def rounds(first: int, last: int) -> None:
        p = ck.Producer({"bootstrap.servers": bs, "linger.ms": 2, "acks": "all"})
        for r in range(first, last):
            for k in range(50):
                p.produce(topic, key=b"k%d" % k, value=b"r%d" % r, on_delivery=on_delivery)
            p.poll(0)
            if r % 10 == 9:
                assert p.flush(T) == 0
                time.sleep(0.1)         # let passes run between the rounds
        assert p.flush(T) == 0

    rounds(0, 60)
    quick_rokka.restart(hard=True)
    got = _read_all(bs, topic)
    assert all(produced[o] == (k, v) for o, k, v in got)              # nothing torn, nothing renumbered
    assert {k: v for _, k, v in got} == {b"k%d" % k: b"r59" for k in range(50)}
    rounds(60, 80)
    want = sorted((o, k, v) for o, (k, v) in produced.items() if v == b"r79")
    _settles(bs, topic, want)
