"""Per-topic configs with real Kafka clients (issue 26 item 7) and CreateTopics with a manual
replica assignment (item 5): each config set through CreateTopics / AlterConfigs /
IncrementalAlterConfigs is shown by DescribeConfigs and takes effect on produce and on the log:
``message.timestamp.type=LogAppendTime`` (consumers see LOG_APPEND_TIME), ``max.message.bytes``
(MESSAGE_TOO_LARGE, not retried), ``min.insync.replicas`` (acks=all gets NOT_ENOUGH_REPLICAS on
one replica), ``retention.bytes`` (the log start moves), ``segment.bytes`` (kept, shown, not applied).
``cleanResourceInterval=300`` makes the retention pass run every 300 ms.

Everything on 127.0.0.1 with free ports; every client call and wait is bounded.
"""

from __future__ import annotations

from typing import Any

import pytest

from interop import harness
from interop.kafka_common import (
    confluent_alter_topic,
    confluent_log_start,
    kafkajs_runner,
    topic_name,
    wait_until,
)

CONFIGS = {"message.timestamp.type": "LogAppendTime", "max.message.bytes": "2000",
           "min.insync.replicas": "2", "segment.bytes": "1048576", "cleanup.policy": "delete"}


@pytest.mark.timeout(180)
def test_kafka_python(quick_rokka: harness.ServerProcess) -> None:
    pytest.importorskip("kafka", reason="kafka-python is not installed")
    from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
    from kafka.admin import ConfigResource, ConfigResourceType, NewTopic
    from kafka.errors import InvalidReplicationAssignmentError, MessageSizeTooLargeError, NotEnoughReplicasError

    bs = quick_rokka.kafka
    topic, manual, bad = topic_name("cfg"), topic_name("manual"), topic_name("bad")
    admin = KafkaAdminClient(bootstrap_servers=bs, request_timeout_ms=15000)
    try:
        admin.create_topics([NewTopic(topic, 1, 1, topic_configs=CONFIGS)])
        got = admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, topic)])
        shown = {k: v["value"] for k, v in got["topic"][topic].items()}
        assert {k: shown[k] for k in CONFIGS if k != "cleanup.policy"} == {
            k: v for k, v in CONFIGS.items() if k != "cleanup.policy"}
        p = KafkaProducer(bootstrap_servers=bs, acks=1, retries=0)
        meta = p.send(topic, b"small", partition=0).get(timeout=10)
        assert meta.timestamp > 1_000_000_000_000          # the broker's append time
        with pytest.raises(MessageSizeTooLargeError):
            p.send(topic, b"x" * 5000, partition=0).get(timeout=10)
        p.close(timeout=10)
        strict = KafkaProducer(bootstrap_servers=bs, acks="all", retries=0)
        with pytest.raises(NotEnoughReplicasError):
            strict.send(topic, b"all", partition=0).get(timeout=10)
        strict.close(timeout=10)
        c = KafkaConsumer(bootstrap_servers=bs, auto_offset_reset="earliest", consumer_timeout_ms=3000)
        c.assign([TopicPartition(topic, 0)])
        recs = list(c)
        c.close()
        assert [(r.value, r.timestamp_type, r.timestamp) for r in recs] == [(b"small", 1, meta.timestamp)]
        # retention.bytes: 0 keeps nothing, the log start reaches the end
        res = admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, topic, configs={"retention.bytes": "0"})])
        assert res == {"topic": {topic: "OK"}}
        part = TopicPartition(topic, 0)
        probe = KafkaConsumer(bootstrap_servers=bs)
        try:
            wait_until(lambda: probe.beginning_offsets([part]) == {part: 1}, 20,
                       "retention.bytes moves the log start")
        finally:
            probe.close()
        # manual replica assignment naming this broker; an unknown broker is refused
        broker = admin.describe_cluster()["brokers"][0]
        node = int(broker.get("node_id", broker.get("broker_id")))
        admin.create_topics([NewTopic(manual, -1, -1, replica_assignments={0: [node], 1: [node]})])
        with pytest.raises(InvalidReplicationAssignmentError):
            admin.create_topics([NewTopic(bad, -1, -1, replica_assignments={0: [node + 1]})])
    finally:
        admin.close()
    check = KafkaConsumer(bootstrap_servers=bs)
    try:
        assert check.partitions_for_topic(manual) == {0, 1}
        assert not check.partitions_for_topic(bad)
    finally:
        check.close()


