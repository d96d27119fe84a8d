"""The soak: SIGTERM and ``kill -9`` rounds of a real ``rokka serve`` (SYNC_FLUSH) under load from both protocols.

Theory of operation
-------------------
``run_soak(SoakConfig)`` starts ``rokka serve`` with a broker.conf of ``flushDiskType=SYNC_FLUSH`` on fixed
ports (``interop/harness.py``: restarts come back on the same ports and data dir), creates the topics, and
starts one loader process per producer (``benchmarks.soak.loaders``: confluent-kafka idempotent and
transactional, kafka-python idempotent and plain acks=all, rokka's RocketMQ client and the C++ client sync sends). Then
``rounds`` times: load for ``round_s``, SIGTERM (the exit code must be 0), start, load, ``kill -9``, start.
After the rounds the loaders get ``settle_s`` to deliver what is pending, are stopped (they flush), and
everything is read back from the restarted server: Kafka topics with a read_committed consumer from offset
0, the RocketMQ topic with pulls of every queue from offset 0.

Checks (``SoakResult.checks``): every SIGTERM exit 0; 0 acknowledged records lost (every producer); 0
duplicates from the idempotent producer; every committed transaction's records present exactly once;
no record of an aborted transaction visible to read_committed; in-doubt transactions all-or-nothing.
Duplicates of the non-idempotent producers (kafka-python without idempotence, RocketMQ) are reported,
not failed: those clients may resend after a lost answer, as with Kafka and RocketMQ.
"""

from __future__ import annotations

import platform
import signal
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT / "interop") not in sys.path:
    sys.path.insert(0, str(ROOT / "interop"))

import harness  # noqa: E402  (interop/harness.py)

KAFKA_TOPICS = {"idem": "soak-idem", "kp-idem": "soak-kp-idem", "txn": "soak-txn", "plain": "soak-plain"}
IDEMPOTENT = ("idem", "kp-idem", "txn")
RMQ_TOPICS = {"rmq": "soak-rmq", "cpp": "soak-cpp"}
PARTITIONS = 4
CONF = "flushDiskType=SYNC_FLUSH\ntransactionTimeOut=3000\ntransactionCheckInterval=1000\n"


@dataclass
class SoakConfig:
    rounds: int = 3                 # SIGTERM stops; as many kill -9 rounds again
    round_s: float = 3.0            # load between two stops
    settle_s: float = 15.0          # after the last round, before the loaders stop
    rate: float = 100.0             # records per second per loader
    roles: tuple[str, ...] = ("idem", "kp-idem", "txn", "plain", "rmq", "cpp")
    workdir: Path | None = None
    stop_timeout_s: float = 60.0
    server_pythonpath: str | None = None  # run server and loaders from another rokka tree (a folder with rokka/)


@dataclass
class SoakResult:
    config: dict[str, Any]
    sigterm_exits: list[int | None] = field(default_factory=list)
    kill_rounds: int = 0
    per_role: dict[str, dict[str, Any]] = field(default_factory=dict)
    loader_errors: dict[str, int] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)
    seconds: float = 0.0
    workdir: str = ""

    def checks(self) -> list[str]:
        bad = list(self.problems)
        nonzero = [c for c in self.sigterm_exits if c != 0]
        if nonzero:
            bad.append(f"SIGTERM exits not 0: {Counter(nonzero)} of {len(self.sigterm_exits)} stops")
        for role, r in self.per_role.items():
            if r.get("lost"):
                bad.append(f"{role}: {r['lost']} acknowledged records lost (e.g. {r.get('lost_sample')})")
            if role in IDEMPOTENT and r.get("dups"):
                bad.append(f"{role}: {r['dups']} duplicates (e.g. {r.get('dup_sample')})")
            for key in ("aborted_visible", "doubt_partial"):
                if r.get(key):
                    bad.append(f"{role}: {key} {r[key]}")
        return bad

    def table(self) -> str:
        head = (f"machine {platform.node()} ({platform.machine()}, {platform.system()}), "
                f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; {len(self.sigterm_exits)} SIGTERM stops "
                f"(exit codes {dict(Counter(self.sigterm_exits))}) + {self.kill_rounds} kill -9 rounds, "
                f"SYNC_FLUSH, {self.config['round_s']} s of load per round, {self.seconds:.0f} s in all")
        rows = [head, "", "| producer | acknowledged | lost | duplicates | notes |", "|---|---|---|---|---|"]
        names = {"idem": "confluent-kafka idempotent", "kp-idem": "kafka-python idempotent",
                 "txn": "confluent-kafka transactional (records)",
                 "plain": "kafka-python acks=all", "rmq": "rokka RocketMQ client, sync send",
                 "cpp": "RocketMQ C++ client, send_sync"}
        for role, r in self.per_role.items():
            note = r.get("note", "")
            rows.append(f"| {names.get(role, role)} | {r.get('acked', 0)} | {r.get('lost', 0)} | {r.get('dups', 0)} "
                        f"| {note} |")
        return "\n".join(rows)


