"""The Java Kafka client scenarios of ``interop/test_kafka_java.py``, run for ``make conformance``.

Theory of operation
-------------------
One driver JVM (``interop/java/kafka``, kafka-clients 4.x, ``serve`` mode: JSON commands on stdin, one JSON
answer each) runs every scenario against one broker; the broker is a ``Broker``: its bootstrap address
and a ``restart(hard)`` (SIGTERM, or SIGKILL, then the same ports and data).  Each scenario returns a
summary of what the client saw -- the facts a user depends on (records, offsets, exception classes,
assignment sizes, group state), not the checks of the pytest suite -- so the same function's outcome on
rokka and on Apache Kafka can be compared (``compare.verdict``).  Topic and group names are fixed per
scenario (each broker starts empty), so they compare too.
"""

from __future__ import annotations

import itertools
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import harness
from kafka_common import Rec, sample_records

JAR = harness.INTEROP / "java" / "kafka" / "target" / "k4" / "kafka-interop.jar"
JVM_FLAGS = ["-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-Xmx256m", "-Xss1m"]
CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
_ids = itertools.count()


@dataclass
class Broker:
    name: str
    bootstrap: Callable[[], str]
    restart: Callable[[bool], None]


class Java:
    """The driver JVM; ``ok(op, **fields)`` answers the result line or raises with the error line."""

    def __init__(self, broker: Broker, workdir: Path) -> None:
        self.broker = broker
        self.proc = harness.JsonLinesProcess(["java", *JVM_FLAGS, "-jar", str(JAR), "serve"],
                                             name=f"java-k4-{broker.name}", workdir=workdir)
        self.version = self.proc.wait_event("ready", 90)[0]["kafka_clients"]

    def ok(self, op: str, timeout: float = 120, **fields: Any) -> dict[str, Any]:
        rid = next(_ids)
        self.proc.send({"op": op, "id": rid, "bootstrap": self.broker.bootstrap(), **fields})
        self.proc.wait_for(lambda evs: any(e.get("id") == rid for e in evs), timeout, f"the answer to {op}")
        (ev,) = [e for e in self.proc.events if e.get("id") == rid]
        if ev["event"] != "result":
            raise RuntimeError(f"{op}: {ev}")
        return ev

    def close(self) -> None:
        try:
            self.proc.close(timeout=20)
        finally:
            self.proc.kill()


def _recs(recs: list[Rec]) -> list[dict[str, Any]]:
    return [{"key": None if r.key is None else r.key.decode(), "value": r.value.decode(),
             "headers": [[k, v.decode()] for k, v in r.headers]} for r in recs]


def _create(java: Java, *names: str, partitions: int = 3) -> dict[str, Any]:
    return java.ok("create_topics", topics=[{"name": n, "partitions": partitions} for n in names])["errors"]


def codecs(java: Java) -> dict[str, Any]:
    """Keys, headers, each codec: what the consumer reads back, and the produce acks' offsets."""
    want = _recs(sample_records())
    out: dict[str, Any] = {}
    for codec in CODECS:
        topic = f"cf-codec-{codec}"
        created = _create(java, topic)
        acks = java.ok("produce", topic=topic, codec=codec, records=want)["results"]
        got = java.ok("consume", topic=topic, expect=len(want))["records"]
        by_part: dict[int, list[int]] = defaultdict(list)
        for m in got:
            by_part[m["partition"]].append(m["offset"])
        out[codec] = {
            "create_errors": created, "produce_errors": sorted({str(a.get("error")) for a in acks if "error" in a}),
            "records": sorted((m["key"] or "", m["value"], tuple(map(tuple, m["headers"]))) for m in got),
            "acked_offsets": sorted((a["partition"], a["offset"]) for a in acks if "offset" in a) ==
            sorted((m["partition"], m["offset"]) for m in got),
            "offsets_per_partition_dense": all(sorted(v) == list(range(len(v))) for v in by_part.values()),
            "keys_to_one_partition": all(len({m["partition"] for m in got if m["key"] == k}) == 1
                                         for k in {m["key"] for m in got if m["key"] is not None}),
        }
    return out


