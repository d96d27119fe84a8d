"""Kafka clients against a two-broker rokka cluster (``rokka namesrv`` + broker-a + broker-b).

What it shows, with real processes on 127.0.0.1 and ports 0:

1. A topic created on both brokers with ``rokka admin updateTopic -c`` (4 queues each) is one
   Kafka topic of 8 partitions: kafka-python and confluent-kafka, bootstrapped on either broker,
   see both brokers and partitions 0-3 led by broker-a, 4-7 by broker-b.
2. Both clients produce to every partition and read everything back (all partitions assigned).
3. A kafka-python consumer group commits offsets for partitions on both brokers; a RocketMQ
   PullConsumer of the same group reads the same offsets from each broker (queue = partition -
   the broker's base), and a confluent-kafka consumer of the group fetches them back; kafka-python's
   admin deletes two partitions' offsets (one per broker) and then the whole group, on both brokers.
4. ``kill -9`` broker-b: after a metadata refresh clients keep producing to broker-a's partitions.

No timing assertions; every wait is bounded.
"""

from __future__ import annotations

import json
import subprocess
import time
from typing import Any

import harness
import pytest
import trio
from kafka_common import topic_name, wait_until

pytest.importorskip("kafka", reason="kafka-python is not installed (interop/install.sh installs it)")
pytest.importorskip("confluent_kafka", reason="confluent-kafka is not installed (interop/install.sh)")
import kafka.errors  # noqa: E402
from confluent_kafka import Consumer as CkConsumer  # noqa: E402
from confluent_kafka import Producer as CkProducer  # noqa: E402
from confluent_kafka import TopicPartition as CkTopicPartition  # noqa: E402
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition  # noqa: E402
from kafka.errors import KafkaError  # noqa: E402
from rokka.gateway.kafka.cluster import derive_node_id  # noqa: E402
from rokka.net.remoting.client import MessageQueue, NamesrvClient, PullConsumer, RemotingClient  # noqa: E402

QUEUES = 4
PARTITIONS = 2 * QUEUES
PER_PARTITION = 5  # records per partition and client
TIMEOUT_MS = 15000


def admin_update_topic(cluster: harness.Cluster, topic: str) -> None:
    res = subprocess.run([harness.rokka_executable(), "admin", "-n", cluster.namesrv_addr, "--json",
                          "updateTopic", "-t", topic, "-c", "DefaultCluster",
                          "-r", str(QUEUES), "-w", str(QUEUES)],
                         capture_output=True, text=True, timeout=60, check=False)
    assert res.returncode == 0, res.stderr
    assert sorted(json.loads(res.stdout)["brokers"]) == sorted(b.broker for b in cluster.brokers.values())


def owner(partition: int) -> tuple[str, int]:
    return ("broker-a", partition) if partition < QUEUES else ("broker-b", partition - QUEUES)


def kp_view(bootstrap: str, topic: str) -> tuple[set[int], dict[int, int]]:
    """(broker node ids, partition -> leader) as kafka-python's metadata sees them."""
    c = KafkaConsumer(bootstrap_servers=bootstrap, request_timeout_ms=TIMEOUT_MS + 5000)
    try:
        parts = c.partitions_for_topic(topic) or set()
        cl = c._client.cluster
        return ({getattr(b, "nodeId", None) or b.node_id for b in cl.brokers()},
                {p: cl.leader_for_partition(TopicPartition(topic, p)) for p in parts})
    finally:
        c.close()


def ck_view(bootstrap: str, topic: str) -> tuple[set[int], dict[int, int]]:
    c = CkConsumer({"bootstrap.servers": bootstrap, "group.id": "probe"})
    try:
        md = c.list_topics(topic, timeout=10)
        t = md.topics[topic]
        return set(md.brokers), {p: pm.leader for p, pm in t.partitions.items()}
    finally:
        c.close()


def wait_layout(view: Any, bootstrap: str, topic: str, brokers: set[int], leaders: dict[int, int]) -> None:
    seen: list[Any] = []

    def ok() -> bool:
        seen[:] = [view(bootstrap, topic)]
        return seen[0] == (brokers, leaders)

    try:
        wait_until(ok, 45, f"{view.__name__} of {topic} via {bootstrap}", interval=0.5)
    except AssertionError as exc:
        raise AssertionError(f"{exc}: last seen {seen}") from None


def produce_kp(bootstrap: str, topic: str, tag: str) -> None:
    p = KafkaProducer(bootstrap_servers=bootstrap, request_timeout_ms=TIMEOUT_MS, max_block_ms=TIMEOUT_MS,
                      enable_idempotence=False, retries=5)
    try:
        futs = [(part, p.send(topic, value=f"{tag}-{part}-{i}".encode(), partition=part))
                for part in range(PARTITIONS) for i in range(PER_PARTITION)]
        p.flush(timeout=30)
        for part, f in futs:
            assert f.get(timeout=30).partition == part
    finally:
        p.close(timeout=10)


def produce_ck(bootstrap: str, topic: str, tag: str) -> None:
    p = CkProducer({"bootstrap.servers": bootstrap, "enable.idempotence": False})
    errors: list[Any] = []
    for part in range(PARTITIONS):
        for i in range(PER_PARTITION):
            p.produce(topic, value=f"{tag}-{part}-{i}".encode(), partition=part,
                      on_delivery=lambda err, msg: errors.append(err) if err else None)
    assert p.flush(30) == 0 and not errors, errors


