"""Many small requests: RocketMQ single-message sync sends at 1, 16 and 64 concurrent senders.

Run: ``python -m benchmarks.bench_rmq_senders [--count N] [--flush SYNC_FLUSH|ASYNC_FLUSH] [--profile]``

Theory of operation
-------------------
Issue 20's "many small requests" rows.  One fresh ``rokka serve`` (port 0, temp data dir; the flush
policy from ``--flush`` through a broker.conf), then for each client -- our trio client
(``benchmarks/lib/rmq_trio_role.py``: concurrent tasks share one producer connection) and the
RocketMQ C++ client (``rocketmq`` wheel, ``benchmarks/lib/rmq_cpp_role.py``: threads share one
producer) -- and each concurrency it runs ``count`` single-message (100 B) sync sends and reads the
broker process's on-CPU time (``lib/cpu.py``, all threads) before and after the client
process.  Reported: client-timed msg/s, p50/p99 latency and server CPU microseconds per send.  The
goal is ``rate(64) >= 3 x rate(1)`` per client.  The machine may be shared: CPU per send is the
steadier number.  Every wait is bounded.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from benchmarks.lib import procs
from benchmarks.lib.cpu import read as server_cpu
from benchmarks.lib.procs import fmt, harness

CPP_ROLE = procs.ROOT / "benchmarks" / "lib" / "rmq_cpp_role.py"
TRIO_ROLE = [sys.executable, "-m", "benchmarks.lib.rmq_trio_role"]
CONCURRENCY = (1, 16, 64)


def role(client: str, params: dict[str, Any], workdir: Path, timeout: float) -> dict[str, Any]:
    """Run one client role (``benchmarks/lib/rmq_*_role.py``) to completion; its ``result`` event."""
    argv = [sys.executable, str(CPP_ROLE)] if client == "cpp" else TRIO_ROLE
    name = f"{client}-{params['role']}-{uuid.uuid4().hex[:6]}"
    events = harness.run_json(argv, name=name, workdir=workdir / name, params=params, timeout=timeout,
                              cwd=procs.ROOT)
    return next(e for e in events if e["event"] == "result")


def one_row(client: str, conc: int, rokka: harness.ServerProcess, count: int, wd: Path) -> dict[str, Any]:
    assert rokka.proc is not None
    topic = f"Senders_{client}"
    params = {"role": "send", "namesrv": rokka.namesrv, "group": f"PG_{uuid.uuid4().hex[:8]}", "topic": topic,
              "mode": "sync", "threads": conc, "tasks": conc, "count": count, "body_size": 100,
              "max_s": 25, "warmup": 100}
    c0 = server_cpu(rokka.proc.pid)
    res = role(client, params, wd, timeout=120)
    cpu = server_cpu(rokka.proc.pid) - c0
    res["rate"] = res["messages"] / res["seconds"] if res["seconds"] else float("nan")
    res["cpu_us"] = cpu / max(1, res["messages"] + params["warmup"]) * 1e6
    return res


HEADERS = ["client", "senders", "msg/s", "vs 1 sender", "p50 / p99 ms", "server CPU us/send", "errors"]


def sender_rows(rokka: harness.ServerProcess, clients: list[str], count: int, wd: Path) -> list[list[str]]:
    """One row per client and concurrency (``CONCURRENCY``) against a running ``rokka``."""
    rows: list[list[str]] = []
    for client in clients:
        rates: dict[int, float] = {}
        for conc in CONCURRENCY:
            r = one_row(client, conc, rokka, count, wd)
            rates[conc] = r["rate"]
            gain = r["rate"] / rates[1] if rates.get(1) else float("nan")
            rows.append([client, str(conc), fmt(r["rate"]), f"{gain:.2f}x",
                         f"{fmt(r['p50_us'] / 1000, 2)} / {fmt(r['p99_us'] / 1000, 2)}",
                         fmt(r["cpu_us"], 0), str(r.get("errors") or "")[:60]])
            print(f"  {client} x{conc}: {r['rate']:,.0f} msg/s ({gain:.2f}x), server CPU "
                  f"{r['cpu_us']:.0f} us/send", flush=True)
    return rows


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.bench_rmq_senders")
    ap.add_argument("--count", type=int, default=6000, help="sends per row")
    ap.add_argument("--flush", default="ASYNC_FLUSH", choices=("ASYNC_FLUSH", "SYNC_FLUSH"))
    ap.add_argument("--clients", default="trio,cpp")
    ap.add_argument("--profile", action="store_true", help="run rokka under cProfile, print the top functions")
    ap.add_argument("--quick", action="store_true", help="2,000 sends a row (make bench --quick)")
    args = ap.parse_args(argv)
    if args.quick:
        args.count = min(args.count, 2000)
    clients = args.clients.split(",")
    if "cpp" in clients and (reason := harness.cpp_available()):
        print(f"cpp client skipped: {reason}")
        clients.remove("cpp")
    wd = Path(tempfile.mkdtemp(prefix="rokka-bench-senders-"))
    conf = wd / "broker.conf"
    conf.write_text(f"flushDiskType={args.flush}\n")
    prof = wd / "rokka.prof" if args.profile else None
    rokka = procs.start_rokka(wd / "rokka", prof, config=conf)
    t0 = time.monotonic()
    try:
        rows = sender_rows(rokka, clients, args.count, wd)
    finally:
        rokka.stop()
    print()
    print(procs.table(HEADERS, rows))
    print(f"\n({time.monotonic() - t0:.0f} s; {args.flush}; 100 B bodies, {args.count} sends per row)")
    if prof is not None:
        print(procs.profile_summary(prof))
    shutil.rmtree(wd, ignore_errors=True)


if __name__ == "__main__":
    main()
