"""The six clients of the matrix, each as a producer and as a consumer driver.

Theory of operation
-------------------
Every client runs in its own subprocess (``harness.JsonLinesProcess`` over the role scripts of this
package, or kcat itself), so a crash or hang fails only that client's cells.

* A producer is started once per scenario round and kept alive between ``produce()`` calls (the
  restart scenario restarts the server between two calls on the same process).  ``produce(jobs)``
  returns one ``{"acked": n, "error": ...}`` per job (a job = one topic's records, or one transaction).
* A consumer is one-shot: ``consume(jobs, group, commit)`` reads every job's topic (or view) with one
  consumer group until the job's expected count, lingers to catch extras, commits when asked and
  stops; it returns the observed records per read name and an error text (or None).

``missing()`` says why a client cannot run here (library not installed), so the matrix reports
those cells as n/a instead of failing.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import harness

from matrix import go_role, java_rmq_role, java_role
from matrix.model import KAFKA, ROCKETMQ, Job, Obs

HERE = Path(__file__).resolve().parent
PY = sys.executable
ROLE_TIMEOUT = 150.0


def _py_missing(module: str) -> str | None:
    r = subprocess.run([PY, "-c", f"import {module}"], capture_output=True, text=True, timeout=60)
    return None if r.returncode == 0 else f"{module} does not import: {r.stderr.strip()[-200:]}"


@dataclass(frozen=True)
class Client:
    """One client library: how to start its producer and consumer roles."""

    name: str      # column / row label
    short: str     # used in topic and group names
    protocol: str  # KAFKA | ROCKETMQ
    txn_na: str | None = None  # why its producer cannot do transactions (None: it can)
    txn_na_short: str = ""     # the same in a few words, for the table cell

    # ----- availability
    def missing(self) -> str | None:
        if self.name == "kafka-python":
            return _py_missing("kafka")
        if self.name == "confluent-kafka":
            return _py_missing("confluent_kafka")
        if self.name == "kcat":
            return None if harness.kcat_path() else "kcat is not installed"
        if self.name == "kafkajs":
            return harness.node_available("kafkajs")
        if self.name == "rocketmq-cpp":
            return harness.cpp_available()
        if self.name in go_role.GO_CLIENTS:
            return go_role.missing()
        if self.name == "java-kafka":
            return java_role.missing()
        if self.name == "rocketmq-java":
            return java_rmq_role.missing()
        return None

    # ----- argv of the role scripts
    def _argv(self, role: str) -> list[str]:
        if self.name in ("kafka-python", "confluent-kafka"):
            return [PY, str(HERE / "kafka_role.py"), self.name, role]
        if self.name == "kafkajs":
            return ["node", str(HERE / "kafkajs_role.js"), role]
        if self.name == "rocketmq-cpp":
            return [PY, str(HERE / "cpp_role.py"), role]
        if self.name == "rokka-client":
            return [PY, str(HERE / "rokka_role.py"), role]
        if self.name == "rocketmq-java":
            return [PY, str(HERE / "java_rmq_role.py"), role]
        if self.name == "java-kafka":
            return java_role.argv(role)
        if self.name in go_role.GO_CLIENTS:
            return go_role.argv(self.name, role)
        raise ValueError(self.name)

    def _params(self, srv: harness.ServerProcess) -> dict[str, Any]:
        if self.protocol == KAFKA:
            return {"bootstrap": srv.kafka, "brokers": [srv.kafka]}
        return {"namesrv": srv.namesrv}

    # ----- producer
    def start_producer(self, srv: harness.ServerProcess, workdir: Path, tag: str) -> ProducerSession:
        if self.name == "kcat":
            return KcatProducer(srv)
        params = {**self._params(srv), "group": f"PG_{self.short}_{tag}", "txn_id": f"tx-{self.short}-{tag}",
                  "txnId": f"tx-{self.short}-{tag}"}
        proc = harness.JsonLinesProcess(self._argv("producer"), name=f"{self.short}-producer-{tag}",
                                        workdir=workdir / f"{self.short}-producer-{tag}", cwd=HERE)
        proc.send(params)
        return RoleProducer(proc)

    # ----- consumer
    def consume(self, srv: harness.ServerProcess, workdir: Path, jobs: list[Job], *, group: str, commit: bool,
                timeout_s: float = 45.0, linger_s: float = 1.0) -> tuple[dict[str, list[Obs]], str | None]:
        if self.name == "kcat":
            return kcat_consume(srv, workdir, jobs, group=group, commit=commit, timeout_s=timeout_s,
                                linger_s=linger_s)
        params = {**self._params(srv), "group": group, "jobs": [j.to_json() for j in jobs],
                  "timeout_s": timeout_s, "linger_s": linger_s, "commit": commit}
        name = f"{self.short}-consumer-{group}"
        proc = harness.JsonLinesProcess(self._argv("consumer"), name=name, workdir=workdir / name, cwd=HERE)
        error = None
        try:
            proc.send(params)
            code = proc.close(timeout=timeout_s + 60)
            if code != 0 or proc.of("error"):
                error = f"{name} exit {code}: {proc.of('error')[:1]}\n{proc.describe()}"
        except harness.HarnessError as exc:
            error = str(exc)
        finally:
            proc.kill()
        out: dict[str, list[Obs]] = {j.read: [] for j in jobs}
        for e in proc.of("msg"):
            out.setdefault(e["read"], []).append(Obs.from_json(e))
        warnings = proc.of("warning")
        if warnings and error is None and not all(out.values()):
            error = f"{name} warnings: {warnings[:2]}"
        return out, error


class ProducerSession:
    def produce(self, jobs: list[dict[str, Any]]) -> list[dict[str, Any]]:
        raise NotImplementedError

    def close(self) -> None:
        pass


class RoleProducer(ProducerSession):
    def __init__(self, proc: harness.JsonLinesProcess) -> None:
        self.proc = proc
        self.seq = 0

    def produce(self, jobs: list[dict[str, Any]]) -> list[dict[str, Any]]:
        self.seq += 1
        seq = self.seq
        try:
            self.proc.send({"op": "produce", "seq": seq, "jobs": jobs})
            self.proc.wait_for(
                lambda evs: any(e.get("event") == "produced" and e.get("seq") == seq for e in evs),
                ROLE_TIMEOUT, f"produce round {seq}")
        except (harness.HarnessError, BrokenPipeError, OSError) as exc:
            why = str(exc).splitlines()[0] if str(exc) else repr(exc)
            return [{"acked": 0, "error": f"producer process failed: {why}", "log": str(exc)[-2000:]}
                    for _ in jobs]
        (ev,) = [e for e in self.proc.of("produced") if e.get("seq") == seq]
        return list(ev["results"])

    def close(self) -> None:
        try:
            self.proc.close(timeout=30)
        except harness.HarnessError:
            pass
        finally:
            self.proc.kill()


# ------------------------------------------------------------------ kcat


def _kcat_base(srv: harness.ServerProcess) -> list[str]:
    return ["-b", srv.kafka, "-X", "socket.timeout.ms=10000"]


class KcatProducer(ProducerSession):
    """kcat -P: one invocation per run of records sharing key presence and headers (-H is per call)."""

    def __init__(self, srv: harness.ServerProcess) -> None:
        self.srv = srv

    def produce(self, jobs: list[dict[str, Any]]) -> list[dict[str, Any]]:
        out = []
        for job in jobs:
            if job.get("txn"):
                out.append({"acked": 0, "error": "kcat has no transactional produce"})
                continue
            acked, err = 0, None
            for run in _runs(job["messages"]):
                keyed = run[0]["key"] is not None
                args = [*_kcat_base(self.srv), "-P", "-t", job["topic"], "-X", "acks=all"]
                if keyed:
                    args += ["-K", "::"]
                for k, v in _kcat_headers(run[0]):
                    args += ["-H", f"{k}={v}"]
                text = "".join((f"{m['key']}::" if keyed else "") + m["value"] + "\n" for m in run)
                try:
                    r = harness.run_kcat(args, input=text, timeout=60, check=False)
                except harness.HarnessError as exc:
                    err = err or str(exc)[:300]
                    continue
                if r.returncode == 0 and "failed" not in r.stderr.lower():
                    acked += len(run)
                else:
                    err = err or f"kcat exit {r.returncode}: {r.stderr[-300:]}"
            out.append({"acked": acked, "error": err})
        return out


def _kcat_headers(m: dict[str, Any]) -> list[tuple[str, str]]:
    h = [tuple(x) for x in m["headers"]]
    if m.get("tag"):
        h.append(("rocketmq.TAGS", m["tag"]))
    if m.get("delay"):
        h.append(("rocketmq.DELAY", str(m["delay"])))
    return h


def _runs(msgs: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    runs: list[list[dict[str, Any]]] = []
    for m in msgs:
        sig = (m["key"] is not None, _kcat_headers(m))
        if runs and (runs[-1][0]["key"] is not None, _kcat_headers(runs[-1][0])) == sig:
            runs[-1].append(m)
        else:
            runs.append([m])
    return runs


def _kcat_obs(m: dict[str, Any]) -> Obs:
    h = m.get("headers") or []
    return Obs(value=m["payload"], key=m.get("key"), headers=list(zip(h[0::2], h[1::2], strict=True)))


def kcat_consume(srv: harness.ServerProcess, workdir: Path, jobs: list[Job], *, group: str, commit: bool,
                 timeout_s: float, linger_s: float) -> tuple[dict[str, list[Obs]], str | None]:
    """Without commit: ``kcat -C -e`` per topic (repeated until the count is there).  With commit: one
    ``kcat -G group`` balanced consumer over every topic, stopped with SIGTERM (final commit)."""
    if commit:
        return _kcat_group(srv, workdir, jobs, group=group, timeout_s=timeout_s, linger_s=linger_s)
    out: dict[str, list[Obs]] = {}
    errors = []
    deadline = time.monotonic() + timeout_s
    for job in jobs:
        got: list[Obs] = []
        while True:
            try:
                r = harness.run_kcat([*_kcat_base(srv), "-C", "-t", job.read, "-o", "beginning", "-e", "-J",
                                      "-q", "-X", "isolation.level=read_committed"], timeout=30, check=False)
                got = [_kcat_obs(json.loads(line)) for line in r.stdout.splitlines() if line.strip()]
                if r.returncode != 0:
                    errors.append(f"kcat -C {job.read} exit {r.returncode}: {r.stderr[-300:]}")
            except harness.HarnessError as exc:
                errors.append(str(exc)[:300])
            if len(got) >= job.expect or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        out[job.read] = got
    return out, ("; ".join(errors[:3]) if errors and not all(out.values()) else None)


def _kcat_group(srv: harness.ServerProcess, workdir: Path, jobs: list[Job], *, group: str, timeout_s: float,
                linger_s: float) -> tuple[dict[str, list[Obs]], str | None]:
    exe = harness.kcat_path()
    assert exe
    reads = sorted({j.read for j in jobs})
    argv = [exe, *_kcat_base(srv), "-G", group, "-J", "-u", "-q", "-X", "auto.offset.reset=earliest",
            "-X", "session.timeout.ms=10000", "-X", "heartbeat.interval.ms=1000",
            "-X", "auto.commit.interval.ms=300", "-X", "isolation.level=read_committed", *reads]
    name = f"kcat-consumer-{group}"
    proc = harness.JsonLinesProcess(argv, name=name, workdir=workdir / name)
    want = {j.read: j.expect for j in jobs}

    def full(evs: list[dict[str, Any]]) -> bool:
        have: dict[str, int] = {}
        for e in evs:
            if "payload" in e:
                have[e["topic"]] = have.get(e["topic"], 0) + 1
        return all(have.get(r, 0) >= n for r, n in want.items())

    error = None
    try:
        proc.wait_for(full, timeout_s, "every expected record")
        time.sleep(linger_s + 0.6)  # extras, and one auto-commit interval
    except harness.HarnessError as exc:
        error = str(exc)
    try:
        code = proc.terminate()
        if code != 0 and error is None:
            error = f"kcat -G exited {code}\n{proc.describe()}"
    except harness.HarnessError as exc:
        error = error or str(exc)
    out: dict[str, list[Obs]] = {r: [] for r in reads}
    for e in proc.events:
        if "payload" in e:
            out.setdefault(e["topic"], []).append(_kcat_obs(e))
    return out, error


CLIENTS: list[Client] = [
    Client("kafka-python", "kpy", KAFKA),
    Client("confluent-kafka", "ck", KAFKA),
    Client("kcat", "kcat", KAFKA, txn_na="kcat has no transactional producer mode",
           txn_na_short="kcat has no txn"),
    Client("kafkajs", "kjs", KAFKA),
    Client("rocketmq-cpp", "cpp", ROCKETMQ,
           txn_na="the rocketmq==0.4.4 wheel has no TransactionMQProducer (its C API exports no "
                  "transactional producer)", txn_na_short="wheel has no txn producer"),
    Client("rokka-client", "rmq", ROCKETMQ),
    Client("java-kafka", "jv", KAFKA),
    Client("franz-go", "fgo", KAFKA),
    Client("sarama", "sgo", KAFKA),
    Client("rocketmq-client-go", "rgo", ROCKETMQ),
    Client("rocketmq-java", "jrmq", ROCKETMQ),
]
BY_NAME = {c.name: c for c in CLIENTS}
