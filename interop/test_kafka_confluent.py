"""confluent-kafka (librdkafka) against rokka's Kafka listener: admin create topic, keys/headers, every
codec, earliest and latest, a 3-member group that rebalances, commit + resume across client and broker
restarts, the idempotent producer, offsets_for_times."""

from __future__ import annotations

import threading
import time
from typing import Any

import harness
import pytest
from kafka_common import (
    GroupLog,
    Rec,
    compressible,
    confluent_poll,
    feed_until,
    keys_stick_to_partitions,
    same_records,
    sample_records,
    timestamps,
    topic_name,
    wait_until,
)

ck = pytest.importorskip("confluent_kafka", reason="confluent-kafka is not installed (interop/install.sh)")
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

T = 20.0  # seconds, per client call


def create_topic(srv: harness.ServerProcess, partitions: int = 3) -> str:
    name = topic_name("ck")
    a = AdminClient({"bootstrap.servers": srv.kafka})
    futs = a.create_topics([NewTopic(name, num_partitions=partitions, replication_factor=1)],
                           operation_timeout=T, request_timeout=T)
    futs[name].result(timeout=T)
    wait_until(lambda: name in a.list_topics(timeout=T).topics, 15, f"{name} in metadata")
    md = a.list_topics(topic=name, timeout=T).topics[name]
    assert sorted(md.partitions) == list(range(partitions))
    return name


def producer(srv: harness.ServerProcess, **conf: Any) -> Producer:
    return Producer({"bootstrap.servers": srv.kafka, "message.timeout.ms": int(T * 1000), **conf})


def consumer(srv: harness.ServerProcess, group: str | None = None, **conf: Any) -> Consumer:
    return Consumer({"bootstrap.servers": srv.kafka, "group.id": group or topic_name("unused"),
                     "auto.offset.reset": "earliest", "enable.auto.commit": False, **conf})


def send_all(p: Producer, topic: str, recs: list[Rec], **kw: Any) -> list[Any]:
    delivered: list[Any] = []
    errors: list[Any] = []

    def cb(err: Any, msg: Any) -> None:
        (errors if err else delivered).append(err or msg)

    for r in recs:
        p.produce(topic, value=r.value, key=r.key, headers=list(r.headers) or None, on_delivery=cb, **kw)
        p.poll(0)
    left = p.flush(T)
    assert left == 0 and not errors, (left, errors)
    return delivered


def poll_n(c: Consumer, n: int, timeout: float = 30) -> list[Any]:
    out = confluent_poll(c, n, timeout)
    assert len(out) >= n, f"got {len(out)} of {n} records"
    return out


def drain(c: Consumer, seconds: float) -> list[Any]:
    out = []
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        m = c.poll(0.2)
        if m is not None and not m.error():
            out.append(m)
    return out


def as_rec(m: Any) -> Rec:
    return Rec(m.key(), m.value(), tuple((k, v if v is not None else b"") for k, v in (m.headers() or [])))


def test_admin_create_topic(rokka: harness.ServerProcess) -> None:
    create_topic(rokka, partitions=4)


def test_keys_and_headers(rokka: harness.ServerProcess) -> None:
    topic = create_topic(rokka)
    recs = sample_records()
    p = producer(rokka)
    delivered = send_all(p, topic, recs)
    keys_stick_to_partitions([(m.key(), m.partition()) for m in delivered])
    c = consumer(rokka)
    c.subscribe([topic])
    try:
        got = poll_n(c, len(recs))
    finally:
        c.close()
    same_records([as_rec(m) for m in got], recs)


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4", "zstd"])
def test_compression(rokka: harness.ServerProcess, codec: str) -> None:
    topic = create_topic(rokka, partitions=1)
    values = [compressible(i) for i in range(200)]
    send_all(producer(rokka, **{"compression.type": codec, "linger.ms": 20}), topic, [Rec(None, v) for v in values])
    c = consumer(rokka)
    c.assign([TopicPartition(topic, 0, 0)])
    try:
        got = poll_n(c, len(values))
    finally:
        c.close()
    assert [m.value() for m in got] == values
    assert [m.offset() for m in got] == list(range(len(values)))


