"""kafka-python against rokka's Kafka listener: admin create topic, keys/headers, every codec, earliest
and latest, a 3-member group that rebalances, commit + resume across client and broker restarts,
the idempotent producer, ListOffsets by timestamp."""

from __future__ import annotations

import threading
import time

import harness
import kafka_common as kc
import pytest

kafka = pytest.importorskip("kafka", reason="kafka-python is not installed (interop/install.sh installs it)")
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition  # noqa: E402
from kafka.errors import CommitFailedError  # noqa: E402

TIMEOUT_MS = 15000


def admin(srv: harness.ServerProcess) -> KafkaAdminClient:
    return KafkaAdminClient(bootstrap_servers=srv.kafka, client_id="interop-admin", request_timeout_ms=TIMEOUT_MS)


def create_topic(srv: harness.ServerProcess, partitions: int = 3) -> str:
    name = kc.topic_name("kp")
    a = admin(srv)
    try:
        a.create_topics({name: {"num_partitions": partitions, "replication_factor": 1}})
        kc.wait_until(lambda: name in a.list_topics(), 15, f"{name} in list_topics")
    finally:
        a.close()
    return name


def producer(srv: harness.ServerProcess, **kw) -> KafkaProducer:  # noqa: ANN003
    kw.setdefault("enable_idempotence", False)
    return KafkaProducer(bootstrap_servers=srv.kafka, request_timeout_ms=TIMEOUT_MS, max_block_ms=TIMEOUT_MS,
                         **kw)


def consumer(srv: harness.ServerProcess, *topics: str, **kw) -> KafkaConsumer:  # noqa: ANN003
    kw.setdefault("auto_offset_reset", "earliest")
    kw.setdefault("enable_auto_commit", False)
    return KafkaConsumer(*topics, bootstrap_servers=srv.kafka, request_timeout_ms=TIMEOUT_MS + 5000,
                         consumer_timeout_ms=1000, **kw)


def send_all(p: KafkaProducer, topic: str, recs: list[kc.Rec], **kw) -> list:  # noqa: ANN003
    futs = [p.send(topic, key=r.key, value=r.value, headers=list(r.headers), **kw) for r in recs]
    p.flush(timeout=30)
    return [f.get(timeout=30) for f in futs]


def poll_n(c: KafkaConsumer, n: int, timeout: float = 30) -> list:
    out: list = []
    deadline = time.monotonic() + timeout
    while len(out) < n and time.monotonic() < deadline:
        for batch in c.poll(timeout_ms=500).values():
            out.extend(batch)
    assert len(out) >= n, f"got {len(out)} of {n} records"
    return out


def as_rec(m) -> kc.Rec:  # noqa: ANN001
    return kc.Rec(m.key, m.value, tuple((k, v) for k, v in m.headers))


def test_admin_create_topic(rokka: harness.ServerProcess) -> None:
    name = create_topic(rokka, partitions=4)
    c = consumer(rokka)
    try:
        assert c.partitions_for_topic(name) == {0, 1, 2, 3}
    finally:
        c.close()


def test_keys_and_headers(rokka: harness.ServerProcess) -> None:
    topic = create_topic(rokka)
    recs = kc.sample_records()
    p = producer(rokka)
    try:
        metas = send_all(p, topic, recs)
    finally:
        p.close(timeout=10)
    kc.keys_stick_to_partitions([(r.key, m.partition) for r, m in zip(recs, metas, strict=True)])
    c = consumer(rokka, topic)
    try:
        got = poll_n(c, len(recs))
    finally:
        c.close()
    kc.same_records([as_rec(m) for m in got], recs)


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4", "zstd"])
def test_compression(rokka: harness.ServerProcess, codec: str) -> None:
    topic = create_topic(rokka, partitions=1)
    values = [kc.compressible(i) for i in range(200)]
    p = producer(rokka, compression_type=codec, linger_ms=20)
    try:
        send_all(p, topic, [kc.Rec(None, v) for v in values])
    finally:
        p.close(timeout=10)
    c = consumer(rokka, topic)
    try:
        got = poll_n(c, len(values))
    finally:
        c.close()
    assert [m.value for m in got] == values
    assert [m.offset for m in got] == list(range(len(values)))