def consume_all(bootstrap: str, topic: str, n: int) -> dict[int, list[tuple[int, bytes]]]:
    c = KafkaConsumer(bootstrap_servers=bootstrap, request_timeout_ms=TIMEOUT_MS + 5000,
                      enable_auto_commit=False)
    try:
        tps = [TopicPartition(topic, p) for p in range(PARTITIONS)]
        c.assign(tps)
        c.seek_to_beginning(*tps)
        got: dict[int, list[tuple[int, bytes]]] = {}
        deadline = time.monotonic() + 60
        while sum(map(len, got.values())) < n and time.monotonic() < deadline:
            for tp, recs in c.poll(timeout_ms=500).items():
                got.setdefault(tp.partition, []).extend((r.offset, r.value) for r in recs)
        return got
    finally:
        c.close()


def group_consume_and_commit(bootstrap: str, topic: str, group: str, n: int) -> dict[int, int]:
    c = KafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=group, auto_offset_reset="earliest",
                      enable_auto_commit=False, request_timeout_ms=TIMEOUT_MS + 5000)
    try:
        count, deadline = 0, time.monotonic() + 90
        while count < n and time.monotonic() < deadline:
            count += sum(len(r) for r in c.poll(timeout_ms=500).values())
        assert count == n
        c.commit()
        return {p: c.committed(TopicPartition(topic, p)) for p in range(PARTITIONS)}
    finally:
        c.close()


def ck_committed(bootstrap: str, topic: str, group: str) -> dict[int, int]:
    c = CkConsumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        parts = c.committed([CkTopicPartition(topic, p) for p in range(PARTITIONS)], timeout=20)
        return {tp.partition: tp.offset for tp in parts}
    finally:
        c.close()


def rocketmq_offsets(namesrv: str, topic: str, group: str) -> dict[int, int | None]:
    async def main() -> dict[int, int | None]:
        with trio.fail_after(30):
            async with RemotingClient(timeout_s=5.0) as rc:
                consumer = PullConsumer(rc, NamesrvClient(rc, namesrv), group)
                return {p: await consumer.query_offset(MessageQueue(topic, *owner(p)))
                        for p in range(PARTITIONS)}

    return trio.run(main)


def test_two_brokers_are_one_kafka_cluster(rokka_cluster: harness.Cluster) -> None:
    cluster = rokka_cluster
    topic = topic_name("kcl")
    admin_update_topic(cluster, topic)
    a_id, b_id = derive_node_id("broker-a"), derive_node_id("broker-b")
    leaders = {p: a_id if p < QUEUES else b_id for p in range(PARTITIONS)}
    for srv in cluster.brokers.values():
        wait_layout(kp_view, srv.kafka, topic, {a_id, b_id}, leaders)
        wait_layout(ck_view, srv.kafka, topic, {a_id, b_id}, leaders)

    # Produce to every partition with both clients (bootstrapped on different brokers), read all back.
    a_boot, b_boot = cluster.brokers["broker-a"].kafka, cluster.brokers["broker-b"].kafka
    produce_kp(a_boot, topic, "kp")
    produce_ck(b_boot, topic, "ck")
    total = 2 * PARTITIONS * PER_PARTITION
    got = consume_all(b_boot, topic, total)
    assert sorted(got) == list(range(PARTITIONS))
    for part, recs in got.items():
        assert [o for o, _ in recs] == list(range(2 * PER_PARTITION))
        assert sorted(v for _, v in recs) == sorted(
            f"{tag}-{part}-{i}".encode() for tag in ("kp", "ck") for i in range(PER_PARTITION))

    # One group, offsets on both brokers, the same for RocketMQ and for another Kafka client.
    group = topic_name("kcl-g")
    assert ck_committed(a_boot, topic, group) == {p: -1001 for p in range(PARTITIONS)}   # nothing yet
    assert ck_committed(b_boot, topic, group) == {p: -1001 for p in range(PARTITIONS)}
    committed = group_consume_and_commit(a_boot, topic, group, total)
    assert committed == {p: 2 * PER_PARTITION for p in range(PARTITIONS)}
    assert rocketmq_offsets(cluster.namesrv_addr, topic, group) == committed
    assert ck_committed(b_boot, topic, group) == committed

    # OffsetDelete and DeleteGroups reach the offsets on both brokers (one of them is remote to the
    # group's coordinator whichever broker that is).
    admin = KafkaAdminClient(bootstrap_servers=b_boot, request_timeout_ms=TIMEOUT_MS)
    try:
        gone = [TopicPartition(topic, 0), TopicPartition(topic, QUEUES + 1)]
        assert set(admin.delete_group_offsets(group, gone).values()) == {kafka.errors.NoError}
        assert ck_committed(a_boot, topic, group) == {p: -1001 if p in (0, QUEUES + 1) else off
                                                      for p, off in committed.items()}
        assert admin.delete_groups([group]) == {group: "OK"}
        assert ck_committed(a_boot, topic, group) == {p: -1001 for p in range(PARTITIONS)}
    finally:
        admin.close()

    # kill -9 broker-b: broker-a's partitions keep taking records once metadata is refreshed.
    cluster.brokers["broker-b"].kill9()
    def only_a() -> bool:
        try:
            return kp_view(a_boot, topic)[0] == {a_id}
        except KafkaError:  # the client may still try broker-b for metadata
            return False

    wait_until(only_a, 60, "broker-b gone from metadata", interval=0.5)
    p = KafkaProducer(bootstrap_servers=a_boot, request_timeout_ms=TIMEOUT_MS, max_block_ms=TIMEOUT_MS,
                      enable_idempotence=False, retries=5)
    try:
        futs = [p.send(topic, value=f"after-{part}".encode(), partition=part) for part in range(QUEUES)]
        p.flush(timeout=30)
        assert [f.get(timeout=30).offset for f in futs] == [2 * PER_PARTITION] * QUEUES
    finally:
        p.close(timeout=10)
    del cluster.brokers["broker-b"]  # killed on purpose: not part of the clean-shutdown check