def big_record(java: Java) -> dict[str, Any]:
    """KIP-74: a record larger than the fetch limits is still returned, alone, then the small ones."""
    topic = "cf-big"
    _create(java, topic, partitions=1)
    recs = [{"key": "big", "value": "B" * 700_000}, *({"key": None, "value": f"small-{i}"} for i in range(3))]
    acks = java.ok("produce", topic=topic, records=recs, props={"max.request.size": "2097152", "linger.ms": "0",
                                                                "batch.size": "1024"})["results"]
    got = java.ok("consume", topic=topic, expect=4, props={"max.partition.fetch.bytes": "1024",
                                                           "fetch.max.bytes": "1024"})["records"]
    return {"errors": [a["error"] for a in acks if "error" in a],
            "values": [m["value"][:10] + f"...{len(m['value'])}" for m in got], "offsets": [m["offset"] for m in got]}


def _group3(java: Java, assignor: str, topic: str) -> dict[str, Any]:
    _create(java, topic, partitions=6)
    ev = java.ok("group3", timeout=200, topic=topic, group=f"{topic}-g", assignor=assignor)
    per_value: dict[str, list[bool]] = defaultdict(list)
    for d in ev["deliveries"]:
        per_value[d["value"]].append(d["committed"])
    return {"errors": ev["errors"],
            "phases": {ph: sorted(len(p) for p in owned.values()) for ph, owned in ev["phases"].items()},
            "partitions_covered": {ph: sorted(x for p in owned.values() for x in p)
                                   for ph, owned in ev["phases"].items()},
            "all_delivered": set(per_value) == set(ev["produced"]),
            "committed_delivered_again": sorted(v for v, c in per_value.items() if any(c[:-1]))[:5],
            "members": sorted({d["member"] for d in ev["deliveries"]})}


def group3_range(java: Java) -> dict[str, Any]:
    return _group3(java, "org.apache.kafka.clients.consumer.RangeAssignor", "cf-grp-range")


def group3_cooperative(java: Java) -> dict[str, Any]:
    return _group3(java, "org.apache.kafka.clients.consumer.CooperativeStickyAssignor", "cf-grp-coop")


def kip848(java: Java) -> dict[str, Any]:
    """group.protocol=consumer (KIP-848)."""
    _create(java, "cf-848", partitions=1)
    ev = java.ok("kip848", topic="cf-848", group="cf-848-g", timeout_ms=20000)
    return {"outcome": ev["outcome"], "type": str(ev.get("type", "")).rsplit(".", 1)[-1]}


def commit_resume(java: Java) -> dict[str, Any]:
    """Commit, a new consumer resumes; broker SIGTERM and SIGKILL restarts in between."""
    topic, group = "cf-resume", "cf-resume-g"
    _create(java, topic)
    values = [f"r-{i}" for i in range(30)]
    java.ok("produce", topic=topic, records=[{"key": f"k{i % 5}", "value": v} for i, v in enumerate(values)])
    seen: list[str] = []
    takes: list[int] = []

    def take(n: int) -> None:
        ev = java.ok("consume", topic=topic, group=group, expect=n, commit=True, timeout_ms=60000)
        takes.append(len(ev["records"]))
        seen.extend(m["value"] for m in ev["records"])

    take(10)
    take(10)
    java.broker.restart(False)
    take(5)
    java.broker.restart(True)
    more = [f"r-{i}" for i in range(30, 36)]
    java.ok("produce", topic=topic, records=[{"key": None, "value": v} for v in more])
    take(11)
    return {"takes": takes, "all_once": sorted(seen) == sorted(values + more),
            "duplicates": sorted(v for v in set(seen) if seen.count(v) > 1)}