def test_earliest_and_latest(rokka: harness.ServerProcess) -> None:
    topic = create_topic(rokka, partitions=1)
    tp = TopicPartition(topic, 0)
    p = producer(rokka)
    try:
        send_all(p, topic, [kc.Rec(None, b"old-%d" % i) for i in range(5)])
        latest = consumer(rokka, auto_offset_reset="latest")
        latest.assign([tp])
        assert latest.position(tp) == 5  # resolves "latest" now, before the new records
        send_all(p, topic, [kc.Rec(None, b"new-%d" % i) for i in range(5)])
    finally:
        p.close(timeout=10)
    try:
        assert [m.value for m in poll_n(latest, 5)] == [b"new-%d" % i for i in range(5)]
    finally:
        latest.close()
    earliest = consumer(rokka)
    earliest.assign([tp])
    try:
        assert len(poll_n(earliest, 10)) == 10
        assert earliest.end_offsets([tp]) == {tp: 10} and earliest.beginning_offsets([tp]) == {tp: 0}
    finally:
        earliest.close()


class Member(threading.Thread):
    def __init__(self, srv: harness.ServerProcess, topic: str, group: str, name: str, log: kc.GroupLog) -> None:
        super().__init__(name=name, daemon=True)
        self.stop = threading.Event()
        self.error: BaseException | None = None
        self.c = consumer(srv, topic, group_id=group, client_id=name, max_poll_records=20,
                          session_timeout_ms=10000, heartbeat_interval_ms=1000)
        self.log = log

    def run(self) -> None:
        try:
            while not self.stop.is_set():
                batch = [m for ms in self.c.poll(timeout_ms=200).values() for m in ms]
                if not batch:
                    continue
                try:
                    self.c.commit()
                    ok = True
                except CommitFailedError:
                    ok = False
                self.log.add(self.name, [m.value for m in batch], ok)
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            self.error = exc
        finally:
            self.c.close(autocommit=False)

    def leave(self) -> None:
        self.stop.set()
        self.join(timeout=30)
        assert not self.is_alive(), f"{self.name} did not leave"
        assert self.error is None, repr(self.error)


def test_group_of_three_rebalances(rokka: harness.ServerProcess) -> None:
    topic = create_topic(rokka, partitions=6)
    group = kc.topic_name("g")
    log = kc.GroupLog()
    produced: list[bytes] = []
    p = producer(rokka)

    def produce(tag: str, n: int = 60) -> None:
        vals = [f"{tag}-{i}".encode() for i in range(n)]
        send_all(p, topic, [kc.Rec(f"k{i}".encode(), v) for i, v in enumerate(vals)])
        produced.extend(vals)

    def caught_up() -> bool:
        return set(produced) <= log.values()

    members: list[Member] = []
    try:
        produce("a")
        for i in range(3):
            m = Member(rokka, topic, group, f"m{i}", log)
            m.start()
            members.append(m)
            kc.feed_until(lambda i=i: f"m{i}" in log.members_that_consumed(), produce, f"join{i}")
            kc.wait_until(caught_up, 60, f"group caught up after m{i} joined")
        for i in range(2):
            members[i].leave()
            produce(f"leave{i}")
            kc.wait_until(caught_up, 60, f"group caught up after m{i} left")
    finally:
        for m in members:
            m.stop.set()
        for m in members:
            m.join(timeout=30)
        p.close(timeout=10)
    assert all(m.error is None for m in members), [repr(m.error) for m in members]
    log.check(produced)


def test_commit_and_resume_after_restarts(rokka: harness.ServerProcess) -> None:
    topic = create_topic(rokka, partitions=2)
    group = kc.topic_name("g")
    first = [kc.Rec(None, b"first-%d" % i) for i in range(10)]
    second = [kc.Rec(None, b"second-%d" % i) for i in range(10)]
    p = producer(rokka)
    send_all(p, topic, first)
    p.close(timeout=10)
    c = consumer(rokka, topic, group_id=group)
    assert sorted(m.value for m in poll_n(c, 10)) == sorted(r.value for r in first)
    c.commit()
    c.close(autocommit=False)

    rokka.restart()
    p = producer(rokka)
    send_all(p, topic, second)
    p.close(timeout=10)
    c = consumer(rokka, topic, group_id=group)
    try:
        got = poll_n(c, 10)
        got += [m for ms in c.poll(timeout_ms=1500).values() for m in ms]
        assert sorted(m.value for m in got) == sorted(r.value for r in second)
        tps = [TopicPartition(topic, i) for i in range(2)]
        c.commit()
        assert sum(c.committed(tp) or 0 for tp in tps) == 20
    finally:
        c.close(autocommit=False)


