"""Streaming reads: exactly-once output across a broker restart and a query restart.

The query reads with ``maxMessagesPerTrigger`` (so there are many micro-batches) and writes to a
Parquet file sink (Spark's exactly-once sink); offsets come from the checkpoint only.  The
broker is restarted on the same ports while the query runs, then the query itself is stopped and
started again from its checkpoint.  The output must hold every input message exactly once.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pyspark", reason="pyspark>=4 and pyarrow are needed: pip install -e '.[pipeline]'")

from rokka.net.remoting.client import OutMessage  # noqa: E402

from tests.pipeline.conftest import start_rokka  # noqa: E402
from tests.pipeline.helpers import group_offsets, produce  # noqa: E402

TOPIC = "SparkStream"
GROUP = "spark_stream_cg"


def start(spark: Any, namesrv: str, out: Path, ckpt: Path) -> Any:
    df = (spark.readStream.format("rokka").option("namesrv", namesrv).option("topic", TOPIC)
          .option("startingOffsets", "earliest").option("maxMessagesPerTrigger", "70")
          .option("consumerGroup", GROUP).load())
    return (df.selectExpr("CAST(body AS STRING) AS body", "queue_id", "queue_offset", "msg_id")
            .writeStream.format("parquet").option("path", str(out)).option("checkpointLocation", str(ckpt))
            .trigger(processingTime="500 milliseconds").start())


OUT_SCHEMA = "body string, queue_id int, queue_offset bigint, msg_id string"


def out_rows(spark: Any, out: Path) -> Any:
    return spark.read.schema(OUT_SCHEMA).parquet(str(out))


def wait_rows(spark: Any, query: Any, out: Path, n: int, timeout: float = 180.0) -> None:
    deadline = time.monotonic() + timeout
    while True:
        if query.exception() is not None:
            raise AssertionError(f"query failed: {query.exception()}")
        if (out / "_spark_metadata").exists() and out_rows(spark, out).count() >= n:
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"only {out_rows(spark, out).count()} of {n} rows after {timeout:.0f}s")
        time.sleep(0.5)


def bodies(lo: int, hi: int) -> list[OutMessage]:
    return [OutMessage(f"s-{i:05d}".encode(), tags="T") for i in range(lo, hi)]


def test_stream_exactly_once_across_broker_and_query_restart(spark: Any, tmp_path: Path) -> None:
    srv = start_rokka(tmp_path / "rokka")
    out, ckpt = tmp_path / "out", tmp_path / "ckpt"
    try:
        produce(srv.namesrv, TOPIC, bodies(0, 300), batch=20)
        query = start(spark, srv.namesrv, out, ckpt)
        try:
            wait_rows(spark, query, out, 100)
            srv.restart()  # same ports, same data; the query keeps running
            produce(srv.namesrv, TOPIC, bodies(300, 500), batch=20)
            wait_rows(spark, query, out, 500)
        finally:
            query.stop()
        produce(srv.namesrv, TOPIC, bodies(500, 600), batch=20)
        query = start(spark, srv.namesrv, out, ckpt)  # resumes from the checkpoint
        try:
            wait_rows(spark, query, out, 600)
            time.sleep(1.5)  # a few more triggers: nothing new may appear
            assert query.exception() is None
        finally:
            query.stop()
        rows = out_rows(spark, out).collect()
        assert len(rows) == 600
        assert sorted(r.body for r in rows) == [f"s-{i:05d}" for i in range(600)]
        assert len({(r.queue_id, r.queue_offset) for r in rows}) == 600
        committed = group_offsets(srv.namesrv, TOPIC, GROUP)
        # Spark tells a source about a committed batch when it plans the next one, so the group may
        # trail by the last micro-batch (at most maxMessagesPerTrigger), never run ahead.
        assert 600 - 70 <= sum(v or 0 for v in committed.values()) <= 600
    finally:
        srv.stop_clean()
