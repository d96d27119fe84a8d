"""Diagnostic: repeated Kafka produce rounds against one rokka, with the server's CPU split per round.

Run: ``python -m benchmarks.kafka_produce_rounds [--rounds 8] [--count 100000] [--size 1024] [--data-dir DIR]``

Starts ``rokka serve`` (ASYNC_FLUSH), then runs ``--rounds`` confluent-kafka produce rounds (a new
4-partition topic each, acks alternating 1 / all) and prints per round: msg/s, and the server
process's user and system CPU seconds (``/proc/<pid>/stat``) -- to tell the server's own work from
the kernel's page-cache work as the CommitLog grows (see BENCHMARKS.md, Kafka section).
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
from pathlib import Path

from benchmarks import bench_kafka
from benchmarks.lib import procs


def _cpu(pid: int) -> tuple[float, float]:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[11]) / 100, int(fields[12]) / 100     # utime, stime (clock ticks of 10 ms)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.kafka_produce_rounds")
    ap.add_argument("--rounds", type=int, default=8)
    ap.add_argument("--count", type=int, default=100_000)
    ap.add_argument("--size", type=int, default=1024)
    ap.add_argument("--data-dir", type=Path, default=None, help="parent of the store (default: a temp dir)")
    args = ap.parse_args(argv)
    wd = Path(tempfile.mkdtemp(prefix="rokka-rounds-", dir=args.data_dir))
    server = procs.start_rokka(wd / "rokka")
    try:
        pid = server.proc.pid
        print(f"{'round':>5} {'acks':>4} {'msg/s':>10} {'user s':>7} {'sys s':>6}")
        for k in range(args.rounds):
            topic, acks = f"rounds-{k}", ("1" if k % 2 == 0 else "all")
            bench_kafka.role({"role": "create", "bootstrap": server.kafka, "topics": [topic], "partitions": 4},
                             wd, 90)
            u0, s0 = _cpu(pid)
            res = bench_kafka.role({"role": "produce", "bootstrap": server.kafka, "topic": topic,
                                    "size": args.size, "count": args.count, "acks": acks, "max_s": 30}, wd, 90)
            u1, s1 = _cpu(pid)
            print(f"{k:>5} {acks:>4} {res['messages'] / res['seconds']:>10,.0f} {u1 - u0:>7.2f} {s1 - s0:>6.2f}",
                  flush=True)
    finally:
        server.stop()
        shutil.rmtree(wd, ignore_errors=True)


if __name__ == "__main__":
    main()
