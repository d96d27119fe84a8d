"""The differences ``make conformance`` found between rokka and Apache Kafka 4.4 / RocketMQ 4.9.7, with real clients.

* DescribeLogDirs (key 35): kafka-python's ``describe_log_dirs`` and Kafka 4.x's ``kafka-log-dirs`` tool
  (``org.apache.kafka.tools.LogDirsCommand``, Admin.describeLogDirs) get one log dir, the store root, with
  each partition's record bytes (0 for an empty one), offset lag 0, no future logs.  Before: the API was not
  offered (kafka-python: "not supported by broker", the Java Admin: UnsupportedVersionException).
* A delayed message delivered after its level keeps ``DELAY`` and the client's ``WAIT=true`` (Apache 4.9.7's
  ``messageTimeup`` stores the parked record's properties string); a committed transactional message keeps
  ``TRAN_MSG=true``, ``REAL_TOPIC``, ``REAL_QID`` and ``WAIT`` (``endMessageTransaction``).  Checked with the
  Java RocketMQ client 4.9.8 (its delay and transaction scenarios, one JVM).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import harness
import pytest
import rmq_java
from kafka import KafkaProducer
from kafka.admin import KafkaAdminClient, NewTopic
from kafka_common import topic_name


def _store_root(srv: harness.ServerProcess) -> str:
    assert srv.data_dir is not None
    return os.path.realpath(srv.data_dir)


def test_describe_log_dirs_kafka_python(rokka: harness.ServerProcess) -> None:
    topic = topic_name("logdirs")
    admin = KafkaAdminClient(bootstrap_servers=rokka.kafka, request_timeout_ms=15000)
    producer = KafkaProducer(bootstrap_servers=rokka.kafka, acks="all", request_timeout_ms=15000)
    try:
        admin.create_topics([NewTopic(topic, 2, 1)])
        for i in range(20):
            producer.send(topic, key=b"k%d" % i, value=b"v" * 100, partition=0)
        producer.flush(timeout=30)
        [answer] = admin.describe_log_dirs({topic: [0, 1]})
        [log_dir] = answer["log_dirs"]
        assert log_dir["error_code"] == 0 and log_dir["log_dir"] == _store_root(rokka)
        [t] = log_dir["topics"]
        parts = {p["partition_index"]: p for p in t["partitions"]}
        assert t["name"] == topic and sorted(parts) == [0, 1]
        assert parts[0]["partition_size"] >= 20 * 100 and parts[1]["partition_size"] == 0
        assert all(p["offset_lag"] == 0 and p["is_future_key"] is False for p in parts.values())
        assert log_dir["total_bytes"] > 0 and 0 <= log_dir["usable_bytes"] <= log_dir["total_bytes"]
        [everything] = admin.describe_log_dirs()     # topics null: every topic
        assert topic in {x["name"] for x in everything["log_dirs"][0]["topics"]}
    finally:
        producer.close(timeout=10)
        admin.close()


def test_kafka_log_dirs_tool(configured_rokka: Any, workdir: Path) -> None:
    """Kafka 4.x's kafka-log-dirs (Admin.describeLogDirs v4+) inside the interop JVM."""
    from test_kafka_java import FAST_GROUPS, Java, create

    srv = configured_rokka(FAST_GROUPS, {})
    java = Java("tools4", srv, workdir)
    topic = topic_name("jv-logdirs")
    try:
        create(java, topic, partitions=2)
        ev = java.ok("tool", main="org.apache.kafka.tools.LogDirsCommand",
                     args=["--bootstrap-server", srv.kafka, "--describe", "--topic-list", topic],
                     stdin="", timeout_ms=45000)
        assert ev["exit"] == 0, ev
        doc = json.loads([line for line in ev["stdout"].splitlines() if line.startswith("{")][-1])
        [broker] = doc["brokers"]
        [log_dir] = broker["logDirs"]
        assert log_dir["error"] is None and log_dir["logDir"] == _store_root(srv)
        assert sorted(p["partition"] for p in log_dir["partitions"]) == [f"{topic}-0", f"{topic}-1"]
        assert all(p["size"] == 0 and p["offsetLag"] == 0 and p["isFuture"] is False
                   for p in log_dir["partitions"])
    finally:
        java.close()


@pytest.fixture(scope="module")
def java_rmq(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    line = rmq_java.LINES["4.9.8"]
    if (why := rmq_java.missing(line)) is not None:
        pytest.skip(why)
    base = tmp_path_factory.mktemp("conformance-rmq")
    (base / "server").mkdir()
    conf = base / "server" / "broker.conf"
    conf.write_text("transactionCheckInterval=1000\ntransactionTimeOut=1000\n")
    srv = harness.start_serve(base / "server", conf=conf)
    try:
        return rmq_java.run_scenarios(line, ["delay", "transaction"], namesrv=srv.namesrv, workdir=base / "client")
    finally:
        print(f"--- rokka stderr tail ---\n{srv.stderr_tail(40)}")
        srv.stop_clean()


def _received(results: dict[str, dict[str, Any]], name: str) -> dict[str, dict[str, str]]:
    res = results[name]
    assert "error" not in res, res["error"]
    return {m["body"]: m["props"] for m in res["received"]}


def test_delayed_copy_keeps_delay_and_wait(java_rmq: dict[str, dict[str, Any]]) -> None:
    got = _received(java_rmq, "delay")
    for level in (1, 2):
        props = got[f"delay-{level}"]
        assert props["DELAY"] == str(level) and props["WAIT"] == "true", props
        assert (props["REAL_TOPIC"], props["REAL_QID"]) == ("J_Delay", "0"), props
    assert "DELAY" not in got["delay-0"] and "REAL_TOPIC" not in got["delay-0"]


def test_committed_copy_keeps_the_half_properties(java_rmq: dict[str, dict[str, Any]]) -> None:
    got = _received(java_rmq, "transaction")
    assert {"commit", "unknown-then-commit"} <= set(got)
    for body in ("commit", "unknown-then-commit"):
        props = got[body]
        assert props["TRAN_MSG"] == "true" and props["WAIT"] == "true", props
        assert props["REAL_TOPIC"] == "J_Txn" and props["REAL_QID"].isdigit(), props
