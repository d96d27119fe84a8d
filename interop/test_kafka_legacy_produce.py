"""Old producers: legacy MessageSet v0/v1 (Produce v0-v2), plain and gzip, read back by a modern consumer."""

from __future__ import annotations

import time

import pytest

from interop import harness
from interop.kafka_common import topic_name


@pytest.mark.timeout(120)
@pytest.mark.parametrize("api_version,compression", [((0, 10, 1), None), ((0, 10, 1), "gzip"), ((0, 9), None),
                                                     ((0, 9), "gzip")])
def test_legacy_message_sets(rokka: harness.ServerProcess, api_version: tuple[int, ...],
                             compression: str | None) -> None:
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition
    from kafka.admin import KafkaAdminClient, NewTopic

    topic = topic_name("legacy")
    admin = KafkaAdminClient(bootstrap_servers=rokka.kafka)
    admin.create_topics([NewTopic(topic, 1, 1)])
    admin.close()
    p = KafkaProducer(bootstrap_servers=rokka.kafka, api_version=api_version, compression_type=compression,
                      linger_ms=20)
    sent = [(f"k{i}".encode() if i % 2 else None, f"legacy-{i}".encode()) for i in range(20)]
    futures = [p.send(topic, key=k, value=v, partition=0) for k, v in sent]
    offsets = [f.get(timeout=15).offset for f in futures]
    p.close()
    assert offsets == list(range(20))
    c = KafkaConsumer(bootstrap_servers=rokka.kafka, enable_auto_commit=False)
    c.assign([TopicPartition(topic, 0)])
    c.seek_to_beginning()
    got: list[tuple[bytes | None, bytes]] = []
    deadline = time.monotonic() + 20
    while len(got) < len(sent) and time.monotonic() < deadline:
        got += [(r.key, r.value) for rs in c.poll(timeout_ms=500).values() for r in rs]
    c.close()
    assert got == sent
