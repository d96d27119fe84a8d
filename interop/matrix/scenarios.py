"""Scenario drivers of the interop matrix: one ``rokka serve`` per scenario, one topic per cell.

Theory of operation
-------------------
A scenario runs every producer client against every consumer client at once: cell (P, C) owns the
topic ``mx-<scenario>-<P>-<C>`` (created up front with rokka's RocketMQ admin client, 2 queues).
Work is batched per client, not per cell: each producer process produces to its six cell topics in
one round, then each consumer runs once over its six topics; producers run in parallel, then
consumers run in parallel (threads, each driving one subprocess).

* plain / keys / tags / delay / txn: produce one round, consume once (a fresh group per consumer).
  Tags: RocketMQ consumers subscribe ``red || green``; Kafka consumers read a view created with
  CreateTopics (``rokka.view.topic`` / ``rokka.view.filter`` / ``rokka.view.filter.type=TAG``).
  Txn: every cell gets one aborted and then one committed transaction.
* handover: group ``GH-<C>`` reads batch 1 with a partner client of the other protocol (rokka's
  PullConsumer for Kafka columns, kafka-python for RocketMQ columns) and commits; batch 2 is read by
  C with the same group (exactly batch 2 must arrive); batch 3 by the partner again.
* restart: producers stay up while the server restarts (SIGTERM, same ports, same data) between two
  produce rounds; one consumer pass must return both batches.

``run_scenario`` returns a ``CellResult`` per (producer, consumer) pair; nothing raises for a cell's
failure, so one bad client cannot hide the rest of the table.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import harness
import trio

from matrix.clients import BY_NAME, CLIENTS, Client
from matrix.model import KAFKA, CellResult, Job, Obs, Spec, check_cell

BROKER_CONF = "messageDelayLevel=1s 2s 3s\nenablePropertyFilter=true\n"
SCENARIOS = ["plain", "keys+headers", "tags+filter", "delay", "txn", "handover", "restart"]
TAG_FILTER = "red || green"
LANG = "žluť-ß→✓"


@dataclass
class Round:
    """What one producer round sent: per cell, the jobs and the specs that must become visible."""

    jobs: dict[tuple[str, str], list[dict[str, Any]]] = field(default_factory=dict)
    visible: dict[tuple[str, str], list[Spec]] = field(default_factory=dict)
    acked: dict[tuple[str, str], int] = field(default_factory=dict)
    errors: dict[tuple[str, str], str] = field(default_factory=dict)


Reads = dict[tuple[str, str], tuple[list[Obs], str | None]]
# one consumer pass: (round it reads, what it got per cell, label, stand-in reader or None)
Read = tuple[Round, Reads, str, Callable[[Client], Client] | None]


# ------------------------------------------------------------------ records per scenario


def records(scenario: str, p: Client, c: Client, batch: int = 0) -> list[tuple[str | None, list[Spec]]]:
    """[(txn, specs)] for one cell; values are unique per cell and batch."""
    base = f"{scenario[:4]}-{p.short}-{c.short}-b{batch}"
    if scenario == "plain":
        return [(None, [Spec(f"{base}-{i}-{'x' * (i * 13)}") for i in range(8)])]
    if scenario == "keys+headers":
        return [(None, [Spec(f"{base}-{i}-{LANG}", key=None if i % 4 == 0 else f"key-{i % 3}",
                             headers=(("h1", f"v{i}"), ("lang", LANG)) if i % 2 else ())
                        for i in range(8)])]
    if scenario == "tags+filter":
        return [(None, [Spec(f"{base}-{i}", key=f"k{i}", tag=("red", "blue", "green")[i % 3],
                             headers=(("n", str(i)),)) for i in range(12)])]
    if scenario == "delay":
        return [(None, [Spec(f"{base}-{i}", delay=(0, 1, 2, 3)[i % 4], headers=(("n", str(i)),))
                        for i in range(8)])]
    if scenario == "txn":
        return [("abort", [Spec(f"{base}-aborted-{i}") for i in range(4)]),
                ("commit", [Spec(f"{base}-committed-{i}", key=f"k{i}", headers=(("n", str(i)),))
                            for i in range(4)])]
    # handover, restart: plain batches of keyed records
    return [(None, [Spec(f"{base}-{i}", key=f"k{i}") for i in range(6)])]


def visible(scenario: str, txn: str | None, spec: Spec) -> bool:
    if scenario == "tags+filter":
        return spec.tag in ("red", "green")
    return txn != "abort"


def topic(scenario: str, p: Client, c: Client) -> str:
    return f"mx-{scenario.split('+')[0]}-{p.short}-{c.short}"


def view(t: str) -> str:
    return f"{t}-view"


# ------------------------------------------------------------------ server and topics


def start_server(workdir: Path) -> harness.ServerProcess:
    conf = workdir / "broker.conf"
    conf.write_text(BROKER_CONF)
    data = workdir / "data"
    data.mkdir(parents=True, exist_ok=True)
    base = harness.serve_argv(data, "json")
    return harness.ServerProcess("rokka-serve", lambda ports: [*base(ports), "-c", str(conf)], workdir,
                                 data_dir=data).start()


def create_topics(srv: harness.ServerProcess, topics: list[str], queues: int = 2) -> None:
    from rokka.net.remoting.client import Admin, NamesrvClient, RemotingClient

    async def create() -> None:
        with trio.fail_after(60):
            async with RemotingClient() as rc:
                ns = NamesrvClient(rc, [srv.namesrv])
                admin = Admin(rc, ns)
                for t in topics:
                    await admin.create_topic(srv.broker, t, read_queue_nums=queues, write_queue_nums=queues)
                pending = list(topics)
                while pending:  # the broker registers new topics with the name server on its own
                    pending = [t for t in pending if await ns.get_route(t) is None]
                    if pending:
                        await trio.sleep(0.1)

    trio.run(create)


def create_views(srv: harness.ServerProcess, sources: list[str]) -> None:
    from kafka.admin import KafkaAdminClient, NewTopic

    admin = KafkaAdminClient(bootstrap_servers=srv.kafka, request_timeout_ms=20000)
    try:
        admin.create_topics([NewTopic(view(t), -1, 1, topic_configs={
            "rokka.view.topic": t, "rokka.view.filter": TAG_FILTER, "rokka.view.filter.type": "TAG"})
            for t in sources])
    finally:
        admin.close()


# ------------------------------------------------------------------ the runner


class Matrix:
    """One scenario's run: the server, the clients that load here, and the cell results."""

    def __init__(self, scenario: str, workdir: Path, producers: list[Client] | None = None,
                 consumers: list[Client] | None = None) -> None:
        self.scenario = scenario
        self.workdir = workdir
        self.producers = producers or CLIENTS
        self.consumers = consumers or CLIENTS
        self.results = {(p.name, c.name): CellResult(p.name, c.name, scenario)
                        for p in self.producers for c in self.consumers}
        self.missing = {cl.name: cl.missing() for cl in {*self.producers, *self.consumers}}
        self.srv: harness.ServerProcess | None = None
        self.log: list[str] = []

    # ----- helpers
    def live_producers(self) -> list[Client]:
        return [p for p in self.producers if not self.missing[p.name]]

    def live_consumers(self) -> list[Client]:
        return [c for c in self.consumers if not self.missing[c.name]]

    def cell_na(self, p: Client, c: Client) -> tuple[str, str] | None:
        """(reason, short reason) when the cell cannot run here, else None."""
        for cl in (p, c):
            if self.missing[cl.name]:
                return f"{cl.name} is not installed here: {self.missing[cl.name]}", f"{cl.name} not installed"
        if self.scenario == "txn" and p.txn_na:
            return p.txn_na, p.txn_na_short
        return None

    def active(self) -> list[tuple[Client, Client]]:
        return [(p, c) for p in self.producers for c in self.consumers if self.cell_na(p, c) is None]

    @staticmethod
    def parallel(fns: list[Callable[[], Any]]) -> list[Any]:
        with ThreadPoolExecutor(max_workers=max(len(fns), 1)) as pool:
            return [f.result() for f in [pool.submit(fn) for fn in fns]]

    # ----- producing
    def produce_round(self, batch: int, between: Callable[[], None] | None = None) -> Round:
        """Every live producer sends its cells' records (one process per producer); ``between``
        runs after a first half-round with the producers still up (the restart scenario)."""
        rnd = Round()
        for p, c in self.active():
            jobs = []
            for txn, specs in records(self.scenario, p, c, batch):
                jobs.append({"topic": topic(self.scenario, p, c), "txn": txn,
                             "messages": [s.to_json() for s in specs]})
                rnd.visible.setdefault((p.name, c.name), []).extend(
                    s for s in specs if visible(self.scenario, txn, s))
            rnd.jobs[(p.name, c.name)] = jobs
        assert self.srv is not None
        srv = self.srv

        def run(p: Client) -> None:
            cells = [k for k in rnd.jobs if k[0] == p.name]
            flat = [(k, j) for k in cells for j in rnd.jobs[k]]
            session = p.start_producer(srv, self.workdir, f"{self.scenario.split('+')[0]}{batch}")
            try:
                self._record(rnd, flat, session.produce([j for _, j in flat]))
            finally:
                session.close()

        self.parallel([functools.partial(run, p) for p in self.live_producers()])
        return rnd

    @staticmethod
    def _record(rnd: Round, flat: list[tuple[tuple[str, str], dict[str, Any]]],
                results: list[dict[str, Any]]) -> None:
        for (key, _job), r in zip(flat, results, strict=True):
            rnd.acked[key] = rnd.acked.get(key, 0) + int(r.get("acked") or 0)
            if r.get("error") and key not in rnd.errors:
                rnd.errors[key] = str(r["error"])[:300]

    # ----- consuming
    def consume_round(self, rnd: Round, *, group_of: Callable[[Client], str], commit: bool,
                      who: Callable[[Client], Client] | None = None) -> Reads:
        """Each live consumer column (or its stand-in ``who(c)``) reads its cells' topics once."""
        assert self.srv is not None
        srv = self.srv
        out: Reads = {}

        def run(c: Client) -> None:
            reader = who(c) if who else c
            jobs = []
            for (pn, cn), specs in rnd.visible.items():
                if cn != c.name:
                    continue
                t = topic(self.scenario, BY_NAME[pn], c)
                read = view(t) if self.scenario == "tags+filter" and reader.protocol == KAFKA else t
                expr = TAG_FILTER if self.scenario == "tags+filter" else "*"
                props = sorted({k for s in specs for k, _ in s.headers})
                jobs.append(Job((pn, cn), t, read, len(specs), expr, tuple(props)))
            if not jobs:
                return
            got, err = reader.consume(srv, self.workdir, jobs, group=group_of(c), commit=commit)
            for j in jobs:
                out[j.cell] = (got.get(j.read, []), err)

        self.parallel([functools.partial(run, c) for c in self.live_consumers()])
        return out

    # ----- verdicts
    def judge(self, rnds: list[Round], reads: list[Read]) -> None:
        """Fill the cell results: producer acks per round, then every read against its round."""
        for (pn, cn), res in self.results.items():
            na = self.cell_na(BY_NAME[pn], BY_NAME[cn])
            if na:
                res.na(*na)
                continue
            key = (pn, cn)
            res.sent = sum(len([m for j in r.jobs.get(key, []) for m in j["messages"]]) for r in rnds)
            for r in rnds:
                if r.acked.get(key, 0) < len([m for j in r.jobs.get(key, []) for m in j["messages"]]):
                    why = r.errors.get(key, "no error text")
                    res.fail(f"producer {pn}: {r.acked.get(key, 0)} acked; {why}")
            received = expected = 0
            for rnd, got, label, who in reads:
                obs, err = got.get(key, ([], "consumer did not run"))
                sub = CellResult(pn, cn, self.scenario)
                reader = who(BY_NAME[cn]) if who else BY_NAME[cn]
                check_cell(sub, BY_NAME[pn].protocol, reader.protocol, rnd.visible.get(key, []), obs)
                received += sub.received
                expected += sub.expected
                prefix = f"{label}: " if label else ""
                for why in sub.problems:
                    res.fail(prefix + why)
                if err and sub.problems:
                    res.fail(prefix + "consumer error: " + err.splitlines()[0][:300])
                    res.detail = err[-3000:]
            res.received, res.expected = received, expected