def test_earliest_and_latest(rokka: harness.ServerProcess) -> None:
    topic = create_topic(rokka, partitions=1)
    p = producer(rokka)
    send_all(p, topic, [Rec(None, b"old-%d" % i) for i in range(5)])
    latest = consumer(rokka, **{"auto.offset.reset": "latest"})
    latest.subscribe([topic])
    try:
        # Probe until the consumer is assigned and positioned, then send the real "new" records.
        got: list[Any] = []
        deadline = time.monotonic() + 60
        while not got:
            assert time.monotonic() < deadline, "latest consumer never started consuming"
            send_all(p, topic, [Rec(None, b"probe")])
            got += drain(latest, 1.0)
        send_all(p, topic, [Rec(None, b"new-%d" % i) for i in range(5)])
        got += poll_n(latest, 5)
        values = [m.value() for m in got]
        assert not [v for v in values if v.startswith(b"old")]
        assert [v for v in values if v.startswith(b"new")] == [b"new-%d" % i for i in range(5)]
    finally:
        latest.close()
    earliest = consumer(rokka)
    earliest.subscribe([topic])
    try:
        assert [m.value() for m in poll_n(earliest, 5)] == [b"old-%d" % i for i in range(5)]
        low, high = earliest.get_watermark_offsets(TopicPartition(topic, 0), timeout=T)
        assert low == 0 and high >= 11
    finally:
        earliest.close()


class Member(threading.Thread):
    def __init__(self, srv: harness.ServerProcess, topic: str, group: str, name: str, log: GroupLog) -> None:
        super().__init__(name=name, daemon=True)
        self.stop = threading.Event()
        self.error: BaseException | None = None
        self.log = log
        self.c = consumer(srv, group, **{"client.id": name, "session.timeout.ms": 10000,
                                         "heartbeat.interval.ms": 1000})
        self.c.subscribe([topic])

    def run(self) -> None:
        try:
            while not self.stop.is_set():
                batch = [m for m in self.c.consume(num_messages=20, timeout=0.2) if not m.error()]
                if not batch:
                    continue
                try:
                    self.c.commit(asynchronous=False)
                    ok = True
                except KafkaException:
                    ok = False
                self.log.add(self.name, [m.value() for m in batch], ok)
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            self.error = exc
        finally:
            self.c.close()

    def leave(self) -> None:
        self.stop.set()
        self.join(timeout=30)
        assert not self.is_alive(), f"{self.name} did not leave"
        assert self.error is None, repr(self.error)


def test_group_of_three_rebalances(rokka: harness.ServerProcess) -> None:
    topic = create_topic(rokka, partitions=6)
    group = topic_name("g")
    log = GroupLog()
    produced: list[bytes] = []
    p = producer(rokka)

    def produce(tag: str, n: int = 60) -> None:
        vals = [f"{tag}-{i}".encode() for i in range(n)]
        send_all(p, topic, [Rec(f"k{i}".encode(), v) for i, v in enumerate(vals)])
        produced.extend(vals)

    members: list[Member] = []
    try:
        produce("a")
        for i in range(3):
            members.append(Member(rokka, topic, group, f"m{i}", log))
            members[-1].start()
            feed_until(lambda i=i: f"m{i}" in log.members_that_consumed(), produce, f"join{i}")
            wait_until(lambda: set(produced) <= log.values(), 60, f"caught up after m{i} joined")
        for i in range(2):
            members[i].leave()
            produce(f"leave{i}")
            wait_until(lambda: set(produced) <= log.values(), 60, f"caught up after m{i} left")
    finally:
        for m in members:
            m.stop.set()
        for m in members:
            m.join(timeout=30)
    assert all(m.error is None for m in members), [repr(m.error) for m in members]
    log.check(produced)


def test_commit_and_resume_after_restarts(rokka: harness.ServerProcess) -> None:
    topic = create_topic(rokka, partitions=2)
    group = topic_name("g")
    send_all(producer(rokka), topic, [Rec(None, b"first-%d" % i) for i in range(10)])
    c = consumer(rokka, group)
    c.subscribe([topic])
    assert len(poll_n(c, 10)) == 10
    c.commit(asynchronous=False)
    c.close()

    rokka.restart()
    send_all(producer(rokka), topic, [Rec(None, b"second-%d" % i) for i in range(10)])
    c = consumer(rokka, group)
    c.subscribe([topic])
    try:
        got = poll_n(c, 10) + drain(c, 1.5)
        assert sorted(m.value() for m in got) == sorted(b"second-%d" % i for i in range(10))
        c.commit(asynchronous=False)
        committed = c.committed([TopicPartition(topic, i) for i in range(2)], timeout=T)
        assert sum(tp.offset for tp in committed) == 20
    finally:
        c.close()


