"""``make conformance`` (mqadmin part): the Java mqadmin operations commands against Apache RocketMQ and rokka.

Theory of operation
-------------------
Issue 27 asks that each mqadmin command of README's table prints the same *shape* against rokka as against
Apache RocketMQ 4.9.7.  ``workload`` prepares a broker the same way on either side: topic ``O_T`` with 8 keyed
messages sent by the C++ producer, a live C++ push consumer of group ``O_CG`` (so consumerStatus,
brokerConsumeStats and statsAll have a consumer to show) and a live producer of group ``O_PG`` (rokka's own
client, heartbeating from a thread, for the ``producer`` command).  ``run_commands`` then runs ``COMMANDS``
(phase by phase; a phase's commands run three at a time, one ``MQAdminStartup`` JVM each) with the Java
tools of ``interop/java/rocketmq`` (4.9.8 by default).

``shape(text)`` reduces an output to what does not depend on the data: table header columns (``#A #B``
lines) and whether rows follow, the keys of ``key = value`` / ``key : value`` lines, and every other line
with its numbers, addresses, ids and paths replaced by placeholders.  ``compare_shapes`` calls two shapes
"yes" when headers, line templates and keys are equal, "shape" when only the printed key sets differ (a
config dump: Apache's broker prints ~200 fields of its own, rokka its own; the keys are listed), else "no".
``interop/test_mqadmin_ops_java.py`` reuses ``workload``, ``COMMANDS`` and ``run_commands`` against rokka.
"""

from __future__ import annotations

import re
import subprocess
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import harness
import rmq_cpp
import rmq_java
import trio

TOPIC, GROUP, CLONE, PRODUCER, NAMESPACE = "O_T", "O_CG", "O_CG2", "O_PG", "O_NS"
RUNTIME_KEY, RUNTIME_VALUE = "shortPollingTimeMills", "1500"
NAMESRV_KEY, NAMESRV_VALUE = "orderMessageEnable", "true"


def commands(broker: str, broker_name: str = "broker-a") -> list[dict[str, list[str]]]:
    """The commands in phases: a later phase reads what an earlier one changed."""
    return [
        {
            "getNamesrvConfig": ["getNamesrvConfig"],
            "updateBrokerConfig": ["updateBrokerConfig", "-b", broker, "-k", RUNTIME_KEY, "-v", RUNTIME_VALUE],
            "updateNamesrvConfig": ["updateNamesrvConfig", "-k", NAMESRV_KEY, "-v", NAMESRV_VALUE],
            "cloneGroupOffset": ["cloneGroupOffset", "-s", GROUP, "-d", CLONE, "-t", TOPIC],
            "consumerStatus": ["consumerStatus", "-g", GROUP],
            "brokerConsumeStats": ["brokerConsumeStats", "-b", broker],
            "queryCq": ["queryCq", "-t", TOPIC, "-q", "0", "-i", "0", "-c", "2"],
            "producer": ["producer", "-b", broker],
            "updateKvConfig": ["updateKvConfig", "-s", NAMESPACE, "-k", "k1", "-v", "v1"],
            "getConsumerConfig": ["getConsumerConfig", "-g", GROUP],
            "wipeWritePerm": ["wipeWritePerm", "-b", broker_name],
        },
        {
            "getBrokerConfig": ["getBrokerConfig", "-b", broker],
            "getNamesrvConfig2": ["getNamesrvConfig"],
            "statsAll": ["statsAll", "-t", TOPIC],
            "deleteKvConfig": ["deleteKvConfig", "-s", NAMESPACE, "-k", "k1"],
            "addWritePerm": ["addWritePerm", "-b", broker_name],
            "cleanExpiredCQ": ["cleanExpiredCQ", "-b", broker],
            "cleanUnusedTopic": ["cleanUnusedTopic", "-b", broker],
            "brokerStatus": ["brokerStatus", "-b", broker],
        },
    ]


def core_commands(broker: str) -> dict[str, list[str]]:
    """The commands ``interop/test_mqadmin_java.py`` tests against rokka: compared too (a third phase)."""
    return {
        "clusterList": ["clusterList"],
        "topicList": ["topicList"],
        "topicRoute": ["topicRoute", "-t", TOPIC],
        "topicStatus": ["topicStatus", "-t", TOPIC],
        "consumerProgress": ["consumerProgress", "-g", GROUP],
        "queryMsgByKey": ["queryMsgByKey", "-t", TOPIC, "-k", "k3"],
        "updateTopic": ["updateTopic", "-c", "DefaultCluster", "-t", "O_Adm", "-r", "3", "-w", "3"],
        "updateSubGroup": ["updateSubGroup", "-c", "DefaultCluster", "-g", "O_AdmGroup"],
    }


