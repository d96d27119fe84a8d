"""Tag-filtered and SQL92 pulls against the unfiltered pull of the same number of records (issue 20).

Run: ``python -m benchmarks.bench_rocketmq_filter [--matching N] [--rounds R] [--clients trio,cpp,cpp-push]
[--quick] [--profile]``  (or ``python -m benchmarks.run rocketmq_filter``)

Theory of operation
-------------------
One fresh ``rokka serve`` (port 0, temp data dir).  Our trio client fills two topics with batch
sends of 100 B bodies: ``Filter_mixed`` holds ``10 x N`` records, tags ``Tag0`` .. ``Tag9`` in turn,
and ``Filter_plain`` holds ``N`` records, all ``Tag3``.  Then, per client -- our trio client
(``PullConsumer.pull``, every queue drained from offset 0 by its own task, 32 per pull) and the
RocketMQ C++ client (the ``rocketmq`` wheel's ``PullConsumer.pull``, queue after queue; and its
``PushConsumer``, 2 threads, until it got N matching messages) -- it runs:

* the baseline: an unfiltered pull ("*") of ``Filter_plain`` (N records delivered);
* the tag-filtered pull ("Tag3", 1 tag of 10) of ``Filter_mixed`` (the same N records delivered,
  out of 10 N scanned);
* trio only: a SQL92 pull (``TAGS = 'Tag3'``) of ``Filter_mixed`` (raw PULL_MESSAGE with
  expressionType SQL92; the broker runs with ``enablePropertyFilter=true``).

Each client role runs in its own process (this module, ``--role``: one JSON line of parameters on
stdin, JSON lines back), ``--rounds`` times per case, the cases interleaved (each round a new
consumer group reading from offset 0).  Reported per row, medians of the rounds: records delivered,
msg/s (client-timed, first request to last answer) and the broker's on-CPU time
(``lib/cpu.py``, all threads) read before and after the client process, per delivered record.
Clients re-check the tag string of what they get (Java's PullAPIWrapper does; a record with another
tag would be a broker bug and is counted).  Goal: the filtered pull >= 50 % of the baseline's msg/s
with each client.  The machine may be shared (two cores, other work): the CPU per record is the
steadier number.  Every wait is bounded.
"""

from __future__ import annotations

import argparse
import json
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

ROLES = {"trio": "trio-pull", "cpp": "cpp-pull", "cpp-push": "cpp-push"}
TAG = "Tag3"
SQL = f"TAGS = '{TAG}'"


# ----- the driver ------------------------------------------------------------------------------

def role(params: dict[str, Any], wd: Path, timeout: float) -> dict[str, Any]:
    name = f"{params['role']}-{uuid.uuid4().hex[:6]}"
    events = harness.run_json([sys.executable, "-m", "benchmarks.bench_rocketmq_filter", "--role"], name=name,
                              workdir=wd / name, params=params, timeout=timeout, cwd=procs.ROOT)
    return next(e for e in events if e["event"] == "result")


def measured(rokka: harness.ServerProcess, params: dict[str, Any], wd: Path) -> dict[str, Any]:
    assert rokka.proc is not None
    c0 = server_cpu(rokka.proc.pid)
    res = role(params, wd, timeout=300)
    res["cpu_us"] = (server_cpu(rokka.proc.pid) - c0) / max(1, res["messages"]) * 1e6
    res["rate"] = res["messages"] / res["seconds"] if res["seconds"] else float("nan")
    return res


def run(rokka: harness.ServerProcess, matching: int, clients: list[str], rounds: int, wd: Path) -> list[list[str]]:
    ns = rokka.namesrv
    role({"role": "fill", "namesrv": ns, "topic": "Filter_mixed", "count": matching * 10, "tags": 10}, wd, 600)
    role({"role": "fill", "namesrv": ns, "topic": "Filter_plain", "count": matching, "tags": 0}, wd, 300)
    rows: list[list[str]] = []
    for client in clients:
        cases = [("unfiltered '*'", "Filter_plain", {"expression": "*", "expect": matching}),
                 ("tag 1 of 10", "Filter_mixed", {"expression": TAG, "tag": TAG, "expect": matching})]
        if client == "trio":
            cases.append(("SQL92 1 of 10", "Filter_mixed", {"expression": SQL, "sql": True, "tag": TAG}))
            # not measured: the broker loads its SQL92 parser (lark grammar) at the first SQL92 subscription
            role({"role": "trio-pull", "namesrv": ns, "topic": "Filter_plain", "group": "CG_sql_warm",
                  "expression": SQL, "sql": True}, wd, 300)
        got: dict[str, list[dict[str, Any]]] = {label: [] for label, _, _ in cases}
        for _ in range(rounds):     # interleaved, so a burst of load elsewhere hits every case alike
            for label, topic, extra in cases:
                got[label].append(measured(rokka, {"role": ROLES[client], "namesrv": ns, "topic": topic,
                                                   "group": f"CG_{uuid.uuid4().hex[:8]}", **extra}, wd))
        base = _median(got[cases[0][0]])
        for label, topic, _ in cases:
            stored = matching * (10 if topic == "Filter_mixed" else 1)
            goal = 0.5 if label.startswith("tag") else None
            rows.append(_row(f"{label} ({stored:,} stored)", client.replace("-", " "), _median(got[label]), base,
                             goal))
            print("  " + " | ".join(rows[-1]), flush=True)
    return rows


