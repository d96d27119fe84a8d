"""Spark connector throughput: batch read and batch write of ``format("rokka")`` (msg/s).

Starts ``rokka serve`` as a subprocess (interop/harness.py), fills an 8-queue topic with N
messages of 100 B (project's trio client, SEND_BATCH_MESSAGE), then with a ``local[2]`` Spark:

* read: ``spark.read.format("rokka")`` of the whole topic, aggregated (count and total body
  length, checked against what was sent);
* write: ``spark.range(N)`` -> 100 B bodies -> ``df.write.format("rokka")`` (2 partitions).

The same two operations then run through Spark's own Kafka connector (spark-sql-kafka-0-10, from the
Ivy cache ``interop/install.sh`` fills: ``interop/spark_kafka/``) against rokka's Kafka port, on the
same topic and data: ``spark.read.format("kafka")`` of TOPIC_IN (count and total value length) and
``df.write.format("kafka")`` into a third topic.  Without the pre-fetched connector those rows are
skipped with a note.

Each operation runs ``--repeat`` times (default 3, after one warm-up read) and the median is
reported, with every run listed: the machine is often shared, so single runs are noisy.  Beside
msg/s, the rokka server's CPU per message (on-CPU time of its process, ``lib/cpu.py``, over
the run) is reported: it is less disturbed by other load than throughput.

``python -m benchmarks.bench_spark [--quick]``: 1M messages (quick: 100k).  Needs the
``[pipeline]`` extra (pyspark, pyarrow) and Java 17.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import structlog
import trio
from rokka.net.remoting.client import Admin, NamesrvClient, OutMessage, Producer, RemotingClient

from benchmarks.lib.cpu import read as _cpu_s

TOPIC_IN = "BenchSparkIn"
TOPIC_OUT = "BenchSparkOut"
TOPIC_KAFKA_OUT = "BenchSparkKafkaOut"
QUEUES = 8
BODY = 100


async def _fill(namesrv: str, broker: str, n: int) -> None:
    async with RemotingClient() as rc:
        ns = NamesrvClient(rc, namesrv)
        admin = Admin(rc, ns)
        for topic in (TOPIC_IN, TOPIC_OUT, TOPIC_KAFKA_OUT):
            await admin.create_topic(broker, topic, read_queue_nums=QUEUES, write_queue_nums=QUEUES)
        for topic in (TOPIC_IN, TOPIC_OUT, TOPIC_KAFKA_OUT):
            while await ns.get_route(topic) is None:  # noqa: ASYNC110 - the broker registers asynchronously
                await trio.sleep(0.05)
        producer = Producer(rc, ns, "bench_spark_pg")
        body = b"x" * BODY
        batch = [OutMessage(body, tags="B") for _ in range(512)]

        async def worker(queue: int, count: int) -> None:
            for i in range(0, count, 512):
                await producer.send_batch(TOPIC_IN, batch[:min(512, count - i)], queue=queue)

        async with trio.open_nursery() as nursery:
            for q in range(QUEUES):
                nursery.start_soon(worker, q, n // QUEUES + (1 if q < n % QUEUES else 0))


def _kafka_connector() -> dict[str, str]:
    """spark.jars.* settings for Spark's Kafka connector from the pre-fetched Ivy cache ({} if absent)."""
    from interop.spark_kafka.driver import IVY_DIR, IVY_SETTINGS, VERSION_FILE, package

    if not VERSION_FILE.exists():
        return {}
    return {"spark.jars.packages": package(), "spark.jars.ivy": str(IVY_DIR),
            "spark.jars.ivySettings": str(IVY_SETTINGS)}


def _session(extra: dict[str, str]):  # noqa: ANN202 - a SparkSession
    from pyspark.sql import SparkSession
    from rokka.pipeline.source import register

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = (SparkSession.builder.master("local[2]").appName("rokka-bench")
               .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
               .config("spark.sql.shuffle.partitions", "2").config("spark.driver.memory", "4g"))
    for k, v in extra.items():
        builder = builder.config(k, v)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    register(spark)
    return spark


class Timer:
    """Runs of one operation: wall seconds and the rokka server's CPU seconds of each."""

    def __init__(self, pid: int) -> None:
        self.pid, self.runs, self.cpu = pid, [], []

    def run(self, fn) -> None:  # noqa: ANN001 - a callable doing one run
        t0, c0 = time.perf_counter(), _cpu_s(self.pid)
        fn()
        self.runs.append(time.perf_counter() - t0)
        self.cpu.append(_cpu_s(self.pid) - c0)


