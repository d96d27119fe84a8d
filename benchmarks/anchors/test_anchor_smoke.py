"""``make anchors``' self-check: the Apache Kafka anchor it fetched starts, serves a real client and stops.

This is what the benchmarks and ``make conformance`` rely on: a formatted KRaft node that confluent-kafka
produces to and consumes from, stopped with nothing left running.  It needs the fetched jars, so it is not
collected by ``make test`` (tests/ and interop/ only).
"""

from __future__ import annotations

from pathlib import Path

from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition

from benchmarks.lib import apache


def test_apache_kafka_starts_serves_a_real_client_and_stops(tmp_path: Path) -> None:
    assert apache.missing() is None, apache.missing()
    ak = apache.start_kafka(tmp_path / "kafka")
    try:
        assert ak.server.running() and ak.pids
        prod = Producer({"bootstrap.servers": ak.bootstrap, "acks": "all"})
        for i in range(5):
            prod.produce("anchor-smoke", f"v{i}".encode(), key=b"k")
        assert prod.flush(60) == 0
        cons = Consumer({"bootstrap.servers": ak.bootstrap, "group.id": "smoke", "enable.auto.commit": False})
        cons.assign([TopicPartition("anchor-smoke", 0, OFFSET_BEGINNING)])
        got: list[bytes] = []
        for _ in range(60):
            got += [m.value() for m in cons.consume(5 - len(got), 1.0) if not m.error()]
            if len(got) == 5:
                break
        cons.close()
        assert got == [f"v{i}".encode() for i in range(5)]
    finally:
        ak.stop()
    assert not ak.server.running()
