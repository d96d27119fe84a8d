"""Spark's own Kafka source and sink (spark-sql-kafka-0-10) against rokka's Kafka port.

Theory of operation
-------------------
One driver JVM for the module (``interop/spark_kafka/driver.py``: a ``local[2]`` SparkSession with
``spark.jars.packages`` = Spark's Kafka connector, resolved offline from the Ivy cache that
``interop/install.sh`` pre-fetched); each test gets its own ``rokka serve`` and sends the driver JSON
commands.  kafka-python produces the input and reads the sink's output back, so both directions are
checked by an independent client:

* source, exactly-once into files: a streaming query (small micro-batches) writes a topic into a
  checkpointed parquet sink; it is stopped mid-stream, more records are produced, the query restarts
  from its checkpoint and drains the topic; the sink holds every record exactly once, at its offset.
* sink: ``df.write.format("kafka")`` (batch, with headers) and a streaming copy (readStream kafka ->
  writeStream kafka) are read back exactly by kafka-python and by Spark's batch Kafka reader.
* data loss and bounds: records deleted (DeleteRecords) below a checkpoint fail the query with
  ``failOnDataLoss=true`` and are skipped exactly with ``false``; batch reads bounded by timestamps
  (ListOffsets by time) and by per-partition offsets.

Skips (with the reason) only when pyspark or the pre-fetched connector is missing.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import harness
import kafka_common as kc
import pytest

pytest.importorskip("pyspark", reason="pyspark is not installed: pip install -e '.[pipeline]'")
kafka = pytest.importorskip("kafka", reason="kafka-python is not installed (interop/install.sh installs it)")
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition  # noqa: E402

DRIVER = Path(__file__).resolve().parent / "spark_kafka" / "driver.py"
VERSION_FILE = DRIVER.parent / ".ivy" / "VERSION"
TIMEOUT_MS = 15000
CALL_TIMEOUT = 240.0


class Spark:
    """The driver process; ``call(op, **fields)`` returns its answer (HarnessError on an error answer)."""

    def __init__(self, workdir: Path) -> None:
        self.proc = harness.JsonLinesProcess([sys.executable, str(DRIVER)], name="spark-kafka", workdir=workdir)
        self.proc.wait_event("ready", timeout=CALL_TIMEOUT)
        self.answers = 0

    def call(self, op: str, **fields: Any) -> dict[str, Any]:
        self.proc.send({"op": op, **fields})
        self.answers += 1
        self.proc.wait_for(lambda evs: sum(e.get("event") in ("ok", "error") for e in evs) >= self.answers,
                           CALL_TIMEOUT, f"the answer to {op}")
        answer = [e for e in self.proc.events if e.get("event") in ("ok", "error")][-1]
        if answer["event"] == "error":
            raise harness.HarnessError(f"spark {op}: {answer['error']}\n{answer.get('trace', '')}\n"
                                       f"{self.proc.describe()}")
        return answer


@pytest.fixture(scope="module")
def spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Spark]:
    if not VERSION_FILE.exists():
        pytest.skip("Spark's Kafka connector is not pre-fetched: run interop/install.sh")
    driver = Spark(tmp_path_factory.mktemp("spark-kafka"))
    try:
        yield driver
    finally:
        try:
            driver.proc.close(timeout=120)
        finally:
            driver.proc.kill()


def create_topic(srv: harness.ServerProcess, prefix: str, partitions: int = 3) -> str:
    name = kc.topic_name(prefix)
    admin = KafkaAdminClient(bootstrap_servers=srv.kafka, request_timeout_ms=TIMEOUT_MS)
    try:
        admin.create_topics([kafka.admin.NewTopic(name, partitions, 1)])
        kc.wait_until(lambda: name in admin.list_topics(), 30, f"{name} in list_topics")
    finally:
        admin.close()
    return name


def produce(srv: harness.ServerProcess, topic: str, start: int, n: int, partitions: int | None = None,
            ts0: int | None = None) -> None:
    """Records k<i>/v<i> for i in [start, start + n); with ``partitions``, i goes to partition i % partitions;
    with ``ts0``, record i has timestamp ts0 + i seconds."""
    p = KafkaProducer(bootstrap_servers=srv.kafka, request_timeout_ms=TIMEOUT_MS, max_block_ms=TIMEOUT_MS)
    try:
        futs = [p.send(topic, key=f"k{i}".encode(), value=f"v{i}".encode(),
                       partition=None if partitions is None else i % partitions,
                       timestamp_ms=None if ts0 is None else ts0 + i * 1000) for i in range(start, start + n)]
        p.flush(timeout=60)
        for f in futs:
            f.get(timeout=60)
    finally:
        p.close(timeout=30)


def read_back(srv: harness.ServerProcess, topic: str, n: int) -> list[Any]:
    c = KafkaConsumer(topic, bootstrap_servers=srv.kafka, auto_offset_reset="earliest", enable_auto_commit=False,
                      request_timeout_ms=TIMEOUT_MS + 5000, consumer_timeout_ms=1000)
    try:
        out: list[Any] = []
        kc.wait_until(lambda: out.extend(m for b in c.poll(timeout_ms=500).values() for m in b) or len(out) >= n,
                      90, f"{n} records of {topic}")
        out.extend(m for b in c.poll(timeout_ms=1500).values() for m in b)  # nothing more may come
        return out
    finally:
        c.close()


def test_source_exactly_once_into_files_across_restart(spark: Spark, rokka: harness.ServerProcess,
                                                      tmp_path: Path) -> None:
    topic = create_topic(rokka, "spark-in")
    produce(rokka, topic, 0, 300)
    out, ckpt = str(tmp_path / "out"), str(tmp_path / "checkpoint")
    spark.call("stream_start", bootstrap=rokka.kafka, topic=topic, out=out, checkpoint=ckpt, max_per_trigger=40)
    spark.call("stream_wait", rows=120)
    spark.call("stream_stop")
    produce(rokka, topic, 300, 200)
    spark.call("stream_start", bootstrap=rokka.kafka, topic=topic, out=out, checkpoint=ckpt, once=True)
    rows = spark.call("read_files", out=out)["rows"]
    values = sorted(r[3] for r in rows)
    assert len(rows) == 500 and values == sorted(f"v{i}" for i in range(500)), (len(rows), len(set(values)))
    assert all(r[2] == "k" + r[3][1:] for r in rows)
    by_partition: dict[int, list[int]] = {}
    for part, offset, _, _ in rows:
        by_partition.setdefault(part, []).append(offset)
    for offsets in by_partition.values():  # each partition's offsets 0..n-1, once each
        assert sorted(offsets) == list(range(len(offsets)))
    # the restarted query resumed from its checkpoint: a third run finds nothing new
    again = spark.call("stream_start", bootstrap=rokka.kafka, topic=topic, out=out, checkpoint=ckpt, once=True)
    assert again["input_rows"] == 0
    assert len(spark.call("read_files", out=out)["rows"]) == 500


def test_sink_batch_and_streaming_read_back_exactly(spark: Spark, rokka: harness.ServerProcess,
                                                    tmp_path: Path) -> None:
    batch_topic, copy_topic = create_topic(rokka, "spark-out"), create_topic(rokka, "spark-copy", partitions=2)
    spark.call("batch_write", bootstrap=rokka.kafka, topic=batch_topic, n=250, prefix="w")
    got = read_back(rokka, batch_topic, 250)
    want = {(f"k{i}".encode(), f"w{i}".encode(), (("h", str(i).encode()),)) for i in range(250)}
    assert len(got) == 250 and {(m.key, m.value, tuple(m.headers)) for m in got} == want

    copied = spark.call("stream_copy", bootstrap=rokka.kafka, src=batch_topic, dst=copy_topic,
                        checkpoint=str(tmp_path / "copy-checkpoint"))
    assert copied["input_rows"] == 250
    got = read_back(rokka, copy_topic, 250)
    assert len(got) == 250 and {(m.key, m.value, tuple(m.headers)) for m in got} == want

    rows = spark.call("batch_read", bootstrap=rokka.kafka, topic=copy_topic)["rows"]
    assert sorted((r[2], r[3], tuple(tuple(h) for h in r[4])) for r in rows) == sorted(
        (f"k{i}", f"w{i}", (("h", str(i)),)) for i in range(250))


def test_source_data_loss_and_time_bounds(spark: Spark, rokka: harness.ServerProcess, tmp_path: Path) -> None:
    """Records deleted (DeleteRecords) below a query's checkpoint: failOnDataLoss=true stops the query
    with Spark's data-loss error, false skips exactly the deleted ones; batch reads bounded by time
    (ListOffsets by timestamp) and by offsets."""
    topic, ts0 = create_topic(rokka, "spark-loss", partitions=2), 1_700_000_000_000
    produce(rokka, topic, 0, 40, partitions=2, ts0=ts0)
    ckpt, out = tmp_path / "checkpoint", tmp_path / "out"
    assert spark.call("stream_start", bootstrap=rokka.kafka, topic=topic, out=str(out), checkpoint=str(ckpt),
                      once=True)["input_rows"] == 40
    produce(rokka, topic, 40, 40, partitions=2, ts0=ts0)
    admin = KafkaAdminClient(bootstrap_servers=rokka.kafka, request_timeout_ms=TIMEOUT_MS)
    try:
        admin.delete_records({TopicPartition(topic, 0): 30, TopicPartition(topic, 1): 30})
    finally:
        admin.close()
    with pytest.raises(harness.HarnessError, match="Some data may have been lost"):
        spark.call("stream_start", bootstrap=rokka.kafka, topic=topic, out=str(out), checkpoint=str(ckpt), once=True)
    # the same checkpoint again, now tolerating the loss: the failed batch is planned again and skips it
    spark.call("stream_start", bootstrap=rokka.kafka, topic=topic, out=str(out), checkpoint=str(ckpt), once=True,
               options={"failOnDataLoss": "false"})
    values = sorted(int(r[3][1:]) for r in spark.call("read_files", out=str(out))["rows"])
    assert values == list(range(40)) + list(range(60, 80))     # offsets 20..29 of each partition are gone

    def read(**options: str) -> list[int]:
        rows = spark.call("batch_read", bootstrap=rokka.kafka, topic=topic, options=options)["rows"]
        return sorted(int(r[3][1:]) for r in rows)
    assert read(startingTimestamp=str(ts0 + 65_000)) == list(range(65, 80))
    bounds = {"startingOffsets": json.dumps({topic: {"0": 32, "1": -2}}),
              "endingOffsets": json.dumps({topic: {"0": -1, "1": 31}})}
    assert read(**bounds) == [61, 64, 66, 68, 70, 72, 74, 76, 78]    # p0: offsets 32.., p1: 30 (its start)