# --------------------------------------------------------------------------- loaders


def start_loader(role: str, server: harness.ServerProcess, workdir: Path, gen: int, rate: float,
                 pythonpath: str | None = None) -> Any:
    topic = RMQ_TOPICS[role] if role in RMQ_TOPICS else KAFKA_TOPICS[role]
    path = f"{pythonpath}:{ROOT}" if pythonpath else str(ROOT)
    p = harness.JsonLinesProcess([sys.executable, "-m", "benchmarks.soak.loaders"], name=f"{role}-{gen}",
                                 workdir=workdir / f"{role}-{gen}", cwd=ROOT, env={"PYTHONPATH": path})
    p.send({"role": role, "bootstrap": server.kafka, "namesrv": server.namesrv, "topic": topic, "rate": rate,
            "prefix": f"{role}{gen}"})
    return p


def create_topics(server: harness.ServerProcess, roles: tuple[str, ...]) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    kafka = [KAFKA_TOPICS[r] for r in roles if r in KAFKA_TOPICS]
    if kafka:
        a = AdminClient({"bootstrap.servers": server.kafka})
        futs = a.create_topics([NewTopic(t, num_partitions=PARTITIONS, replication_factor=1) for t in kafka],
                               operation_timeout=30, request_timeout=30)
        for t in kafka:
            futs[t].result(timeout=30)
    for role, topic in RMQ_TOPICS.items():
        if role in roles:
            harness.create_rocketmq_topic(server, topic, queues=PARTITIONS)


# --------------------------------------------------------------------------- reading back


