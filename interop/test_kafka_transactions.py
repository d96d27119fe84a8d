"""Kafka transactions against a real ``rokka serve``: confluent-kafka exactly-once consume-transform-produce,
aborted transactions invisible to read_committed, read_uncommitted and RocketMQ readers, transaction
timeout, broker restarts mid-transaction, and kafka-python's transactional producer.

rokka keeps transactional records as RocketMQ half messages until EndTxn (gateway/kafka/txn/coordinator.py), so
read_uncommitted consumers see exactly what read_committed ones see: committed records only.
"""

from __future__ import annotations

import time
from typing import Any

import harness
import pytest
from kafka_common import topic_name, wait_until

ck = pytest.importorskip("confluent_kafka", reason="confluent-kafka is not installed (interop/install.sh)")
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

T = 20.0


def create_topics(srv: harness.ServerProcess, *names: str, partitions: int = 2) -> None:
    a = AdminClient({"bootstrap.servers": srv.kafka})
    futs = a.create_topics([NewTopic(n, num_partitions=partitions, replication_factor=1) for n in names],
                           operation_timeout=T, request_timeout=T)
    for n in names:
        futs[n].result(timeout=T)
    for n in names:   # a per-topic Metadata request (the all-topics form is not what is tested here)
        wait_until(lambda n=n: n in a.list_topics(topic=n, timeout=T).topics, 15, f"{n} in metadata")


def txn_producer(srv: harness.ServerProcess, tid: str, **conf: Any) -> Producer:
    p = Producer({"bootstrap.servers": srv.kafka, "transactional.id": tid, **conf})
    p.init_transactions(T)
    return p


def consumer(srv: harness.ServerProcess, group: str, isolation: str = "read_committed",
             **conf: Any) -> Consumer:
    return Consumer({"bootstrap.servers": srv.kafka, "group.id": group, "auto.offset.reset": "earliest",
                     "enable.auto.commit": False, "isolation.level": isolation, **conf})


def read_all(srv: harness.ServerProcess, topic: str, isolation: str, expect: int,
             settle: float = 3.0) -> list[bytes]:
    """Every value of ``topic`` seen by a fresh consumer: wait for ``expect``, then ``settle`` s more."""
    c = consumer(srv, topic_name("reader"), isolation)
    c.subscribe([topic])
    out: list[bytes] = []
    deadline = time.monotonic() + 40
    quiet_until = None
    try:
        while time.monotonic() < deadline:
            m = c.poll(0.3)
            if m is not None and not m.error():
                out.append(m.value())
            if len(out) >= expect:
                quiet_until = quiet_until or time.monotonic() + settle
                if time.monotonic() > quiet_until:
                    break
    finally:
        c.close()
    return out


def rocketmq_values(srv: harness.ServerProcess, topic: str) -> list[bytes]:
    """Every message body of ``topic`` pulled over the RocketMQ protocol (rokka's trio client)."""
    import trio
    from rokka.net.remoting.client import NamesrvClient, PullConsumer, RemotingClient

    async def pull_all() -> list[bytes]:
        out: list[bytes] = []
        with trio.fail_after(30):
            async with RemotingClient() as rc:
                ns = NamesrvClient(rc, [srv.namesrv])
                while await ns.get_route(topic) is None:  # noqa: ASYNC110 - polling a remote route
                    await trio.sleep(0.2)
                pc = PullConsumer(rc, ns, topic_name("rmq-reader"))
                for mq in await pc.fetch_subscribe_queues(topic):
                    off, end = 0, await pc.max_offset(mq)
                    while off < end:
                        res = await pc.pull(mq, off, max_nums=32)
                        out += [m.body for m in res.messages]
                        if res.next_begin_offset <= off:
                            break
                        off = res.next_begin_offset
        return out

    return trio.run(pull_all)


def send(p: Producer, topic: str, values: list[bytes], **kw: Any) -> list[Any]:
    reports: list[Any] = []
    for v in values:
        p.produce(topic, value=v, on_delivery=lambda err, msg: reports.append((err, msg)), **kw)
    assert p.flush(T) == 0
    assert all(err is None for err, _ in reports), reports
    return [msg for _, msg in reports]


