"""The checks franz-go and sarama (``rokka-go franz|sarama ...``) share against rokka's Kafka listener.

Theory of operation
-------------------
Both Go clients take the same actions (create, produce, consume, member, txn) with the same JSON
parameters, so ``KafkaGo(client, prefix)`` wraps them once: ``run`` (one action), ``create`` (a topic
named ``prefix-...``), ``consume`` (the ``record`` events) and ``member`` (a group member, ready).
The functions below are whole test bodies both test files call with their client; what differs
between the clients (e.g. the assignor's final assignment) is passed in.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import harness
from kafka_common import GroupLog, compressible, feed_until, timestamps, topic_name

from go import rokkago as go


class KafkaGo:
    def __init__(self, client: str, prefix: str) -> None:
        self.client, self.prefix = client, prefix

    def run(self, srv: harness.ServerProcess, workdir: Path, action: str, timeout: float = 60,
            **p: Any) -> list[dict]:
        return go.run(self.client, action, workdir, timeout=timeout, brokers=[srv.kafka], **p)

    def create(self, srv: harness.ServerProcess, workdir: Path, partitions: int = 3) -> str:
        name = topic_name(self.prefix)
        created = go.one(self.run(srv, workdir, "create", topic=name, partitions=partitions), "created")
        assert created["partitions"] == partitions
        return name

    def consume(self, srv: harness.ServerProcess, workdir: Path, topic: str, count: int, **p: Any) -> list[dict]:
        return go.of(self.run(srv, workdir, "consume", topic=topic, count=count, linger_ms=500, **p), "record")

    def member(self, srv: harness.ServerProcess, workdir: Path, topic: str, group: str,
               name: str) -> harness.JsonLinesProcess:
        m = go.start(self.client, "member", workdir, name, brokers=[srv.kafka], topic=topic, group=group, name=name)
        m.wait_event("ready", timeout=30)
        return m

    def admin(self, srv: harness.ServerProcess, workdir: Path) -> tuple[str, str, dict[str, dict]]:
        """The ``admin`` action on a new topic and group: (topic, group, its events by name)."""
        topic, group = topic_name("adm"), topic_name("g")
        ts = timestamps(6)
        return topic, group, {e["event"]: e for e in self.run(srv, workdir, "admin", topic=topic, group=group,
                                                              timestamps=ts)}


def check_admin(ev: dict[str, dict], topic: str, group: str) -> None:
    """What both admin clients answer alike (``KafkaGo.admin``): configs, partitions, group offsets, groups."""
    assert ev["list"]["partitions"] == 2
    assert ev["configs"]["configs"]["retention.ms"] == "3600000"
    assert ev["alter"]["err"] is None
    assert ev["configs_after"]["configs"]["retention.ms"] == "7200000"
    assert ev["alter_bad"]["err"] is not None
    assert ev["add_partition"]["err"] is None and ev["list_after"]["partitions"] == 3
    assert (ev["fetch_offsets"]["offset"], ev["fetch_offsets"]["metadata"]) == (2, "go")
    assert group in ev["groups"]["groups"]
    assert ev["describe_group"]["state"] == "Empty" and ev["describe_group"]["err"] is None
    assert ev["delete_group"]["err"] is None and ev["delete_topic"]["err"] is None
    assert topic not in ev["topics_after_delete"]["topics"]


SAMPLE = [{"key": None if i % 3 == 0 else f"key-{i % 4}", "value": f"v{i}",
           "headers": [["h1", f"x{i}"], ["empty", ""], ["h1", "dup"], ["ünï", "ß→"]] if i % 2 else []}
          for i in range(12)]


def keys_headers_and_every_codec(k: KafkaGo, rokka: harness.ServerProcess, workdir: Path) -> None:
    """Keys (null too), repeated / empty / non-ASCII headers with every codec; a key keeps one partition."""
    topic = k.create(rokka, workdir)
    codecs = ["none", "gzip", "snappy", "lz4", "zstd"]
    want = {}
    for c in codecs:
        msgs = [{**m, "value": f"{c}-{m['value']}"} for m in SAMPLE]
        msgs += [{"key": f"k{i}", "value": f"{c}-" + compressible(i).decode()} for i in range(20)]
        go.one(k.run(rokka, workdir, "produce", topic=topic, messages=msgs, compression=c), "sent")
        want.update({m["value"]: m for m in msgs})
    got = k.consume(rokka, workdir, topic, len(want))
    assert sorted(r["value"] for r in got) == sorted(want)
    parts: dict[str, set[int]] = {}
    for r in got:
        m = want[r["value"]]
        assert r["key"] == m["key"], r
        assert [tuple(h) for h in r["headers"]] == [tuple(h) for h in m.get("headers", [])], r
        if r["key"] is not None:
            parts.setdefault(r["key"], set()).add(r["partition"])
    assert all(len(p) == 1 for p in parts.values()), parts


def group_of_three_rebalances(k: KafkaGo, rokka: harness.ServerProcess, workdir: Path,
                              check_last: Callable[[harness.JsonLinesProcess], None]) -> None:
    """Three members join one by one, two leave; every record is delivered (GroupLog's rules) and
    ``check_last`` checks the last member's assignment (it owns all 6 partitions) while it runs."""
    topic = k.create(rokka, workdir, partitions=6)
    group = topic_name("g")
    produced: list[str] = []
    members: list[harness.JsonLinesProcess] = []

    def produce_tag(tag: str, n: int = 30) -> None:
        vals = [f"{tag}-{i}" for i in range(n)]
        msgs = [{"key": f"k{i}", "value": v} for i, v in enumerate(vals)]
        k.run(rokka, workdir, "produce", topic=topic, messages=msgs)
        produced.extend(vals)

    def caught_up(what: str) -> None:
        harness.wait_until(lambda: set(produced) <= {v for _, v, _ in go.delivered(members)}, 60, what)

    try:
        produce_tag("a")
        for i in range(3):
            members.append(k.member(rokka, workdir, topic, group, f"m{i}"))
            feed_until(lambda i=i: f"m{i}" in {m for m, _, _ in go.delivered(members)}, produce_tag, f"join{i}", 60)
            caught_up(f"caught up after m{i} joined")
        assert {m for m, _, _ in go.delivered(members)} == {"m0", "m1", "m2"}
        for i in range(2):
            assert members[i].close() == 0
            produce_tag(f"leave{i}")
            caught_up(f"caught up after m{i} left")
        check_last(members[2])
    finally:
        for m in members:
            m.close() if m.proc.poll() is None else None
    log = GroupLog()
    for name, value, committed in go.delivered(members):
        log.add(name, [value.encode()], committed)
    log.check([v.encode() for v in produced])


def commit_and_resume_after_client_and_broker_restart(k: KafkaGo, rokka: harness.ServerProcess,
                                                      workdir: Path) -> None:
    topic = k.create(rokka, workdir, partitions=2)
    group = topic_name("g")
    rounds = ["first", "second", "third"]
    for n, tag in enumerate(rounds):
        k.run(rokka, workdir, "produce", topic=topic, messages=[{"value": f"{tag}-{i}"} for i in range(10)])
        m = k.member(rokka, workdir, topic, group, f"reader-{tag}")
        try:
            m.wait_for(lambda _, m=m: len(go.delivered([m])) >= 10, 60, f"{tag} batch")
            # an uncommitted or wrongly re-delivered earlier record would show up in this linger
            k.consume(rokka, workdir, topic, 10 * (n + 1))
        finally:
            assert m.close() == 0
        got = go.delivered([m])
        assert sorted(v for _, v, _ in got) == sorted(f"{tag}-{i}" for i in range(10))
        assert all(c for _, _, c in got)
        if tag == "second":
            rokka.restart()


def idempotent_producer_and_transactions(k: KafkaGo, rokka: harness.ServerProcess, workdir: Path) -> None:
    topic = k.create(rokka, workdir, partitions=1)
    vals = [f"idem-{i:04d}" for i in range(200)]
    k.run(rokka, workdir, "produce", topic=topic, messages=[{"value": v} for v in vals], idempotent=True)
    rokka.restart()
    more = [f"idem-{i:04d}" for i in range(200, 260)]
    k.run(rokka, workdir, "produce", topic=topic, messages=[{"value": v} for v in more], idempotent=True)
    got = k.consume(rokka, workdir, topic, 260)
    assert [r["value"] for r in got] == vals + more
    assert [r["offset"] for r in got] == list(range(260))

    txt = k.create(rokka, workdir, partitions=2)
    txns = [{"commit": c, "messages": [{"key": f"k{j}", "value": f"tx{i}-{j}"} for j in range(5)]}
            for i, c in enumerate([True, False, True, False, True])]
    ev = k.run(rokka, workdir, "txn", topic=txt, txn_id=topic_name("tx"), txns=txns)
    assert [e["commit"] for e in go.of(ev, "txn")] == [True, False, True, False, True]
    committed = sorted(f"tx{i}-{j}" for i in (0, 2, 4) for j in range(5))
    assert sorted(r["value"] for r in k.consume(rokka, workdir, txt, 15, read_committed=True)) == committed
    # rokka's documented choice: aborted records are never stored visibly, read_uncommitted included
    raw = k.consume(rokka, workdir, txt, 15)
    assert sorted(r["value"] for r in raw) == committed
