"""Master/slave replication cost: RocketMQ sends to a master without a slave, ASYNC_MASTER + slave and
SYNC_MASTER + slave, in the same run.

Theory of operation
-------------------
Each setup starts a name server, a master (and a SLAVE of the same brokerName) as separate ``rokka``
processes, then ``--tasks`` trio tasks of rokka's own RocketMQ client send ``--messages`` messages
(batches of ``--batch`` bodies of ``--size`` bytes, SEND_BATCH_MESSAGE, sync).  Reported: sends/s
and records/s, p50/p99 send latency, the master's and the slave's CPU per record (on-CPU time from
``lib/cpu.py``, all threads: less disturbed by other load than throughput), and the slave's lag:
the seconds from the last acknowledged send until the slave's CommitLog holds everything (read from
its log's ``ha.*`` events is not possible, so it is measured by polling the slave's
GET_BROKER_RUNTIME_INFO ``commitLogMaxOffset``).

    .venv/bin/python -m benchmarks.bench_ha --messages 20000 --batch 16
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from tempfile import TemporaryDirectory
from typing import Any

import trio

from benchmarks.lib import procs
from benchmarks.lib.cpu import read as _cpu
from benchmarks.lib.procs import harness


def _broker(workdir: Path, name: str, ns: str, **keys: Any) -> harness.ServerProcess:
    d = workdir / name
    (d / "data").mkdir(parents=True, exist_ok=True)
    conf = d / "broker.conf"
    conf.write_text("".join(f"{k}={v}\n" for k, v in {"brokerName": "broker-b", **keys}.items()))
    return harness.ServerProcess(name, harness.broker_argv(ns, "broker-b", d / "data", "json", conf), d,
                                 data_dir=d / "data").start()


async def _load(ns: str, master: str, slave: str | None, args: argparse.Namespace) -> dict[str, Any]:
    from rokka.net.remoting.client import Admin, NamesrvClient, Producer, RemotingClient
    from rokka.net.remoting.codec.codes import RequestCode
    from rokka.net.remoting.codec.remoting import RemotingCommand

    lat: list[float] = []
    body = b"x" * args.size
    async with RemotingClient() as rc:
        nsc = NamesrvClient(rc, [ns])
        await Admin(rc, nsc).create_topic(master, "BenchHA")
        with trio.fail_after(30):
            while await nsc.get_route("BenchHA") is None:  # noqa: ASYNC110 - polls the name server
                await trio.sleep(0.05)
        producer = Producer(rc, nsc, "bench", send_timeout_s=10)
        sends = args.messages // args.batch
        per_task = sends // args.tasks
        statuses: dict[str, int] = {}

        async def task(k: int) -> None:
            for i in range(per_task):
                t0 = time.perf_counter()
                r = await producer.send_batch("BenchHA", [body] * args.batch, queue=(k + i) % 4)
                lat.append(time.perf_counter() - t0)
                statuses[r.status] = statuses.get(r.status, 0) + 1

        t0 = time.perf_counter()
        async with trio.open_nursery() as n:
            for k in range(args.tasks):
                n.start_soon(task, k)
        wall = time.perf_counter() - t0
        lag = None
        if slave is not None:
            async def max_offset(addr: str) -> int:
                resp = await rc.invoke(addr, RemotingCommand(RequestCode.GET_BROKER_RUNTIME_INFO))
                return int(json.loads(resp.body)["table"]["commitLogMaxOffset"])
            want = await max_offset(master)
            with trio.fail_after(120):
                while await max_offset(slave) < want:  # noqa: ASYNC110 - polls the slave
                    await trio.sleep(0.01)
            lag = time.perf_counter() - t0 - wall
    lat.sort()
    return {"sends": len(lat), "records": len(lat) * args.batch, "wall": wall, "statuses": statuses,
            "p50_ms": procs.percentile(lat, 0.5) * 1e3, "p99_ms": procs.percentile(lat, 0.99) * 1e3, "lag_s": lag}


def run_setup(role: str, with_slave: bool, args: argparse.Namespace) -> dict[str, Any]:
    with TemporaryDirectory(prefix="bench_ha_") as tmp:
        w = Path(tmp)
        (w / "ns").mkdir()
        ns = harness.ServerProcess("namesrv", harness.namesrv_argv("json"), w / "ns").start()
        procs_: list[harness.ServerProcess] = [ns]
        try:
            master = _broker(w, "master", ns.namesrv, brokerId=0, brokerRole=role, haListenPort=procs.free_port())
            procs_.append(master)
            slave = None
            if with_slave:
                slave = _broker(w, "slave", ns.namesrv, brokerId=1, brokerRole="SLAVE")
                procs_.append(slave)
                deadline = time.monotonic() + 60
                while '"ha.slave_connected"' not in master.stderr_path.read_text():  # type: ignore[union-attr]
                    if time.monotonic() > deadline:
                        raise RuntimeError("the slave did not connect")
                    time.sleep(0.2)
            m0 = _cpu(master.proc.pid)  # type: ignore[union-attr]
            s0 = _cpu(slave.proc.pid) if slave else None  # type: ignore[union-attr]
            res = trio.run(_load, ns.namesrv, master.broker, slave.broker if slave else None, args)
            res["master_us"] = (_cpu(master.proc.pid) - m0) / res["records"] * 1e6  # type: ignore[union-attr]
            res["slave_us"] = ((_cpu(slave.proc.pid) - s0) / res["records"] * 1e6  # type: ignore[union-attr]
                               if slave else None)
            return res
        finally:
            for p in reversed(procs_):
                p.stop()


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.bench_ha", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--messages", type=int, default=20000)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--size", type=int, default=256)
    ap.add_argument("--tasks", type=int, default=8)
    ap.add_argument("--quick", action="store_true", help="5,000 messages a setup (make bench --quick)")
    args = ap.parse_args(argv)
    if args.quick:
        args.messages = min(args.messages, 5000)
    rows = []
    for label, role, slave in (("no slave (ASYNC_MASTER)", "ASYNC_MASTER", False),
                               ("ASYNC_MASTER + slave", "ASYNC_MASTER", True),
                               ("SYNC_MASTER + slave", "SYNC_MASTER", True)):
        r = run_setup(role, slave, args)
        print(label, json.dumps({k: v for k, v in r.items()}, default=str), flush=True)
        rows.append([label, procs.fmt(r["records"] / r["wall"]), procs.fmt(r["p50_ms"], 2), procs.fmt(r["p99_ms"], 2),
                     procs.fmt(r["master_us"], 1), procs.fmt(r["slave_us"], 1), procs.fmt(r["lag_s"], 3),
                     ",".join(f"{k}:{v}" for k, v in r["statuses"].items())])
    print(procs.table(["setup", "records/s", "p50 ms", "p99 ms", "master CPU us/rec", "slave CPU us/rec",
                       "slave lag s", "statuses"], rows))


if __name__ == "__main__":
    main()
