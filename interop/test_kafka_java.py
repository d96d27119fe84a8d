"""The Java Kafka client (kafka-clients 4.x and 3.x) and the Kafka command-line tools against rokka.

Theory of operation
-------------------
``interop/java/kafka`` (Maven, built by ``interop/java/install.sh``) makes three jars: ``target/k4`` and
``target/k3`` (the same driver compiled against kafka-clients 4.x and 3.x) and ``target/tools4`` (4.x
plus kafka-tools, whose main classes are what kafka-topics.sh & co. start).  Each scenario runs one JVM
(``java -jar kafka-interop.jar serve``) that takes JSON commands on stdin and answers each with one JSON
line; the scenario restarts rokka between commands where it needs to.  The Java side reports what the
client saw (records, offsets, exception classes, assignments); the checks are here.
"""

from __future__ import annotations

import itertools
import json
import shutil
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import harness
import pytest
from kafka_common import Rec, keys_stick_to_partitions, same_records, sample_records, topic_name

JAVA_DIR = Path(__file__).resolve().parent / "java" / "kafka"
BUILDS = {"4.x": "k4", "3.x": "k3"}
JVM_FLAGS = ["-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-Xmx256m", "-Xss1m"]
CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
_ids = itertools.count()


def jar(build: str) -> Path:
    return JAVA_DIR / "target" / build / "kafka-interop.jar"


class Java:
    """One driver JVM; ``call(op, **fields)`` sends a command and returns its result line."""

    def __init__(self, build: str, srv: harness.ServerProcess, workdir: Path) -> None:
        if shutil.which("java") is None:
            pytest.skip("java is not installed (the polyglot machine has OpenJDK 17)")
        path = jar(build)
        assert path.is_file(), f"{path} is missing: run interop/java/install.sh (make install-test)"
        self.srv = srv
        self.proc = harness.JsonLinesProcess(["java", *JVM_FLAGS, "-jar", str(path), "serve"],
                                             name=f"java-{build}", workdir=workdir / f"java-{build}")
        self.version = self.proc.wait_event("ready", 60)[0]["kafka_clients"]

    def call(self, op: str, timeout: float = 90, **fields: Any) -> dict[str, Any]:
        rid = next(_ids)
        self.proc.send({"op": op, "id": rid, "bootstrap": self.srv.kafka, **fields})
        self.proc.wait_for(lambda evs: any(e.get("id") == rid for e in evs), timeout, f"the answer to {op}")
        (ev,) = [e for e in self.proc.events if e.get("id") == rid]
        return ev

    def ok(self, op: str, timeout: float = 90, **fields: Any) -> dict[str, Any]:
        ev = self.call(op, timeout, **fields)
        assert ev["event"] == "result", f"{op} failed: {ev}\n{self.proc.describe()}"
        return ev

    def close(self) -> None:
        try:
            self.proc.close(timeout=20)
        finally:
            self.proc.kill()


# group.initial.rebalance.delay.ms=0, as Kafka's own test setups use: a fresh group forms at once.
FAST_GROUPS = {"kafkaGroupInitialRebalanceDelayMs": "0"}


@pytest.fixture
def srv(configured_rokka: Any) -> harness.ServerProcess:
    return configured_rokka(FAST_GROUPS, {})


@pytest.fixture(params=list(BUILDS), ids=[f"kafka-clients-{v}" for v in BUILDS])
def java(request: pytest.FixtureRequest, srv: harness.ServerProcess, workdir: Path) -> Any:
    client = Java(BUILDS[request.param], srv, workdir)
    try:
        yield client
    finally:
        client.close()


def recs_json(recs: list[Rec]) -> list[dict[str, Any]]:
    return [{"key": None if r.key is None else r.key.decode(), "value": r.value.decode(),
             "headers": [[k, v.decode()] for k, v in r.headers]} for r in recs]


def as_rec(m: dict[str, Any]) -> Rec:
    return Rec(None if m["key"] is None else m["key"].encode(), m["value"].encode(),
               tuple((k, v.encode()) for k, v in m["headers"]))


def create(java: Java, *names: str, partitions: int = 3) -> None:
    ev = java.ok("create_topics", topics=[{"name": n, "partitions": partitions} for n in names])
    assert ev["errors"] == dict.fromkeys(names), ev


# ------------------------------------------------------------------ produce / consume


