"""``rokka serve --brokers N``: Kafka produce / consume rates and server CPU per record for N = 1, 2, 4.

Run: ``python -m benchmarks.bench_cluster [--quick] [--brokers 1,2,4] [--producers P]``

Theory of operation
-------------------
For each N a fresh ``rokka serve --brokers N`` (N = 1 is today's single process) is started on port
0 (``interop/harness.start_serve``); one topic of ``PARTITIONS`` partitions is created with
CreateTopics (spread over the N brokers: 8, 4+4, 2+2+2+2).  Then, for 100 B and 1 KiB values:

* produce: ``--producers`` confluent-kafka processes (``benchmarks/lib/kafka_role``, acks=1, null
  keys so librdkafka spreads records over every partition) run at once, each ``count / P`` records;
  msg/s = all records / the slowest producer's time;
* consume: one confluent-kafka process reads the topic from the beginning (all partitions).

Server CPU is user+system time from ``/proc/PID/stat`` summed over the server's processes (the
supervisor and every child for N > 1), before and after each row, divided by the records: it is
less disturbed than msg/s by other load on a shared machine.  Loopback only; every wait bounded.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any

from benchmarks import bench_kafka as bk
from benchmarks.lib import procs

harness = procs.harness
PARTITIONS = 8
TICKS = 100
COUNTS = {100: 200_000, 1024: 80_000}
QUICK_COUNTS = {100: 40_000, 1024: 15_000}


def cpu_of(pids: list[int]) -> float:
    total = 0.0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += (int(fields[11]) + int(fields[12])) / TICKS
    return total


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


def rows_for(n: int, counts: dict[int, int], producers: int, wd: Path, max_s: float) -> list[list[str]]:
    srv = harness.start_serve(wd / f"n{n}", log_format="json", brokers=n)
    rows: list[list[str]] = []
    try:
        pids = server_pids(srv, n)
        bs = srv.kafka
        topics = {size: f"cluster-{n}-{size}" for size in counts}
        bk.role({"role": "create", "bootstrap": bs, "topics": list(topics.values()), "partitions": PARTITIONS},
                wd, 90)
        for size, count in counts.items():
            c0 = cpu_of(pids)
            res = parallel([{"role": "produce", "bootstrap": bs, "topic": topics[size], "size": size,
                             "count": count // producers, "acks": "1", "max_s": max_s}
                            for _ in range(producers)], wd, max_s + 60)
            cpu = cpu_of(pids) - c0
            msgs = sum(int(r["messages"]) for r in res)
            secs = max(float(r["seconds"]) for r in res)
            rows.append([str(n), f"produce {size} B x{producers}", procs.fmt(msgs / secs if secs else 0),
                         procs.fmt(cpu / max(msgs, 1) * 1e6, 2)])
            c0 = cpu_of(pids)
            r = bk.role({"role": "consume", "bootstrap": bs, "topic": topics[size], "partitions": PARTITIONS,
                         "count": msgs, "max_s": max_s}, wd, max_s + 60)
            cpu = cpu_of(pids) - c0
            got = int(r["messages"])
            rows.append([str(n), f"consume {size} B", procs.fmt(got / r["seconds"] if r["seconds"] else 0),
                         procs.fmt(cpu / max(got, 1) * 1e6, 2)])
            print(f"  N={n}: {rows[-2]} {rows[-1]}", flush=True)
    finally:
        srv.stop_clean()
    return rows


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="bench_cluster", description="rokka serve --brokers N: Kafka rows for N")
    ap.add_argument("--quick", action="store_true", help="short run")
    ap.add_argument("--brokers", default="1,2,4", help="comma-separated N values (default 1,2,4)")
    ap.add_argument("--producers", type=int, default=2, help="producer processes at once (default 2)")
    args, _ = ap.parse_known_args(argv)
    counts = QUICK_COUNTS if args.quick else COUNTS
    wd = Path(tempfile.mkdtemp(prefix="rokka-bench-cluster-"))
    rows: list[list[str]] = []
    try:
        for n in [int(x) for x in args.brokers.split(",") if x.strip()]:
            rows += rows_for(n, counts, max(1, args.producers), wd, 40 if args.quick else 120)
    finally:
        shutil.rmtree(wd, ignore_errors=True)
    print(f"\nKafka over `rokka serve --brokers N`, {PARTITIONS} partitions, confluent-kafka, acks=1; "
          f"server CPU summed over the supervisor and its children\n")
    print(procs.table(["N", "row", "msg/s", "server CPU us/msg"], rows))


if __name__ == "__main__":
    main(sys.argv[1:])
