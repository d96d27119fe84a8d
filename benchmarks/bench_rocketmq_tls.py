"""What TLS costs on the RocketMQ ports: ``tls.server.mode`` disabled / permissive / enforcing, rokka's
own client, server CPU per record.

Run: ``python -m benchmarks.bench_rocketmq_tls [--quick] [--rounds N] [--count N]``

Theory of operation
-------------------
Each round starts ``rokka serve`` fresh in each mode: ``disabled`` (no sniffing), ``permissive``
(the default: the first byte of every connection is peeked; plaintext client) and ``enforcing``
(TLS with a trustme certificate; the client checks it).  rokka's trio client then sends ``count``
messages of 100 B from ``SENDERS`` concurrent senders (one connection) and pulls them back in
batches of 32.  The rokka process's CPU time (``lib/cpu.py``, all threads) around each phase,
divided by the records, is the row: it is less disturbed by other load on a shared machine than
the client-timed msg/s, which is printed too.  No goal is asserted; the table is the record.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import time
from pathlib import Path

import trio
from rokka.gateway.rocketmq.tls import client_context
from rokka.net.remoting.client import Admin, NamesrvClient, Producer, PullConsumer, RemotingClient

from benchmarks.lib import procs
from benchmarks.lib.cpu import read as server_cpu

SENDERS = 16
MODES = ("disabled", "permissive", "enforcing")


def configs(wd: Path) -> dict[str, tuple[Path, Path | None]]:
    """mode -> (broker.conf, CA file the client checks or None for plaintext)."""
    import trustme

    ca = trustme.CA()
    cert = ca.issue_cert("127.0.0.1")
    cert.private_key_and_cert_chain_pem.write_to_path(str(wd / "server.pem"))
    ca.cert_pem.write_to_path(str(wd / "ca.pem"))
    out: dict[str, tuple[Path, Path | None]] = {}
    for mode in MODES:
        conf = wd / f"{mode}.conf"
        conf.write_text(f"tls.server.mode={mode}\ntls.test.mode.enable=false\ntls.server.certPath={wd / 'server.pem'}\n"
                        + ("tls.enable=true\n" if mode == "enforcing" else ""))
        out[mode] = (conf, wd / "ca.pem" if mode == "enforcing" else None)
    return out


async def drive(namesrv: str, broker: str, ca: Path | None, count: int, pid: int) -> dict[str, tuple[float, float]]:
    out: dict[str, tuple[float, float]] = {}
    tls = client_context(str(ca)) if ca is not None else None
    async with RemotingClient(tls=tls, timeout_s=30) as rc:
        nsc = NamesrvClient(rc, [namesrv])
        await Admin(rc, nsc).create_topic(broker, "TlsBench", read_queue_nums=1, write_queue_nums=1)
        producer = Producer(rc, nsc, "pg_bench")
        body = b"x" * 100
        sent = await producer.send("TlsBench", body, queue=0)      # route + connection warm
        cpu0, t0 = server_cpu(pid), time.monotonic()

        async def sender(n: int) -> None:
            for _ in range(n):
                await producer.send("TlsBench", body, queue=0)

        async with trio.open_nursery() as nursery:
            for _ in range(SENDERS):
                nursery.start_soon(sender, count // SENDERS)
        total = count // SENDERS * SENDERS
        out["send"] = (total / (time.monotonic() - t0), (server_cpu(pid) - cpu0) * 1e6 / total)
        consumer = PullConsumer(rc, nsc, "cg_bench")
        cpu0, t0, offset, got = server_cpu(pid), time.monotonic(), sent.queue_offset, 0
        while got < total + 1:
            res = await consumer.pull(sent.queue, offset, max_nums=32)
            if not res.messages:
                break
            got += len(res.messages)
            offset = res.next_begin_offset
        out["pull"] = (got / (time.monotonic() - t0), (server_cpu(pid) - cpu0) * 1e6 / max(got, 1))
    return out


def one_run(wd: Path, conf: Path, ca: Path | None, count: int) -> dict[str, tuple[float, float]]:
    srv = procs.start_rokka(wd / "rokka", None, conf)
    try:
        assert srv.proc is not None
        return trio.run(drive, srv.namesrv, srv.broker, ca, count, srv.proc.pid)
    finally:
        srv.stop()
        shutil.rmtree(wd / "rokka", ignore_errors=True)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="bench_rocketmq_tls", description="rokka RocketMQ ports: TLS modes")
    ap.add_argument("--quick", action="store_true", help="short run")
    ap.add_argument("--rounds", type=int, default=None, help="rounds (default 3, 1 with --quick)")
    ap.add_argument("--count", type=int, default=None, help="messages per phase (default 20000, 3200 with --quick)")
    args = ap.parse_args(argv)
    rounds = max(1, args.rounds or (1 if args.quick else 3))
    count = args.count or (3200 if args.quick else 20000)
    wd = Path(tempfile.mkdtemp(prefix="rokka-bench-rmq-tls-"))
    t0 = time.monotonic()
    confs = configs(wd)
    runs: dict[str, list[dict[str, tuple[float, float]]]] = {m: [] for m in MODES}
    for i in range(rounds):
        for mode in (MODES if i % 2 == 0 else tuple(reversed(MODES))):
            runs[mode].append(one_run(wd, *confs[mode], count))
            print(f"  round {i + 1} {mode}: " + ", ".join(f"{op} {v[0]:,.0f}/s ({v[1]:.1f} us)"
                                                           for op, v in runs[mode][-1].items()), flush=True)
    rows = []
    for mode in MODES:
        row = [mode, "TLS" if mode == "enforcing" else "plaintext"]
        for op in ("send", "pull"):
            row += [procs.fmt(statistics.median(r[op][0] for r in runs[mode])),
                    f"{statistics.median(r[op][1] for r in runs[mode]):.1f}"]
        rows.append(row)
    print()
    print(procs.table(["tls.server.mode", "client", "send msg/s", "server us/send", "pull msg/s",
                       "server us/record"], rows))
    print(f"\n({time.monotonic() - t0:.0f} s; {rounds} round(s), medians; {count} x 100 B, {SENDERS} senders, "
          "rokka's trio client, one connection)")
    shutil.rmtree(wd, ignore_errors=True)


if __name__ == "__main__":
    main()