def test_keys_headers_and_every_codec(java: Java) -> None:
    want = sample_records()
    topics = {codec: topic_name(f"jv-{codec}") for codec in CODECS}
    create(java, *topics.values())
    failures = {}
    for codec, topic in topics.items():
        produced = java.ok("produce", topic=topic, codec=codec, records=recs_json(want))["results"]
        errors = [r["error"] for r in produced if "error" in r]
        got = java.ok("consume", topic=topic, expect=len(want))["records"]
        try:
            assert not errors, errors[:2]
            same_records([as_rec(m) for m in got], want)
            keys_stick_to_partitions([(as_rec(m).key, m["partition"]) for m in got])
            assert sorted((r["partition"], r["offset"]) for r in produced) == \
                sorted((m["partition"], m["offset"]) for m in got)
        except AssertionError as exc:
            failures[codec] = str(exc)[:600]
    assert not failures, failures


def test_record_larger_than_the_fetch_limits(java: Java) -> None:
    """KIP-74: a record batch larger than max.partition.fetch.bytes / fetch.max.bytes is still returned
    (alone), so the consumer makes progress; the small records after it follow."""
    topic = topic_name("jv-big")
    create(java, topic, partitions=1)
    big = "B" * 700_000
    recs = [{"key": "big", "value": big}, *({"key": None, "value": f"small-{i}"} for i in range(3))]
    acks = java.ok("produce", topic=topic, records=recs, props={"max.request.size": "2097152", "linger.ms": "0",
                                                                "batch.size": "1024"})["results"]
    assert not [r for r in acks if "error" in r], acks
    got = java.ok("consume", topic=topic, expect=4, props={"max.partition.fetch.bytes": "1024",
                                                           "fetch.max.bytes": "1024"})["records"]
    assert [m["value"] for m in got] == [big, "small-0", "small-1", "small-2"]
    assert [m["offset"] for m in got] == [0, 1, 2, 3]


# ------------------------------------------------------------------ groups


@pytest.mark.parametrize("assignor", ["range", "cooperative-sticky"])
def test_group_of_three_rebalances(java: Java, assignor: str) -> None:
    """Eager (RangeAssignor, the default) and incremental cooperative (KIP-429) rebalances, both on the
    classic protocol: the assignment after each join / leave, no loss, no redelivery of a commit."""
    topic = topic_name("jv-grp")
    create(java, topic, partitions=6)
    cls = {"range": "org.apache.kafka.clients.consumer.RangeAssignor",
           "cooperative-sticky": "org.apache.kafka.clients.consumer.CooperativeStickyAssignor"}[assignor]
    ev = java.ok("group3", timeout=170, topic=topic, group=topic_name("jv-g"), assignor=cls)
    assert not ev["errors"], ev["errors"]
    phases = ev["phases"]
    assert phases["one"] == {"m1": list(range(6))}
    for phase, n in (("three", 2), ("two", 3)):
        owned = phases[phase]
        assert all(len(p) == n for p in owned.values()), phases
        assert sorted(x for p in owned.values() for x in p) == list(range(6)), phases
    per_value: dict[str, list[bool]] = defaultdict(list)
    for d in ev["deliveries"]:
        per_value[d["value"]].append(d["committed"])
    assert set(per_value) == set(ev["produced"])
    double = {v: c for v, c in per_value.items() if any(c[:-1])}
    assert not double, f"committed records delivered again: {list(double.items())[:5]}"
    assert {d["member"] for d in ev["deliveries"]} == {"m1", "m2", "m3"}


def test_new_consumer_protocol_is_refused_clearly(java: Java) -> None:
    """rokka has no ConsumerGroupHeartbeat (api key 68) and does not list it in ApiVersions; the client's
    group.protocol=consumer then fails with UnsupportedVersionException, as it does against a Kafka broker
    without KIP-848 -- no hang, no silent wrong behaviour.  4.x says to set group.protocol=classic; 3.x
    (where the new protocol is a preview) names the missing API."""
    topic = topic_name("jv-848")
    create(java, topic, partitions=1)
    ev = java.ok("kip848", topic=topic, group=topic_name("jv-g848"), timeout_ms=15000)
    assert ev["outcome"] == "raised", ev
    assert ev["type"].endswith("UnsupportedVersionException"), ev
    if java.version.startswith("3."):
        assert "CONSUMER_GROUP_HEARTBEAT" in ev["message"], ev
    else:
        assert "group.protocol" in ev["message"] and "classic" in ev["message"].lower(), ev


