"""Kafka transactions across the brokers of ``rokka serve --brokers 3`` (confluent-kafka).

What it shows, with real processes on 127.0.0.1 (SYNC_FLUSH):

1. Exactly-once consume-transform-produce: a read_committed consumer of a 6-partition input topic
   and a transactional producer writing a 6-partition output topic (partitions led by all three
   brokers: the transaction coordinator and two participants), offsets sent to the transaction
   (the group may be coordinated by a third broker); one transaction aborted on purpose.  The
   output holds every input record transformed exactly once and nothing of the aborted one; the
   group's committed offsets are the input's ends.
2. Crashes: a transaction writes to all six partitions; one participant is frozen (SIGSTOP) so the
   commit stops between the coordinator's PrepareCommit and the participant's share; the
   coordinator is SIGKILLed there, then the participant too.  After the supervisor restarts both,
   the transaction becomes wholly visible (the coordinator resumes the completion, the participant
   completes its share).  A second transaction left open when its coordinator is SIGKILLed is never
   visible: the next InitProducerId of its id aborts it on every broker.  A read_committed consumer
   sees each transaction wholly or not at all.

No timing assertions; every wait is bounded.
"""

from __future__ import annotations

import os
import signal
import threading
import zlib
from collections import Counter
from collections.abc import Iterator
from typing import Any

import harness
import pytest
from kafka_common import topic_name, wait_until

pytest.importorskip("confluent_kafka", reason="confluent-kafka is not installed (interop/install.sh)")
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

BROKERS = 3
PARTS = 6


@pytest.fixture(scope="module")
def cluster3(tmp_path_factory: pytest.TempPathFactory) -> Iterator[harness.ServerProcess]:
    """One cluster for the module (the crash test runs last: it leaves restarted children)."""
    server_dir = tmp_path_factory.mktemp("txn-cluster") / "server"
    server_dir.mkdir()
    conf = server_dir / "broker.conf"
    conf.write_text("flushDiskType=SYNC_FLUSH\n")
    srv = harness.start_serve(server_dir, conf=conf, brokers=BROKERS)
    try:
        wait_clustered(srv)
        yield srv
    finally:
        print(f"--- supervisor stderr tail ---\n{srv.stderr_tail(60)}")
        if srv.running():
            for pid in harness.cluster_children(srv).values():
                _signal(pid, signal.SIGCONT)
            srv.stop_clean()