def test_idempotent_producer(rokka: harness.ServerProcess) -> None:
    topic = create_topic(rokka, partitions=2)
    p = producer(rokka, **{"enable.idempotence": True, "linger.ms": 5, "batch.num.messages": 20})
    vals = [b"idem-%04d" % i for i in range(300)]
    delivered = send_all(p, topic, [Rec(b"k%d" % (i % 2), v) for i, v in enumerate(vals)])
    c = consumer(rokka)
    c.subscribe([topic])
    try:
        got = poll_n(c, len(vals)) + drain(c, 1.0)
    finally:
        c.close()
    assert sorted(m.value() for m in got) == vals
    for part in (0, 1):
        in_part = [m for m in got if m.partition() == part]
        assert [m.offset() for m in in_part] == list(range(len(in_part)))
        assert [m.value() for m in in_part] == sorted(m.value() for m in in_part)
    assert {(m.partition(), m.offset()) for m in delivered} == {(m.partition(), m.offset()) for m in got}


def test_offsets_for_times(rokka: harness.ServerProcess) -> None:
    topic = create_topic(rokka, partitions=1)
    ts = timestamps(6)
    p = producer(rokka)
    for i, t in enumerate(ts):
        p.produce(topic, value=b"t%d" % i, timestamp=t, partition=0)
    assert p.flush(T) == 0
    c = consumer(rokka)
    try:
        def lookup(t: int) -> int:
            return c.offsets_for_times([TopicPartition(topic, 0, t)], timeout=T)[0].offset

        assert lookup(ts[2] + 500) == 3
        assert lookup(ts[0] - 10_000) == 0
        assert lookup(ts[-1]) == 5
        assert lookup(ts[-1] + 1) == -1  # OFFSET_END: no record at or after that time
        c.assign([TopicPartition(topic, 0, lookup(ts[4]))])
        got = poll_n(c, 2)
        assert [m.value() for m in got] == [b"t4", b"t5"]
        assert [m.timestamp()[1] for m in got] == ts[4:]
    finally:
        c.close()


def test_delete_consumer_group(rokka: harness.ServerProcess) -> None:
    """AdminClient.delete_consumer_groups: refused while a member consumes, then the group and its
    offsets are gone (a new member starts from auto.offset.reset again)."""
    from confluent_kafka import ConsumerGroupTopicPartitions

    topic = create_topic(rokka, partitions=2)
    group = topic_name("g")
    send_all(producer(rokka), topic, [Rec(None, b"v-%d" % i) for i in range(10)])
    a = AdminClient({"bootstrap.servers": rokka.kafka})
    c = consumer(rokka, group)
    c.subscribe([topic])
    try:
        assert len(poll_n(c, 10)) == 10
        c.commit(asynchronous=False)
        with pytest.raises(KafkaException) as refused:
            a.delete_consumer_groups([group], request_timeout=T)[group].result(timeout=T)
        assert refused.value.args[0].code() == ck.KafkaError.NON_EMPTY_GROUP
    finally:
        c.close()
    a.delete_consumer_groups([group], request_timeout=T)[group].result(timeout=T)
    listed = a.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)], request_timeout=T)
    assert [tp for tp in listed[group].result(timeout=T).topic_partitions if tp.offset >= 0] == []
    with pytest.raises(KafkaException) as unknown:
        a.delete_consumer_groups([group], request_timeout=T)[group].result(timeout=T)
    assert unknown.value.args[0].code() == ck.KafkaError.GROUP_ID_NOT_FOUND
    c = consumer(rokka, group)
    c.subscribe([topic])
    try:
        assert len(poll_n(c, 10)) == 10      # no committed offset any more: earliest again
    finally:
        c.close()


def test_admin_refuses_a_compacted_topic(rokka: harness.ServerProcess) -> None:
    """An unknown cleanup.policy is refused with INVALID_CONFIG and the reason (compaction itself is
    supported: interop/test_kafka_compaction.py); a topic with plain delete-policy configs is created."""
    a = AdminClient({"bootstrap.servers": rokka.kafka})
    compacted, plain = topic_name("ckc"), topic_name("ckp")
    futs = a.create_topics([NewTopic(compacted, num_partitions=1, replication_factor=1,
                                     config={"cleanup.policy": "compact,shred"}),
                            NewTopic(plain, num_partitions=1, replication_factor=1,
                                     config={"cleanup.policy": "delete", "retention.ms": "86400000"})],
                           operation_timeout=T, request_timeout=T)
    with pytest.raises(KafkaException) as refused:
        futs[compacted].result(timeout=T)
    err = refused.value.args[0]
    assert err.code() == ck.KafkaError.INVALID_CONFIG and "String must be one of: compact, delete" in err.str()
    futs[plain].result(timeout=T)
    topics = a.list_topics(timeout=T).topics
    assert plain in topics and compacted not in topics
