"""What TLS costs on the Kafka port: rokka plaintext vs. rokka with kafkaSslCertFile, same clients.

Run: ``python -m benchmarks.bench_kafka_tls [--quick] [--rounds N]``  (or ``python -m benchmarks.run kafka_tls``)

Theory of operation
-------------------
A test CA (trustme) issues rokka a certificate for 127.0.0.1.  Each round starts rokka twice, fresh
each time, plaintext and TLS in alternating order (ABBA over the rounds, as ``bench_kafka``), and runs
the confluent-kafka rows of ``bench_kafka``'s plan against it: produce acks=1 of 100 B and 1 KiB
values to 4 partitions, then consume them from the beginning with the partitions assigned (the
``benchmarks.lib.kafka_role`` roles; the TLS runs pass ``security.protocol=SSL`` and the CA file).
Besides msg/s (client-timed) it reads the rokka process's CPU time (all threads, ``lib/cpu.py``)
around each row and prints server microseconds per record: with TLS every byte is encrypted or
decrypted once more in rokka (OpenSSL, AES-GCM on this CPU) and once more in the client.

No goal is asserted; the table is the record.  Loopback only; every wait bounded.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks import bench_kafka as bk
from benchmarks.lib import procs
from benchmarks.lib.cpu import read as server_cpu

Row = tuple[str, int]           # (op, value size)


def certificates(wd: Path) -> tuple[Path, Path]:
    """(broker.conf with TLS on, CA file) under ``wd``."""
    import trustme

    ca = trustme.CA()
    ca.issue_cert("127.0.0.1").private_key_and_cert_chain_pem.write_to_path(str(wd / "server.pem"))
    ca.cert_pem.write_to_path(str(wd / "ca.pem"))
    conf = wd / "tls.conf"
    conf.write_text(f"kafkaSslCertFile={wd / 'server.pem'}\n")
    return conf, wd / "ca.pem"


def one_run(plan: bk.Plan, wd: Path, config: Path | None, client: dict[str, Any]) -> dict[Row, tuple[float, float]]:
    """{row: (msg/s, server us per record)} against one fresh rokka."""
    srv = procs.start_rokka(wd / "rokka", None, config)
    out: dict[Row, tuple[float, float]] = {}
    try:
        assert srv.proc is not None
        pid, bs = srv.proc.pid, srv.kafka
        topics = {s: f"tls-bench-{s}" for s in plan.counts}
        bk.role({"role": "create", "bootstrap": bs, "topics": list(topics.values()),
                 "partitions": bk.PARTITIONS, "client": client}, wd, 90)
        for size, count in plan.counts.items():
            cpu0 = server_cpu(pid)
            r = bk.role({"role": "produce", "bootstrap": bs, "topic": topics[size], "size": size, "count": count,
                         "acks": "1", "max_s": plan.max_s, "client": client}, wd, plan.max_s + 60)
            out[("produce", size)] = (r["messages"] / r["seconds"], (server_cpu(pid) - cpu0) * 1e6 / max(count, 1))
            cpu0 = server_cpu(pid)
            r = bk.role({"role": "consume", "bootstrap": bs, "topic": topics[size], "partitions": bk.PARTITIONS,
                         "count": count + 1, "max_s": plan.max_s, "client": client}, wd, plan.max_s + 60)
            rate = r["messages"] / r["seconds"] if r["seconds"] else 0.0
            out[("consume", size)] = (rate, (server_cpu(pid) - cpu0) * 1e6 / max(r["messages"], 1))
            if r["messages"] != count + 1:
                print(f"  consume {size}: {r['messages']} of {count + 1} records")
    finally:
        srv.stop()
        shutil.rmtree(wd / "rokka", ignore_errors=True)
    return out


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="bench_kafka_tls", description="rokka Kafka port: plaintext vs. TLS")
    ap.add_argument("--quick", action="store_true", help="short run (< 1 minute)")
    ap.add_argument("--rounds", type=int, default=None, help="rounds (default 3, 1 with --quick)")
    args = ap.parse_args(argv)
    try:
        import trustme  # noqa: F401
    except ImportError:
        print("skipped: trustme is not installed (make bench installs the test extras)")
        return
    plan = bk.QUICK if args.quick else bk.FULL
    rounds = max(1, args.rounds or (1 if args.quick else 3))
    wd = Path(tempfile.mkdtemp(prefix="rokka-bench-tls-"))
    t0 = time.monotonic()
    conf, ca = certificates(wd)
    modes = {"plaintext": (None, {}), "TLS": (conf, {"security.protocol": "SSL", "ssl.ca.location": str(ca)})}
    runs: dict[str, list[dict[Row, tuple[float, float]]]] = {m: [] for m in modes}
    for i in range(rounds):
        for mode in (("plaintext", "TLS") if i % 2 == 0 else ("TLS", "plaintext")):
            time.sleep(bk.SETTLE_S)
            runs[mode].append(one_run(plan, wd, *modes[mode]))
            row = runs[mode][-1]
            print(f"  round {i + 1} {mode}: " + ", ".join(f"{op} {s} B {v[0]:,.0f}/s ({v[1]:.2f} us)"
                                                           for (op, s), v in row.items()), flush=True)
    rows = []
    for key in runs["plaintext"][0]:
        def med(mode: str, k: int, key: Row = key) -> float:
            return statistics.median(r[key][k] for r in runs[mode])
        plain, tls = med("plaintext", 0), med("TLS", 0)
        mb = key[1] / 1e6
        rows.append([key[0], f"{key[1]} B", procs.fmt(plain), procs.fmt(plain * mb, 1), procs.fmt(tls),
                     procs.fmt(tls * mb, 1), f"{tls / plain:.2f}x" if plain else "—",
                     f"{med('plaintext', 1):.2f} / {med('TLS', 1):.2f}"])
    print()
    print(procs.table(["op", "value", "plaintext msg/s", "MB/s", "TLS msg/s", "MB/s", "TLS/plaintext",
                       "server us/record (plain / TLS)"], rows))
    print(f"\n({time.monotonic() - t0:.0f} s; {'--quick' if args.quick else 'full'} run; {rounds} round(s), "
          f"medians; confluent-kafka, acks=1, {bk.PARTITIONS} partitions)")
    shutil.rmtree(wd, ignore_errors=True)


if __name__ == "__main__":
    main()
