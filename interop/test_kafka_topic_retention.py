"""Per-topic retention.ms with real Kafka admin clients: set at CreateTopics, changed with
IncrementalAlterConfigs and AlterConfigs, shown by DescribeConfigs, applied (records older than it
disappear from the log start for every reader), reset; configs rokka does not apply per topic are
refused with the reason.  ``cleanResourceInterval=300`` makes the retention pass run every 300 ms.

Everything on 127.0.0.1 with free ports; every client call and wait is bounded.
"""

from __future__ import annotations

import time
from typing import Any

import harness
import pytest
from kafka_common import confluent_alter_topic, confluent_log_start, kafkajs_runner, topic_name, wait_until


def test_kafka_python(quick_rokka: harness.ServerProcess) -> None:
    pytest.importorskip("kafka", reason="kafka-python is not installed")
    from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
    from kafka.admin import ConfigResource, ConfigResourceType, NewTopic

    bs = quick_rokka.kafka
    topic, kept = topic_name("ret"), topic_name("kept")
    admin = KafkaAdminClient(bootstrap_servers=bs, request_timeout_ms=15000)
    consumer = KafkaConsumer(bootstrap_servers=bs)
    try:
        admin.create_topics([NewTopic(topic, 2, 1), NewTopic(kept, 1, 1, topic_configs={"retention.ms": "86400000"})])
        p = KafkaProducer(bootstrap_servers=bs)
        for i in range(10):
            p.send(topic, f"v{i}".encode(), partition=i % 2)
            p.send(kept, f"k{i}".encode())
        p.flush(timeout=30)
        parts = [TopicPartition(topic, 0), TopicPartition(topic, 1)]
        assert consumer.end_offsets(parts) == {parts[0]: 5, parts[1]: 5}
        assert consumer.beginning_offsets(parts) == {parts[0]: 0, parts[1]: 0}

        def modified(name: str) -> dict[str, Any]:
            got = admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, name)])
            return {k: v["value"] for k, v in got["topic"][name].items()}

        assert modified(kept) == {"retention.ms": "86400000"}       # set at CreateTopics
        assert modified(topic) == {}
        # IncrementalAlterConfigs SET: the records are older than 1 s soon, and go for every reader
        res = admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, topic, configs={"retention.ms": "1000"})])
        assert res == {"topic": {topic: "OK"}}
        assert modified(topic) == {"retention.ms": "1000"}
        wait_until(lambda: consumer.beginning_offsets(parts) == {parts[0]: 5, parts[1]: 5}, 20,
                   "records older than retention.ms gone")
        c = KafkaConsumer(topic, bootstrap_servers=bs, auto_offset_reset="earliest", consumer_timeout_ms=2000)
        try:
            assert list(c) == []
        finally:
            c.close()
        kept_part = TopicPartition(kept, 0)
        assert consumer.beginning_offsets([kept_part]) == {kept_part: 0}        # other topics untouched
        # AlterConfigs (the non-incremental one): -1 = no retention of the topic's own
        res = admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, topic, configs={"retention.ms": "-1"})],
                                  incremental=False)
        assert res == {"topic": {topic: "OK"}}
        assert modified(topic) == {}
        p.send(topic, b"after", partition=0)
        p.flush(timeout=30)
        p.close(timeout=10)
        time.sleep(1.5)                                 # several retention passes: nothing is cut any more
        assert consumer.end_offsets([parts[0]]) == {parts[0]: 6}
        assert consumer.beginning_offsets([parts[0]]) == {parts[0]: 5}
        # what rokka cannot apply per topic is refused with the reason, and nothing changes
        res = admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, topic,
                                                  configs={"flush.messages": "1", "retention.ms": "5"})],
                                  raise_on_unknown=False)
        assert "not applied per topic" in res["topic"][topic]
        res = admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, topic, configs={"retention.ms": "-5"})],
                                  raise_on_unknown=False)
        assert "must be >= -1" in res["topic"][topic]
        assert modified(topic) == {}
        res = admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, topic_name("nope"),
                                                  configs={"retention.ms": "5"})], raise_on_unknown=False)
        assert "UnknownTopicOrPartition" in next(iter(res["topic"].values()))
    finally:
        consumer.close()
        admin.close()


def test_confluent_kafka(quick_rokka: harness.ServerProcess) -> None:
    ck = pytest.importorskip("confluent_kafka", reason="confluent-kafka is not installed")
    from confluent_kafka import admin as cka

    bs = quick_rokka.kafka
    topic = topic_name("ret")
    admin = cka.AdminClient({"bootstrap.servers": bs})
    admin.create_topics([cka.NewTopic(topic, 1, 1, config={"retention.ms": "600000"})])[topic].result(20)

    def retention() -> tuple[str, bool]:
        fut = admin.describe_configs([cka.ConfigResource(cka.ResourceType.TOPIC, topic)])
        (configs,) = [f.result(20) for f in fut.values()]
        e = configs["retention.ms"]
        return e.value, e.is_default

    assert retention() == ("600000", False)
    p = ck.Producer({"bootstrap.servers": bs})
    for i in range(5):
        p.produce(topic, f"c{i}".encode())
    assert p.flush(20) == 0

    def alter(op: Any, value: str | None) -> None:
        entry = cka.ConfigEntry("retention.ms", value, incremental_operation=op)
        confluent_alter_topic(admin, topic, [entry])

    alter(cka.AlterConfigOpType.SET, "500")
    assert retention() == ("500", False)
    wait_until(lambda: confluent_log_start(bs, topic) == 5, 20, "records older than retention.ms gone")
    alter(cka.AlterConfigOpType.DELETE, None)
    value, is_default = retention()
    assert is_default and value != "500"                 # back to the store-wide retention
    bad = cka.ConfigEntry("cleanup.policy", "compact,shred", incremental_operation=cka.AlterConfigOpType.SET)
    with pytest.raises(ck.KafkaException, match="String must be one of: compact, delete"):
        confluent_alter_topic(admin, topic, [bad])


def test_kafkajs(quick_rokka: harness.ServerProcess, workdir: Any) -> None:
    """kafkajs's alterConfigs is the non-incremental AlterConfigs (v0)."""
    harness.skip_unless_node("kafkajs")
    topic = topic_name("ret")
    run = kafkajs_runner(workdir, quick_rokka.kafka, topic)

    assert [e for e in run("create", partitions=1) if e.get("event") == "created"]
    altered = run("alter_configs", configs=[{"name": "retention.ms", "value": "3600000"}])
    assert [e["resources"] for e in altered if e.get("event") == "altered"] == [[{"name": topic, "errorCode": 0}]]
    (configs,) = [e["configs"] for e in run("describe_configs") if e.get("event") == "configs"]
    (ret,) = [c for c in configs if c["name"] == "retention.ms"]
    assert (ret["value"], ret["isDefault"], ret["readOnly"]) == ("3600000", False, False)
    refused = run("alter_configs", configs=[{"name": "flush.messages", "value": "1"}])
    assert [e["type"] for e in refused if e.get("event") == "refused"] == ["INVALID_CONFIG"], refused