def _operations(spark, srv, n: int, repeat: int, kafka: bool) -> tuple[dict[str, Timer], int]:  # noqa: ANN001
    from pyspark.sql import functions as F  # noqa: N812

    def reader(topic: str):  # noqa: ANN202 - a fresh DataFrameReader (option() mutates it)
        return spark.read.format("rokka").option("namesrv", srv.namesrv).option("topic", topic)

    def kafka_reader():  # noqa: ANN202
        return spark.read.format("kafka").option("kafka.bootstrap.servers", srv.kafka).option("subscribe", TOPIC_IN)

    def read_rokka() -> None:
        total = reader(TOPIC_IN).load().agg(F.count(F.lit(1)).alias("n"), F.sum(F.length("body")).alias("b")).first()
        assert total is not None and (total.n, total.b) == (n, n * BODY), total

    def read_kafka() -> None:
        total = kafka_reader().load().agg(F.count(F.lit(1)).alias("n"), F.sum(F.length("value")).alias("b")).first()
        assert total is not None and (total.n, total.b) == (n, n * BODY), total

    out = spark.range(n, numPartitions=2).select(
        F.concat(F.lit("y" * (BODY - 12)), F.lpad(F.col("id").cast("string"), 12, "0")).cast("binary").alias("body"))

    def write_rokka() -> None:
        out.write.format("rokka").option("namesrv", srv.namesrv).option("topic", TOPIC_OUT).option(
            "batchSize", "512").mode("append").save()

    def write_kafka() -> None:
        out.withColumnRenamed("body", "value").write.format("kafka").option(
            "kafka.bootstrap.servers", srv.kafka).option("topic", TOPIC_KAFKA_OUT).save()

    reader(TOPIC_IN).option("endingOffsets", "earliest").load().count()  # warm-up (workers, routes)
    if kafka:
        (spark.read.format("kafka").option("kafka.bootstrap.servers", srv.kafka)   # warm-up: one record
         .option("assign", json.dumps({TOPIC_IN: [0]})).option("endingOffsets", json.dumps({TOPIC_IN: {"0": 1}}))
         .load().count())
    ops = {"batch read  rokka source (count + sum(len))": read_rokka,
           "batch read  Kafka source (count + sum(len))": read_kafka if kafka else None,
           "batch write rokka sink (range -> rokka)": write_rokka,
           "batch write Kafka sink (range -> kafka)": write_kafka if kafka else None}
    ops = {name: fn for name, fn in ops.items() if fn is not None}
    timers = {name: Timer(srv.proc.pid) for name in ops}
    for _ in range(repeat):
        for name, fn in ops.items():
            timers[name].run(fn)
    return timers, reader(TOPIC_OUT).load().count()


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.bench_spark")
    ap.add_argument("--quick", action="store_true", help="100k messages instead of 1M")
    ap.add_argument("--messages", type=int, default=None)
    ap.add_argument("--repeat", type=int, default=3, help="runs of each operation (the median is reported)")
    args = ap.parse_args(argv)
    n = args.messages or (100_000 if args.quick else 1_000_000)
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(40))
    from interop.harness import start_serve

    srv = start_serve(Path(tempfile.mkdtemp(prefix="rokka-bench-spark-")), log_format="json")
    connector = _kafka_connector()
    try:
        t0 = time.perf_counter()
        trio.run(_fill, srv.namesrv, srv.broker, n)
        fill_s = time.perf_counter() - t0
        spark = _session(connector)
        timers, check = _operations(spark, srv, n, args.repeat, bool(connector))
        spark.stop()
    finally:
        srv.stop_clean()
    print(f"spark benchmark: {n:,} messages of {BODY} B, {QUEUES} queues, local[2] "
          f"(fill with the trio client: {n / fill_s:,.0f} msg/s; server CPU = rokka's process)")
    if not connector:
        print("(Kafka connector rows skipped: interop/spark_kafka/.ivy is not filled; run interop/install.sh)")
    head = f"operation (median of {args.repeat})"
    print(f"{head:<46}{'seconds':>9}{'msg/s':>11}{'srv CPU us/msg':>16}   all runs (msg/s)")
    for name, t in timers.items():
        med = statistics.median(t.runs)
        cpu_us = statistics.median(t.cpu) / n * 1e6
        print(f"{name:<46}{med:>9.2f}{n / med:>11,.0f}{cpu_us:>16.2f}   {', '.join(f'{n / r:,.0f}' for r in t.runs)}")
    if check != n * args.repeat:
        print(f"WARNING: read back {check} of {n * args.repeat} written messages")


if __name__ == "__main__":
    main()
