"""kafkajs 2.2.4 (node, interop/node/kafkajs_client.js) against rokka's Kafka listener: admin create topic,
keys/headers, gzip (kafkajs's only built-in codec), earliest and latest, a 3-member group that
rebalances, commit + resume across client and broker restarts, the idempotent producer,
offsets by timestamp."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import harness
import pytest
from kafka_common import GroupLog, compressible, feed_until, timestamps, topic_name


@pytest.fixture(autouse=True)
def _kafkajs() -> None:
    harness.skip_unless_node("kafkajs")


def js(srv: harness.ServerProcess, workdir: Path, action: str, timeout: float = 60, **params: Any) -> list[dict]:
    return harness.run_node("kafkajs_client", {"action": action, "brokers": [srv.kafka], **params},
                            workdir=workdir / f"{action}-{time.monotonic_ns()}", timeout=timeout)


def one(events: list[dict], event: str) -> dict:
    (e,) = [x for x in events if x.get("event") == event]
    return e


def create_topic(srv: harness.ServerProcess, workdir: Path, partitions: int = 3) -> str:
    name = topic_name("kj")
    assert one(js(srv, workdir, "create", topic=name, partitions=partitions), "created")["partitions"] == list(
        range(partitions))
    return name


def produce(srv: harness.ServerProcess, workdir: Path, topic: str, messages: list[dict], **kw: Any) -> list[dict]:
    return one(js(srv, workdir, "produce", topic=topic, messages=messages, **kw), "sent")["results"]


def start_member(srv: harness.ServerProcess, workdir: Path, topic: str, group: str, name: str,
                 from_beginning: bool = True) -> harness.JsonLinesProcess:
    p = harness.start_node("kafkajs_client", {"action": "member", "brokers": [srv.kafka], "topic": topic,
                                              "groupId": group, "name": name, "fromBeginning": from_beginning},
                           name=name, workdir=workdir / name)
    p.wait_event("ready", timeout=60)
    return p


def delivered(members: list[harness.JsonLinesProcess]) -> list[tuple[str, str, bool]]:
    return [(b["member"], v, b["committed"]) for m in members for b in m.of("batch") for v in b["values"]]


def test_admin_create_topic(rokka: harness.ServerProcess, workdir: Path) -> None:
    create_topic(rokka, workdir, partitions=4)


def test_keys_headers_and_gzip(rokka: harness.ServerProcess, workdir: Path) -> None:
    topic = create_topic(rokka, workdir)
    msgs = [{"key": None if i % 3 == 0 else f"key-{i % 4}", "value": f"v{i}",
             "headers": [["h1", f"x{i}"], ["h1", "dup"], ["ünï", "ß→"]] if i % 2 else None} for i in range(12)]
    produce(rokka, workdir, topic, msgs)
    big = [{"value": compressible(i).decode()} for i in range(100)]
    produce(rokka, workdir, topic, big, compression="gzip")
    m = start_member(rokka, workdir, topic, topic_name("g"), "reader")
    try:
        m.wait_for(lambda _: len(delivered([m])) >= 112, 60, "all records")
    finally:
        m.close()
    got = {}
    for b in m.of("batch"):
        for v, k, h in zip(b["values"], b["keys"], b["headers"], strict=True):
            got[v] = (k, h)
    assert len(got) == 112
    for i, spec in enumerate(msgs):
        k, h = got[f"v{i}"]
        assert k == spec["key"]
        assert sorted(map(tuple, h)) == sorted(map(tuple, spec["headers"] or []))
    assert {b["value"] for b in big} <= set(got)


def test_earliest_and_latest(rokka: harness.ServerProcess, workdir: Path) -> None:
    topic = create_topic(rokka, workdir, partitions=1)
    produce(rokka, workdir, topic, [{"value": f"old-{i}"} for i in range(5)])
    latest = start_member(rokka, workdir, topic, topic_name("g"), "latest", from_beginning=False)
    probes = 0
    try:
        deadline = time.monotonic() + 60
        while not delivered([latest]):
            assert time.monotonic() < deadline, latest.describe()
            produce(rokka, workdir, topic, [{"value": "probe"}])
            probes += 1
            time.sleep(1)
        produce(rokka, workdir, topic, [{"value": f"new-{i}"} for i in range(5)])
        latest.wait_for(lambda _: sum(v.startswith("new-") for _, v, _ in delivered([latest])) >= 5, 30, "new")
    finally:
        latest.close()
    values = [v for _, v, _ in delivered([latest])]
    assert not [v for v in values if v.startswith("old-")]
    assert [v for v in values if v.startswith("new-")] == [f"new-{i}" for i in range(5)]
    earliest = start_member(rokka, workdir, topic, topic_name("g"), "earliest")
    try:
        earliest.wait_for(lambda _: len(delivered([earliest])) >= 5, 60, "old records")
    finally:
        earliest.close()
    assert [v for _, v, _ in delivered([earliest])][:5] == [f"old-{i}" for i in range(5)]
    (w,) = one(js(rokka, workdir, "watermarks", topic=topic), "offsets")["offsets"]
    assert (w["low"], w["high"]) == (0, 5 + probes + 5)


def test_group_of_three_rebalances(rokka: harness.ServerProcess, workdir: Path) -> None:
    topic = create_topic(rokka, workdir, partitions=6)
    group = topic_name("g")
    produced: list[str] = []
    members: list[harness.JsonLinesProcess] = []

    def produce_tag(tag: str, n: int = 60) -> None:
        vals = [f"{tag}-{i}" for i in range(n)]
        produce(rokka, workdir, topic, [{"key": f"k{i}", "value": v} for i, v in enumerate(vals)])
        produced.extend(vals)

    def caught_up(what: str) -> None:
        harness.wait_until(lambda: set(produced) <= {v for _, v, _ in delivered(members)}, 90, what)

    try:
        produce_tag("a")
        for i in range(3):
            members.append(start_member(rokka, workdir, topic, group, f"m{i}"))
            feed_until(lambda i=i: f"m{i}" in {m for m, _, _ in delivered(members)}, produce_tag, f"join{i}", 90)
            caught_up(f"caught up after m{i} joined")
        for i in range(2):
            assert members[i].close() == 0
            produce_tag(f"leave{i}")
            caught_up(f"caught up after m{i} left")
    finally:
        for m in members:
            m.close() if m.proc.poll() is None else None
    log = GroupLog()
    for member, value, committed in delivered(members):
        log.add(member, [value.encode()], committed)
    log.check([v.encode() for v in produced])


def test_commit_and_resume_after_restarts(rokka: harness.ServerProcess, workdir: Path) -> None:
    topic = create_topic(rokka, workdir, partitions=2)
    group = topic_name("g")
    produce(rokka, workdir, topic, [{"value": f"first-{i}"} for i in range(10)])
    m1 = start_member(rokka, workdir, topic, group, "before")
    try:
        m1.wait_for(lambda _: len(delivered([m1])) >= 10, 60, "first batch")
    finally:
        assert m1.close() == 0
    assert all(c for _, _, c in delivered([m1]))
    rokka.restart()
    produce(rokka, workdir, topic, [{"value": f"second-{i}"} for i in range(10)])
    m2 = start_member(rokka, workdir, topic, group, "after")
    try:
        m2.wait_for(lambda _: len(delivered([m2])) >= 10, 60, "second batch")
        time.sleep(1.5)  # room for a wrongly re-delivered first-batch record to show up
    finally:
        assert m2.close() == 0
    assert sorted(v for _, v, _ in delivered([m2])) == sorted(f"second-{i}" for i in range(10))


def test_idempotent_producer(rokka: harness.ServerProcess, workdir: Path) -> None:
    topic = create_topic(rokka, workdir, partitions=2)
    vals = [f"idem-{i:04d}" for i in range(300)]
    produce(rokka, workdir, topic, [{"key": f"k{i % 2}", "value": v} for i, v in enumerate(vals)],
            idempotent=True, chunk=25)
    m = start_member(rokka, workdir, topic, topic_name("g"), "reader")
    try:
        m.wait_for(lambda _: len(delivered([m])) >= 300, 60, "all records")
        time.sleep(1)
    finally:
        m.close()
    assert sorted(v for _, v, _ in delivered([m])) == vals
    for part in (0, 1):
        offs = [o for b in m.of("batch") if b["partition"] == part for o in b["offsets"]]
        values = [v for b in m.of("batch") if b["partition"] == part for v in b["values"]]
        assert offs == list(range(len(offs)))
        assert values == sorted(values)


def test_offsets_by_timestamp(rokka: harness.ServerProcess, workdir: Path) -> None:
    topic = create_topic(rokka, workdir, partitions=1)
    ts = timestamps(6)
    produce(rokka, workdir, topic, [{"value": f"t{i}", "timestamp": t, "partition": 0} for i, t in enumerate(ts)])

    def at(t: int) -> int:
        (o,) = one(js(rokka, workdir, "by_time", topic=topic, timestamp=t), "offsets")["offsets"]
        return o["offset"]

    assert at(ts[2] + 500) == 3
    assert at(ts[0] - 10_000) == 0
    assert at(ts[-1]) == 5


def test_delete_groups(rokka: harness.ServerProcess, workdir: Path) -> None:
    """admin.deleteGroups: NON_EMPTY_GROUP (68) while a member consumes, then the group and its
    committed offsets are gone; an unknown group is GROUP_ID_NOT_FOUND (69)."""
    topic = create_topic(rokka, workdir, partitions=2)
    group = topic_name("g")
    produce(rokka, workdir, topic, [{"value": f"v-{i}"} for i in range(10)])
    m = start_member(rokka, workdir, topic, group, "deletable")
    try:
        m.wait_for(lambda _: len(delivered([m])) >= 10, 60, "all records")
        refused = one(js(rokka, workdir, "delete_groups", groupIds=[group]), "refused")["groups"]
        assert [(g["groupId"], g["errorCode"]) for g in refused] == [(group, 68)]
    finally:
        assert m.close() == 0
    offsets = one(js(rokka, workdir, "committed", groupId=group, topic=topic), "offsets")["offsets"]
    assert sum(o["offset"] for o in offsets) == 10
    deleted = one(js(rokka, workdir, "delete_groups", groupIds=[group]), "deleted")["results"]
    assert [(g["groupId"], g["errorCode"]) for g in deleted] == [(group, 0)]
    offsets = one(js(rokka, workdir, "committed", groupId=group, topic=topic), "offsets")["offsets"]
    assert sorted(o["offset"] for o in offsets) == [-1, -1]
    unknown = one(js(rokka, workdir, "delete_groups", groupIds=[group]), "refused")["groups"]
    assert [(g["groupId"], g["errorCode"]) for g in unknown] == [(group, 69)]