def test_exactly_once_consume_transform_produce(rokka: harness.ServerProcess) -> None:
    src, dst = topic_name("txa"), topic_name("txb")
    create_topics(rokka, src, dst)
    plain = Producer({"bootstrap.servers": rokka.kafka})
    inputs = [f"in-{i}".encode() for i in range(20)]
    # Both input partitions get data (librdkafka's sticky partitioner may otherwise fill only one).
    send(plain, src, inputs[:10], partition=0)
    send(plain, src, inputs[10:], partition=1)

    group = topic_name("eos")
    c = consumer(rokka, group)
    c.subscribe([src])
    p = txn_producer(rokka, topic_name("tid"))
    transformed: list[bytes] = []
    deadline = time.monotonic() + 60
    while len(transformed) < len(inputs) and time.monotonic() < deadline:
        batch = [m for m in c.consume(10, 1.0) if not m.error()]
        if not batch:
            continue
        p.begin_transaction()
        out = [m.value().replace(b"in-", b"out-") for m in batch]
        send(p, dst, out)
        p.send_offsets_to_transaction(c.position(c.assignment()), c.consumer_group_metadata(), T)
        p.commit_transaction(T)
        transformed += out
    assert sorted(transformed) == sorted(v.replace(b"in-", b"out-") for v in inputs)

    # An aborted transaction: its records (and its offsets) never appear anywhere.
    p.begin_transaction()
    send(p, dst, [b"aborted-1", b"aborted-2", b"aborted-3"])
    p.send_offsets_to_transaction([TopicPartition(src, 0, 0), TopicPartition(src, 1, 0)],
                                  c.consumer_group_metadata(), T)
    p.abort_transaction(T)
    p.begin_transaction()
    send(p, dst, [b"after-abort"])
    p.commit_transaction(T)
    c.close()

    want = sorted(transformed + [b"after-abort"])
    assert sorted(read_all(rokka, dst, "read_committed", len(want))) == want
    assert sorted(read_all(rokka, dst, "read_uncommitted", len(want))) == want
    assert sorted(rocketmq_values(rokka, dst)) == want

    # The group's committed offsets are the end of the input (the aborted reset to 0 was discarded).
    c2 = consumer(rokka, group)
    committed = c2.committed([TopicPartition(src, 0), TopicPartition(src, 1)], timeout=T)
    ends = [c2.get_watermark_offsets(TopicPartition(src, i), timeout=T)[1] for i in (0, 1)]
    assert [tp.offset for tp in committed] == ends and sum(ends) == len(inputs)
    c2.close()


def test_zombie_is_fenced_by_a_new_instance(rokka: harness.ServerProcess) -> None:
    dst = topic_name("txz")
    create_topics(rokka, dst)
    tid = topic_name("tid")
    old = txn_producer(rokka, tid)
    old.begin_transaction()
    send(old, dst, [b"zombie"])
    new = txn_producer(rokka, tid)           # aborts the open transaction, bumps the epoch
    new.begin_transaction()
    send(new, dst, [b"fresh"])
    new.commit_transaction(T)
    with pytest.raises(KafkaException):
        old.commit_transaction(T)            # fenced: the zombie's transaction was aborted
    assert sorted(read_all(rokka, dst, "read_uncommitted", 1)) == [b"fresh"]


def test_transaction_timeout_aborts(rokka: harness.ServerProcess) -> None:
    dst = topic_name("txt")
    create_topics(rokka, dst)
    p = txn_producer(rokka, topic_name("tid"), **{"transaction.timeout.ms": 2000, "message.timeout.ms": 2000})
    p.begin_transaction()
    send(p, dst, [b"too-slow-1", b"too-slow-2"])
    time.sleep(4)                           # the coordinator aborts it (1 s ticks) and fences the producer
    with pytest.raises(KafkaException):
        p.commit_transaction(T)
    assert read_all(rokka, dst, "read_uncommitted", 0, settle=2) == []
    assert rocketmq_values(rokka, dst) == []


@pytest.mark.parametrize("hard", [False, True], ids=["sigterm", "sigkill"])
def test_commit_after_broker_restart(rokka: harness.ServerProcess, hard: bool) -> None:
    dst = topic_name("txr")
    create_topics(rokka, dst)
    p = txn_producer(rokka, topic_name("tid"), **{"transaction.timeout.ms": 60000})
    p.begin_transaction()
    send(p, dst, [b"r1", b"r2", b"r3"])
    rokka.restart(hard=hard)
    p.commit_transaction(T)
    assert sorted(read_all(rokka, dst, "read_committed", 3)) == [b"r1", b"r2", b"r3"]