def test_idempotent_producer(rokka: harness.ServerProcess) -> None:
    topic = create_topic(rokka, partitions=2)
    p = producer(rokka, enable_idempotence=True, acks="all", max_in_flight_requests_per_connection=5,
                 linger_ms=5, batch_size=512)
    try:
        vals = [b"idem-%04d" % i for i in range(300)]
        metas = send_all(p, topic, [kc.Rec(b"k%d" % (i % 2), v) for i, v in enumerate(vals)])
    finally:
        p.close(timeout=10)
    c = consumer(rokka, topic)
    try:
        got = poll_n(c, len(vals))
        got += [m for ms in c.poll(timeout_ms=1000).values() for m in ms]
    finally:
        c.close()
    assert sorted(m.value for m in got) == vals  # exactly once
    for part in (0, 1):
        in_part = [m for m in got if m.partition == part]
        assert [m.offset for m in in_part] == list(range(len(in_part)))
        assert [m.value for m in in_part] == sorted(m.value for m in in_part)  # produce order kept
    assert {(m.partition, m.offset) for m in metas} == {(m.partition, m.offset) for m in got}


def test_offsets_for_times(rokka: harness.ServerProcess) -> None:
    topic = create_topic(rokka, partitions=1)
    tp = TopicPartition(topic, 0)
    ts = kc.timestamps(6)
    p = producer(rokka)
    try:
        for i, t in enumerate(ts):
            p.send(topic, value=b"t%d" % i, timestamp_ms=t)
        p.flush(timeout=30)
    finally:
        p.close(timeout=10)
    c = consumer(rokka)
    try:
        res = c.offsets_for_times({tp: ts[2] + 500})
        assert res[tp].offset == 3 and res[tp].timestamp == ts[3]
        assert c.offsets_for_times({tp: ts[0] - 10_000})[tp].offset == 0
        assert c.offsets_for_times({tp: ts[-1]})[tp].offset == 5
        assert c.offsets_for_times({tp: ts[-1] + 1})[tp] is None
        c.assign([tp])
        c.seek(tp, c.offsets_for_times({tp: ts[4]})[tp].offset)
        assert [m.value for m in poll_n(c, 2)] == [b"t4", b"t5"]
    finally:
        c.close()


def test_delete_group_offsets_and_group(rokka: harness.ServerProcess) -> None:
    """Admin DeleteGroups and OffsetDelete: refused while a member consumes, then the offsets are
    gone (a new member of the group starts from auto_offset_reset again)."""
    from kafka.structs import OffsetAndMetadata

    subscribed, other = create_topic(rokka, partitions=1), create_topic(rokka, partitions=1)
    group = kc.topic_name("g")
    p = producer(rokka)
    send_all(p, subscribed, [kc.Rec(None, b"v-%d" % i) for i in range(10)])
    p.close(timeout=10)
    a = admin(rokka)
    try:
        assert a.alter_group_offsets(group, {TopicPartition(other, 0): OffsetAndMetadata(3, "", -1)})
        c = consumer(rokka, subscribed, group_id=group)
        try:
            assert len(poll_n(c, 10)) == 10
            c.commit()
            assert a.delete_groups([group]) == {group: "NonEmptyGroupError"}
            got = a.delete_group_offsets(group, [TopicPartition(subscribed, 0), TopicPartition(other, 0)])
            assert got == {TopicPartition(subscribed, 0): kafka.errors.GroupSubscribedToTopicError,
                           TopicPartition(other, 0): kafka.errors.NoError}
            left = a.list_group_offsets({group: None})[group]
            assert {tp: o.offset for tp, o in left.items()} == {TopicPartition(subscribed, 0): 10}
        finally:
            c.close(autocommit=False)
        assert a.delete_groups([group, group + "-never"]) == {
            group: "OK", group + "-never": "GroupIdNotFoundError"}
        assert a.list_group_offsets({group: None})[group] == {}
    finally:
        a.close()
    c = consumer(rokka, subscribed, group_id=group)
    try:
        assert len(poll_n(c, 10)) == 10      # no committed offset any more: earliest again
    finally:
        c.close(autocommit=False)
