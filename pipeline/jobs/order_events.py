"""Example pipeline: order events -> per-category revenue per event-time window.

Theory of operation
-------------------
1. ``generate`` produces order events to a rokka topic with the project's RocketMQ client
   (SEND_BATCH_MESSAGE).  An event is JSON ``{"order_id", "category", "amount_cents",
   "event_time"}`` with the category as the message tag and the order id as its key.  Event
   times are deterministic (``start_ms + i * step_ms``), so the expected result is computable.
   The run ends with one ``TICK`` event far enough ahead to move the watermark past every
   window, so the last windows close too (a real feed does this by itself as time goes on).
2. ``start_query`` reads the topic as a stream (``format("rokka")``), parses the JSON, applies a
   watermark on the event time, drops the TICKs, and counts orders and sums revenue per
   (tumbling window, category) in **append** mode: a window is emitted once, when the watermark
   passes its end.
3. Each micro-batch (``foreachBatch``) writes its closed windows twice: to Parquet under
   ``<output>/batch_id=<n>`` (overwritten if the batch is replayed, so the Parquet data is
   exactly-once) and to the result topic as JSON messages tagged with the category (at-least-
   once; replays carry the same ``msg_id`` thanks to the sink's deterministic UNIQ_KEYs).

Run it: ``rokka pipeline run order_events --namesrv H:P --generate 10000 --output DIR`` (or
``spark-submit pipeline/jobs/order_events.py ...``); see pipeline/README.md.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import trio
from rokka.net.remoting.client import NamesrvClient, OutMessage, Producer, RemotingClient

CATEGORIES = ("BOOKS", "GAMES", "MUSIC", "TOYS")
TICK = "TICK"
RESULT_COLUMNS = ("category", "window_start", "window_end", "orders", "revenue_cents")


@dataclass(frozen=True, slots=True)
class JobConfig:
    namesrv: str
    source_topic: str = "OrderEvents"
    result_topic: str = "OrderRevenue"
    output: str = "order_revenue"
    checkpoint: str = "order_revenue_checkpoint"
    window: str = "1 minute"
    watermark: str = "30 seconds"
    max_per_trigger: int | None = None
    consumer_group: str | None = "order_revenue_job"


def order_events(n: int, *, start_ms: int, step_ms: int = 100, seed: int = 7) -> list[dict[str, object]]:
    """The ``n`` deterministic order events ``generate`` sends (before the TICK)."""
    rnd = random.Random(seed)
    return [{"order_id": f"o-{i:08d}", "category": rnd.choice(CATEGORIES), "amount_cents": rnd.randint(100, 50_000),
             "event_time": start_ms + i * step_ms} for i in range(n)]


def expected_revenue(events: Sequence[dict[str, object]], window_ms: int) -> dict[tuple[str, int], tuple[int, int]]:
    """(category, window start ms) -> (orders, revenue) computed in plain Python (for checks)."""
    out: dict[tuple[str, int], tuple[int, int]] = {}
    for e in events:
        t = int(e["event_time"])  # type: ignore[call-overload]
        k = (str(e["category"]), t - t % window_ms)
        orders, revenue = out.get(k, (0, 0))
        out[k] = (orders + 1, revenue + int(e["amount_cents"]))  # type: ignore[call-overload]
    return out


async def _send(namesrv: str, topic: str, events: Sequence[dict[str, object]], batch: int) -> None:
    async with RemotingClient() as rc:
        producer = Producer(rc, NamesrvClient(rc, namesrv), "order_events_generator")
        msgs = [OutMessage(json.dumps(e, separators=(",", ":")).encode(), tags=str(e["category"]),
                           keys=str(e["order_id"])) for e in events]
        for i in range(0, len(msgs), batch):
            await producer.send_batch(topic, msgs[i:i + batch])


def generate(namesrv: str, topic: str, n: int, *, start_ms: int | None = None, step_ms: int = 100,
             tick_after_ms: int = 10 * 60_000, batch: int = 256) -> list[dict[str, object]]:
    """Send ``n`` order events plus one TICK; returns the order events sent."""
    start = start_ms if start_ms is not None else int(time.time() * 1000) - n * step_ms
    events = order_events(n, start_ms=start, step_ms=step_ms)
    last = events[-1]["event_time"] if events else start
    tick = {"order_id": "tick", "category": TICK, "amount_cents": 0, "event_time": int(last) + tick_after_ms}  # type: ignore[call-overload]
    trio.run(_send, namesrv, topic, [*events, tick], batch)
    return events


def build_stream(spark: object, cfg: JobConfig) -> object:
    """The streaming DataFrame of closed (window, category) aggregates."""
    from pyspark.sql import functions as F  # noqa: N812
    from pyspark.sql.types import LongType, StringType, StructField, StructType

    event = StructType([StructField("order_id", StringType()), StructField("category", StringType()),
                        StructField("amount_cents", LongType()), StructField("event_time", LongType())])
    reader = (spark.readStream.format("rokka").option("namesrv", cfg.namesrv)  # type: ignore[attr-defined]
              .option("topic", cfg.source_topic).option("startingOffsets", "earliest"))
    if cfg.max_per_trigger:
        reader = reader.option("maxMessagesPerTrigger", str(cfg.max_per_trigger))
    if cfg.consumer_group:
        reader = reader.option("consumerGroup", cfg.consumer_group)
    events = (reader.load()
              .select(F.from_json(F.col("body").cast("string"), event).alias("e"))
              .select("e.*")
              .withColumn("ts", F.timestamp_millis(F.col("event_time")))
              .withWatermark("ts", cfg.watermark))
    # TICKs are aggregated like orders and dropped on output: a filter here would be pushed below
    # the watermark by the optimizer and the TICK would no longer move it.
    return (events.groupBy(F.window("ts", cfg.window), F.col("category"))
            .agg(F.count(F.lit(1)).alias("orders"), F.sum("amount_cents").alias("revenue_cents"))
            .select("category", F.col("window.start").alias("window_start"),
                    F.col("window.end").alias("window_end"), "orders", "revenue_cents"))


def write_batch(cfg: JobConfig):  # noqa: ANN201 - returns the foreachBatch callback
    """foreachBatch callback: Parquet (replay-safe) + the result topic."""
    from pyspark.sql import functions as F  # noqa: N812

    def write(df: object, batch_id: int) -> None:
        df = df.where(F.col("category") != TICK).persist()  # type: ignore[attr-defined]
        try:
            if df.isEmpty():
                return
            df.write.mode("overwrite").parquet(str(Path(cfg.output) / f"batch_id={batch_id}"))
            (df.select(F.to_json(F.struct(*RESULT_COLUMNS)).alias("body"), F.col("category").alias("tags"),
                       F.concat_ws("@", "category", F.date_format("window_start", "yyyyMMddHHmmss")).alias("keys"))
             .write.format("rokka").option("namesrv", cfg.namesrv).option("topic", cfg.result_topic)
             .mode("append").save())
        finally:
            df.unpersist()
    return write


def start_query(spark: object, cfg: JobConfig, *, trigger: str = "1 second") -> object:
    """Start the streaming query (a micro-batch every ``trigger``)."""
    return (build_stream(spark, cfg).writeStream.outputMode("append")  # type: ignore[attr-defined]
            .option("checkpointLocation", cfg.checkpoint).foreachBatch(write_batch(cfg))
            .queryName("order_revenue").trigger(processingTime=trigger).start())


def _busy(progress: dict | None) -> bool:
    """Did this micro-batch read input or change state (e.g. close windows on a watermark move)?"""
    if not progress:
        return False
    if progress.get("numInputRows", 0) > 0:
        return True
    return any(op.get("numRowsUpdated", 0) or op.get("numRowsRemoved", 0)
               for op in progress.get("stateOperators", []))


def drain(query: object, *, idle_s: float = 5.0, timeout_s: float = 3600.0) -> None:
    """Run ``query`` until the backlog is processed and the windows the watermark closed are out.

    Trigger.AvailableNow would stop before the no-data batch that emits the windows closed by the
    last watermark move; so the query runs on a processing-time trigger and is stopped once it
    has reported progress and no batch has read input or touched state for ``idle_s`` seconds.
    """
    deadline = time.monotonic() + timeout_s
    last_busy, seen = time.monotonic(), ""
    while time.monotonic() < deadline and query.isActive:  # type: ignore[attr-defined]
        for p in query.recentProgress:  # type: ignore[attr-defined]
            if p.get("timestamp", "") > seen:  # ISO-8601 UTC strings sort by time
                seen = p["timestamp"]
                if _busy(p):
                    last_busy = time.monotonic()
        status = query.status  # type: ignore[attr-defined]
        # a running trigger (e.g. the no-data batch that writes the closed windows) is not idle
        idle = seen and not status["isDataAvailable"] and not status["isTriggerActive"]
        if idle and time.monotonic() - last_busy > idle_s:
            break
        time.sleep(0.5)
    query.stop()  # type: ignore[attr-defined]
    if query.exception() is not None:  # type: ignore[attr-defined]
        raise RuntimeError(f"order_revenue query failed: {query.exception()}")  # type: ignore[attr-defined]


def spark_session(master: str = "local[2]") -> object:
    """A SparkSession with the rokka format registered (reuses an active one, e.g. spark-submit's)."""
    import os

    from pyspark.sql import SparkSession
    from rokka.pipeline.source import register

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    spark = (SparkSession.builder.master(master).appName("rokka-order-events")
             .config("spark.ui.enabled", "false").config("spark.sql.shuffle.partitions", "4")
             .config("spark.sql.session.timeZone", "UTC").getOrCreate())
    spark.sparkContext.setLogLevel("WARN")
    register(spark)
    return spark


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="rokka pipeline run order_events", description=__doc__.split("\n")[0])
    p.add_argument("--namesrv", required=True, help="rokka name server host:port")
    p.add_argument("--source-topic", default="OrderEvents")
    p.add_argument("--result-topic", default="OrderRevenue")
    p.add_argument("--output", default="order_revenue", help="Parquet output directory")
    p.add_argument("--checkpoint", default=None, help="checkpoint dir (default <output>_checkpoint)")
    p.add_argument("--generate", type=int, default=0, metavar="N", help="first send N generated order events")
    p.add_argument("--window", default="1 minute")
    p.add_argument("--watermark", default="30 seconds")
    p.add_argument("--max-per-trigger", type=int, default=None)
    p.add_argument("--follow", action="store_true", help="keep running instead of stopping once the "
                   "backlog is processed")
    p.add_argument("--idle-seconds", type=float, default=5.0, help="without --follow: stop after this long "
                   "without input or closed windows")
    p.add_argument("--master", default="local[2]")
    a = p.parse_args(argv)
    cfg = JobConfig(namesrv=a.namesrv, source_topic=a.source_topic, result_topic=a.result_topic, output=a.output,
                    checkpoint=a.checkpoint or f"{a.output.rstrip('/')}_checkpoint", window=a.window,
                    watermark=a.watermark, max_per_trigger=a.max_per_trigger)
    if a.generate:
        generate(cfg.namesrv, cfg.source_topic, a.generate)
        print(f"sent {a.generate} order events (+1 TICK) to {cfg.source_topic}", flush=True)
    spark = spark_session(a.master)
    query = start_query(spark, cfg)
    if a.follow:
        query.awaitTermination()  # type: ignore[attr-defined]
    else:
        drain(query, idle_s=a.idle_seconds)
    if not Path(cfg.output).exists():
        print("no window closed yet (no output)", flush=True)
        return 0
    rows = spark.read.parquet(cfg.output).orderBy("window_start", "category").collect()  # type: ignore[attr-defined]
    for r in rows[-20:]:
        print(f"{r.window_start:%Y-%m-%d %H:%M:%S} {r.category:<6} orders={r.orders:<6} "
              f"revenue={r.revenue_cents / 100:.2f}")
    print(f"{len(rows)} window results in {cfg.output} and topic {cfg.result_topic}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
