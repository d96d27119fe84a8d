"""RocketMQ rows against the real anchor: rokka vs. Apache RocketMQ 4.9.7 (name server + broker), same client.

Run: ``python -m benchmarks.bench_anchor_rocketmq [--quick] [--rounds N] [--brokers rokka,rocketmq]``
(or ``python -m benchmarks.run anchor_rocketmq``, part of ``make bench``; ``make anchors`` fetches RocketMQ)

Theory of operation
-------------------
Issue 21's RocketMQ rows with two clients: the RocketMQ C++ client (``rocketmq`` wheel;
``benchmarks/lib/rmq_cpp_role.py`` for sends, ``benchmarks/anchors/rmq_tags_role.py`` for the tagged topic and
the pulls) and the Java client 4.9.8 (``benchmarks/anchors/rmq-java-bench``, ``RmqBench``: the same roles,
one JVM per role, built by ``make anchors``), each role in its own process, 100 B bodies, after an unmeasured
warm-up (C++ sync sends from 16 senders, ``WARMUP_SENDS`` of them: a JVM's CPU per send kept falling
over 12,000 sends after a 2,000-send warm-up):

* sync send from 1, 16 and 64 senders (threads sharing one producer; single-message ``SEND_MESSAGE``);
* batch send, 100 messages per batch, 4 senders;
* pull: a topic filled by single sync sends (64 senders) with tags ``A`` and ``B`` alternating, drained
  by the C++ ``PullConsumer`` with ``*`` (every queue from offset 0, 32 per pull);
* tag-filtered pull: the same topic drained by another group with the expression ``A`` (half the messages
  match; the others must not come back: ``foreign`` counts any).

Apache RocketMQ 4.9.7 stores each C++ client batch as ONE message (it takes a batch from the request
header's batch flag, which the C++ client does not set; rokka splits code 320 requests; the Java client sets
it): the C++ batch row counts the messages as the client sent them, and the pull rows read a topic filled
without batches.

Brokers, one at a time, each fresh, both ASYNC_FLUSH on disk: ``rokka serve`` (its default flush policy)
and Apache RocketMQ 4.9.7 (``benchmarks/lib/apache.py``: ``flushDiskType=ASYNC_FLUSH``,
``autoCreateTopicEnable``, 1 GiB heap, every other setting at its default).  Topics are created by the first
send on both (auto-creation).  The order alternates by round; several rounds give medians.  Each row reports
client-timed msg/s (p99 call latency for the sends) and the server CPU per message: on-CPU time of the
server processes (rokka: one; Apache: name server + broker) read before and after the client process,
divided by the messages (warm-up sends included).  Goals (issue 21): rokka >= 1.0x Apache RocketMQ on every
row, server CPU per message below it.  ``--clients cpp`` or ``java`` runs one client's rows only.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks.bench_rocketmq import role as cpp_role
from benchmarks.lib import apache, cpu, procs
from benchmarks.lib.procs import fmt, harness

TAGS_ROLE = procs.ROOT / "benchmarks" / "anchors" / "rmq_tags_role.py"
JAVA_JAR = procs.ROOT / "benchmarks" / "anchors" / "rmq-java-bench" / "target" / "rmq-bench.jar"
JAVA_JVM = ["-XX:+UseSerialGC", "-Xmx512m", "-Drocketmq.client.logUseSlf4j=false"]
BROKERS = ("rocketmq", "rokka")
LABEL = {"rokka": "rokka", "rocketmq": "Apache RocketMQ"}
SENDERS = (1, 16, 64)
WARMUP = 100
#: Unmeasured sync sends before any row (JIT warm-up of a JVM broker; C2 compiles after ~10,000 calls).
WARMUP_SENDS = 10_000
NAN = float("nan")


@dataclass
class Plan:
    sync: int      # sync sends per senders row
    batches: int   # batches of 100 in the batch row (also the pull row's topic)
    tagged: int    # messages in the tagged topic
    max_s: float


QUICK = Plan(sync=2000, batches=200, tagged=20_000, max_s=15)
# max_s under 30 s: the C++ client refreshes routes every 30 s and can lose the route under load (bench_rocketmq)
FULL = Plan(sync=10_000, batches=1000, tagged=100_000, max_s=25)

Results = dict[str, tuple[float, float, float]]  # row -> (msg/s, p99 ms or NaN, server CPU us per message)


def tags_role(params: dict[str, Any], wd: Path, timeout: float) -> dict[str, Any]:
    name = f"tags-{params['role']}-{uuid.uuid4().hex[:6]}"
    events = harness.run_json([sys.executable, str(TAGS_ROLE)], name=name, workdir=wd / name, params=params,
                              timeout=timeout, cwd=procs.ROOT)
    return next(e for e in events if e["event"] == "result")


def java_role(args: list[str], wd: Path, timeout: float) -> dict[str, Any]:
    """One run of the Java client's load generator (``RmqBench``): its result line."""
    name = f"java-{args[0]}-{uuid.uuid4().hex[:6]}"
    argv = ["java", *JAVA_JVM, f"-Duser.home={wd / name}", "-jar", str(JAVA_JAR), *args]
    events = harness.run_json(argv, name=name, workdir=wd / name, timeout=timeout, cwd=procs.ROOT)
    return next(e for e in events if e["event"] == "result")


