"""Master/slave replication (issue 24): name server + master + SLAVE as separate ``rokka`` processes.

The C++ client (``rocketmq`` wheel) and confluent-kafka (acks=all) write to the master; the master is
SIGKILLed; every acknowledged message is read from the slave by a C++ push consumer of a new group
and by a Kafka consumer on the slave's Kafka port; the master restarts and keeps serving its slave
(what is written after the restart reaches the slave; nothing is lost or duplicated).
"""

from __future__ import annotations

import time
from pathlib import Path

import harness
import pytest
from rmq_cpp import bodies, duplicates, msgs, send, start_push, uniq, wait_bodies

pytestmark = pytest.mark.usefixtures("need_cpp")
ck = pytest.importorskip("confluent_kafka", reason="confluent-kafka is not installed (interop/install.sh)")


def _conf(path: Path, **keys: object) -> Path:
    path.write_text("".join(f"{k}={v}\n" for k, v in keys.items()))
    return path


def _broker(workdir: Path, name: str, namesrv: str, conf: Path) -> harness.ServerProcess:
    data = workdir / name / "data"
    data.mkdir(parents=True, exist_ok=True)
    return harness.ServerProcess(name, harness.broker_argv(namesrv, "broker-ha", data, "json", conf),
                                 workdir / name, data_dir=data).start()


def _wait_log(p: harness.ServerProcess, event: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while f'"{event}"' not in (p.stderr_path.read_text() if p.stderr_path else ""):
        if time.monotonic() > deadline:
            raise harness.HarnessError(f"{p.name}: no {event} within {timeout:.0f}s\n{p.stderr_tail()}")
        time.sleep(0.2)


def _send_all(namesrv: str, workdir: Path, messages: list[dict[str, str]]) -> set[str]:
    """C++ sync sends (a first send can hit the client's connection race: retried); the acknowledged bodies."""
    for attempt in range(3):
        try:
            sent = send(namesrv, workdir, "sync", messages)
            return {messages[e["i"]]["body"] for e in sent if e.get("status") == 0}
        except harness.HarnessError:
            if attempt == 2:
                raise
            time.sleep(1)
    return set()


def _kafka_produce(bootstrap: str, topic: str, values: list[str]) -> set[str]:
    """acks=all produce; returns the values the master acknowledged."""
    acked: set[str] = set()

    def done(err: object, m: object) -> None:
        if err is None:
            acked.add(m.value().decode())  # type: ignore[attr-defined]

    p = ck.Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
                     "message.timeout.ms": 30000})
    for v in values:
        p.produce(topic, v.encode(), on_delivery=done)
        p.poll(0)
    assert p.flush(60) == 0
    return acked


def _kafka_placement(bootstrap: str, topic: str, replicas: int,
                     timeout: float = 30) -> tuple[int, list[int], list[int]]:
    """Partition 0's (leader, replicas, ISR) as librdkafka reads them from Metadata, once it lists ``replicas``
    replicas all in the ISR (the brokers publish them within seconds: the view refreshes every 3 s)."""
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap})
    deadline = time.monotonic() + timeout
    while True:
        p = admin.list_topics(topic, timeout=10).topics[topic].partitions[0]
        placed = (p.leader, list(p.replicas), list(p.isrs))
        if len(placed[1]) == len(placed[2]) == replicas or time.monotonic() > deadline:
            return placed
        time.sleep(0.5)


def _kafka_read(bootstrap: str, topic: str, want: set[str], timeout: float = 60) -> list[str]:
    c = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": uniq("KG"), "auto.offset.reset": "earliest",
                     "enable.auto.commit": False})
    got: list[str] = []
    try:
        c.subscribe([topic])
        deadline = time.monotonic() + timeout
        while not want <= set(got) and time.monotonic() < deadline:
            m = c.poll(1.0)
            if m is not None and m.error() is None:
                got.append(m.value().decode())
    finally:
        c.close()
    return got


@pytest.mark.parametrize("role", ["SYNC_MASTER", "ASYNC_MASTER"])
def test_slave_serves_every_acknowledged_message_after_master_sigkill(workdir: Path, role: str) -> None:
    (workdir / "ns").mkdir(parents=True, exist_ok=True)
    ns = harness.ServerProcess("namesrv", harness.namesrv_argv("json"), workdir / "ns").start()
    ha_port = harness.fixed_ports(("ha",))["ha"]
    common = {"brokerClusterName": "HaCluster", "brokerName": "broker-ha", "haSendHeartbeatInterval": 1000}
    master_conf = _conf(workdir / "master.conf", brokerId=0, brokerRole=role, haListenPort=ha_port, **common)
    slave_conf = _conf(workdir / "slave.conf", brokerId=1, brokerRole="SLAVE", **common)
    master = _broker(workdir, "master", ns.namesrv, master_conf)
    slave = _broker(workdir, "slave", ns.namesrv, slave_conf)
    consumer = None
    try:
        topic = uniq("T_ha")
        _wait_log(master, "ha.slave_connected")
        rmq = [{"topic": topic, "body": f"r{i}"} for i in range(200)]
        acked_rmq = _send_all(ns.namesrv, workdir, rmq)
        if role == "SYNC_MASTER":
            assert len(acked_rmq) == len(rmq)
        ktopic = uniq("K_ha")
        acked_kafka = _kafka_produce(master.kafka, ktopic, [f"k{i}" for i in range(200)])
        assert len(acked_kafka) == 200
        # librdkafka's view of the set: the master leads, both brokers are replicas, both in the ISR
        leader, replicas, isrs = _kafka_placement(master.kafka, ktopic, 2)
        assert len(replicas) == 2 and leader == replicas[0] and sorted(isrs) == sorted(replicas), \
            (leader, replicas, isrs)
        if role == "ASYNC_MASTER":
            time.sleep(3)       # ASYNC_MASTER: what the slave has not copied yet is lost with the master
        master.kill9()
        consumer = start_push(ns.namesrv, workdir, group=uniq("CG_ha"), topic=topic, name="slave-reader")
        wait_bodies([consumer], acked_rmq, 90, "C++ push consumer reading the slave")
        assert not duplicates(bodies(msgs(consumer)))
        got = _kafka_read(slave.kafka, ktopic, acked_kafka)
        assert acked_kafka <= set(got) and not duplicates(got)
        # with the master gone the slave leads its partitions, alone in their replicas and ISR
        s_leader, s_replicas, s_isrs = _kafka_placement(slave.kafka, ktopic, 1)
        assert s_leader in replicas and s_leader != leader and s_replicas == s_isrs == [s_leader]
        consumer.close()
        consumer = None
        master.start()
        more = [{"topic": topic, "body": f"s{i}"} for i in range(50)]
        _wait_log(master, "ha.slave_connected")
        assert len(_send_all(ns.namesrv, workdir, more)) == 50
        consumer = start_push(ns.namesrv, workdir, group=uniq("CG_ha2"), topic=topic, name="after-restart")
        want = acked_rmq | {m["body"] for m in more}
        wait_bodies([consumer], want, 90, "every message after the master's restart")
        master.kill9()
        consumer.close()
        consumer = start_push(ns.namesrv, workdir, group=uniq("CG_ha3"), topic=topic, name="slave-again")
        wait_bodies([consumer], want, 90, "the slave has what the restarted master took")
        assert not duplicates(bodies(msgs(consumer)))
    finally:
        if consumer is not None:
            consumer.close()
        for p in (slave, master, ns):
            if p.running():
                p.stop()