def test_commit_resume_across_client_and_broker_restart(java: Java) -> None:
    rokka = java.srv
    topic, group = topic_name("jv-resume"), topic_name("jv-gres")
    create(java, topic)
    values = [f"r-{i}" for i in range(30)]
    java.ok("produce", topic=topic, records=[{"key": f"k{i % 5}", "value": v} for i, v in enumerate(values)])
    seen: list[str] = []

    def take(n: int) -> None:
        ev = java.ok("consume", topic=topic, group=group, expect=n, commit=True, timeout_ms=40000)
        assert len(ev["records"]) == n, ev
        seen.extend(m["value"] for m in ev["records"])

    take(10)
    take(10)                      # a new consumer (client restart) resumes at the commits
    rokka.restart()               # SIGTERM, same ports and data dir
    take(5)
    rokka.restart(hard=True)      # SIGKILL: commits that were acknowledged survive
    more = [f"r-{i}" for i in range(30, 36)]
    java.ok("produce", topic=topic, records=[{"key": None, "value": v} for v in more])
    take(11)
    dup = sorted(v for v in set(seen) if seen.count(v) > 1)
    assert sorted(seen) == sorted(values + more), f"takes {seen}: duplicates {dup}"


# ------------------------------------------------------------------ producers


def test_idempotent_producer_across_broker_restart(java: Java) -> None:
    """One idempotent producer stays up while rokka restarts twice (SIGTERM, then SIGKILL): every record is
    stored exactly once, offsets per partition have no gap and no duplicate."""
    rokka = java.srv
    topic = topic_name("jv-idem")
    create(java, topic)
    props = {"enable.idempotence": "true", "acks": "all", "max.in.flight.requests.per.connection": "5"}
    acks = []
    for n, restart in enumerate((rokka.restart, lambda: rokka.restart(hard=True), None)):
        acks += java.ok("produce", topic=topic, client="idem", props=props,
                        records=[{"key": f"k{i}", "value": f"i-{i}"} for i in range(n * 60, n * 60 + 60)])["results"]
        if restart:
            restart()
    java.ok("close_producer", client="idem")
    assert not [r for r in acks if "error" in r], [r for r in acks if "error" in r][:3]
    got = java.ok("consume", topic=topic, expect=180)["records"]
    assert sorted(m["value"] for m in got) == sorted(f"i-{i}" for i in range(180))
    per_part: dict[int, list[int]] = defaultdict(list)
    for m in got:
        per_part[m["partition"]].append(m["offset"])
    for offsets in per_part.values():
        assert sorted(offsets) == list(range(len(offsets))), per_part


def test_transactions_commit_abort_and_offsets(java: Java) -> None:
    topic, out_topic = topic_name("jv-txn"), topic_name("jv-txo")
    create(java, topic, out_topic)
    ev = java.ok("txn", timeout=150, topic=topic, out_topic=out_topic, txn_id=topic_name("jv-tx"),
                 group=topic_name("jv-gtx"))
    committed = sorted([f"c1-{i}" for i in range(5)] + [f"c2-{i}" for i in range(5)])
    assert sorted(ev["committed_view"]) == committed
    # docs/compat.md (transactions): aborted records never reach a queue, so read_uncommitted sees only
    # committed data too (Kafka would also show the a-* records there).  Offsets are still Kafka's.
    assert sorted(ev["uncommitted_view"]) == committed
    assert ev["transformed"] == 10
    assert sorted(ev["out_committed_view"]) == sorted(f"t-{v}" for v in committed)
    offsets = ev["group_offsets"]
    assert set(offsets) == {f"{topic}-{p}" for p in range(3)}
    assert all(0 < offsets[tp] <= ev["end_offsets"][tp] for tp in offsets), ev
    # A second producer with the same transactional.id fences the first, as in Kafka: the old epoch's
    # produce is refused (INVALID_PRODUCER_EPOCH), its commit fails, its records never become visible.
    fence = ev["fencing"]
    assert fence["old_send"] in ("InvalidProducerEpochException", "ProducerFencedException"), fence
    assert fence["old_commit"] == "raised" and fence["fresh"] == "committed", fence
    assert sorted(fence["visible"]) == sorted([*committed, "fresh-0"]), fence


# ------------------------------------------------------------------ admin


UNOFFERED = ("describe_producers", "list_transactions")