@pytest.mark.timeout(180)
def test_confluent_kafka(quick_rokka: harness.ServerProcess) -> None:
    ck = pytest.importorskip("confluent_kafka", reason="confluent-kafka is not installed")
    from confluent_kafka import admin as cka

    bs = quick_rokka.kafka
    topic, manual, bad = topic_name("cfg"), topic_name("manual"), topic_name("bad")
    admin = cka.AdminClient({"bootstrap.servers": bs})
    admin.create_topics([cka.NewTopic(topic, 1, 1)])[topic].result(20)
    entries = [cka.ConfigEntry(k, v, incremental_operation=cka.AlterConfigOpType.SET) for k, v in CONFIGS.items()]
    confluent_alter_topic(admin, topic, entries)
    futures = admin.describe_configs([cka.ConfigResource(cka.ResourceType.TOPIC, topic)])
    (described,) = [f.result(20) for f in futures.values()]
    assert {k: (described[k].value, described[k].is_default) for k in ("max.message.bytes", "min.insync.replicas")} \
        == {"max.message.bytes": ("2000", False), "min.insync.replicas": ("2", False)}

    reports: list[tuple[bytes, Any]] = []

    def produce(conf: dict[str, Any], value: bytes) -> None:
        p = ck.Producer({"bootstrap.servers": bs, "message.timeout.ms": 60000, **conf})
        p.produce(topic, value, partition=0, on_delivery=lambda err, msg: reports.append((msg.value(), err)))
        assert p.flush(30) == 0         # a retriable error would be retried until message.timeout.ms
    produce({"acks": 1}, b"small")
    produce({"acks": 1}, b"x" * 5000)
    produce({"acks": "all", "retries": 0}, b"all")
    assert [(v, err.code() if err else None) for v, err in reports] == [
        (b"small", None), (b"x" * 5000, ck.KafkaError.MSG_SIZE_TOO_LARGE),
        (b"all", ck.KafkaError.NOT_ENOUGH_REPLICAS)]
    c = ck.Consumer({"bootstrap.servers": bs, "group.id": topic_name("g"), "auto.offset.reset": "earliest"})
    try:
        c.assign([ck.TopicPartition(topic, 0, 0)])
        msg = c.poll(20)
        assert msg is not None and msg.error() is None and msg.value() == b"small"
        assert msg.timestamp()[0] == ck.TIMESTAMP_LOG_APPEND_TIME
    finally:
        c.close()
    # retention.bytes through IncrementalAlterConfigs
    size = [cka.ConfigEntry("retention.bytes", "0", incremental_operation=cka.AlterConfigOpType.SET)]
    confluent_alter_topic(admin, topic, size)
    wait_until(lambda: confluent_log_start(bs, topic) == 1, 20, "retention.bytes moves the log start")
    # manual replica assignment
    node = admin.describe_cluster().result(20).nodes[0].id
    admin.create_topics([cka.NewTopic(manual, 3, replica_assignment=[[node], [node], [node]])])[manual].result(20)
    assert len(admin.list_topics(manual, timeout=10).topics[manual].partitions) == 3
    with pytest.raises(ck.KafkaException, match="no such broker"):
        admin.create_topics([cka.NewTopic(bad, 1, replica_assignment=[[node + 1]])])[bad].result(20)
    bad_policy = [cka.ConfigEntry("cleanup.policy", "compact,shred", incremental_operation=cka.AlterConfigOpType.SET)]
    with pytest.raises(ck.KafkaException, match="String must be one of: compact, delete"):
        confluent_alter_topic(admin, topic, bad_policy)


@pytest.mark.timeout(180)
def test_kafkajs(quick_rokka: harness.ServerProcess, workdir: Any) -> None:
    """kafkajs's alterConfigs (AlterConfigs v0) sets the kept configs; describeConfigs shows them."""
    harness.skip_unless_node("kafkajs")
    topic = topic_name("cfg")
    run = kafkajs_runner(workdir, quick_rokka.kafka, topic)

    assert [e for e in run("create", partitions=1) if e.get("event") == "created"]
    wanted = {"max.message.bytes": "4096", "message.timestamp.type": "LogAppendTime", "retention.bytes": "1000000",
              "segment.ms": "3600000"}
    altered = run("alter_configs", configs=[{"name": k, "value": v} for k, v in wanted.items()])
    assert [e["resources"] for e in altered if e.get("event") == "altered"] == [[{"name": topic, "errorCode": 0}]]
    (configs,) = [e["configs"] for e in run("describe_configs") if e.get("event") == "configs"]
    shown = {c["name"]: (c["value"], c["isDefault"]) for c in configs if c["name"] in wanted}
    assert shown == {k: (v, False) for k, v in wanted.items()}
