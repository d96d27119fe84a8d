"""Offset commit metadata and leader epochs with real clients: confluent-kafka (TopicPartition
metadata / leader_epoch, also through a transaction's TxnOffsetCommit), kafka-python (OffsetAndMetadata),
kafkajs (admin.fetchOffsets metadata); Kafka's OFFSET_METADATA_TOO_LARGE past 4096 characters; both
survive a broker restart; in a two-broker cluster the metadata of a partition owned by the other broker
round-trips too."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import harness
import pytest
from kafka_common import topic_name, wait_until

ck = pytest.importorskip("confluent_kafka", reason="confluent-kafka is not installed (interop/install.sh)")
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

T = 20.0  # seconds, per client call


def create_topic(bootstrap: str, partitions: int = 2) -> str:
    name = topic_name("meta")
    a = AdminClient({"bootstrap.servers": bootstrap})
    a.create_topics([NewTopic(name, num_partitions=partitions, replication_factor=1)],
                    operation_timeout=T, request_timeout=T)[name].result(timeout=T)
    wait_until(lambda: len(a.list_topics(topic=name, timeout=T).topics[name].partitions) == partitions, 15,
               f"{name} in metadata")
    return name


def consumer(bootstrap: str, group: str) -> Consumer:
    return Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})


def read_back(tp: Any, want: str | None) -> str | None:
    """The metadata confluent-kafka hands back for ``tp``, compared with ``want``.

    confluent-kafka 2.16 builds ``TopicPartition.metadata`` from librdkafka's metadata pointer as a
    NUL-terminated C string (src/confluent_kafka/src/confluent_kafka.c, c_part_to_py), but
    ``Consumer.committed`` copies exactly ``metadata_size`` bytes with no terminator, so now and then
    the string runs on into the client's heap ('...says hi\x07').  The broker's bytes are checked
    exactly by kafka-python and kafkajs in this file; here a short run-on past ``want`` is that client
    bug, anything else is a real difference.
    """
    got = tp.metadata
    if want is not None and isinstance(got, str) and got.startswith(want) and len(got) - len(want) <= 16:
        return want
    return got


def committed(bootstrap: str, group: str, topic: str, partitions: int) -> dict[int, Any]:
    c = consumer(bootstrap, group)
    try:
        return {tp.partition: tp for tp in c.committed([TopicPartition(topic, p) for p in range(partitions)],
                                                       timeout=T)}
    finally:
        c.close()


def test_confluent_metadata_round_trips_and_survives_a_restart(rokka: harness.ServerProcess) -> None:
    topic, group = create_topic(rokka.kafka), topic_name("g")
    c = consumer(rokka.kafka, group)
    try:
        c.commit(offsets=[TopicPartition(topic, 0, 5, metadata="checkpoint é 5", leader_epoch=0),
                          TopicPartition(topic, 1, 3)], asynchronous=False)
    finally:
        c.close()
    got = committed(rokka.kafka, group, topic, 2)
    assert (got[0].offset, read_back(got[0], "checkpoint é 5")) == (5, "checkpoint é 5")
    assert got[0].leader_epoch == 0
    assert (got[1].offset, got[1].metadata, got[1].leader_epoch) == (3, None, None)  # "" / -1 on the wire

    rokka.restart()
    got = committed(rokka.kafka, group, topic, 2)
    assert (got[0].offset, read_back(got[0], "checkpoint é 5"), got[0].leader_epoch) == (5, "checkpoint é 5", 0)


def test_too_large_metadata_is_refused(rokka: harness.ServerProcess) -> None:
    topic, group = create_topic(rokka.kafka), topic_name("g")
    c = consumer(rokka.kafka, group)
    try:
        c.commit(offsets=[TopicPartition(topic, 0, 1, metadata="ok")], asynchronous=False)
        with pytest.raises(KafkaException) as info:
            c.commit(offsets=[TopicPartition(topic, 0, 9, metadata="x" * 4097)], asynchronous=False)
        assert info.value.args[0].code() == KafkaError.OFFSET_METADATA_TOO_LARGE
        # exactly the limit is fine (Kafka's offset.metadata.max.bytes = 4096); confluent-kafka sends the
        # metadata with its C string's NUL, so 4095 characters are 4096 on the wire
        c.commit(offsets=[TopicPartition(topic, 1, 2, metadata="y" * 4095)], asynchronous=False)
        with pytest.raises(KafkaException):
            c.commit(offsets=[TopicPartition(topic, 1, 3, metadata="y" * 4096)], asynchronous=False)
    finally:
        c.close()
    got = committed(rokka.kafka, group, topic, 2)
    assert (got[0].offset, read_back(got[0], "ok")) == (1, "ok")          # the refused commit changed nothing
    assert (got[1].offset, read_back(got[1], "y" * 4095)) == (2, "y" * 4095)


def test_transactional_offsets_keep_their_metadata(rokka: harness.ServerProcess) -> None:
    """TxnOffsetCommit: the metadata takes effect with the transaction's commit, an abort leaves none."""
    topic, group = create_topic(rokka.kafka), topic_name("g")
    c = consumer(rokka.kafka, group)
    p = Producer({"bootstrap.servers": rokka.kafka, "transactional.id": topic_name("tid")})
    try:
        p.init_transactions(T)
        p.begin_transaction()
        p.send_offsets_to_transaction([TopicPartition(topic, 0, 3, metadata="txn-a", leader_epoch=0)],
                                      c.consumer_group_metadata(), T)
        p.commit_transaction(T)
        p.begin_transaction()
        p.send_offsets_to_transaction([TopicPartition(topic, 0, 5, metadata="aborted")],
                                      c.consumer_group_metadata(), T)
        p.abort_transaction(T)
    finally:
        c.close()
    got = committed(rokka.kafka, group, topic, 2)[0]
    assert (got.offset, read_back(got, "txn-a"), got.leader_epoch) == (3, "txn-a", 0)


