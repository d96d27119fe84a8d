"""franz-go (kgo + kadm, interop/go) against rokka's Kafka listener: keys/headers with every codec,
a 3-member group that rebalances, commit + resume across a client and a broker restart, the
idempotent producer (franz-go's default) across a broker restart, transactions (aborted records are
invisible, read_uncommitted too: rokka never exposes them) and
kadm (topics, configs, partitions, offsets by time, groups)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import harness
from go import kafka_checks as checks
from go import rokkago as go
from kafka_common import topic_name

pytestmark = go.requires_go


K = checks.KafkaGo("franz", "fz")
fz, create, consume = K.run, K.create, K.consume


def test_keys_headers_and_every_codec(rokka: harness.ServerProcess, workdir: Path) -> None:
    checks.keys_headers_and_every_codec(K, rokka, workdir)


def test_group_of_three_rebalances(rokka: harness.ServerProcess, workdir: Path) -> None:
    def owns_all(last: harness.JsonLinesProcess) -> None:
        owned: set[int] = set()  # franz-go's default balancer is cooperative-sticky: increments only
        for e in list(last.events):
            if e["event"] in ("assigned", "revoked"):
                (owned.update if e["event"] == "assigned" else owned.difference_update)(e["partitions"] or [])
        assert owned == set(range(6))

    checks.group_of_three_rebalances(K, rokka, workdir, owns_all)


def test_server_side_balancer_falls_back_to_the_classic_protocol(rokka: harness.ServerProcess,
                                                                 workdir: Path) -> None:
    """kgo.ServerSideBalancer (KIP-848) against a broker without ConsumerGroupHeartbeat: franz-go
    uses the classic protocol and the group of two consumes every record."""
    topic = create(rokka, workdir, partitions=4)
    group = topic_name("g")
    fz(rokka, workdir, "produce", topic=topic, messages=[{"key": f"k{i}", "value": f"s{i}"} for i in range(40)])
    members = [go.start("franz", "member", workdir, f"ss{i}", brokers=[rokka.kafka], topic=topic, group=group,
                        name=f"ss{i}", server_side=True) for i in range(2)]
    try:
        harness.wait_until(lambda: len({v for _, v, _ in go.delivered(members)}) >= 40, 60, "all records")
    finally:
        for m in members:
            assert m.close() == 0
    assert sorted({v for _, v, _ in go.delivered(members)}) == sorted(f"s{i}" for i in range(40))
    assert all(c for _, _, c in go.delivered(members))


def test_commit_and_resume_after_client_and_broker_restart(rokka: harness.ServerProcess, workdir: Path) -> None:
    checks.commit_and_resume_after_client_and_broker_restart(K, rokka, workdir)


def test_idempotent_producer_and_transactions(rokka: harness.ServerProcess, workdir: Path) -> None:
    checks.idempotent_producer_and_transactions(K, rokka, workdir)


def test_idempotent_producer_survives_a_broker_kill(rokka: harness.ServerProcess, workdir: Path) -> None:
    """One long-lived franz-go producer (one producer id) keeps producing across a SIGKILL of the
    broker: every record acked before and after is there exactly once, offsets contiguous."""
    topic = create(rokka, workdir, partitions=1)
    prod = go.start("matrix-franz", "producer", workdir, "long-producer", brokers=[rokka.kafka])
    prod.wait_event("started", timeout=30)
    acked: list[str] = []

    def round_(seq: int, tag: str) -> None:
        vals = [f"{tag}-{i:03d}" for i in range(50)]
        prod.send({"op": "produce", "seq": seq, "jobs": [{"topic": topic, "txn": None, "messages": [
            {"value": v, "key": None, "headers": [], "tag": None, "delay": 0} for v in vals]}]})
        prod.wait_for(lambda evs: any(e.get("seq") == seq for e in evs if e["event"] == "produced"), 60, tag)
        (res,) = [e for e in prod.of("produced") if e["seq"] == seq][0]["results"]
        assert res == {"acked": 50, "error": None}, res
        acked.extend(vals)

    try:
        round_(1, "before")
        rokka.restart(hard=True)
        round_(2, "after")
    finally:
        assert prod.close() == 0
    got = consume(rokka, workdir, topic, 100)
    assert [r["value"] for r in got] == acked
    assert [r["offset"] for r in got] == list(range(100))


def test_kadm_admin(rokka: harness.ServerProcess, workdir: Path) -> None:
    topic, group, ev = K.admin(rokka, workdir)
    assert ev["create"]["err"] is None and ev["create"]["partitions"] == 2
    assert "TOPIC_ALREADY_EXISTS" in ev["create_again"]["err"]
    assert [o["offset"] for o in ev["offsets_by_time"]["offsets"]] == [0, 1, 2, 3, 4, 5, 6]
    assert (ev["watermarks"]["start0"], ev["watermarks"]["end0"], ev["watermarks"]["end1"]) == (0, 6, 0)
    assert ev["commit"]["err"] is None
    checks.check_admin(ev, topic, group)


def test_exactly_once_consume_transform_produce(rokka: harness.ServerProcess, workdir: Path) -> None:
    """GroupTransactSession: the output and the group's offsets commit in one transaction; an aborted
    batch is polled again, and a restarted client resumes after the last committed batch."""
    src, dst = create(rokka, workdir, partitions=2), create(rokka, workdir, partitions=2)
    group, txn_id = topic_name("g"), topic_name("eos")
    fz(rokka, workdir, "produce", topic=src, messages=[{"key": f"k{i}", "value": f"a{i}"} for i in range(20)])
    ev = fz(rokka, workdir, "eos", topic=src, output=dst, group=group, txn_id=txn_id, count=20, mode="abort-first")
    batches = go.of(ev, "batch")
    assert batches[0]["wanted_commit"] is False and batches[0]["committed"] is False
    assert sorted(v for b in batches if b["committed"] for v in b["values"]) == sorted(f"a{i}" for i in range(20))
    fz(rokka, workdir, "produce", topic=src, messages=[{"key": f"k{i}", "value": f"b{i}"} for i in range(10)])
    ev = fz(rokka, workdir, "eos", topic=src, output=dst, group=group, txn_id=txn_id, count=10)
    assert sorted(v for b in go.of(ev, "batch") for v in b["values"]) == sorted(f"b{i}" for i in range(10))
    out = consume(rokka, workdir, dst, 30, read_committed=True)
    want = [f"out-a{i}" for i in range(20)] + [f"out-b{i}" for i in range(10)]
    assert sorted(r["value"] for r in out) == sorted(want)


def test_sasl_scram_and_acls_with_kadm(configured_rokka: Any, workdir: Path) -> None:
    """SASL/SCRAM-SHA-256 (kgo.SASL) and kadm CreateACLs / DescribeACLs / DeleteACLs with kafkaAclEnable:
    the ACLs a super user grants are exactly what the other user may do."""
    users = {"admin": "admin-secret", "alice": "alice-secret"}
    srv = configured_rokka({"kafkaSaslMechanisms": "SCRAM-SHA-256", "kafkaSaslUsers": "{dir}/users.json",
                            "kafkaAclEnable": "true", "kafkaSuperUsers": "User:admin"},
                           {"users.json": json.dumps({"users": users})})
    topic, group = topic_name("acl"), topic_name("g")
    ev = {e["event"]: e for e in fz(srv, workdir, "acl", topic=topic, group=group,
                                     credentials=["admin", users["admin"]], user2=["alice", users["alice"]])}
    assert ev["acl_create"]["errors"] == [None] * 4
    assert ev["produce_mine"]["err"] is None
    assert "TOPIC_AUTHORIZATION_FAILED" in ev["produce_secret"]["err"]
    assert ev["consumed"]["values"] == ["produce_mine"] and ev["consumed"]["commit_err"] is None
    assert ev["acl_describe"]["acls"] == sorted([
        f"TOPIC:{topic}:WRITE:ALLOW:*", f"TOPIC:{topic}:READ:ALLOW:*", f"TOPIC:{topic}:DESCRIBE:ALLOW:*",
        f"GROUP:{group}:READ:ALLOW:*"])
    assert ev["acl_delete"]["deleted"] == 4
    assert "TOPIC_AUTHORIZATION_FAILED" in ev["produce_after_delete"]["err"]


def test_kadm_records_lag_and_transaction_apis(rokka: harness.ServerProcess, workdir: Path) -> None:
    """kadm DeleteRecords (log start moves, reads start there), Lag, ListBrokers, DescribeBrokerConfigs,
    DescribeProducers, ListTransactions, DescribeTransactions of an unknown id."""
    ev = {e["event"]: e for e in fz(rokka, workdir, "probe", topic=topic_name("pr"), group=topic_name("g"))}
    assert (ev["delete_records"]["err"], ev["delete_records"]["low"]) == (None, 4)
    assert ev["start_after_delete"]["offset"] == 4
    assert ev["read_after_delete"]["records"] == [f"{i}:d{i}" for i in range(4, 10)]
    assert (ev["lag"]["err"], ev["lag"]["lag"], ev["lag"]["state"]) == (None, 3, "Empty")
    assert (ev["brokers"]["count"], ev["brokers"]["err"]) == (1, None)
    assert ev["broker_configs"]["err"] is None and ev["broker_configs"]["count"] > 0
    assert ev["describe_producers"]["err"] is None and ev["list_transactions"]["err"] is None
    assert "TRANSACTIONAL_ID_NOT_FOUND" in ev["describe_transactions"]["item_err"]