def run_scenario(scenario: str, workdir: Path, producers: list[Client] | None = None,
                 consumers: list[Client] | None = None) -> tuple[list[CellResult], float]:
    """Run one scenario end to end; returns every cell's result and the wall time in seconds."""
    t0 = time.monotonic()
    workdir.mkdir(parents=True, exist_ok=True)
    m = Matrix(scenario, workdir, producers, consumers)
    m.srv = start_server(workdir)
    try:
        topics = sorted({topic(scenario, p, c) for p, c in m.active()})
        create_topics(m.srv, topics)
        if scenario == "tags+filter":
            create_views(m.srv, sorted({topic(scenario, p, c) for p, c in m.active() if c.protocol == KAFKA}))
        DRIVERS.get(scenario, _simple)(m)
    finally:
        try:
            m.srv.stop_clean()
        except harness.HarnessError as exc:
            for res in m.results.values():
                if res.status == "pass":
                    res.fail(f"server did not stop cleanly: {str(exc)[:300]}")
    return list(m.results.values()), time.monotonic() - t0


def _fresh_group(m: Matrix, tag: str = "") -> Callable[[Client], str]:
    return lambda c: f"GC-{m.scenario.split('+')[0]}{tag}-{c.short}"


def _simple(m: Matrix) -> None:
    rnd = m.produce_round(0)
    got = m.consume_round(rnd, group_of=_fresh_group(m), commit=False)
    m.judge([rnd], [(rnd, got, "", None)])


