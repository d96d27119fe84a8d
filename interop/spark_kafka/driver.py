"""Spark's own Kafka source and sink (spark-sql-kafka-0-10) driven by JSON commands, one JVM per run.

Theory of operation
-------------------
``python interop/spark_kafka/driver.py`` starts one ``local[2]`` SparkSession whose
``spark.jars.packages`` is Spark's Kafka connector, resolved by Ivy from the cache that
``interop/install.sh`` filled (``interop/spark_kafka/.ivy``, settings in ``ivysettings.xml``; the
connector version is the one install.sh recorded in ``.ivy/VERSION``), so a test run needs no network.
It then reads JSON commands on stdin, one per line, and answers each with one JSON line
(``{"event": "ok", ...}`` or ``{"event": "error", ...}``); stdin's end stops Spark and exits.

Commands (``op``):

* ``stream_start``: ``readStream.format("kafka")`` of ``topic`` from the earliest offsets into a
  parquet file sink at ``out`` with checkpoint ``checkpoint`` (``maxOffsetsPerTrigger`` rows per
  micro-batch; trigger ``once`` = availableNow, else every 500 ms; more source ``options`` when given).
  With ``once`` the answer comes after the query ended (an ``error`` if it failed); otherwise at once.
* ``stream_wait``: until the running query has taken at least ``rows`` input rows (its progress).
* ``stream_stop``: stops the running query (whatever batch it is in).
* ``read_files``: the rows of the file sink ``out`` (Spark honours the sink's ``_spark_metadata`` log,
  so files of an aborted batch are not read) as ``[partition, offset, key, value]``.
* ``batch_write``: ``n`` rows (key ``k<i>``, value ``prefix<i>``, one header ``h=<i>``) through
  ``df.write.format("kafka")`` into ``topic``.
* ``stream_copy``: ``readStream.format("kafka")`` of ``src`` -> ``writeStream.format("kafka")`` into
  ``dst`` with checkpoint ``checkpoint``, trigger availableNow (headers carried).
* ``batch_read``: ``spark.read.format("kafka")`` of ``topic`` with headers (plus the source ``options``
  given), as ``[partition, offset, key, value, headers]``.

Keys, values and header values are UTF-8 text in the JSON lines (the tests use text).
"""

from __future__ import annotations

import json
import os
import sys
import time
import traceback
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
IVY_DIR = HERE / ".ivy"
IVY_SETTINGS = HERE / "ivysettings.xml"
VERSION_FILE = IVY_DIR / "VERSION"


def package() -> str:
    """The connector's Maven coordinate, at the version interop/install.sh pre-fetched."""
    version = VERSION_FILE.read_text().strip() if VERSION_FILE.exists() else ""
    if not version:
        raise SystemExit(f"{VERSION_FILE} is missing: run interop/install.sh (it pre-fetches spark-sql-kafka)")
    return f"org.apache.spark:spark-sql-kafka-0-10_2.13:{version}"