def test_open_transaction_past_timeout_is_aborted_after_restart(rokka: harness.ServerProcess) -> None:
    dst = topic_name("txo")
    create_topics(rokka, dst)
    p = txn_producer(rokka, topic_name("tid"), **{"transaction.timeout.ms": 3000, "message.timeout.ms": 3000})
    p.begin_transaction()
    send(p, dst, [b"orphan"])
    rokka.kill9()
    time.sleep(3.5)
    rokka.start()
    time.sleep(2)                            # first coordinator tick aborts it
    with pytest.raises(KafkaException):
        p.commit_transaction(T)
    assert read_all(rokka, dst, "read_uncommitted", 0, settle=2) == []
    assert rocketmq_values(rokka, dst) == []


def test_kafka_python_transactional_producer(rokka: harness.ServerProcess) -> None:
    kp = pytest.importorskip("kafka", reason="kafka-python is not installed")
    from kafka import KafkaProducer

    if "transactional_id" not in KafkaProducer.DEFAULT_CONFIG:
        pytest.skip(f"kafka-python {kp.__version__} has no transactional producer")
    dst = topic_name("txk")
    create_topics(rokka, dst)
    p = KafkaProducer(bootstrap_servers=rokka.kafka, transactional_id=topic_name("kp"))
    try:
        p.init_transactions()
        p.begin_transaction()
        for i in range(5):
            p.send(dst, f"kp-{i}".encode())
        p.commit_transaction()
        p.begin_transaction()
        p.send(dst, b"kp-aborted")
        p.flush()
        p.abort_transaction()
    finally:
        p.close(timeout=10)
    want = sorted(f"kp-{i}".encode() for i in range(5))
    assert sorted(read_all(rokka, dst, "read_committed", 5)) == want
    assert sorted(rocketmq_values(rokka, dst)) == want


def test_kafka_python_admin_lists_and_describes_transactions(rokka: harness.ServerProcess) -> None:
    """kafka-python's admin (ListTransactions, DescribeTransactions, DescribeProducers) sees a
    confluent-kafka transaction while it is open and after it commits."""
    pytest.importorskip("kafka", reason="kafka-python is not installed")
    from kafka import KafkaAdminClient
    from kafka import TopicPartition as KpTopicPartition
    from kafka.errors import TransactionalIdNotFoundError

    dst = topic_name("txa")
    create_topics(rokka, dst)
    tid = topic_name("adm")
    p = txn_producer(rokka, tid, **{"enable.idempotence": True})
    a = KafkaAdminClient(bootstrap_servers=rokka.kafka, request_timeout_ms=int(T * 1000))
    try:
        p.begin_transaction()
        send(p, dst, [b"open-1", b"open-2"], partition=1)

        (listings,) = a.list_transactions().values()
        mine = [t for t in listings if t.transactional_id == tid]
        assert [t.state.value for t in mine] == ["Ongoing"]
        pid = mine[0].producer_id
        assert [t.transactional_id for t in a.list_transactions(state_filters=["Ongoing"]).popitem()[1]
                if t.transactional_id == tid] == [tid]
        assert all(t.transactional_id != tid
                   for t in a.list_transactions(producer_id_filters=[pid + 1000]).popitem()[1])
        running = {t.transactional_id for t in a.list_transactions(duration_filter_ms=0).popitem()[1]}
        assert tid in running                                  # v1's duration filter: running >= 0 ms
        assert tid not in {t.transactional_id
                           for t in a.list_transactions(duration_filter_ms=3_600_000).popitem()[1]}
        desc = a.describe_transactions([tid])[tid]
        assert (desc.state.value, desc.producer_id) == ("Ongoing", pid)
        assert desc.topic_partitions == {KpTopicPartition(dst, 1)}
        assert desc.transaction_start_time_ms > 0 and desc.transaction_timeout_ms > 0
        producers = a.describe_producers([KpTopicPartition(dst, 1), KpTopicPartition(dst, 0)])
        assert [(s.producer_id, s.last_sequence) for s in producers[KpTopicPartition(dst, 1)].active_producers] \
            == [(pid, 1)]
        assert producers[KpTopicPartition(dst, 0)].active_producers == []

        p.commit_transaction(T)
        assert a.describe_transactions([tid])[tid].state.value == "CompleteCommit"
        assert a.describe_transactions([tid])[tid].topic_partitions == set()
        with pytest.raises(TransactionalIdNotFoundError):
            a.describe_transactions([tid + "-never"])
    finally:
        a.close()
        p.flush(T)