def idempotent(java: Java) -> dict[str, Any]:
    """One idempotent producer across a SIGTERM and a SIGKILL broker restart."""
    topic = "cf-idem"
    _create(java, topic)
    props = {"enable.idempotence": "true", "acks": "all", "max.in.flight.requests.per.connection": "5"}
    acks: list[dict[str, Any]] = []
    for n, hard in enumerate((False, True, None)):
        acks += java.ok("produce", topic=topic, client="idem", props=props,
                        records=[{"key": f"k{i}", "value": f"i-{i}"} for i in range(n * 60, n * 60 + 60)])["results"]
        if hard is not None:
            java.broker.restart(hard)
    java.ok("close_producer", client="idem")
    got = java.ok("consume", topic=topic, expect=180)["records"]
    per_part: dict[int, list[int]] = defaultdict(list)
    for m in got:
        per_part[m["partition"]].append(m["offset"])
    return {"errors": sorted({a["error"] for a in acks if "error" in a}),
            "exactly_once": sorted(m["value"] for m in got) == sorted(f"i-{i}" for i in range(180)),
            "offsets_dense": all(sorted(v) == list(range(len(v))) for v in per_part.values())}


def transactions(java: Java) -> dict[str, Any]:
    topic, out_topic = "cf-txn", "cf-txo"
    _create(java, topic, out_topic)
    ev = java.ok("txn", timeout=200, topic=topic, out_topic=out_topic, txn_id="cf-tx", group="cf-gtx")
    offsets = ev["group_offsets"]
    return {"committed_view": sorted(ev["committed_view"]), "uncommitted_view": sorted(ev["uncommitted_view"]),
            "transformed": ev["transformed"], "out_committed_view": sorted(ev["out_committed_view"]),
            "group_offsets_partitions": sorted(offsets),
            "group_offsets_within_end": all(0 < offsets[tp] <= ev["end_offsets"][tp] for tp in offsets),
            "fencing": {k: (sorted(v) if isinstance(v, list) else v) for k, v in ev["fencing"].items()}}


def admin(java: Java) -> dict[str, Any]:
    """Admin: topics, configs, partitions, offsets by time, groups, records deletion, refusals."""
    t1, t2, group = "cf-adm", "cf-adm2", "cf-gadm"
    ev = java.ok("admin", t1=t1, t2=t2, group=group, ts0=(int(time.time()) - 3600) * 1000)
    out: dict[str, Any] = {}
    for k, v in sorted(ev.items()):
        if not isinstance(v, dict):
            continue
        if "error" in v:
            out[k] = {"error": v["error"]}
        elif "ok" in v:
            val = v["ok"]
            if k == "list_topics":
                val = sorted(t for t in val if t.startswith("cf-"))
            elif k == "describe_cluster":
                val = {"nodes": val.get("nodes")}
            elif k == "describe_broker_config":
                val = "some" if val else val
            out[k] = {"ok": val}
    return out


SCENARIOS: dict[str, Callable[[Java], dict[str, Any]]] = {
    "codecs": codecs, "big_record": big_record, "group3_range": group3_range,
    "group3_cooperative": group3_cooperative, "kip848": kip848, "commit_resume": commit_resume,
    "idempotent": idempotent, "transactions": transactions, "admin": admin,
}


def run_all(broker: Broker, workdir: Path, names: list[str]) -> dict[str, Any]:
    """{scenario: outcome or {"error": ...}} for ``names`` against ``broker``, in one driver JVM."""
    java = Java(broker, workdir)
    out: dict[str, Any] = {}
    try:
        for name in names:
            t0 = time.monotonic()
            try:
                out[name] = SCENARIOS[name](java)
            except Exception as exc:  # noqa: BLE001 - one scenario's failure is its outcome
                out[name] = {"error": f"{type(exc).__name__}: {exc}"[:400]}
            print(f"  kafka {broker.name:6} {name:20} {time.monotonic() - t0:5.1f} s"
                  f"{'  ERROR ' + out[name]['error'][:120] if 'error' in out[name] else ''}", flush=True)
    finally:
        java.close()
    return out