def check_admin(ev: dict[str, Any], t1: str, group: str) -> None:
    ok = {k: v.get("ok") for k, v in ev.items() if isinstance(v, dict) and "ok" in v}
    err = {k: v for k, v in ev.items() if isinstance(v, dict) and "error" in v}
    expected_errors = {"create_existing": "TopicExistsException",
                       "describe_missing_topic": "UnknownTopicOrPartitionException",
                       "alter_bad_config": "InvalidConfigurationException"}
    assert {k: v["error"] for k, v in err.items() if k in expected_errors} == expected_errors, err
    # APIs rokka does not offer (not in its ApiVersions): the Admin client must refuse them itself, at once.
    unoffered = {k: v for k, v in err.items() if k in UNOFFERED}
    assert all(v["error"] == "UnsupportedVersionException" for v in unoffered.values()), unoffered
    unexpected = {k: v for k, v in err.items() if k not in expected_errors and k != "describe_acls"
                  and k not in UNOFFERED}
    assert not unexpected, unexpected
    assert ok["describe_cluster"]["nodes"] == 1 and ok["describe_cluster"]["cluster_id"]
    assert t1 in ok["list_topics"] and f"{t1}-v" not in ok["list_topics"]
    assert ok["describe_topic"] == {"partitions": 3, "leader": ok["describe_cluster"]["controller"], "replicas": 1} \
        or ok["describe_topic"]["partitions"] == 3
    assert ok["describe_topic_config"] == "3600000"
    assert ok["describe_broker_config"] > 0
    assert ok["alter_topic_config"] == "7200000"
    assert ok["create_partitions"] == 4
    assert ok["list_offsets"] == {"earliest": 0, "latest": 3, "ts_plus_500": 1, "ts_exact_2": 2, "ts_after": -1,
                                  "max_timestamp": 2}
    assert ok["list_groups"] == [group]
    assert ok["describe_group"]["members"] == 0 and ok["describe_group"]["state"].upper() == "EMPTY"
    assert ok["delete_records"] == 1
    assert ok["describe_log_dirs"] == 1      # one broker, one log dir (DescribeLogDirs, key 35)
    assert list(ok["group_offsets"].values()) == [3]  # records 1 and 2 (0 was deleted)
    assert ok["alter_group_offsets"] == 1
    assert ok["delete_group"] == []
    assert ok["delete_topics"] is False


def test_admin(java: Java) -> None:
    t1, t2, group = topic_name("jv-adm"), topic_name("jv-adm2"), topic_name("jv-gadm")
    ts0 = (int(time.time()) - 3600) * 1000
    ev = java.ok("admin", t1=t1, t2=t2, group=group, ts0=ts0)
    check_admin(ev, t1, group)
    assert ev["describe_acls"].get("error") == "SecurityDisabledException", ev["describe_acls"]


USERS = {"admin": "admin-secret", "alice": "alice-secret"}


@pytest.mark.parametrize("build", list(BUILDS.values()))
def test_admin_acls_over_sasl(build: str, configured_rokka: Any, workdir: Path) -> None:
    srv = configured_rokka({"kafkaSaslMechanisms": "PLAIN,SCRAM-SHA-256", "kafkaSaslUsers": "{dir}/users.json",
                            "kafkaAclEnable": "true", "kafkaSuperUsers": "User:admin", **FAST_GROUPS},
                           {"users.json": json.dumps({"users": USERS})})
    java = Java(build, srv, workdir)
    props = {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "SCRAM-SHA-256",
             "sasl.jaas.config": 'org.apache.kafka.common.security.scram.ScramLoginModule required '
                                 'username="admin" password="admin-secret";'}
    try:
        t1, t2, group = topic_name("jv-acl"), topic_name("jv-acl2"), topic_name("jv-gacl")
        ev = java.ok("admin", t1=t1, t2=t2, group=group, ts0=(int(time.time()) - 3600) * 1000, acls=True,
                     props=props)
        check_admin(ev, t1, group)
        assert ev["create_acls"] == {"ok": True}
        assert f"{t1}:User:alice:READ" in ev["describe_acls"]["ok"]
        assert ev["delete_acls"] == {"ok": 1}
    finally:
        java.close()


# ------------------------------------------------------------------ the Kafka command-line tools