def session(app: str, pkg: str) -> Any:
    from pyspark.sql import SparkSession

    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    spark = (SparkSession.builder.master("local[2]").appName(app)
             .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
             .config("spark.sql.shuffle.partitions", "2").config("spark.default.parallelism", "2")
             .config("spark.sql.session.timeZone", "UTC").config("spark.driver.memory", "1g")
             .config("spark.jars.packages", pkg).config("spark.jars.ivy", str(IVY_DIR))
             .config("spark.jars.ivySettings", str(IVY_SETTINGS)).getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def _text(b: Any) -> str | None:
    return None if b is None else bytes(b).decode()


class Driver:
    def __init__(self, spark: Any) -> None:
        self.spark = spark
        self.query: Any = None

    def _source(self, bootstrap: str, topic: str, per_trigger: int | None = None,
                options: dict[str, str] | None = None) -> Any:
        reader = (self.spark.readStream.format("kafka").option("kafka.bootstrap.servers", bootstrap)
                  .option("subscribe", topic).option("startingOffsets", "earliest").option("includeHeaders", "true"))
        if per_trigger:
            reader = reader.option("maxOffsetsPerTrigger", str(per_trigger))
        for k, v in (options or {}).items():
            reader = reader.option(k, v)
        return reader.load()

    def stream_start(self, bootstrap: str, topic: str, out: str, checkpoint: str, once: bool = False,
                     max_per_trigger: int | None = None, options: dict[str, str] | None = None) -> dict[str, Any]:
        df = self._source(bootstrap, topic, max_per_trigger, options).selectExpr(
            "partition", "offset", "CAST(key AS STRING) AS key", "CAST(value AS STRING) AS value")
        writer = df.writeStream.format("parquet").option("path", out).option("checkpointLocation", checkpoint)
        writer = writer.trigger(availableNow=True) if once else writer.trigger(processingTime="500 milliseconds")
        self.query = writer.start()
        if once:
            self.query.awaitTermination()
            return self._ended()
        return {"id": str(self.query.id)}

    def _ended(self) -> dict[str, Any]:
        q, self.query = self.query, None
        exc = q.exception()
        if exc is not None:
            raise RuntimeError(f"query failed: {exc}")
        return {"input_rows": sum(p["numInputRows"] for p in q.recentProgress)}

    def stream_wait(self, rows: int, timeout: float = 120.0) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while True:
            if self.query.exception() is not None:
                raise RuntimeError(f"query failed: {self.query.exception()}")
            seen = sum(p["numInputRows"] for p in self.query.recentProgress)
            if seen >= rows:
                return {"input_rows": seen}
            if time.monotonic() > deadline:
                raise TimeoutError(f"query took {seen} of {rows} rows in {timeout:.0f}s")
            time.sleep(0.2)

    def stream_stop(self) -> dict[str, Any]:
        self.query.stop()
        return self._ended()

    def read_files(self, out: str) -> dict[str, Any]:
        rows = self.spark.read.parquet(out).collect()
        return {"rows": [[r.partition, r.offset, r.key, r.value] for r in rows]}

    def batch_write(self, bootstrap: str, topic: str, n: int, prefix: str) -> dict[str, Any]:
        df = self.spark.range(n, numPartitions=2).selectExpr(
            "CAST(concat('k', id) AS BINARY) AS key", f"CAST(concat('{prefix}', id) AS BINARY) AS value",
            "array(named_struct('key', 'h', 'value', CAST(CAST(id AS STRING) AS BINARY))) AS headers")
        df.write.format("kafka").option("kafka.bootstrap.servers", bootstrap).option("topic", topic).save()
        return {"written": n}

    def stream_copy(self, bootstrap: str, src: str, dst: str, checkpoint: str) -> dict[str, Any]:
        df = self._source(bootstrap, src).select("key", "value", "headers")
        self.query = (df.writeStream.format("kafka").option("kafka.bootstrap.servers", bootstrap)
                      .option("topic", dst).option("checkpointLocation", checkpoint)
                      .trigger(availableNow=True).start())
        self.query.awaitTermination()
        return self._ended()

    def batch_read(self, bootstrap: str, topic: str, options: dict[str, str] | None = None) -> dict[str, Any]:
        reader = (self.spark.read.format("kafka").option("kafka.bootstrap.servers", bootstrap)
                  .option("subscribe", topic).option("includeHeaders", "true"))
        for k, v in (options or {}).items():
            reader = reader.option(k, v)
        rows = reader.load().collect()
        return {"rows": [[r.partition, r.offset, _text(r.key), _text(r.value),
                          [[h.key, _text(h.value)] for h in (r.headers or [])]] for r in rows]}


def main() -> int:
    spark = session("rokka-spark-kafka", package())
    print(json.dumps({"event": "ready", "spark": spark.version}), flush=True)
    driver = Driver(spark)
    try:
        for line in sys.stdin:
            if not line.strip():
                continue
            cmd = json.loads(line)
            op = cmd.pop("op")
            try:
                answer = {"event": "ok", "op": op, **getattr(driver, op)(**cmd)}
            except Exception as exc:  # noqa: BLE001 - reported to the test, which fails with it
                answer = {"event": "error", "op": op, "error": f"{type(exc).__name__}: {exc}"[:4000],
                          "trace": traceback.format_exc()[-4000:]}
            print(json.dumps(answer), flush=True)
    finally:
        if driver.query is not None:
            driver.query.stop()
        spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
