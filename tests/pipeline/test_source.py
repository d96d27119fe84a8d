"""Batch reads of ``format("rokka")`` against a real ``rokka serve``.

Data comes from real clients where it matters: the RocketMQ C++ client (``rocketmq==0.4.4``, in a
subprocess via interop/harness.py) and kafka-python; the rest from the project's trio client.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pyspark", reason="pyspark>=4 and pyarrow are needed: pip install -e '.[pipeline]'")

from rokka.net.remoting.client import OutMessage  # noqa: E402
from rokka.pipeline.options import SourceOptions  # noqa: E402
from rokka.pipeline.rows import SCHEMA, SCHEMA_DDL  # noqa: E402

from interop.harness import cpp_available, run_cpp  # noqa: E402
from tests.pipeline.helpers import produce, read_all, wait_route  # noqa: E402


def test_schema_matches_ddl(spark: Any) -> None:
    from pyspark.sql.types import _parse_datatype_string

    assert _parse_datatype_string(SCHEMA_DDL) == SCHEMA
    assert spark.read.format("rokka").option("namesrv", "x:1").option("topic", "T").load().schema == SCHEMA


@pytest.mark.parametrize(("options", "error"), [
    ({"topic": "T"}, "namesrv"),
    ({"namesrv": "h:1"}, "topic"),
    ({"namesrv": "h:1", "topic": "T", "subscriptionType": "XML"}, "subscriptionType"),
    ({"namesrv": "h:1", "topic": "T", "subscriptionType": "SQL92"}, "SQL92"),
    ({"namesrv": "h:1", "topic": "T", "startingOffsets": "{bad"}, "startingOffsets"),
    ({"namesrv": "h:1", "topic": "T", "startingOffsets": '{"T": {"nocolon": 1}}'}, "queue key"),
    ({"namesrv": "h:1", "topic": "T", "maxMessagesPerTrigger": "0"}, "maxMessagesPerTrigger"),
])
def test_bad_options_are_named(options: dict[str, str], error: str) -> None:
    with pytest.raises(ValueError, match=error):
        SourceOptions.parse(options)


def test_batch_read_of_cpp_client_messages(spark: Any, rokka: Any, tmp_path: Path) -> None:
    reason = cpp_available()
    if reason:
        pytest.skip(reason)
    specs = [{"topic": "SparkCpp", "body": f"cpp-{i}", "tags": "TA" if i % 2 else "TB", "keys": f"key{i}",
              "props": {"color": "red" if i % 3 else "blue"}} for i in range(40)]
    events = run_cpp("producer", {"namesrv": rokka.namesrv, "group": "spark_cpp_pg", "mode": "sync",
                                  "messages": specs}, workdir=tmp_path, timeout=90)
    sent = [e for e in events if e.get("event") == "sent"]
    assert len(sent) == 40 and all(e["status"] == 0 for e in sent)
    rows = read_all(spark, rokka.namesrv, "SparkCpp")
    assert sorted(r.body.decode() for r in rows) == sorted(s["body"] for s in specs)
    by_body = {r.body.decode(): r for r in rows}
    for s in specs:
        r = by_body[s["body"]]
        assert (r.topic, r.tags, r.keys, r.properties["color"]) == ("SparkCpp", s["tags"], s["keys"],
                                                                    s["props"]["color"])
        assert r.key is None and r.headers is None  # not a Kafka record
        assert r.broker_name == "broker-a" and r.store_timestamp >= r.born_timestamp
    assert {r.msg_id for r in rows} == {e["msg_id"] for e in sent}
    # one partition per queue that holds data, each read in offset order
    for q in {r.queue_id for r in rows}:
        offs = [r.queue_offset for r in rows if r.queue_id == q]
        assert offs == list(range(len(offs)))


def test_batch_read_of_kafka_records_keeps_key_and_headers(spark: Any, rokka: Any) -> None:
    kafka = pytest.importorskip("kafka", reason="kafka-python is not installed")
    producer = kafka.KafkaProducer(bootstrap_servers=rokka.kafka, request_timeout_ms=20_000, max_block_ms=20_000)
    try:
        sent = []
        for i in range(30):
            key = None if i % 5 == 0 else (b"\x00bin\xff" + bytes([i]) if i % 2 else f"k{i}".encode())
            headers = [("h1", f"v{i}".encode()), ("bin", b"\x01\x02"), ("h1", b"")] if i % 3 else []
            value = None if i == 7 else f"value-{i}".encode()
            producer.send("SparkKafka", key=key, value=value, headers=headers, partition=i % 2).get(timeout=30)
            sent.append((key, value, headers))
        producer.flush(timeout=30)
    finally:
        producer.close(timeout=10)
    wait_route(rokka.namesrv, "SparkKafka")
    rows = read_all(spark, rokka.namesrv, "SparkKafka")
    assert len(rows) == 30
    got = sorted(((r.key, r.body, [(h.key, h.value) for h in r.headers]) for r in rows),
                 key=lambda t: repr(t))
    want = sorted(((k, v, [(hk, hv) for hk, hv in h]) for k, v, h in sent), key=lambda t: repr(t))
    assert got == want


def test_tag_and_sql92_filtered_reads(spark: Any, rokka: Any) -> None:
    msgs = [OutMessage(f"m{i}".encode(), tags=["A", "B", "C"][i % 3], properties={"n": str(i)})
            for i in range(90)]
    produce(rokka.namesrv, "SparkFilter", msgs)
    tagged = read_all(spark, rokka.namesrv, "SparkFilter", subscription="A || C")
    assert sorted(r.body for r in tagged) == sorted(m.body for m in msgs if m.tags in ("A", "C"))
    sql = read_all(spark, rokka.namesrv, "SparkFilter", subscriptionType="SQL92",
                   subscription="n BETWEEN 10 AND 19 AND TAGS <> 'B'")
    assert sorted(r.body for r in sql) == sorted(m.body for m in msgs
                                                 if 10 <= int(m.properties["n"]) <= 19 and m.tags != "B")


def test_offset_options(spark: Any, rokka: Any) -> None:
    produce(rokka.namesrv, "SparkOffsets", [OutMessage(f"a{i}".encode()) for i in range(20)], queue=0)
    time.sleep(0.05)
    mid = int(time.time() * 1000)
    time.sleep(0.05)
    produce(rokka.namesrv, "SparkOffsets", [OutMessage(f"b{i}".encode()) for i in range(10)], queue=0)
    all_rows = read_all(spark, rokka.namesrv, "SparkOffsets")
    broker = all_rows[0].broker_name
    key = f"{broker}:0"
    assert len(all_rows) == 30
    ranged = read_all(spark, rokka.namesrv, "SparkOffsets", startingOffsets=json.dumps({"SparkOffsets": {key: 5}}),
                      endingOffsets=json.dumps({"SparkOffsets": {key: 12}}))
    assert [r.queue_offset for r in ranged] == list(range(5, 12))
    latest = read_all(spark, rokka.namesrv, "SparkOffsets", startingOffsets="latest")
    assert latest == []
    since = read_all(spark, rokka.namesrv, "SparkOffsets", startingTimestamp=str(mid))
    assert [r.body for r in since] == [f"b{i}".encode() for i in range(10)]


def test_unknown_topic_fails_with_a_clear_error(spark: Any, rokka: Any) -> None:
    with pytest.raises(Exception, match="no route for topic NoSuchSparkTopic"):
        read_all(spark, rokka.namesrv, "NoSuchSparkTopic", retrySeconds="0")