FAILED: dict[str, Any] = {"messages": 0, "seconds": 0.0, "p99_us": NAN, "foreign": 0, "errors": ["role failed"]}


def measured(pids: list[int], run: Any) -> tuple[dict[str, Any], float]:
    """(the role's result, the server CPU seconds it cost); a client role that fails (a client crash) gives
    an empty result (the row shows no rate) and its error is printed, so one row does not end the run."""
    c0 = cpu.read(pids)
    try:
        res = run()
    except harness.HarnessError as exc:
        print(f"  a client role failed: {str(exc)[:300]}", flush=True)
        res = FAILED
    return res, cpu.read(pids) - c0


def send(client: str, namesrv: str, topic: str, mode: str, conc: int, count: int, plan: Plan,
         wd: Path) -> dict[str, Any]:
    """``count`` calls (sync single sends, or batches of 100) from ``conc`` senders; the role's result."""
    if client == "java":
        return java_role(["send", "--namesrv", namesrv, "--topic", topic, "--mode", mode, "--threads", str(conc),
                          "--count", str(count), "--batch", "100", "--size", "100", "--warmup", str(WARMUP),
                          "--max-s", str(plan.max_s)], wd, plan.max_s + 120)
    return cpp_role("cpp", {"role": "send", "namesrv": namesrv, "group": f"PG_{uuid.uuid4().hex[:8]}",
                            "topic": topic, "mode": mode, "threads": conc, "count": count, "batch_size": 100,
                            "body_size": 100, "max_s": plan.max_s, "warmup": WARMUP}, wd, plan.max_s + 90)


def pull(client: str, namesrv: str, topic: str, expr: str, wd: Path) -> dict[str, Any]:
    """Drain every queue of ``topic`` from 0 with ``expr``: ``{messages, foreign, seconds}``."""
    if client == "java":
        return java_role(["pull", "--namesrv", namesrv, "--topic", topic, "--expr", expr, "--max-s", "60"], wd, 150)
    return tags_role({"role": "pull", "namesrv": namesrv, "group": f"CG_{uuid.uuid4().hex[:8]}", "topic": topic,
                      "expression": expr, "max_s": 60}, wd, 120)