def test_kafka_python_offset_and_metadata(rokka: harness.ServerProcess) -> None:
    kafka = pytest.importorskip("kafka", reason="kafka-python is not installed (interop/install.sh)")
    from kafka.structs import OffsetAndMetadata

    topic, group = create_topic(rokka.kafka), topic_name("g")
    c = kafka.KafkaConsumer(bootstrap_servers=rokka.kafka, group_id=group, enable_auto_commit=False,
                            request_timeout_ms=int(T * 1000) + 5000)
    try:
        tp = kafka.TopicPartition(topic, 1)
        c.commit({tp: OffsetAndMetadata(7, "kafka-python says hi", 2)})
        got = c.committed(tp, metadata=True)
        assert (got.offset, got.metadata, got.leader_epoch) == (7, "kafka-python says hi", 2)
    finally:
        c.close()
    # the other client reads the same commit
    seen = committed(rokka.kafka, group, topic, 2)[1]
    assert (seen.offset, read_back(seen, "kafka-python says hi"), seen.leader_epoch) == (7, "kafka-python says hi", 2)


def test_kafkajs_reads_the_metadata(rokka: harness.ServerProcess, workdir: Path) -> None:
    harness.skip_unless_node("kafkajs")
    kafka = pytest.importorskip("kafka", reason="kafka-python is not installed (interop/install.sh)")
    from kafka.structs import OffsetAndMetadata

    topic, group = create_topic(rokka.kafka), topic_name("g")
    meta = json.dumps({"app": "x", "ts": 1})
    c = kafka.KafkaConsumer(bootstrap_servers=rokka.kafka, group_id=group, enable_auto_commit=False,
                            request_timeout_ms=int(T * 1000) + 5000)
    try:
        c.commit({kafka.TopicPartition(topic, 0): OffsetAndMetadata(4, meta, -1)})
    finally:
        c.close()
    events = harness.run_node("kafkajs_client", {"action": "committed", "brokers": [rokka.kafka],
                                                 "groupId": group, "topic": topic}, workdir=workdir, timeout=60)
    (done,) = [e for e in events if e.get("event") == "offsets"]
    offsets = {o["partition"]: o for o in done["offsets"]}
    assert offsets[0]["offset"] == 4 and offsets[0]["metadata"] == meta


def test_cluster_routes_the_metadata(rokka_cluster: harness.Cluster) -> None:
    """The group's coordinator owns half of the partitions; the other half's commits (with their
    metadata) are forwarded to their owner and read back from it."""
    topic, group = topic_name("meta"), topic_name("g")
    res = subprocess.run([harness.rokka_executable(), "admin", "-n", rokka_cluster.namesrv_addr, "--json",
                          "updateTopic", "-t", topic, "-c", "DefaultCluster", "-r", "4", "-w", "4"],
                         capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    boots = [b.kafka for b in rokka_cluster.brokers.values()]
    for boot in boots:
        a = AdminClient({"bootstrap.servers": boot})
        wait_until(lambda a=a: topic in (md := a.list_topics(timeout=T).topics)
                   and len(md[topic].partitions) == 8, 45, f"8 partitions of {topic} via {boot}", interval=0.5)
    c = consumer(boots[0], group)
    try:
        c.commit(offsets=[TopicPartition(topic, p, 10 + p, metadata=f"m{p}", leader_epoch=0) for p in range(8)],
                 asynchronous=False)
    finally:
        c.close()
    for boot in boots:
        got = committed(boot, group, topic, 8)
        assert {p: (tp.offset, read_back(tp, f"m{p}"), tp.leader_epoch) for p, tp in got.items()} == \
            {p: (10 + p, f"m{p}", 0) for p in range(8)}