def _signal(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        pass


def node_id(name: str) -> int:
    return zlib.crc32(name.encode()) % 0x7FFFFFFF or 1


def coordinator_of(tid: str) -> str:
    """The broker that coordinates ``tid`` (``ClusterView.txn_coordinator_for``)."""
    names = sorted(f"broker-{i}" for i in range(BROKERS))
    return names[zlib.crc32(tid.encode()) % len(names)]


def wait_clustered(srv: harness.ServerProcess) -> None:
    """Every broker lists all three brokers (each knows the others' endpoints)."""
    for addr in srv.kafka.split(","):
        admin = AdminClient({"bootstrap.servers": addr})
        wait_until(lambda a=admin: len(a.list_topics(timeout=10).brokers) == BROKERS, 60,
                   f"{addr} to list {BROKERS} brokers")


def create(srv: harness.ServerProcess, prefix: str) -> str:
    name = topic_name(prefix)
    admin = AdminClient({"bootstrap.servers": srv.kafka})
    admin.create_topics([NewTopic(name, num_partitions=PARTS, replication_factor=1)],
                        operation_timeout=20, request_timeout=30)[name].result(timeout=30)
    c = Consumer({"bootstrap.servers": srv.kafka, "group.id": "probe"})
    try:
        def spread() -> bool:
            t = c.list_topics(name, timeout=10).topics[name]
            return t.error is None and len(t.partitions) == PARTS and \
                len({pm.leader for pm in t.partitions.values()} - {-1}) == BROKERS
        wait_until(spread, 30, f"{name}'s partitions led by {BROKERS} brokers")
    finally:
        c.close()
    return name


def committed_values(srv: harness.ServerProcess, topic: str, timeout: float = 60) -> list[bytes]:
    """Everything a read_committed consumer reads from every partition up to its end."""
    c = Consumer({"bootstrap.servers": srv.kafka, "group.id": topic_name("reader"), "enable.auto.commit": False,
                  "isolation.level": "read_committed", "enable.partition.eof": True})
    out: list[bytes] = []
    try:
        c.assign([TopicPartition(topic, p, 0) for p in range(PARTS)])
        ends: set[int] = set()

        def drained() -> bool:
            m = c.poll(0.5)
            if m is None:
                return False
            if m.error():
                if m.error().code() == KafkaError._PARTITION_EOF:
                    ends.add(m.partition())
                    return len(ends) == PARTS
                raise KafkaException(m.error())
            ends.discard(m.partition())
            out.append(m.value())
            return False
        wait_until(drained, timeout, f"the end of every partition of {topic}", interval=0)
    finally:
        c.close()
    return out


def txn_producer(srv: harness.ServerProcess, tid: str) -> Producer:
    p = Producer({"bootstrap.servers": srv.kafka, "transactional.id": tid, "transaction.timeout.ms": 60000,
                  "enable.idempotence": True, "acks": "all"})
    p.init_transactions(30)
    return p


def test_exactly_once_consume_transform_produce_across_brokers(cluster3: harness.ServerProcess) -> None:
    srv = cluster3
    src, dst = create(srv, "eos-in"), create(srv, "eos-out")
    plain = Producer({"bootstrap.servers": srv.kafka})
    n = 60
    for i in range(n):
        plain.produce(src, f"in-{i}".encode(), partition=i % PARTS)
    assert plain.flush(30) == 0
    group = topic_name("eos-group")
    consumer = Consumer({"bootstrap.servers": srv.kafka, "group.id": group, "enable.auto.commit": False,
                         "isolation.level": "read_committed", "auto.offset.reset": "earliest"})
    consumer.subscribe([src])
    producer = txn_producer(srv, topic_name("eos-tid"))
    seen = 0
    rounds = 0
    try:
        # one aborted transaction that touches every partition of the output first
        producer.begin_transaction()
        for p in range(PARTS):
            producer.produce(dst, b"aborted", partition=p)
        producer.flush(30)
        producer.abort_transaction(30)
        while seen < n and rounds < 200:
            rounds += 1
            batch = consumer.consume(num_messages=25, timeout=1.0)
            batch = [m for m in batch if m.error() is None]
            if not batch:
                continue
            producer.begin_transaction()
            for k, m in enumerate(batch):       # spread each transaction over all three brokers
                producer.produce(dst, m.value().replace(b"in-", b"out-"), partition=(seen + k) % PARTS)
            producer.send_offsets_to_transaction(consumer.position(consumer.assignment()),
                                                 consumer.consumer_group_metadata(), 30)
            producer.commit_transaction(30)
            seen += len(batch)
    finally:
        consumer.close()
    assert seen == n
    values = committed_values(srv, dst)
    assert Counter(values) == Counter(f"out-{i}".encode() for i in range(n)), Counter(values).most_common(3)
    # the group's offsets (committed with the transactions) are the input's ends
    probe = Consumer({"bootstrap.servers": srv.kafka, "group.id": group, "enable.auto.commit": False})
    try:
        def offsets_at_end() -> bool:
            got = probe.committed([TopicPartition(src, p) for p in range(PARTS)], timeout=10)
            return sum(tp.offset for tp in got if tp.offset >= 0) == n
        wait_until(offsets_at_end, 30, "the group's committed offsets to reach the input's ends")
    finally:
        probe.close()


def _find_tid(coordinator: str) -> str:
    while True:
        tid = topic_name("crash-tid")
        if coordinator_of(tid) == coordinator:
            return tid


def test_sigkill_of_coordinator_mid_commit_and_of_participant(cluster3: harness.ServerProcess) -> None:
    srv = cluster3
    dst = create(srv, "crash-out")
    children = harness.cluster_children(srv)
    coord, part = "broker-0", "broker-1"
    tid = _find_tid(coord)
    # transaction 1: frozen participant, coordinator killed between PrepareCommit and completion
    producer = txn_producer(srv, tid)
    producer.begin_transaction()
    for p in range(PARTS):
        producer.produce(dst, f"t1-{p}".encode(), partition=p)
    assert producer.flush(30) == 0
    os.kill(children[part], signal.SIGSTOP)
    outcome: dict[str, Any] = {}

    def commit() -> None:
        try:
            producer.commit_transaction(20)
            outcome["ok"] = True
        except KafkaException as exc:
            outcome["error"] = exc

    committer = threading.Thread(target=commit, daemon=True)
    committer.start()
    # the coordinator logs the share it could not end yet: PrepareCommit is on its disk
    wait_until(lambda: "kafka_txn.participant_end_pending" in srv.stderr_tail(2000), 30,
               "the coordinator to be stuck between PrepareCommit and the participant's share")
    os.kill(children[coord], signal.SIGKILL)
    os.kill(children[part], signal.SIGKILL)
    committer.join(40)

    def restarted() -> bool:
        now = harness.cluster_children(srv)
        return all(now.get(b, children[b]) != children[b] for b in (coord, part))
    wait_until(restarted, 60, "the supervisor to restart the coordinator and the participant")
    wait_clustered(srv)

    def whole() -> bool:
        return sorted(committed_values(srv, dst)) == sorted(f"t1-{p}".encode() for p in range(PARTS))
    wait_until(whole, 60, "transaction 1 to become wholly visible after the restarts")

    # transaction 2: left open (records on every broker) when its coordinator dies: never visible
    children = harness.cluster_children(srv)
    p2 = txn_producer(srv, tid)
    p2.begin_transaction()
    for p in range(PARTS):
        p2.produce(dst, f"t2-{p}".encode(), partition=p)
    assert p2.flush(30) == 0
    os.kill(children[coord], signal.SIGKILL)
    wait_until(lambda: harness.cluster_children(srv).get(coord, children[coord]) != children[coord], 60,
               "the supervisor to restart the coordinator")
    wait_clustered(srv)
    p3 = txn_producer(srv, tid)           # InitProducerId aborts the open transaction everywhere
    p3.begin_transaction()
    for p in range(PARTS):
        p3.produce(dst, f"t3-{p}".encode(), partition=p)
    p3.commit_transaction(30)
    values = committed_values(srv, dst)
    by_txn = Counter(v.split(b"-")[0] for v in values)
    assert by_txn == {b"t1": PARTS, b"t3": PARTS}, by_txn     # t2 wholly invisible, t1 and t3 whole