def _handover(m: Matrix) -> None:
    def partner(c: Client) -> Client:
        return BY_NAME["rokka-client"] if c.protocol == KAFKA else BY_NAME["kafka-python"]

    def group(c: Client) -> str:
        return f"GH-{c.short}"

    r1 = m.produce_round(1)
    g1 = m.consume_round(r1, group_of=group, commit=True, who=partner)
    r2 = m.produce_round(2)
    g2 = m.consume_round(r2, group_of=group, commit=True)
    r3 = m.produce_round(3)
    g3 = m.consume_round(r3, group_of=group, commit=True, who=partner)
    m.judge([r1, r2, r3], [(r1, g1, "1st part, read by the partner", partner),
                           (r2, g2, "resumed by this client", None),
                           (r3, g3, "back to the partner", partner)])


def _restart(m: Matrix) -> None:
    """Producers stay up across a server restart: round 1, restart, round 2 on the same processes."""
    assert m.srv is not None
    srv = m.srv
    rnd = Round()
    for p, c in m.active():
        jobs = []
        for batch in (1, 2):
            for txn, specs in records(m.scenario, p, c, batch):
                jobs.append({"topic": topic(m.scenario, p, c), "txn": txn, "batch": batch,
                             "messages": [s.to_json() for s in specs]})
                rnd.visible.setdefault((p.name, c.name), []).extend(specs)
        rnd.jobs[(p.name, c.name)] = jobs
    sessions = {p.name: p.start_producer(srv, m.workdir, "restart") for p in m.live_producers()}
    try:
        for batch in (1, 2):
            if batch == 2:
                srv.restart()

            def run(p: Client, batch: int = batch) -> None:
                flat = [(k, j) for k, jobs in rnd.jobs.items() if k[0] == p.name
                        for j in jobs if j["batch"] == batch]
                m._record(rnd, flat, sessions[p.name].produce([j for _, j in flat]))
            m.parallel([functools.partial(run, p) for p in m.live_producers()])
    finally:
        for s in sessions.values():
            s.close()
    got = m.consume_round(rnd, group_of=_fresh_group(m), commit=False)
    m.judge([rnd], [(rnd, got, "", None)])


DRIVERS: dict[str, Callable[[Matrix], None]] = {"handover": _handover, "restart": _restart}
