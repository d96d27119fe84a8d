"""sarama (IBM/sarama, interop/go, protocol version 2.8) against rokka's Kafka listener: keys/headers
with every codec, a 3-member consumer group (range, eager) that rebalances, commit + resume across a
client and a broker restart, the idempotent producer across a broker restart, transactions
(BeginTxn / CommitTxn / AbortTxn) and the ClusterAdmin (topics, configs, partitions, offsets by time
through Client.GetOffset, group offsets, groups)."""

from __future__ import annotations

from pathlib import Path

import harness
import pytest
from go import kafka_checks as checks
from go import rokkago as go
from kafka_common import compressible, topic_name

pytestmark = go.requires_go


K = checks.KafkaGo("sarama", "sa")
sa, create, consume = K.run, K.create, K.consume


def test_keys_headers_and_every_codec(rokka: harness.ServerProcess, workdir: Path) -> None:
    checks.keys_headers_and_every_codec(K, rokka, workdir)


@pytest.mark.parametrize("version", ["0.10.2.0", "0.11.0.0", "1.0.0"])
def test_older_protocol_versions_and_message_formats(rokka: harness.ServerProcess, workdir: Path,
                                                     version: str) -> None:
    """sarama speaking Kafka 0.10.2 (Produce v2, message format v1: compressed wrapper messages with
    relative inner offsets, no headers), 0.11 and 1.0 (record batches v2), every codec its version has.
    Records are read back with the same version, except 0.10.2's: rokka serves Fetch v4+ only (as
    Apache Kafka 4.x, KIP-896), so they are read with sarama at 0.11."""
    topic = create(rokka, workdir, partitions=2)
    codecs = ["none", "gzip", "snappy", "lz4"]
    want = {}
    for c in codecs:
        msgs = [{"key": f"k{i % 3}", "value": f"{version}-{c}-" + compressible(i).decode()} for i in range(15)]
        sa(rokka, workdir, "produce", topic=topic, messages=msgs, compression=c, version=version)
        want.update({m["value"]: m["key"] for m in msgs})
    reader = "0.11.0.0" if version.startswith("0.10") else version
    got = go.of(sa(rokka, workdir, "consume", topic=topic, count=len(want), linger_ms=300, version=reader), "record")
    assert sorted(r["value"] for r in got) == sorted(want)
    assert all(r["key"] == want[r["value"]] for r in got)
    for part in {r["partition"] for r in got}:
        offs = [r["offset"] for r in got if r["partition"] == part]
        assert offs == list(range(len(offs))), (part, offs)


def test_group_of_three_rebalances(rokka: harness.ServerProcess, workdir: Path) -> None:
    def owns_all(last: harness.JsonLinesProcess) -> None:
        assert sorted(last.of("assigned")[-1]["partitions"]) == list(range(6))

    checks.group_of_three_rebalances(K, rokka, workdir, owns_all)


def test_commit_and_resume_after_client_and_broker_restart(rokka: harness.ServerProcess, workdir: Path) -> None:
    checks.commit_and_resume_after_client_and_broker_restart(K, rokka, workdir)


def test_idempotent_producer_and_transactions(rokka: harness.ServerProcess, workdir: Path) -> None:
    checks.idempotent_producer_and_transactions(K, rokka, workdir)


def test_cluster_admin(rokka: harness.ServerProcess, workdir: Path) -> None:
    topic, group, ev = K.admin(rokka, workdir)
    assert ev["create"]["err"] is None
    assert "already exists" in ev["create_again"]["err"]
    # past the last record: -1, as Apache Kafka answers (kadm maps it to the end offset, sarama does not)
    assert [o["offset"] for o in ev["offsets_by_time"]["offsets"]] == [0, 1, 2, 3, 4, 5, -1]
    assert {o["err"] for o in ev["offsets_by_time"]["offsets"]} == {None}
    assert (ev["watermarks"]["start0"], ev["watermarks"]["end0"]) == (0, 6)
    checks.check_admin(ev, topic, group)


def test_exactly_once_consume_transform_produce(rokka: harness.ServerProcess, workdir: Path) -> None:
    """One transaction per record with AddMessageToTxn (AddOffsetsToTxn + TxnOffsetCommit); a
    restarted client resumes after the last committed record and the output has each input once."""
    src, dst = create(rokka, workdir, partitions=2), create(rokka, workdir, partitions=2)
    group, txn_id = topic_name("g"), topic_name("eos")
    for tag, n in (("a", 12), ("b", 6)):
        sa(rokka, workdir, "produce", topic=src, messages=[{"key": f"k{i}", "value": f"{tag}{i}"} for i in range(n)])
        ev = sa(rokka, workdir, "eos", topic=src, output=dst, group=group, txn_id=txn_id, count=n, linger_ms=500)
        assert sorted(v for b in go.of(ev, "batch") for v in b["values"]) == sorted(f"{tag}{i}" for i in range(n))
    out = consume(rokka, workdir, dst, 18, read_committed=True)
    assert sorted(r["value"] for r in out) == sorted([f"out-a{i}" for i in range(12)] + [f"out-b{i}" for i in range(6)])