def run_commands(line: str, home: Path, namesrv: str, phases: list[dict[str, list[str]]],
                 ) -> dict[str, subprocess.CompletedProcess[str]]:
    def one(args: list[str]) -> subprocess.CompletedProcess[str]:
        return subprocess.run(rmq_java.mqadmin_argv(line, home, *args, "-n", namesrv), capture_output=True,
                              text=True, timeout=90, env=rmq_java.mqadmin_env(home), check=False, cwd=home)

    out: dict[str, subprocess.CompletedProcess[str]] = {}
    for phase in phases:
        # Three JVMs at a time: more on two cores push the admin client past its 3 s request timeouts.
        with ThreadPoolExecutor(max_workers=3) as pool:
            futures = {name: pool.submit(one, args) for name, args in phase.items()}
            out.update({name: f.result() for name, f in futures.items()})
    return out


class LiveProducer:
    """A producer of group ``PRODUCER`` that stays registered: rokka's trio client in its own thread, one
    send (route + connection) then a HEART_BEAT every second until ``close``."""

    def __init__(self, namesrv: str, client_id: str = "127.0.0.1@O_live_producer") -> None:
        self.namesrv, self.client_id = namesrv, client_id
        self._stop = threading.Event()
        self._ready = threading.Event()
        self.error: BaseException | None = None
        self._thread = threading.Thread(target=self._main, name="live-producer", daemon=True)

    def start(self, timeout: float = 60.0) -> LiveProducer:
        self._thread.start()
        if not self._ready.wait(timeout) or self.error is not None:
            raise harness.HarnessError(f"live producer did not start: {self.error!r}")
        return self

    def _main(self) -> None:
        try:
            trio.run(self._run)
        except BaseException as exc:  # noqa: BLE001 -- reported by start() / close()
            self.error = exc
            self._ready.set()

    async def _run(self) -> None:
        from rokka.net.remoting.client import NamesrvClient, Producer, RemotingClient  # noqa: PLC0415

        async with RemotingClient() as rc:
            producer = Producer(rc, NamesrvClient(rc, [self.namesrv]), PRODUCER)
            with trio.fail_after(30):
                await producer.send(TOPIC, b"live-producer")
                await producer.heartbeat(self.client_id)
            self._ready.set()
            while not self._stop.is_set():
                await trio.sleep(1.0)
                with trio.fail_after(30):
                    await producer.heartbeat(self.client_id)
            with trio.fail_after(30):
                await producer.shutdown(self.client_id)

    def close(self) -> None:
        self._stop.set()
        self._thread.join(60)


@dataclass
class Workload:
    consumer: harness.JsonLinesProcess
    producer: LiveProducer


@contextmanager
def workload(namesrv: str, workdir: Path) -> Iterator[Workload]:
    """Topic ``TOPIC`` with 8 keyed messages, a live push consumer of ``GROUP``, a live producer."""
    rmq_cpp.send(namesrv, workdir, "sync", [{"topic": TOPIC, "body": f"b{i}", "keys": f"k{i}", "tags": "t"}
                                            for i in range(8)], group=PRODUCER)
    consumer = rmq_cpp.start_push(namesrv, workdir, group=GROUP, topic=TOPIC, name="ops-consumer")
    producer: LiveProducer | None = None
    try:
        rmq_cpp.wait_consuming(namesrv, workdir, TOPIC, [consumer], timeout=120)
        producer = LiveProducer(namesrv).start()
        yield Workload(consumer, producer)
    finally:
        if producer is not None:
            producer.close()
        consumer.close()


# -- shapes -------------------------------------------------------------------------------------------------

_HEADER = re.compile(r"^#\S")
_KV = re.compile(r"^\s*([A-Za-z][\w.\-]*)\s*[=:](\s|$)")
_PLACEHOLDERS: list[tuple[re.Pattern[str], str]] = [
    (re.compile(r"\d+\.\d+\.\d+\.\d+(:\d+)?"), "ADDR"),
    (re.compile(r"\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(,\d+)?"), "TIME"),
    (re.compile(r"(/[\w.\-@]+)+"), "PATH"),
    (re.compile(r"\b[0-9A-F]{24,}\b"), "ID"),
    (re.compile(r"\d+-ADDR@[\w\-]+|ADDR@[\w\-#.]+"), "CLIENT"),
    (re.compile(r"V\d+_\d+_\d+(_SNAPSHOT)?"), "VERSION"),
    (re.compile(r"-?\d+(\.\d+)?"), "N"),
    (re.compile(r"\s+"), " "),
]


def template(ln: str) -> str:
    for pat, repl in _PLACEHOLDERS:
        ln = pat.sub(repl, ln)
    return ln.strip()


def shape(text: str) -> dict[str, Any]:
    """Header columns (with "rows follow"), keys of key/value lines, templates of the other lines."""
    headers: list[tuple[tuple[str, ...], bool]] = []
    keys: set[str] = set()
    lines: list[str] = []
    in_table = False
    for raw in text.splitlines():
        ln = raw.rstrip()
        if "logback" in ln.lower() or ln.startswith(("SLF4J", "OpenJDK", "Java HotSpot")):
            continue
        if not ln.strip():
            in_table = False
            continue
        if _HEADER.match(ln):
            headers.append((tuple(c.strip() for c in ln.split("#") if c.strip()), False))
            in_table = True
        elif in_table:
            if not headers[-1][1]:
                headers[-1] = (headers[-1][0], True)
        elif m := _KV.match(ln):
            keys.add(m.group(1))
        else:
            t = template(ln)
            if not lines or lines[-1] != t:
                lines.append(t)
    return {"headers": headers, "keys": sorted(keys), "lines": lines}


