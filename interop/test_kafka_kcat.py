"""kcat (librdkafka 2.0.2) against rokka's Kafka listener: metadata, keys/headers, every codec, earliest
and latest, a 3-member -G group that rebalances, commit + resume across client and broker restarts,
the idempotent producer, start offset by timestamp (-o s@ts).

kcat has no admin API: topics are created with kafka-python's admin client (or by kcat's first
produce in the auto-create test).
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import harness
import pytest
from kafka_common import compressible, feed_until, timestamps, topic_name

pytestmark = pytest.mark.usefixtures("need_kcat")


def create_topic(srv: harness.ServerProcess, partitions: int = 3) -> str:
    kafka_admin = pytest.importorskip("kafka.admin", reason="kafka-python (used to create topics) is missing")
    name = topic_name("kc")
    a = kafka_admin.KafkaAdminClient(bootstrap_servers=srv.kafka, request_timeout_ms=15000)
    try:
        a.create_topics({name: {"num_partitions": partitions, "replication_factor": 1}})
    finally:
        a.close()
    return name


def kcat(srv: harness.ServerProcess, *args: str, input: str | None = None, timeout: float = 30) -> str:
    return harness.run_kcat(["-b", srv.kafka, "-X", "socket.timeout.ms=10000", *args], input=input,
                            timeout=timeout).stdout


def consume_all(srv: harness.ServerProcess, topic: str, offset: str = "beginning") -> list[dict[str, Any]]:
    out = kcat(srv, "-C", "-t", topic, "-o", offset, "-e", "-J", "-q")
    return [json.loads(line) for line in out.splitlines() if line.strip()]


def headers_of(m: dict[str, Any]) -> list[tuple[str, str]]:
    h = m.get("headers") or []
    return list(zip(h[0::2], h[1::2], strict=True))


def test_metadata_and_auto_create(rokka: harness.ServerProcess) -> None:
    topic = create_topic(rokka, partitions=4)
    md = json.loads(kcat(rokka, "-L", "-J", "-t", topic))
    (t,) = md["topics"]
    assert t["topic"] == topic and sorted(p["partition"] for p in t["partitions"]) == [0, 1, 2, 3]
    assert [b["id"] for b in md["brokers"]]
    auto = topic_name("kc-auto")
    kcat(rokka, "-P", "-t", auto, input="hello\n")
    assert [m["payload"] for m in consume_all(rokka, auto)] == ["hello"]


def test_keys_and_headers(rokka: harness.ServerProcess) -> None:
    topic = create_topic(rokka)
    kcat(rokka, "-P", "-t", topic, "-K", ":", "-H", "h1=v1", "-H", "h2=žluť",
         input="".join(f"key-{i % 4}:with-{i}\n" for i in range(12)))
    kcat(rokka, "-P", "-t", topic, input="".join(f"plain-{i}\n" for i in range(6)))
    got = consume_all(rokka, topic)
    assert len(got) == 18
    keyed = [m for m in got if m["payload"].startswith("with-")]
    plain = [m for m in got if m["payload"].startswith("plain-")]
    assert sorted(m["payload"] for m in keyed) == sorted(f"with-{i}" for i in range(12))
    assert all(m["key"] == f"key-{int(m['payload'][5:]) % 4}" for m in keyed)
    assert all(headers_of(m) == [("h1", "v1"), ("h2", "žluť")] for m in keyed)
    parts: dict[str, set[int]] = {}
    for m in keyed:
        parts.setdefault(m["key"], set()).add(m["partition"])
    assert all(len(p) == 1 for p in parts.values())
    assert sorted(m["payload"] for m in plain) == sorted(f"plain-{i}" for i in range(6))
    assert all(m["key"] is None and not headers_of(m) for m in plain)


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4", "zstd"])
def test_compression(rokka: harness.ServerProcess, codec: str) -> None:
    topic = create_topic(rokka, partitions=1)
    values = [compressible(i).decode() for i in range(200)]
    kcat(rokka, "-P", "-t", topic, "-z", codec, "-X", "linger.ms=20", input="".join(v + "\n" for v in values))
    got = consume_all(rokka, topic)
    assert [m["payload"] for m in got] == values
    assert [m["offset"] for m in got] == list(range(200))


def test_earliest_and_latest(rokka: harness.ServerProcess, workdir: Path) -> None:
    topic = create_topic(rokka, partitions=1)
    kcat(rokka, "-P", "-t", topic, input="".join(f"old-{i}\n" for i in range(5)))
    exe = harness.kcat_path()
    assert exe
    latest = harness.JsonLinesProcess([exe, "-b", rokka.kafka, "-C", "-t", topic, "-o", "end", "-J", "-u", "-q"],
                                      name="kcat-latest", workdir=workdir / "latest")
    try:
        deadline = time.monotonic() + 60
        while not latest.events:
            assert time.monotonic() < deadline, latest.describe()
            kcat(rokka, "-P", "-t", topic, input="probe\n")
            time.sleep(1)
        kcat(rokka, "-P", "-t", topic, input="".join(f"new-{i}\n" for i in range(5)))
        latest.wait_for(lambda evs: sum(e.get("payload", "").startswith("new-") for e in evs) >= 5, 30, "new")
    finally:
        latest.kill()
    payloads = [e["payload"] for e in latest.events]
    assert not [p for p in payloads if p.startswith("old-")]
    assert [p for p in payloads if p.startswith("new-")] == [f"new-{i}" for i in range(5)]
    assert [m["payload"] for m in consume_all(rokka, topic)][:5] == [f"old-{i}" for i in range(5)]


def group_member(srv: harness.ServerProcess, topic: str, group: str, name: str, workdir: Path) -> harness.JsonLinesProcess:
    exe = harness.kcat_path()
    assert exe
    argv = [exe, "-b", srv.kafka, "-G", group, "-J", "-u", "-q", "-X", "auto.offset.reset=earliest",
            "-X", f"client.id={name}", "-X", "session.timeout.ms=10000", "-X", "heartbeat.interval.ms=1000",
            "-X", "auto.commit.interval.ms=500", topic]
    return harness.JsonLinesProcess(argv, name=name, workdir=workdir / name)


def test_group_of_three_rebalances(rokka: harness.ServerProcess, workdir: Path) -> None:
    topic = create_topic(rokka, partitions=6)
    group = topic_name("g")
    produced: list[str] = []
    members: list[harness.JsonLinesProcess] = []

    def produce(tag: str, n: int = 60) -> None:
        vals = [f"{tag}-{i}" for i in range(n)]
        kcat(rokka, "-P", "-t", topic, "-K", ":", input="".join(f"k{i}:{v}\n" for i, v in enumerate(vals)))
        produced.extend(vals)

    def delivered() -> list[str]:
        return [e["payload"] for m in members for e in m.events if "payload" in e]

    def caught_up(what: str) -> None:
        harness.wait_until(lambda: set(produced) <= set(delivered()), 60, what)

    try:
        produce("a")
        for i in range(3):
            members.append(group_member(rokka, topic, group, f"m{i}", workdir))
            feed_until(lambda i=i: bool(members[i].events), produce, f"join{i}")
            caught_up(f"caught up after m{i} joined")
        for i in range(2):
            assert members[i].terminate() == 0  # kcat closes the consumer: final commit + LeaveGroup
            produce(f"leave{i}")
            caught_up(f"caught up after m{i} left")
    finally:
        for m in members:
            m.kill()
    got = delivered()
    assert set(got) == set(produced)
    dups = {v for v in got if got.count(v) > 1}
    assert not dups, f"delivered twice although committed before each rebalance: {sorted(dups)[:5]}"


def test_commit_and_resume_after_restarts(rokka: harness.ServerProcess, workdir: Path) -> None:
    topic = create_topic(rokka, partitions=2)
    group = topic_name("g")
    kcat(rokka, "-P", "-t", topic, input="".join(f"first-{i}\n" for i in range(10)))
    m1 = group_member(rokka, topic, group, "first", workdir)
    try:
        m1.wait_for(lambda evs: len(evs) >= 10, 60, "first batch")
    finally:
        assert m1.terminate() == 0
    rokka.restart()
    kcat(rokka, "-P", "-t", topic, input="".join(f"second-{i}\n" for i in range(10)))
    m2 = group_member(rokka, topic, group, "second", workdir)
    try:
        m2.wait_for(lambda evs: len(evs) >= 10, 60, "second batch")
        time.sleep(1.5)  # leave room for any wrongly re-delivered first-batch record to show up
    finally:
        assert m2.terminate() == 0
    assert sorted(e["payload"] for e in m2.events) == sorted(f"second-{i}" for i in range(10))


def test_idempotent_producer(rokka: harness.ServerProcess) -> None:
    topic = create_topic(rokka, partitions=2)
    vals = [f"idem-{i:04d}" for i in range(300)]
    kcat(rokka, "-P", "-t", topic, "-K", ":", "-X", "enable.idempotence=true", "-X", "linger.ms=5",
         "-X", "batch.num.messages=20", input="".join(f"k{i % 2}:{v}\n" for i, v in enumerate(vals)))
    got = consume_all(rokka, topic)
    assert sorted(m["payload"] for m in got) == vals
    for part in (0, 1):
        in_part = [m for m in got if m["partition"] == part]
        assert [m["offset"] for m in in_part] == list(range(len(in_part)))
        assert [m["payload"] for m in in_part] == sorted(m["payload"] for m in in_part)


def test_start_offset_by_timestamp(rokka: harness.ServerProcess) -> None:
    kafka = pytest.importorskip("kafka", reason="kafka-python (used to write timestamped records) is missing")
    topic = create_topic(rokka, partitions=1)
    ts = timestamps(6)
    p = kafka.KafkaProducer(bootstrap_servers=rokka.kafka, enable_idempotence=False)
    try:
        for i, t in enumerate(ts):
            p.send(topic, value=b"t%d" % i, timestamp_ms=t, partition=0)
        p.flush(timeout=30)
    finally:
        p.close(timeout=10)
    got = consume_all(rokka, topic, f"s@{ts[2] + 500}")
    assert [(m["payload"], m["ts"]) for m in got] == [(f"t{i}", ts[i]) for i in range(3, 6)]
    assert [m["payload"] for m in consume_all(rokka, topic, f"s@{ts[0] - 10_000}")] == [
        f"t{i}" for i in range(6)]
