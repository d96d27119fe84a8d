"""``rokka serve --brokers N``: Kafka produce / consume rates and server CPU per record for N = 1, 2, 4.

Run: ``python -m benchmarks.bench_cluster [--quick] [--brokers 1,2,4|auto] [--producers P] [--consumers C]
[--partitions K] [--shapes plain,key+2-headers] [--sizes 100,1024] [--tansu] [--rounds R] [--scale X]``

Theory of operation
-------------------
For each N a fresh ``rokka serve --brokers N`` (N = 1 is today's single process; ``auto`` = this
machine's cores) is started on port 0 (``interop/harness.start_serve``); one topic of ``--partitions``
partitions per row is created with CreateTopics (spread over the N brokers: 8 -> 8, 4+4, 2+2+2+2).
With ``--tansu`` the Tansu broker (``bench_kafka.start_tansu``, memory storage) runs the same rows with
the same clients in the same run, one broker at a time, in alternating order over ``--rounds``.
Then, for each value size and record shape (``benchmarks.lib.kafka_role.SHAPES``):

* produce: ``--producers`` confluent-kafka processes (``benchmarks/lib/kafka_role``, acks=1, null
  keys spread by librdkafka, keyed shapes by key hash) run at once, each ``count / P`` records;
  msg/s = all records / the slowest producer's time;
* consume: ``--consumers`` confluent-kafka processes read the topic from the beginning at once, the
  partitions dealt round-robin between them, each until it has every record the producers' delivery
  reports put in its partitions; msg/s = all records / the slowest consumer's time.

Server CPU is the on-CPU time from ``lib/cpu.py`` summed over the server's processes (the
supervisor and every child for N > 1; Tansu's one process), before and after each row, divided by the
records: it is less disturbed than msg/s by other load on a shared machine.  The defaults (2
producers, 1 consumer, plain records) fit the project's 2-core machine; a 16-core machine row uses
e.g. ``--brokers 1,auto --tansu --producers 6 --consumers 6 --partitions 32`` (BENCHMARKS.md; on a machine
without a registry through ``benchmarks/multicore.sh``).
Loopback only; every wait bounded.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any

from rokka.gateway.supervisor import resolve_brokers

from benchmarks import bench_kafka as bk
from benchmarks.lib import procs
from benchmarks.lib.cpu import read as cpu_of
from benchmarks.lib.kafka_role import SHAPES

harness = procs.harness
PARTITIONS = 8
COUNTS = {100: 200_000, 1024: 80_000}
QUICK_COUNTS = {100: 40_000, 1024: 15_000}


def server_pids(srv: Any, n: int) -> list[int]:
    assert srv.proc is not None
    return [srv.proc.pid] if n == 1 else [srv.proc.pid, *harness.cluster_children(srv).values()]


def parallel(params: list[dict[str, Any]], wd: Path, timeout: float) -> list[dict[str, Any]]:
    out: list[dict[str, Any] | BaseException] = [RuntimeError("not run")] * len(params)

    def run(i: int) -> None:
        try:
            out[i] = bk.role(params[i], wd, timeout)
        except BaseException as exc:  # noqa: BLE001 - reported below
            out[i] = exc

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(params))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout + 30)
    for r in out:
        if isinstance(r, BaseException):
            raise r
    return out  # type: ignore[return-value]


def deal(partitions: int, consumers: int) -> list[list[int]]:
    """Partitions 0..K-1 dealt round-robin to ``consumers`` readers (none gets an empty list)."""
    hands = [list(range(i, partitions, consumers)) for i in range(min(consumers, partitions))]
    return [h for h in hands if h]


def rows_for(label: str, bs: str, pids: list[int], opts: argparse.Namespace, counts: dict[int, int],
             wd: Path, max_s: float) -> list[list[str]]:
    """Every (size, shape) produce + consume row against one running broker set at ``bs``."""
    rows: list[list[str]] = []
    safe = "".join(c if c.isalnum() else "-" for c in label)
    topics = {(size, shape): f"cluster-{safe}-{size}-{shape}".replace("+", "_")
              for size in counts for shape in opts.shapes}
    bk.role({"role": "create", "bootstrap": bs, "topics": list(topics.values()), "partitions": opts.partitions},
            wd, 120)
    for (size, shape), topic in topics.items():
        count = int(counts[size] * opts.scale)
        c0 = cpu_of(pids)
        res = parallel([{"role": "produce", "bootstrap": bs, "topic": topic, "size": size, "shape": shape,
                         "count": count // opts.producers, "acks": "1", "max_s": max_s}
                        for _ in range(opts.producers)], wd, max_s + 60)
        cpu = cpu_of(pids) - c0
        msgs = sum(int(r["messages"]) for r in res)
        secs = max(float(r["seconds"]) for r in res)
        rows.append([label, f"produce {size} B {shape} x{opts.producers}", procs.fmt(msgs / secs if secs else 0),
                     procs.fmt(cpu / max(msgs, 1) * 1e6, 2)])
        landed: dict[int, int] = {}        # partition -> records there (the producers' delivery reports)
        for r in res:
            for part, n in r["partitions"].items():
                landed[int(part)] = landed.get(int(part), 0) + int(n)
        hands = deal(opts.partitions, opts.consumers)
        wants = [sum(landed.get(part, 0) for part in hand) for hand in hands]
        c0 = cpu_of(pids)
        res = parallel([{"role": "consume", "bootstrap": bs, "topic": topic, "partition_list": hand,
                         "partitions": opts.partitions, "count": want, "max_s": max_s, "group": f"b-{i}"}
                        for i, (hand, want) in enumerate(zip(hands, wants, strict=True)) if want], wd, max_s + 60)
        cpu = cpu_of(pids) - c0
        got = sum(int(r["messages"]) for r in res)
        if got < sum(wants):
            print(f"  {label}: consume {size} B {shape}: read {got:,} of {sum(wants):,} records", flush=True)
        secs = max(float(r["seconds"]) for r in res)
        rows.append([label, f"consume {size} B {shape} x{len(res)}", procs.fmt(got / secs if secs else 0),
                     procs.fmt(cpu / max(got, 1) * 1e6, 2)])
        print(f"  {label}: {rows[-2]} {rows[-1]}", flush=True)
    return rows


def rokka_rows(n: int, opts: argparse.Namespace, counts: dict[int, int], wd: Path, max_s: float,
               tag: str) -> list[list[str]]:
    srv = harness.start_serve(wd / f"n{n}-{tag}", log_format="json", brokers=n)
    try:
        return rows_for(f"rokka N={n}", srv.kafka, server_pids(srv, n), opts, counts, wd, max_s)
    finally:
        srv.stop_clean()
        shutil.rmtree(wd / f"n{n}-{tag}", ignore_errors=True)


def tansu_rows(opts: argparse.Namespace, counts: dict[int, int], wd: Path, max_s: float) -> list[list[str]]:
    srv, bs = bk.start_tansu(wd)
    try:
        assert srv.proc is not None
        return rows_for("Tansu", bs, [srv.proc.pid], opts, counts, wd, max_s)
    finally:
        srv.stop()


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="bench_cluster", description="rokka serve --brokers N: Kafka rows for N")
    ap.add_argument("--quick", action="store_true", help="short run")
    ap.add_argument("--brokers", default="1,2,4", help="comma-separated N values, or auto (default 1,2,4)")
    ap.add_argument("--producers", type=int, default=2, help="producer processes at once (default 2)")
    ap.add_argument("--consumers", type=int, default=1, help="consumer processes at once (default 1)")
    ap.add_argument("--partitions", type=int, default=PARTITIONS, help=f"partitions a topic (default {PARTITIONS})")
    ap.add_argument("--shapes", default="plain", help=f"record shapes, comma-separated, of {', '.join(SHAPES)}")
    ap.add_argument("--sizes", default="100,1024", help="value sizes in bytes (100 and/or 1024)")
    ap.add_argument("--scale", type=float, default=1.0, help="records per row times this")
    ap.add_argument("--tansu", action="store_true", help="the same rows against Tansu, in the same run")
    ap.add_argument("--rounds", type=int, default=1, help="rounds, broker order alternating (default 1)")
    opts, _ = ap.parse_known_args(argv)
    opts.shapes = [x.strip() for x in opts.shapes.split(",") if x.strip()]
    unknown = [x for x in opts.shapes if x not in SHAPES]
    if unknown:
        ap.error(f"unknown shapes {unknown}: choose from {', '.join(SHAPES)}")
    opts.producers, opts.consumers = max(1, opts.producers), max(1, opts.consumers)
    table = QUICK_COUNTS if opts.quick else COUNTS
    counts = {int(x): table[int(x)] for x in opts.sizes.split(",") if x.strip()}
    ns = [resolve_brokers(x) for x in opts.brokers.split(",") if x.strip()]
    max_s = 40.0 if opts.quick else 120.0
    wd = Path(tempfile.mkdtemp(prefix="rokka-bench-cluster-"))
    rows: list[list[str]] = []
    try:
        for rnd in range(max(1, opts.rounds)):
            plan: list[int | None] = [*ns, None] if opts.tansu else list(ns)    # None: Tansu
            for target in (plan if rnd % 2 == 0 else plan[::-1]):
                print(f"round {rnd + 1}: {'Tansu' if target is None else f'rokka N={target}'}", flush=True)
                rows += (tansu_rows(opts, counts, wd, max_s) if target is None
                         else rokka_rows(target, opts, counts, wd, max_s, f"r{rnd}"))
    finally:
        shutil.rmtree(wd, ignore_errors=True)
    print(f"\nKafka over `rokka serve --brokers N`{' and Tansu (memory)' if opts.tansu else ''}, "
          f"{opts.partitions} partitions, confluent-kafka, acks=1, {os.cpu_count()} cores; "
          f"server CPU summed over the supervisor and its children\n")
    print(procs.table(["broker", "row", "msg/s", "server CPU us/msg"], rows))


if __name__ == "__main__":
    main(sys.argv[1:])