def shape_of(command: str, text: str) -> dict[str, Any]:
    """``shape``, except for topicList: one topic name a line, in hash order; the names are its keys."""
    if command == "topicList":
        return {"headers": [], "keys": sorted(text.split()), "lines": []}
    return shape(text)


def compare_shapes(rokka: dict[str, Any], apache: dict[str, Any]) -> tuple[str, list[str]]:
    """(verdict, notes): "yes" when headers, line templates and keys match; "shape" when headers and line
    templates match but the printed key sets differ (a config dump of each server's own fields); "no"."""
    notes: list[str] = []
    if rokka["headers"] != apache["headers"]:
        notes.append(f"headers: rokka {rokka['headers']} / apache {apache['headers']}")
    if rokka["lines"] != apache["lines"]:
        notes.append(f"lines: rokka {rokka['lines'][:8]} / apache {apache['lines'][:8]}")
    verdict = "no" if notes else "yes"
    extra = sorted(set(rokka["keys"]) - set(apache["keys"]))
    lacking = sorted(set(apache["keys"]) - set(rokka["keys"]))
    if extra:
        notes.append(f"keys only rokka prints ({len(extra)}): {extra[:16]}{' ...' if len(extra) > 16 else ''}")
    if lacking:
        notes.append(f"keys only Apache prints ({len(lacking)}): {lacking[:16]}{' ...' if len(lacking) > 16 else ''}")
    if verdict == "yes" and (extra or lacking):
        verdict = f"shape (keys: {len(set(rokka['keys']) & set(apache['keys']))} shared, {len(extra)} rokka-only, " \
                  f"{len(lacking)} Apache-only)"
    return verdict, notes


def failed(r: subprocess.CompletedProcess[str]) -> str | None:
    """Why an mqadmin run failed (it exits 0 after printing a SubCommandException), or None."""
    text = r.stdout + r.stderr
    if r.returncode != 0:
        return f"exit {r.returncode}"
    if "Exception" in text:
        return next((ln.strip() for ln in text.splitlines() if "Exception" in ln), "exception")[:160]
    return None


def on_broker(namesrv: str, broker: str, wd: Path, line: str = "v4") -> dict[str, subprocess.CompletedProcess[str]]:
    home = wd / "home"
    home.mkdir(parents=True, exist_ok=True)
    with workload(namesrv, wd / "clients"):
        return run_commands(line, home, namesrv, [*commands(broker), core_commands(broker)])


def rokka_side(wd: Path) -> dict[str, subprocess.CompletedProcess[str]]:
    srv = harness.start_serve(wd / "server")
    try:
        return on_broker(srv.namesrv, srv.broker, wd)
    finally:
        srv.stop()


def apache_side(wd: Path, start: Callable[[Path], Any]) -> dict[str, subprocess.CompletedProcess[str]]:
    rmq = start(wd / "rocketmq")
    try:
        return on_broker(rmq.namesrv, rmq.broker, wd)
    finally:
        rmq.stop()


def table(rk: dict[str, subprocess.CompletedProcess[str]], ap: dict[str, subprocess.CompletedProcess[str]],
          ) -> tuple[list[tuple[str, str, str, str]], dict[str, list[str]]]:
    """Rows (command, rokka, apache, same shape?) and the notes per command."""
    rows: list[tuple[str, str, str, str]] = []
    details: dict[str, list[str]] = {}
    for name in rk:
        rk_why, ap_why = failed(rk[name]), failed(ap[name])
        verdict, notes = compare_shapes(shape_of(name, rk[name].stdout), shape_of(name, ap[name].stdout))
        if rk_why or ap_why:
            verdict = "no"
            notes = [f"rokka: {rk_why}", f"apache: {ap_why}", *notes]
        rows.append((f"mqadmin: {name}", "error" if rk_why else "ran", "error" if ap_why else "ran", verdict))
        if notes:
            details[f"mqadmin: {name}"] = notes
    return rows, details


def suite(wd: Path, rows: list[tuple[str, str, str, str]], details: dict[str, list[str]], raw: dict[str, Any]) -> None:
    """run.py's mqadmin section: rokka, then Apache RocketMQ 4.9.7 (one broker at a time), compared."""
    from benchmarks.lib import apache  # noqa: PLC0415

    rk = rokka_side(wd / "mqadmin-rokka")
    ap = apache_side(wd / "mqadmin-apache", apache.start_rocketmq)
    raw["mqadmin"] = {side: {n: r.stdout for n, r in out.items()} for side, out in (("rokka", rk), ("apache", ap))}
    more_rows, more_details = table(rk, ap)
    rows.extend(more_rows)
    details.update(more_details)

