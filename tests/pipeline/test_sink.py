"""Writes: ``df.write.format("rokka")`` and ``writeStream.format("rokka")``, read back byte-exact."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pyspark", reason="pyspark>=4 and pyarrow are needed: pip install -e '.[pipeline]'")

from rokka.net.remoting.client import OutMessage  # noqa: E402
from rokka.pipeline.sink import uniq_key  # noqa: E402

from tests.pipeline.helpers import produce, read_all  # noqa: E402


def test_write_then_read_back_byte_exact(spark: Any, rokka: Any) -> None:
    bodies = [bytes(range(256)), b"", b"\x00" * 1000, os.urandom(4000)] + [os.urandom(i) for i in range(1, 60)]
    data = [(b, f"tag{i % 3}", f"k{i} kk{i}", {"p": f"v{i}", "uni": "ü€"}, i % 2) for i, b in enumerate(bodies)]
    df = spark.createDataFrame(data, "body binary, tags string, keys string, properties map<string,string>, "
                                     "queue_id int").repartition(3)
    df.write.format("rokka").option("namesrv", rokka.namesrv).option("topic", "SparkSink").option(
        "batchSize", "7").mode("append").save()
    rows = read_all(spark, rokka.namesrv, "SparkSink")
    assert len(rows) == len(data)
    got = sorted((r.body, r.tags, r.keys, r.properties["p"], r.properties["uni"], r.queue_id) for r in rows)
    assert got == sorted((b, t, k, p["p"], p["uni"], q) for b, t, k, p, q in data)
    ids = [r.msg_id for r in rows]
    assert len(set(ids)) == len(ids) and all(len(i) == 32 for i in ids)


def test_write_validates_columns(spark: Any, rokka: Any) -> None:
    df = spark.createDataFrame([("x",)], "payload string")
    with pytest.raises(Exception, match="body"):
        df.write.format("rokka").option("namesrv", rokka.namesrv).option("topic", "SparkSinkBad").mode(
            "append").save()


def test_stream_copy_topic_to_topic_with_deterministic_ids(spark: Any, rokka: Any, tmp_path: Path) -> None:
    produce(rokka.namesrv, "SparkCopyIn", [OutMessage(f"c{i}".encode(), tags="X", keys=f"k{i}")
                                           for i in range(120)])
    src = (spark.readStream.format("rokka").option("namesrv", rokka.namesrv).option("topic", "SparkCopyIn")
           .option("startingOffsets", "earliest").load())
    query = (src.select("body", "tags", "keys").writeStream.format("rokka").option("namesrv", rokka.namesrv)
             .option("topic", "SparkCopyOut").option("checkpointLocation", str(tmp_path / "ck"))
             .trigger(availableNow=True).start())
    assert query.awaitTermination(180)
    assert query.exception() is None
    rows = read_all(spark, rokka.namesrv, "SparkCopyOut")
    assert sorted(r.body for r in rows) == sorted(f"c{i}".encode() for i in range(120))
    assert all(r.tags == "X" for r in rows)
    # ids come from (query id, batch id, partition, row): batch 0, some partition, row 0 is there
    expected_first = {uniq_key(f"{query.id}/0", p, 0) for p in range(8)}
    assert expected_first & {r.msg_id for r in rows}
