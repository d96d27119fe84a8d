"""Produce fidelity with a real client (confluent-kafka): a record without a key produced to a
compacted topic is refused as Kafka refuses it (INVALID_RECORD, "Compacted topic cannot accept
message without key ..."), and nothing of it is stored; keyed records still go in.

Everything on 127.0.0.1 with free ports; every client call and wait is bounded.
"""

from __future__ import annotations

from typing import Any

import harness
import pytest
from kafka_common import topic_name

T = 20


def _delivered(p: Any, topic: str, *records: tuple[bytes | None, bytes]) -> list[Any]:
    """(error, offset) of each record's delivery report."""
    reports: list[Any] = []
    for key, value in records:
        p.produce(topic, key=key, value=value, on_delivery=lambda err, msg: reports.append((err, msg)))
        p.flush(T)      # one batch per record: the keyless one fails alone
    assert p.flush(T) == 0 and len(reports) == len(records)
    return reports


@pytest.mark.timeout(90)
def test_confluent_keyless_record_refused_on_compacted_topic(rokka: harness.ServerProcess) -> None:
    ck = pytest.importorskip("confluent_kafka", reason="confluent-kafka is installed by make test (pyproject test extra)")
    from confluent_kafka.admin import AdminClient, NewTopic

    bs, topic = rokka.kafka, topic_name("cmpk")
    admin = AdminClient({"bootstrap.servers": bs})
    admin.create_topics([NewTopic(topic, 1, 1, config={"cleanup.policy": "compact"})],
                        operation_timeout=T, request_timeout=T)[topic].result(T)
    p = ck.Producer({"bootstrap.servers": bs, "linger.ms": 0, "retries": 0, "message.timeout.ms": T * 1000})
    (ok1, bad, ok2) = _delivered(p, topic, (b"a", b"1"), (None, b"no key"), (b"b", b"2"))
    assert ok1[0] is None and ok2[0] is None
    err = bad[0]
    assert err is not None and err.code() == ck.KafkaError.INVALID_RECORD, err
    assert not err.retriable()
    assert (ok1[1].offset(), ok2[1].offset()) == (0, 1)        # nothing of the refused batch was stored
    c = ck.Consumer({"bootstrap.servers": bs, "group.id": topic_name("g")})
    try:
        assert c.get_watermark_offsets(ck.TopicPartition(topic, 0), timeout=T) == (0, 2)
    finally:
        c.close()