def _median(results: list[dict[str, Any]]) -> dict[str, Any]:
    """The rounds' median msg/s and median CPU per record (and the most wrong-tag records seen)."""
    rates = sorted(r["rate"] for r in results)
    cpus = sorted(r["cpu_us"] for r in results)
    return {"messages": results[0]["messages"], "rate": rates[len(rates) // 2], "cpu_us": cpus[len(cpus) // 2],
            "wrong": max(r.get("wrong", 0) for r in results)}


def _row(label: str, client: str, res: dict[str, Any], base: dict[str, Any], goal: float | None) -> list[str]:
    ratio = res["rate"] / base["rate"] if base["rate"] else float("nan")
    verdict = "—" if goal is None else ("PASS" if ratio >= goal else "MISS")
    wrong = f" ({res['wrong']} with another tag)" if res.get("wrong") else ""
    return [label, client, f"{res['messages']:,}", fmt(res["rate"]), fmt(res["cpu_us"], 1), f"{ratio:.0%}",
            (f">= {goal:.0%} of '*'" if goal else "—"), verdict + wrong]


HEADERS = ["pull (100 B, 32 per pull)", "client", "delivered", "msg/s", "server CPU us/record",
           "msg/s vs '*'", "goal", "result"]


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.bench_rocketmq_filter")
    ap.add_argument("--matching", type=int, default=20_000, help="records each pull delivers")
    ap.add_argument("--clients", default="trio,cpp,cpp-push")
    ap.add_argument("--rounds", type=int, default=3, help="runs of each pull (interleaved); medians reported")
    ap.add_argument("--quick", action="store_true", help="5,000 matching records, one round")
    ap.add_argument("--profile", action="store_true", help="run rokka under cProfile, print the top functions")
    ap.add_argument("--role", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.role:
        _role_main()
        return
    if args.quick:
        args.matching, args.rounds = 5000, 1
    clients = args.clients.split(",")
    if reason := harness.cpp_available():
        print(f"cpp clients skipped: {reason}")
        clients = [c for c in clients if not c.startswith("cpp")]
    wd = Path(tempfile.mkdtemp(prefix="rokka-bench-filter-"))
    conf = wd / "broker.conf"
    conf.write_text("enablePropertyFilter=true\n")
    prof = wd / "rokka.prof" if args.profile else None
    rokka = procs.start_rokka(wd / "rokka", prof, config=conf)
    t0 = time.monotonic()
    try:
        rows = run(rokka, args.matching, clients, args.rounds, wd)
    finally:
        rokka.stop()
    print()
    print(procs.table(HEADERS, rows))
    print(f"\n({time.monotonic() - t0:.0f} s; one rokka serve; clients in their own processes)")
    if prof is not None:
        print("\nrokka cProfile, top functions by own time:\n")
        print(procs.profile_summary(prof))
    shutil.rmtree(wd, ignore_errors=True)


# ----- the client roles (run in their own processes) -------------------------------------------

def emit(event: str, **fields: Any) -> None:
    sys.stdout.write(json.dumps({"event": event, **fields}) + "\n")
    sys.stdout.flush()


def _role_main() -> None:
    p = json.loads(sys.stdin.readline())
    try:
        if p["role"] == "cpp-pull":
            _cpp_pull(p)
        elif p["role"] == "cpp-push":
            _cpp_push(p)
        else:
            import trio
            trio.run(_trio_role, p)
    except Exception as exc:  # noqa: BLE001 - reported to the caller
        emit("error", error=repr(exc))
    emit("done")
    sys.stdout.flush()
    import os
    os._exit(0)     # the C++ wheel's destructors would shut its objects down twice at exit


async def _trio_role(p: dict[str, Any]) -> None:
    import structlog
    from rokka.net.remoting.client import NamesrvClient, RemotingClient
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(30),
                        logger_factory=structlog.PrintLoggerFactory(sys.stderr))
    async with RemotingClient(timeout_s=20.0) as rc:
        ns = NamesrvClient(rc, [p["namesrv"]])
        await (_fill if p["role"] == "fill" else _trio_pull)(rc, ns, p)


async def _fill(rc: Any, ns: Any, p: dict[str, Any]) -> None:
    from rokka.net.remoting.client import OutMessage, Producer
    producer = Producer(rc, ns, f"PG_{uuid.uuid4().hex[:8]}", send_timeout_s=20.0)
    body, n, tags = b"x" * 100, int(p["count"]), int(p["tags"])
    sent = 0
    while sent < n:
        k = min(100, n - sent)
        msgs = [OutMessage(body, tags=f"Tag{(sent + i) % tags}" if tags else TAG) for i in range(k)]
        await producer.send_batch(p["topic"], msgs)
        sent += k
    emit("result", sent=sent)


async def _trio_pull(rc: Any, ns: Any, p: dict[str, Any]) -> None:
    import trio
    from rokka.net.remoting.client import PullConsumer
    consumer = PullConsumer(rc, ns, p["group"])
    queues = await consumer.fetch_subscribe_queues(p["topic"])
    stats = {"messages": 0, "requests": 0, "wrong": 0}
    tag = p.get("tag")

    async def drain(mq: Any) -> None:
        offset = 0
        while True:
            res = await _pull_once(consumer, mq, offset, p)
            stats["requests"] += 1
            if res.code not in (0, 20):         # FOUND, NO_MATCHED_MSG (go on); else the queue's end
                return
            for m in res.messages:              # the client re-checks the tag string, as Java's does
                if tag is None or m.properties.get("TAGS") == tag:
                    stats["messages"] += 1
                else:
                    stats["wrong"] += 1
            offset = res.next_begin_offset

    t0 = time.perf_counter()
    with trio.fail_after(240):
        async with trio.open_nursery() as nursery:
            for mq in queues:
                nursery.start_soon(drain, mq)
    emit("result", seconds=time.perf_counter() - t0, **stats)


async def _pull_once(consumer: Any, mq: Any, offset: int, p: dict[str, Any]) -> Any:
    """One PULL of 32: the client's own call, or for SQL92 the same request with expressionType SQL92
    (the client's ``pull`` asks for TAG only)."""
    if not p.get("sql"):
        return await consumer.pull(mq, offset, max_nums=32, expression=p["expression"])
    from rokka.net.remoting.client.consumer import decode_messages
    from rokka.net.remoting.client.types import PullResult
    from rokka.net.remoting.codec.codes import RequestCode
    from rokka.net.remoting.codec.remoting import RemotingCommand
    ext = {k: str(v) for k, v in dict(consumerGroup=consumer.group, topic=mq.topic, queueId=mq.queue_id,
                                      queueOffset=offset, maxMsgNums=32, sysFlag=0x4, commitOffset=0,
                                      suspendTimeoutMillis=0, subscription=p["expression"], subVersion=0,
                                      expressionType="SQL92").items()}
    resp = await consumer.client.invoke_ok(await consumer.broker_addr(mq),
                                           RemotingCommand(RequestCode.PULL_MESSAGE, ext_fields=ext), 20.0,
                                           (0, 19, 20, 21))
    e = resp.ext_fields
    return PullResult(resp.code, int(e.get("nextBeginOffset", offset)), 0, 0, 0,
                      decode_messages(resp.body) if resp.code == 0 else ())


def _cpp_push(p: dict[str, Any]) -> None:
    """A C++ push consumer (a new group starts at offset 0 here: the queues' first records are
    still stored) until ``expect`` matching messages came, or 240 s; timed first to last message."""
    import threading
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "interop" / "rocketmq_cpp"))
    from _common import set_log
    from rocketmq.client import PushConsumer
    consumer = PushConsumer(p["group"])
    set_log("push", consumer._handle)
    consumer.set_namesrv_addr(p["namesrv"])
    consumer.set_thread_count(2)
    tag, expect = (p.get("tag") or "").encode(), int(p["expect"])
    lock, done = threading.Lock(), threading.Event()
    seen = {"n": 0, "wrong": 0, "first": 0.0, "last": 0.0}

    def on_message(msg: Any) -> None:     # returning normally acknowledges (CONSUME_SUCCESS)
        now = time.perf_counter()
        with lock:
            if not seen["n"]:
                seen["first"] = now
            if not tag or msg.tags == tag:
                seen["n"] += 1
            else:
                seen["wrong"] += 1
            seen["last"] = now
            if seen["n"] >= expect:
                done.set()

    consumer.subscribe(p["topic"], on_message, p["expression"])
    consumer.start()
    done.wait(timeout=240)
    with lock:
        result = {"messages": seen["n"], "wrong": seen["wrong"], "seconds": seen["last"] - seen["first"]}
    emit("result", **result)
    consumer.shutdown()


def _cpp_pull(p: dict[str, Any]) -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "interop" / "rocketmq_cpp"))
    from _common import set_log  # the wheel's log path setter (interop/rocketmq_cpp/_common.py)
    from rocketmq.client import PullConsumer
    consumer = PullConsumer(p["group"])
    set_log("pull", consumer._handle)
    consumer.set_namesrv_addr(p["namesrv"])
    PullConsumer.offset_table.clear()
    consumer.start()
    n = wrong = 0
    tag = p.get("tag")
    deadline = time.monotonic() + 240
    t0 = time.perf_counter()
    for msg in consumer.pull(p["topic"], p["expression"], 32):
        if tag is None or msg.tags == tag.encode():
            n += 1
        else:
            wrong += 1
        if time.monotonic() > deadline:
            break
    emit("result", messages=n, wrong=wrong, seconds=time.perf_counter() - t0)
    consumer.shutdown()


if __name__ == "__main__":
    main()