def read_kafka(bootstrap: str, topic: str, timeout: float = 180.0) -> Counter[str]:
    """Every value of ``topic`` as a read_committed consumer sees it, from offset 0 to the end."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"soak-verify-{time.time_ns()}",
                  "enable.auto.commit": False, "isolation.level": "read_committed",
                  "auto.offset.reset": "earliest"})
    out: Counter[str] = Counter()
    try:
        parts = [TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(PARTITIONS)]
        ends = {p: c.get_watermark_offsets(TopicPartition(topic, p), timeout=30)[1] for p in range(PARTITIONS)}
        c.assign(parts)
        pos = {p: 0 for p in range(PARTITIONS)}
        deadline = time.monotonic() + timeout
        idle = 0
        while time.monotonic() < deadline:
            batch = c.consume(1000, 1.0)
            for m in batch:
                if m.error() is None:
                    out[m.value().decode()] += 1
                    pos[m.partition()] = m.offset() + 1
            done = all(pos[p] >= ends[p] for p in pos)
            idle = idle + 1 if not batch else 0
            if done or idle >= 5:  # read_committed stops short of aborted / control records at the end
                break
    finally:
        c.close()
    return out


def read_rocketmq(server: harness.ServerProcess, topic: str, timeout: float = 180.0) -> Counter[str]:
    import trio
    from rokka.net.remoting.client import NamesrvClient, PullConsumer, RemotingClient

    out: Counter[str] = Counter()

    async def main() -> None:
        with trio.fail_after(timeout):
            async with RemotingClient() as rc:
                consumer = PullConsumer(rc, NamesrvClient(rc, [server.namesrv]), "soak-verify")
                for mq in await consumer.fetch_subscribe_queues(topic):
                    offset, end = 0, await consumer.max_offset(mq)
                    while offset < end:
                        pulled = await consumer.pull(mq, offset)
                        if not pulled.messages:
                            break
                        for m in pulled.messages:
                            out[m.body.decode()] += 1
                        offset = pulled.messages[-1].queue_offset + 1

    trio.run(main)
    return out


def tally(role: str, loader_events: list[dict[str, Any]], stored: Counter[str]) -> dict[str, Any]:
    if role != "txn":
        acked = {e["v"] for e in loader_events if e.get("e") == "ack"}
        lost = sorted(acked - set(stored))
        dups = [v for v, n in stored.items() if n > 1]
        return {"acked": len(acked), "stored": len(stored), "lost": len(lost), "lost_sample": lost[:5],
                "dups": len(dups), "dup_sample": dups[:5],
                "note": "" if role in IDEMPOTENT else "duplicates allowed (no idempotence)"}
    committed = [v for e in loader_events if e.get("e") == "commit" for v in e["vs"]]
    aborted = [v for e in loader_events if e.get("e") == "abort" for v in e["vs"]]
    doubt = [e["vs"] for e in loader_events if e.get("e") == "doubt"]
    lost = [v for v in committed if stored[v] == 0]
    dups = [v for v in committed if stored[v] > 1]
    visible = [v for v in aborted if stored[v]]
    partial = [vs for vs in doubt if 0 < sum(1 for v in vs if stored[v]) < len(vs)]
    n_commit = sum(1 for e in loader_events if e.get("e") == "commit")
    n_abort = sum(1 for e in loader_events if e.get("e") == "abort")
    return {"acked": len(committed), "stored": len(stored), "lost": len(lost), "lost_sample": lost[:5],
            "dups": len(dups), "dup_sample": dups[:5], "aborted_visible": len(visible),
            "doubt_partial": len(partial),
            "note": f"{n_commit} transactions committed, {n_abort} aborted (invisible: {len(aborted) - len(visible)}"
                    f"/{len(aborted)} records), {len(doubt)} in doubt"}


# --------------------------------------------------------------------------- the run


def _stop(server: harness.ServerProcess, sig: int, timeout: float, res: SoakResult) -> None:
    try:
        code = server.stop(sig, timeout=timeout)
    except harness.HarnessError as exc:
        res.problems.append(f"stop with signal {sig}: {str(exc)[:300]}")
        code = None
    if sig == signal.SIGTERM:
        res.sigterm_exits.append(code)
        if code != 0:
            res.problems.append(f"SIGTERM exit {code}; stderr tail: {server.stderr_tail(5)[-600:]}")
    else:
        res.kill_rounds += 1


def _restart(server: harness.ServerProcess, res: SoakResult) -> bool:
    """Start again (twice at most); a server that cannot start ends the soak (reported)."""
    for attempt in (1, 2):
        try:
            server.start()
            return True
        except harness.HarnessError as exc:
            res.problems.append(f"restart attempt {attempt} failed: {str(exc)[-600:]}")
    return False


def run_soak(cfg: SoakConfig, log: Any = print) -> SoakResult:
    t0 = time.monotonic()
    base = Path(tempfile.mkdtemp(prefix="rokka-soak-", dir=cfg.workdir))
    data = base / "server" / "data"
    data.mkdir(parents=True)
    conf = base / "server" / "broker.conf"
    conf.write_text(CONF)
    server = harness.ServerProcess("rokka-serve", harness.serve_argv(data, "json", conf), base / "server",
                                   data_dir=data,
                                   env={"PYTHONPATH": cfg.server_pythonpath} if cfg.server_pythonpath else None).start()
    res = SoakResult(config={"rounds": cfg.rounds, "round_s": cfg.round_s, "rate": cfg.rate}, workdir=str(base))
    loaders: dict[str, list[Any]] = {}
    try:
        create_topics(server, cfg.roles)
        loaders = {r: [start_loader(r, server, base / "clients", 0, cfg.rate, cfg.server_pythonpath)]
                   for r in cfg.roles}
        for n in range(2 * cfg.rounds):
            time.sleep(cfg.round_s)
            sig = signal.SIGTERM if n % 2 == 0 else signal.SIGKILL
            _stop(server, sig, cfg.stop_timeout_s, res)
            if not _restart(server, res):
                return res
            for role, procs in loaders.items():  # a loader that died is replaced (and counted)
                if procs[-1].proc.poll() is not None:
                    why = procs[-1].describe()[-400:]
                    res.problems.append(f"loader {role} exited {procs[-1].proc.returncode}: {why}")
                    procs.append(start_loader(role, server, base / "clients", len(procs), cfg.rate,
                                               cfg.server_pythonpath))
            acked = sum(1 for ps in loaders.values() for p in ps for e in list(p.events) if e.get("e") == "ack")
            log(f"soak: round {n + 1}/{2 * cfg.rounds} ({signal.Signals(sig).name}) done, {acked} acks so far, "
                f"SIGTERM exits {dict(Counter(res.sigterm_exits))}")
        time.sleep(cfg.settle_s)
        for procs in loaders.values():
            try:
                procs[-1].close(timeout=150)
            except harness.HarnessError as exc:
                res.problems.append(f"loader did not stop: {str(exc)[:300]}")
        for role, procs in loaders.items():
            events = [e for p in procs for e in p.events]
            res.loader_errors[role] = sum(1 for e in events if e.get("e") in ("nack", "error"))
            try:
                stored = (read_rocketmq(server, RMQ_TOPICS[role]) if role in RMQ_TOPICS
                          else read_kafka(server.kafka, KAFKA_TOPICS[role]))
            except Exception as exc:  # noqa: BLE001 - reported, the other producers are still checked
                res.problems.append(f"{role}: reading back failed: {exc!r}"[:400])
                stored = Counter()
            res.per_role[role] = tally(role, events, stored)
        _stop(server, signal.SIGTERM, cfg.stop_timeout_s, res)
    finally:
        for procs in loaders.values():
            for p in procs:
                p.kill()
        if server.running():
            server.kill9()
        res.seconds = time.monotonic() - t0
    return res
