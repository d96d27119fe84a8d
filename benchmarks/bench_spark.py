"""Spark connector throughput: batch read and batch write of ``format("rokka")`` (msg/s).

Starts ``rokka serve`` as a subprocess (interop/harness.py), fills an 8-queue topic with N
messages of 100 B (project's trio client, SEND_BATCH_MESSAGE), then with a ``local[2]`` Spark:

* read: ``spark.read.format("rokka")`` of the whole topic, aggregated (count and total body
  length, checked against what was sent);
* write: ``spark.range(N)`` -> 100 B bodies -> ``df.write.format("rokka")`` (2 partitions).

Each operation runs ``--repeat`` times (default 3, after one warm-up read) and the median is
reported, with every run listed: the machine is often shared, so single runs are noisy.

``python -m benchmarks.bench_spark [--quick]``: 1M messages (quick: 100k).  Needs the
``[pipeline]`` extra (pyspark, pyarrow) and Java 17.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import structlog
import trio
from rokka.gateway.rocketmq.client import Admin, NamesrvClient, OutMessage, Producer, RemotingClient

TOPIC_IN = "BenchSparkIn"
TOPIC_OUT = "BenchSparkOut"
QUEUES = 8
BODY = 100


async def _fill(namesrv: str, broker: str, n: int) -> None:
    async with RemotingClient() as rc:
        ns = NamesrvClient(rc, namesrv)
        admin = Admin(rc, ns)
        for topic in (TOPIC_IN, TOPIC_OUT):
            await admin.create_topic(broker, topic, read_queue_nums=QUEUES, write_queue_nums=QUEUES)
        while await ns.get_route(TOPIC_IN) is None or await ns.get_route(TOPIC_OUT) is None:
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


def _session():  # noqa: ANN202 - a SparkSession
    from pyspark.sql import SparkSession
    from rokka.pipeline.source import register

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    spark = (SparkSession.builder.master("local[2]").appName("rokka-bench")
             .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
             .config("spark.sql.shuffle.partitions", "2").config("spark.driver.memory", "4g").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    register(spark)
    return spark


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
    try:
        t0 = time.perf_counter()
        trio.run(_fill, srv.namesrv, srv.broker, n)
        fill_s = time.perf_counter() - t0
        spark = _session()
        def reader(topic: str):  # noqa: ANN202 - a fresh DataFrameReader (option() mutates it)
            return spark.read.format("rokka").option("namesrv", srv.namesrv).option("topic", topic)

        reader(TOPIC_IN).option("endingOffsets", "earliest").load().count()  # warm-up (workers, routes)
        from pyspark.sql import functions as F  # noqa: N812

        read_runs = []
        for _ in range(args.repeat):
            t0 = time.perf_counter()
            total = reader(TOPIC_IN).load().agg(F.count(F.lit(1)).alias("n"),
                                                F.sum(F.length("body")).alias("b")).first()
            read_runs.append(time.perf_counter() - t0)
            assert total is not None and (total.n, total.b) == (n, n * BODY), total

        out = spark.range(n, numPartitions=2).select(
            F.concat(F.lit("y" * (BODY - 12)), F.lpad(F.col("id").cast("string"), 12, "0")).cast("binary").alias("body"))
        write_runs = []
        for _ in range(args.repeat):
            t0 = time.perf_counter()
            out.write.format("rokka").option("namesrv", srv.namesrv).option("topic", TOPIC_OUT).option(
                "batchSize", "512").mode("append").save()
            write_runs.append(time.perf_counter() - t0)
        check = reader(TOPIC_OUT).load().count()
        spark.stop()
    finally:
        srv.stop_clean()
    print(f"spark benchmark: {n:,} messages of {BODY} B, {QUEUES} queues, local[2] "
          f"(fill with the trio client: {n / fill_s:,.0f} msg/s)")
    head = f"operation (median of {args.repeat})"
    print(f"{head:<38}{'seconds':>9}{'msg/s':>11}   all runs (msg/s)")
    for name, runs in (("batch read  (count + sum(len(body)))", read_runs),
                       ("batch write (range -> format rokka)", write_runs)):
        med = statistics.median(runs)
        print(f"{name:<38}{med:>9.2f}{n / med:>11,.0f}   {', '.join(f'{n / r:,.0f}' for r in runs)}")
    if check != n * args.repeat:
        print(f"WARNING: read back {check} of {n * args.repeat} written messages")


if __name__ == "__main__":
    main()
