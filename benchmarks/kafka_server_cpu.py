"""Server CPU per message, rokka vs. Tansu: the confluent-kafka rows of ``bench_kafka`` with no kcat rows between.

Run: ``python -m benchmarks.kafka_server_cpu [--rounds N]``

Theory of operation
-------------------
``bench_kafka`` compares throughput, which on a 2-core machine depends on how much CPU the broker
leaves to the client.  This tool measures that directly: for each confluent-kafka row of the full
plan (produce 100 B / 1 KiB with acks=1 and acks=all, consume from the beginning) it reads the
broker process's on-CPU time (all threads, ``lib/cpu.py``) before and after the client
process and prints msg/s (client-timed, as in the benchmark) and server CPU microseconds per
message.  Tansu then rokka, each fresh, for ``--rounds`` rounds.  Loopback only; every wait bounded.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
from pathlib import Path

from benchmarks import bench_kafka as bk
from benchmarks.lib import procs
from benchmarks.lib.cpu import read as server_cpu


def rows(name: str, bs: str, pid: int, wd: Path) -> None:
    plan = bk.FULL
    topics = {(s, a): f"cpu-{s}-{a}" for s in plan.counts for a in ("1", "all")}
    bk.role({"role": "create", "bootstrap": bs, "topics": list(topics.values()), "partitions": bk.PARTITIONS},
            wd, 90)

    def report(label: str, r: dict[str, float], cpu: float, count: int) -> None:
        rate = r["messages"] / r["seconds"] if r["seconds"] else 0.0
        print(f"{name:6} {label:22} {rate:>11,.0f} msg/s   server CPU {cpu:5.2f} s = "
              f"{cpu / count * 1e6:5.2f} us/msg", flush=True)

    for size, count in plan.counts.items():
        for acks in ("1", "all"):
            c0 = server_cpu(pid)
            r = bk.role({"role": "produce", "bootstrap": bs, "topic": topics[(size, acks)], "size": size,
                         "count": count, "acks": acks, "max_s": plan.max_s}, wd, plan.max_s + 60)
            report(f"produce {size} B acks={acks}", r, server_cpu(pid) - c0, count)
        c0 = server_cpu(pid)
        r = bk.role({"role": "consume", "bootstrap": bs, "topic": topics[(size, "1")],
                     "partitions": bk.PARTITIONS, "count": count, "max_s": plan.max_s}, wd, plan.max_s + 60)
        report(f"consume {size} B", r, server_cpu(pid) - c0, count)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.kafka_server_cpu")
    ap.add_argument("--rounds", type=int, default=1)
    args = ap.parse_args(argv)
    wd = Path(tempfile.mkdtemp(prefix="rokka-server-cpu-"))
    try:
        for _ in range(max(1, args.rounds)):
            tansu, bs = bk.start_tansu(wd)
            try:
                rows("tansu", bs, tansu.proc.pid, wd)
            finally:
                tansu.stop()
            rokka = procs.start_rokka(wd / "rokka")
            try:
                assert rokka.proc is not None
                rows("rokka", rokka.kafka, rokka.proc.pid, wd)
            finally:
                rokka.stop()
                shutil.rmtree(wd / "rokka", ignore_errors=True)
    finally:
        shutil.rmtree(wd, ignore_errors=True)


if __name__ == "__main__":
    main()
