"""Kafka transaction control markers against a real ``rokka serve``: offsets, end offsets, positions and
lag after committed and aborted transactions are Apache Kafka's, for confluent-kafka (librdkafka) and
kafka-python read_committed consumers; RocketMQ readers (rokka's client, the C++ client) of the same
topic see exactly the committed records.

Kafka writes one COMMIT/ABORT control record into every partition of a transaction when it ends, and
an aborted transaction's records keep their offsets.  So on a one-partition topic, a committed
transaction of 5 records, an aborted one of 3 and a committed one of 2 take offsets 0-4 (records),
5 (COMMIT), 6-8 (aborted), 9 (ABORT), 10-11 (records), 12 (COMMIT): the high watermark is 13 and a
read_committed consumer that read everything stands at 13 (gateway/kafka/txn/coordinator.py, docs/compat.md).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import harness
import pytest
from kafka_common import topic_name
from test_kafka_transactions import T, create_topics, rocketmq_values, send, txn_producer

ck = pytest.importorskip("confluent_kafka", reason="confluent-kafka is not installed (interop/install.sh)")
from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition  # noqa: E402

FIRST = [b"c1-%d" % i for i in range(5)]
ABORTED = [b"ab-%d" % i for i in range(3)]
SECOND = [b"c2-%d" % i for i in range(2)]
AFTER_ABORT = len(FIRST) + 1 + len(ABORTED) + 1          # 10: past the ABORT marker
END = AFTER_ABORT + len(SECOND) + 1                      # 13: past the second COMMIT marker


def _transaction(p: Any, topic: str, values: list[bytes], commit: bool) -> None:
    p.begin_transaction()
    send(p, topic, values, partition=0)
    if commit:
        p.commit_transaction(T)
    else:
        p.abort_transaction(T)


def _topic_and_producer(rokka: harness.ServerProcess, prefix: str) -> tuple[str, Any]:
    """A new one-partition topic named after ``prefix`` and a transactional producer."""
    topic = topic_name(prefix)
    create_topics(rokka, topic, partitions=1)
    return topic, txn_producer(rokka, topic_name("tid"))


def _committed_aborted_committed(p: Any, topic: str) -> None:
    """FIRST committed, ABORTED aborted, SECOND committed: offsets 0..4, marker, 6..8, marker, 10..11, marker."""
    _transaction(p, topic, FIRST, commit=True)
    _transaction(p, topic, ABORTED, commit=False)
    _transaction(p, topic, SECOND, commit=True)


def _drain(c: Consumer, topic: str, until: int) -> list[tuple[int, bytes]]:
    """(offset, value) of every record ``c`` returns until its position on partition 0 is ``until``."""
    got: list[tuple[int, bytes]] = []
    deadline = time.monotonic() + 30
    tp = TopicPartition(topic, 0)
    while time.monotonic() < deadline:
        m = c.poll(0.2)
        if m is not None and not m.error():
            got.append((m.offset(), m.value()))
        if c.position([tp])[0].offset == until:
            return got
    raise AssertionError(f"position {c.position([tp])[0].offset} never reached {until}; got {got}")


def test_confluent_positions_end_offsets_and_lag_are_kafkas(rokka: harness.ServerProcess) -> None:
    topic, p = _topic_and_producer(rokka, "txmark")
    _transaction(p, topic, FIRST, commit=True)
    _transaction(p, topic, ABORTED, commit=False)
    group = topic_name("lag")
    c = Consumer({"bootstrap.servers": rokka.kafka, "group.id": group, "enable.auto.commit": False,
                  "isolation.level": "read_committed", "auto.offset.reset": "earliest"})
    try:
        c.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        assert c.get_watermark_offsets(TopicPartition(topic, 0), T) == (0, AFTER_ABORT)
        got = _drain(c, topic, AFTER_ABORT)           # the aborted records are skipped, not waited for
        assert got == list(enumerate(FIRST))
        _transaction(p, topic, SECOND, commit=True)
        got = _drain(c, topic, END)
        assert got == [(AFTER_ABORT + i, v) for i, v in enumerate(SECOND)]
        low, high = c.get_watermark_offsets(TopicPartition(topic, 0), T, cached=False)
        assert (low, high) == (0, END)
        c.commit(asynchronous=False)
        committed = c.committed([TopicPartition(topic, 0)], T)[0].offset
        assert committed == END and high - committed == 0          # consumer lag reaches 0
    finally:
        c.close()
    # a fresh read_uncommitted consumer sees the same records at the same offsets
    u = Consumer({"bootstrap.servers": rokka.kafka, "group.id": topic_name("ru"), "enable.auto.commit": False,
                  "isolation.level": "read_uncommitted"})
    try:
        u.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        assert [v for _, v in _drain(u, topic, END)] == FIRST + SECOND
    finally:
        u.close()
    assert rocketmq_values(rokka, topic) == FIRST + SECOND     # no marker, no placeholder


def test_kafka_python_read_committed_position(rokka: harness.ServerProcess) -> None:
    kafka = pytest.importorskip("kafka", reason="kafka-python is not installed (interop/install.sh)")
    topic, p = _topic_and_producer(rokka, "txmark-kp")
    _committed_aborted_committed(p, topic)
    c = kafka.KafkaConsumer(bootstrap_servers=rokka.kafka, isolation_level="read_committed",
                            enable_auto_commit=False, consumer_timeout_ms=1000)
    try:
        tp = kafka.TopicPartition(topic, 0)
        c.assign([tp])
        c.seek_to_beginning(tp)
        assert c.end_offsets([tp])[tp] == END
        got: list[tuple[int, bytes]] = []
        deadline = time.monotonic() + 30
        while c.position(tp) != END and time.monotonic() < deadline:
            for recs in c.poll(timeout_ms=200).values():
                got += [(r.offset, r.value) for r in recs]
        assert c.position(tp) == END
        assert got == list(enumerate(FIRST)) + [(AFTER_ABORT + i, v) for i, v in enumerate(SECOND)]
    finally:
        c.close()


@pytest.mark.usefixtures("need_cpp")
def test_rocketmq_cpp_pull_sees_committed_records_only(rokka: harness.ServerProcess, workdir: Path) -> None:
    from rmq_cpp import pull_all

    topic, p = _topic_and_producer(rokka, "txmark-cpp")
    _committed_aborted_committed(p, topic)
    got, table = pull_all(rokka.namesrv, workdir, topic)
    assert [m["body"].encode() for m in sorted(got, key=lambda m: m["queue_offset"])] == FIRST + SECOND
    assert [m["queue_offset"] for m in sorted(got, key=lambda m: m["queue_offset"])] == \
        [*range(len(FIRST)), *range(AFTER_ABORT, AFTER_ABORT + len(SECOND))]
    assert sum(table.values()) == END          # its offset moved past the markers