def client_rows(client: str, name: str, namesrv: str, pids: list[int], plan: Plan, tagged: str, filled: int,
                wd: Path) -> Results:
    res: Results = {}
    tag = uuid.uuid4().hex[:6]
    for conc in SENDERS:
        r, cpu = measured(pids, lambda c=conc: send(client, namesrv, f"Anchor_sync_{tag}", "sync", c, plan.sync,
                                                     plan, wd))
        rate = r["messages"] / r["seconds"] if r["seconds"] else NAN
        res[f"sync send x{conc} senders"] = (rate, r["p99_us"] / 1000, cpu / (r["messages"] + WARMUP) * 1e6)
        if r.get("errors"):
            print(f"  {name} {client} sync x{conc}: errors {r['errors']}", flush=True)
    r, cpu = measured(pids, lambda: send(client, namesrv, f"Anchor_batch_{tag}", "batch", 4, plan.batches, plan, wd))
    # messages as the client sent them (Apache RocketMQ 4.9 stores each C++ batch as one message: see TAGS_ROLE)
    res["batch send x100, 4 senders"] = (r["messages"] / r["seconds"] if r["seconds"] else NAN, r["p99_us"] / 1000,
                                         cpu / (r["messages"] + WARMUP) * 1e6)
    for row, expr, want in (("pull (all)", "*", filled), ("tag-filtered pull (1 of 2 tags)", "A", (filled + 1) // 2)):
        r, cpu = measured(pids, lambda e=expr: pull(client, namesrv, tagged, e, wd))
        if r["messages"] != want or r["foreign"]:
            print(f"  {name} {client} pull {expr}: {r['messages']} of {want}, {r['foreign']} with another tag",
                  flush=True)
        res[row] = (r["messages"] / r["seconds"] if r["seconds"] else NAN, NAN, cpu / max(r["messages"], 1) * 1e6)
    for row, (rate, p99, us) in res.items():
        print(f"  {name:8} {client:4} {row:32} {rate:>10,.0f} msg/s  p99 {p99:7.2f} ms  server CPU {us:7.1f} us/msg",
              flush=True)
    return {f"{row} [{client}]": v for row, v in res.items()}


def workload(name: str, namesrv: str, pids: list[int], plan: Plan, clients: list[str], wd: Path) -> Results:
    tag = uuid.uuid4().hex[:6]
    # warm-up, not measured: a JVM broker's JIT compiles its hot paths in its first seconds (rokka's is ready)
    send("cpp", namesrv, f"Anchor_warm_{tag}", "sync", 16, max(plan.sync, WARMUP_SENDS), plan, wd)
    tagged = f"Anchor_tags_{tag}"
    filled = tags_role({"role": "fill", "namesrv": namesrv, "group": f"PG_{tag}_t", "topic": tagged,
                        "count": plan.tagged, "threads": 64, "tags": ["A", "B"]}, wd, plan.max_s + 180)
    if filled["errors"] or filled["messages"] != plan.tagged:
        print(f"  {name} fill: {filled['messages']} of {plan.tagged} sent, errors {filled['errors']}", flush=True)
    res: Results = {}
    for client in clients:
        res.update(client_rows(client, name, namesrv, pids, plan, tagged, filled["messages"], wd))
    return res


def run_broker(broker: str, plan: Plan, clients: list[str], wd: Path) -> Results:
    bdir = wd / f"{broker}-{uuid.uuid4().hex[:6]}"
    try:
        if broker == "rokka":
            srv = procs.start_rokka(bdir)
            try:
                assert srv.proc is not None
                return workload("rokka", srv.namesrv, [srv.proc.pid], plan, clients, wd)
            finally:
                srv.stop()
        rmq = apache.start_rocketmq(bdir)
        try:
            return workload("rocketmq", rmq.namesrv, rmq.pids, plan, clients, wd)
        finally:
            rmq.stop()
    finally:
        shutil.rmtree(bdir, ignore_errors=True)


def median(runs: list[Results]) -> Results:
    out: Results = {}
    for key in runs[0] if runs else []:
        cols = list(zip(*(r[key] for r in runs if key in r), strict=True))
        out[key] = (statistics.median(cols[0]), statistics.median(cols[1]), statistics.median(cols[2]))
    return out


def report(res: dict[str, Results], brokers: list[str]) -> str:
    rows = []
    rk, ap = res.get("rokka", {}), res.get("rocketmq", {})
    for key in (rk or ap):
        a, b = rk.get(key, (NAN, NAN, NAN)), ap.get(key, (NAN, NAN, NAN))
        ratio = f"{a[0] / b[0]:.2f}x" if rk and ap and b[0] else "—"
        goal = ("PASS" if a[0] >= b[0] and a[2] < b[2] else "MISS") if rk and ap else "—"
        rows.append([key, *(fmt(res[x][key][0]) for x in brokers), ratio,
                     *(fmt(res[x][key][1], 2) for x in brokers), *(fmt(res[x][key][2], 1) for x in brokers), goal])
    return procs.table(["row (100 B bodies) [client]", *(f"{LABEL[x]} msg/s" for x in brokers), "rokka/Apache",
                        *(f"{LABEL[x]} p99 ms" for x in brokers), *(f"{LABEL[x]} CPU us/msg" for x in brokers),
                        "goal"], rows)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="bench_anchor_rocketmq", description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="fewer messages per row, one round (~2 minutes)")
    ap.add_argument("--rounds", type=int, default=None, help="rounds (default 1 quick, 2 full); medians")
    ap.add_argument("--brokers", default=",".join(BROKERS), help="subset of rokka,rocketmq")
    ap.add_argument("--clients", default="cpp,java", help="subset of cpp,java")
    args = ap.parse_args(argv)
    clients = [c for c in args.clients.split(",") if c in ("cpp", "java")]
    if "java" in clients and not JAVA_JAR.is_file():
        print(f"Java client skipped: {JAVA_JAR} is not built (make anchors)")
        clients.remove("java")
    brokers = [b for b in args.brokers.split(",") if b]
    if bad := [b for b in brokers if b not in BROKERS]:
        ap.error(f"unknown brokers {bad}")
    if why := harness.cpp_available():
        print(f"skipped: the RocketMQ C++ client is not available: {why}")
        return
    if "rocketmq" in brokers and (why := apache.missing()):
        print(f"Apache RocketMQ skipped: {why}")
        brokers.remove("rocketmq")
    plan = QUICK if args.quick else FULL
    rounds = max(1, args.rounds or (1 if args.quick else 2))
    wd = Path(tempfile.mkdtemp(prefix="rokka-bench-anchor-rmq-"))
    runs: dict[str, list[Results]] = {b: [] for b in brokers}
    t0 = time.monotonic()
    print(f"brokers {brokers}; clients {clients}; {plan}; {rounds} round(s); Apache RocketMQ "
          f"{apache.ROCKETMQ_VERSION}", flush=True)
    try:
        for i in range(rounds):
            for broker in (brokers if i % 2 == 0 else brokers[::-1]):
                time.sleep(5.0)  # bench_kafka.SETTLE_S: freed memory of the previous broker settles
                runs[broker].append(run_broker(broker, plan, clients, wd))
        print()
        print(report({b: median(r) for b, r in runs.items()}, [b for b in ("rokka", "rocketmq") if b in brokers]))
        print(f"\n({time.monotonic() - t0:.0f} s; {'--quick' if args.quick else 'full'} run; {rounds} round(s)"
              f"{', medians' if rounds > 1 else ''}; both ASYNC_FLUSH on disk; server CPU = server processes' "
              f"on-CPU time of every thread / messages, lib/cpu.py; machine shared with other work)")
    finally:
        shutil.rmtree(wd, ignore_errors=True)


if __name__ == "__main__":
    main()
