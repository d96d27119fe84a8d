"""``make conformance``: the Java client scenarios against Apache Kafka / Apache RocketMQ and against rokka.

Run: ``python interop/conformance/run.py [--only kafka|rocketmq] [--scenarios a,b] [--json FILE]``

Theory of operation
-------------------
Issue 21: each Java scenario of the interop suites also runs against the broker a user would run
instead, and the outcomes are compared.  Brokers run one at a time (JVMs are heavy on a 2-core machine),
each fresh, always stopped (try/finally):

* Kafka: ``kafka_scenarios`` (the Java Kafka client 4.x driver of ``interop/java/kafka``) against
  ``rokka serve`` (``kafkaGroupInitialRebalanceDelayMs=0``) and Apache Kafka 4.4.0
  (``benchmarks/lib/apache.py``, ``group.initial.rebalance.delay.ms=0``: the same setting);
* RocketMQ: the scenarios of ``interop/test_rocketmq_java.py`` (the Java RocketMQ client 4.9.8 driver of
  ``interop/java/rocketmq``, all in one JVM) against ``rokka serve`` and Apache RocketMQ 4.9.7, both with
  ``enablePropertyFilter=true``, ``transactionCheckInterval=1000``, ``transactionTimeOut=1000`` (the
  suite's broker.conf; Apache's defaults would check transactions after 60 s); each outcome reduced by
  ``rocketmq_summaries`` (the scenarios run concurrently, so queues, offsets and interleavings vary).

``compare.verdict`` reduces each pair of outcomes to "same" or the paths that differ; the table
(scenario, rokka, Apache, same?) is printed, then every difference.  Exit code 0 when every scenario ran
on both brokers (differences are findings for README's compatibility section, not failures), 1 when a
broker did not start.  Needs ``make anchors`` and ``make install-test`` (the Java drivers).
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
for p in (str(HERE), str(ROOT / "interop"), str(ROOT)):
    if p not in sys.path:
        sys.path.insert(0, p)

import compare  # noqa: E402
import harness  # noqa: E402
import kafka_scenarios  # noqa: E402
import mqadmin_shapes  # noqa: E402
import rmq_java  # noqa: E402
import rocketmq_summaries  # noqa: E402

from benchmarks.lib import apache  # noqa: E402

RMQ_SCENARIOS = ["send", "filter", "delay", "transaction", "clustering", "orderly", "broadcast", "litepull",
                 "request", "trace"]
RMQ_CONF = {"enablePropertyFilter": "true", "transactionCheckInterval": "1000", "transactionTimeOut": "1000"}
KAFKA_ROKKA_CONF = {"kafkaGroupInitialRebalanceDelayMs": "0"}
KAFKA_APACHE_CONF = {"group.initial.rebalance.delay.ms": "0"}


def _conf(path: Path, keys: dict[str, str]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(f"{k}={v}\n" for k, v in keys.items()))
    return path


def kafka_on_rokka(wd: Path, names: list[str]) -> dict[str, Any]:
    srv = harness.start_serve(wd / "server", conf=_conf(wd / "server" / "broker.conf", KAFKA_ROKKA_CONF))
    try:
        def restart(hard: bool) -> None:
            srv.restart(hard=hard)
        broker = kafka_scenarios.Broker("rokka", lambda: srv.kafka, restart)
        return kafka_scenarios.run_all(broker, wd / "java", names)
    finally:
        srv.stop()


def kafka_on_apache(wd: Path, names: list[str]) -> dict[str, Any]:
    ak = apache.start_kafka(wd / "kafka", KAFKA_APACHE_CONF)
    try:
        def restart(hard: bool) -> None:
            ak.restart(hard=hard)
        broker = kafka_scenarios.Broker("apache", lambda: ak.bootstrap, restart)
        return kafka_scenarios.run_all(broker, wd / "java", names)
    finally:
        ak.stop()


def rmq_results(namesrv: str, wd: Path, names: list[str]) -> dict[str, Any]:
    res = rmq_java.run_scenarios("v4", names, namesrv=namesrv, workdir=wd, prefix="CF", timeout_s=150)
    return {n: {k: v for k, v in res.get(n, {"error": "no result"}).items() if k != "scenario"} for n in names}


def rmq_on_rokka(wd: Path, names: list[str]) -> dict[str, Any]:
    srv = harness.start_serve(wd / "server", conf=_conf(wd / "server" / "broker.conf", RMQ_CONF))
    try:
        return rmq_results(srv.namesrv, wd / "client", names)
    finally:
        srv.stop()


def rmq_on_apache(wd: Path, names: list[str]) -> dict[str, Any]:
    rmq = apache.start_rocketmq(wd / "rocketmq", RMQ_CONF)
    try:
        return rmq_results(rmq.namesrv, wd / "client", names)
    finally:
        rmq.stop()


def suite(label: str, names: list[str], on_rokka: Any, on_apache: Any, wd: Path,
          rows: list[tuple[str, str, str, str]], details: dict[str, list[str]], raw: dict[str, Any],
          summarize: Any = None) -> None:
    t0 = time.monotonic()
    rk = on_rokka(wd / f"{label}-rokka", names)
    ap = on_apache(wd / f"{label}-apache", names)
    raw[label] = {"rokka": rk, "apache": ap}
    if summarize is not None:
        rk = {n: summarize(n, v) for n, v in rk.items()}
        ap = {n: summarize(n, v) for n, v in ap.items()}
        raw[f"{label}-compared"] = {"rokka": rk, "apache": ap}
    for name in names:
        what, paths = compare.verdict(rk.get(name), ap.get(name))
        rk_s = "error" if "error" in rk.get(name, {}) else "ran"
        ap_s = "error" if "error" in ap.get(name, {}) else "ran"
        rows.append((f"{label}: {name}", rk_s, ap_s, "yes" if what == "same" else f"no ({what})"))
        if paths:
            details[f"{label}: {name}"] = paths
    print(f"  {label}: {time.monotonic() - t0:.0f} s", flush=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="conformance", description=__doc__.splitlines()[0])
    ap.add_argument("--only", choices=("kafka", "rocketmq", "mqadmin"), default=None)
    ap.add_argument("--scenarios", default="", help="comma-separated subset (names of either suite)")
    ap.add_argument("--json", type=Path, default=None, help="write every outcome (both brokers) here")
    args = ap.parse_args(argv)
    if why := apache.missing():
        print(f"conformance: {why}")
        return 1
    wanted = [s for s in args.scenarios.split(",") if s]
    k_names = [n for n in kafka_scenarios.SCENARIOS if not wanted or n in wanted]
    r_names = [n for n in RMQ_SCENARIOS if not wanted or n in wanted]
    for line, jar_missing in (("kafka", not kafka_scenarios.JAR.is_file()), ("rocketmq", rmq_java.missing("v4"))):
        if jar_missing:
            print(f"conformance: the Java {line} driver is not built: run `make install-test`")
            return 1
    wd = Path(tempfile.mkdtemp(prefix="rokka-conformance-"))
    rows: list[tuple[str, str, str, str]] = []
    details: dict[str, list[str]] = {}
    raw: dict[str, Any] = {}
    t0 = time.monotonic()
    try:
        if args.only in (None, "kafka") and k_names:
            suite("kafka", k_names, kafka_on_rokka, kafka_on_apache, wd, rows, details, raw)
        if args.only in (None, "rocketmq") and r_names:
            suite("rocketmq", r_names, rmq_on_rokka, rmq_on_apache, wd, rows, details, raw,
                  rocketmq_summaries.summarize)
        if args.only in (None, "mqadmin") and not wanted:   # issue 27: mqadmin output shapes, rokka vs Apache
            mqadmin_shapes.suite(wd, rows, details, raw)
    except (apache.AnchorError, harness.HarnessError) as exc:
        print(f"conformance: a broker did not start or a driver failed:\n{exc}")
        return 1
    finally:
        if args.json is not None:
            args.json.write_text(json.dumps(raw, indent=1, sort_keys=True, default=str))
        shutil.rmtree(wd, ignore_errors=True)
    print(f"\nConformance: Java clients (kafka-clients {kafka_scenarios_version(raw)}, rocketmq-client 4.9.8) vs "
          f"Apache Kafka {apache.KAFKA_VERSION} / Apache RocketMQ {apache.ROCKETMQ_VERSION}\n")
    print(compare.table(rows))
    for name, paths in details.items():
        print(f"\n{name}:")
        for p in paths[:12]:
            print(f"  {p}")
        if len(paths) > 12:
            print(f"  ... {len(paths) - 12} more")
    same = sum(r[3] == "yes" for r in rows)
    print(f"\n{same} of {len(rows)} scenarios the same ({time.monotonic() - t0:.0f} s)")
    return 0


def kafka_scenarios_version(raw: dict[str, Any]) -> str:
    return "4.4.0" if "kafka" in raw else "—"


if __name__ == "__main__":
    sys.exit(main())
