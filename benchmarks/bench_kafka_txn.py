"""Transactional Kafka produce: server CPU per record with and without transactions, same run (issue 20).

Run: ``python -m benchmarks.bench_kafka_txn [--quick] [--rounds N] [--txn RECORDS]``

Theory of operation
-------------------
A transactional producer (Kafka Streams' exactly_once_v2, any consume-transform-produce job) is a shape
of its own on rokka's side: its records are stored as transaction halves, then copied to their
partitions when the transaction commits (``gateway/kafka/txn/coordinator.py``), where a plain producer's
records are stored once.  Per round a fresh ``rokka serve`` takes, from one confluent-kafka producer
process (``lib/kafka_role.py``, linger.ms 5), text-keyed 100 B records to a 4-partition topic: first
without transactions (acks=all, as a transactional producer's are), then in transactions of ``--txn``
records; then a read_committed consumer reads the transactional topic back and must count every
committed record.  Reported: msg/s (client-timed) and the broker's on-CPU time per record
(``lib/cpu.py``, every thread), medians over the rounds.  Loopback only; every wait bounded.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from benchmarks import bench_kafka as bk
from benchmarks.lib import procs
from benchmarks.lib.cpu import read as server_cpu

ROWS = (("no transaction", 0), ("transactions", None))
MAX_S = 120.0


def one_round(wd: Path, count: int, txn: int) -> dict[str, tuple[float, float]]:
    """{row: (msg/s, server CPU us per record)} against a fresh rokka."""
    out: dict[str, tuple[float, float]] = {}
    rokka = procs.start_rokka(wd / "rokka")
    try:
        assert rokka.proc is not None
        pid, bs = rokka.proc.pid, rokka.kafka
        bk.role({"role": "create", "bootstrap": bs, "topics": ["plain", "txn"], "partitions": bk.PARTITIONS}, wd, 90)
        for name, size in ROWS:
            topic = "plain" if size == 0 else "txn"
            c0 = server_cpu(pid)
            r = bk.role({"role": "produce", "bootstrap": bs, "topic": topic, "size": 100, "count": count,
                         "acks": "all", "shape": "text-key", "txn": txn if size is None else 0, "max_s": MAX_S},
                        wd, MAX_S + 60)
            cpu = server_cpu(pid) - c0
            if r["errors"] or r["messages"] < count:
                print(f"  {name}: {r['messages']}/{count} records {r['errors']}")
            out[name] = (r["messages"] / r["seconds"], cpu / max(r["messages"], 1) * 1e6)
            print(f"  {name:15} {out[name][0]:>10,.0f} msg/s  server CPU {out[name][1]:6.2f} us/rec", flush=True)
        got = bk.role({"role": "consume", "bootstrap": bs, "topic": "txn", "partitions": bk.PARTITIONS,
                       "count": count + 1, "max_s": 60}, wd, 120)
        if got["messages"] != count + 1:
            print(f"  read_committed consumer: {got['messages']} of {count + 1} committed records")
    finally:
        rokka.stop()
        shutil.rmtree(wd / "rokka", ignore_errors=True)
    return out


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="bench_kafka_txn", description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="fewer records (< 1 minute)")
    ap.add_argument("--rounds", type=int, default=None, help="rounds (default 1 quick, 3 full); medians")
    ap.add_argument("--txn", type=int, default=10_000, help="records a transaction")
    args = ap.parse_args(argv)
    count = 30_000 if args.quick else 100_000
    rounds = max(1, args.rounds or (1 if args.quick else 3))
    wd = Path(tempfile.mkdtemp(prefix="rokka-bench-txn-"))
    t0 = time.monotonic()
    runs = []
    print(f"{count} text-keyed 100 B records a row, transactions of {args.txn}, {rounds} round(s)", flush=True)
    try:
        for _ in range(rounds):
            time.sleep(bk.SETTLE_S)
            runs.append(one_round(wd, count, args.txn))
        rows = []
        for name, _ in ROWS:
            rate = statistics.median(r[name][0] for r in runs)
            cpu = statistics.median(r[name][1] for r in runs)
            rows.append([name, procs.fmt(rate), f"{cpu:.2f}"])
        print()
        print(procs.table(["producer (text key, 100 B)", "rokka msg/s", "rokka CPU us/rec"], rows))
        print(f"\n({time.monotonic() - t0:.0f} s; {rounds} round(s){', medians' if rounds > 1 else ''}; server CPU = "
              "on-CPU time of the broker's threads / records)")
    finally:
        shutil.rmtree(wd, ignore_errors=True)


if __name__ == "__main__":
    main()