TOOLS = {  # the main class each shell script starts (bin/*.sh of kafka 4.x)
    "kafka-topics": "org.apache.kafka.tools.TopicCommand",
    "kafka-console-producer": "org.apache.kafka.tools.ConsoleProducer",
    "kafka-console-consumer": "org.apache.kafka.tools.consumer.ConsoleConsumer",
    "kafka-consumer-groups": "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand",
    "kafka-configs": "org.apache.kafka.tools.ConfigCommand",
    "kafka-get-offsets": "org.apache.kafka.tools.GetOffsetShell",
}
# kafka 3.9: ConsoleProducer and ConfigCommand are still Scala classes of kafka_2.13, and the console
# tools take --property (4.x: --reader-property / --formatter-property).
TOOLS3 = {**TOOLS, "kafka-console-producer": "kafka.tools.ConsoleProducer",
          "kafka-configs": "kafka.admin.ConfigCommand"}
TOOL_BUILDS = {"tools4": (TOOLS, "--reader-property", "--formatter-property"),
               "tools3": (TOOLS3, "--property", "--property")}


@pytest.mark.parametrize("build", list(TOOL_BUILDS))
def test_cli_tools(build: str, srv: harness.ServerProcess, workdir: Path) -> None:
    """kafka-topics, kafka-console-producer/consumer, kafka-consumer-groups and kafka-configs (4.x and 3.x),
    run as their scripts would run them (the main class with the script's arguments) inside one JVM."""
    tools, reader_prop, formatter_prop = TOOL_BUILDS[build]
    java = Java(build, srv, workdir)
    bs = ["--bootstrap-server", srv.kafka]
    topic, group = topic_name("jv-cli"), topic_name("jv-gcli")

    def tool(name: str, *args: str, stdin: str = "", code: int = 0) -> str:
        ev = java.ok("tool", main=tools[name], args=list(args), stdin=stdin, timeout_ms=45000)
        assert ev["exit"] == code, f"{name} {' '.join(args)}: {ev}"
        return ev["stdout"]

    try:
        assert f"Created topic {topic}." in tool("kafka-topics", *bs, "--create", "--topic", topic,
                                                  "--partitions", "3", "--replication-factor", "1")
        assert topic in tool("kafka-topics", *bs, "--list").split()
        desc = tool("kafka-topics", *bs, "--describe", "--topic", topic)
        assert "PartitionCount: 3" in desc and desc.count("Leader:") == 3, desc
        lines = [f"k{i % 3}:v{i}" for i in range(9)]
        tool("kafka-console-producer", *bs, "--topic", topic, reader_prop, "parse.key=true",
             reader_prop, "key.separator=:", "--producer-property", "acks=all", stdin="\n".join(lines) + "\n")
        out = tool("kafka-console-consumer", *bs, "--topic", topic, "--group", group, "--from-beginning",
                   "--max-messages", "9", "--timeout-ms", "20000", formatter_prop, "print.key=true",
                   formatter_prop, "key.separator=:")
        assert sorted(out.split()) == sorted(lines), out
        ends = tool("kafka-get-offsets", *bs, "--topic", topic, "--time", "-1").split()
        assert sum(int(e.rsplit(":", 1)[1]) for e in ends) == 9 and len(ends) == 3, ends
        assert group in tool("kafka-consumer-groups", *bs, "--list").split()
        desc = tool("kafka-consumer-groups", *bs, "--describe", "--group", group)
        rows = [r.split() for r in desc.splitlines() if topic in r]
        assert len(rows) == 3 and all(r[5] == "0" for r in rows), desc  # LAG column
        reset = tool("kafka-consumer-groups", *bs, "--reset-offsets", "--group", group, "--topic", topic,
                     "--to-earliest", "--execute")
        words = reset.split()  # GROUP TOPIC PARTITION NEW-OFFSET rows (3.9 prints them without line breaks)
        assert [words[i + 3] for i, w in enumerate(words) if w == group] == ["0", "0", "0"], reset
        tool("kafka-configs", *bs, "--entity-type", "topics", "--entity-name", topic, "--alter",
             "--add-config", "retention.ms=86400000")
        cfg = tool("kafka-configs", *bs, "--entity-type", "topics", "--entity-name", topic, "--describe")
        assert "retention.ms=86400000" in cfg, cfg
        tool("kafka-topics", *bs, "--delete", "--topic", topic)
        assert topic not in tool("kafka-topics", *bs, "--list").split()
    finally:
        java.close()
