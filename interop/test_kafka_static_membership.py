"""Static group membership (KIP-345, ``group.instance.id``) with confluent-kafka (librdkafka) and kafka-python.

A group of three static consumers; one closes (a static member sends no LeaveGroup on close) and a new
process with the same instance id comes back within the session timeout: it gets the old member's
partitions, the other two see no revoke and no assign, and the broker starts no new generation.  A
static member that does not come back is removed when its session times out, and the others then
rebalance.  The broker's generations are read from its own log (``kafka group generation`` lines).
"""

from __future__ import annotations

import json
import threading
from typing import Any

import harness
import pytest
from kafka_common import topic_name, wait_until

ck = pytest.importorskip("confluent_kafka", reason="confluent-kafka is not installed (interop/install.sh)")
from confluent_kafka import Consumer  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

T = 20.0
PARTITIONS = 6


class StaticMember(threading.Thread):
    """One consumer polling in its own thread; counts its rebalance callbacks."""

    def __init__(self, srv: harness.ServerProcess, topic: str, group: str, instance: str,
                 session_ms: int) -> None:
        super().__init__(name=instance, daemon=True)
        self.stop = threading.Event()
        self.error: BaseException | None = None
        self.assigns = self.revokes = 0
        self.assigned: set[int] = set()
        self.c = Consumer({"bootstrap.servers": srv.kafka, "group.id": group, "group.instance.id": instance,
                           "client.id": instance, "session.timeout.ms": session_ms,
                           "heartbeat.interval.ms": 1000, "enable.auto.commit": False,
                           "auto.offset.reset": "earliest"})
        self.c.subscribe([topic], on_assign=self._on_assign, on_revoke=self._on_revoke)

    def _on_assign(self, c: Any, parts: list[Any]) -> None:
        self.assigns += 1
        self.assigned = {p.partition for p in parts}

    def _on_revoke(self, c: Any, parts: list[Any]) -> None:
        self.revokes += 1
        self.assigned = set()

    def run(self) -> None:
        try:
            while not self.stop.is_set():
                self.c.poll(0.2)
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            self.error = exc
        finally:
            self.c.close()

    def close(self) -> None:
        self.stop.set()
        self.join(timeout=30)
        assert not self.is_alive(), f"{self.name} did not close"
        assert self.error is None, repr(self.error)


def create_topic(srv: harness.ServerProcess) -> str:
    name = topic_name("static")
    a = AdminClient({"bootstrap.servers": srv.kafka})
    a.create_topics([NewTopic(name, num_partitions=PARTITIONS, replication_factor=1)],
                    operation_timeout=T, request_timeout=T)[name].result(timeout=T)
    wait_until(lambda: len(a.list_topics(topic=name, timeout=T).topics[name].partitions) == PARTITIONS, 15,
               f"{name} in metadata")
    return name


def generations(srv: harness.ServerProcess, group: str) -> list[tuple[int, str]]:
    """(generation, leader member id) the broker logged for ``group`` (JSON log lines)."""
    out = []
    path = srv.stderr_path
    assert path is not None
    for line in path.read_text().splitlines():
        try:
            rec = json.loads(line)
        except ValueError:
            continue
        if rec.get("event") == "kafka group generation" and rec.get("group") == group:
            out.append((int(rec["generation"]), str(rec["leader"])))
    return out


def describe(srv: harness.ServerProcess, group: str) -> Any:
    a = AdminClient({"bootstrap.servers": srv.kafka})
    return a.describe_consumer_groups([group], request_timeout=T)[group].result(timeout=T)


def settled(members: list[StaticMember]) -> bool:
    parts = [m.assigned for m in members]
    return all(parts) and sorted(p for ps in parts for p in ps) == list(range(PARTITIONS))


def start_group(srv: harness.ServerProcess, topic: str, group: str, session_ms: int) -> list[StaticMember]:
    members = [StaticMember(srv, topic, group, f"inst-{i}", session_ms) for i in range(3)]
    for m in members:
        m.start()
    wait_until(lambda: settled(members), 60, "three static members share the partitions")
    return members


def test_static_member_restarts_without_rebalance(rokka: harness.ServerProcess) -> None:
    topic, group = create_topic(rokka), topic_name("sg")
    members = start_group(rokka, topic, group, session_ms=30000)
    restarted: StaticMember | None = None
    try:
        before_gens = generations(rokka, group)
        before = {m.name: (m.assigns, m.revokes, set(m.assigned)) for m in members}
        # the group leader restarts: the hard case (a dynamic leader's rejoin always rebalances)
        gone = next(m for m in members if before_gens[-1][1].startswith(m.name + "-"))
        others = [m for m in members if m is not gone]
        gone.close()                       # no LeaveGroup: still a member of the group
        desc = describe(rokka, group)
        assert sorted(m.group_instance_id for m in desc.members) == ["inst-0", "inst-1", "inst-2"]
        restarted = StaticMember(rokka, topic, group, gone.name, 30000)
        restarted.start()
        wait_until(lambda: restarted.assigned, 60, "the restarted member is assigned")
        assert restarted.assigned == before[gone.name][2]          # the old member's partitions
        for m in others:
            assert (m.assigns, m.revokes, m.assigned) == before[m.name], f"{m.name} saw a rebalance"
        assert generations(rokka, group) == before_gens           # no new generation
        desc = describe(rokka, group)
        assert str(desc.state).endswith("STABLE")
        assert sorted(m.group_instance_id for m in desc.members) == ["inst-0", "inst-1", "inst-2"]
    finally:
        for m in [*members, restarted]:
            if m is not None and m.is_alive():
                m.close()


def test_static_member_that_stays_away_is_removed(rokka: harness.ServerProcess) -> None:
    topic, group = create_topic(rokka), topic_name("sg")
    members = start_group(rokka, topic, group, session_ms=6000)
    try:
        before_gens = generations(rokka, group)
        members[1].close()
        rest = [members[0], members[2]]
        wait_until(lambda: settled(rest), 60, "the other two take over every partition")
        assert all(m.revokes >= 1 for m in rest)
        assert generations(rokka, group)[-1][0] > before_gens[-1][0]
        desc = describe(rokka, group)
        assert sorted(m.group_instance_id for m in desc.members) == ["inst-0", "inst-2"]
    finally:
        for m in members:
            if m.is_alive():
                m.close()


class KpStaticMember(threading.Thread):
    """The same with kafka-python (``group_instance_id``); rebalance callbacks via a listener."""

    def __init__(self, srv: harness.ServerProcess, topic: str, group: str, instance: str) -> None:
        import kafka

        super().__init__(name=instance, daemon=True)
        self.stop = threading.Event()
        self.error: BaseException | None = None
        self.assigns = self.revokes = 0
        self.assigned: set[int] = set()
        member = self

        class Listener(kafka.ConsumerRebalanceListener):
            def on_partitions_revoked(self, revoked: Any) -> None:
                member.revokes += 1
                member.assigned = set()

            def on_partitions_assigned(self, assigned: Any) -> None:
                member.assigns += 1
                member.assigned = {tp.partition for tp in assigned}

        self.c = kafka.KafkaConsumer(bootstrap_servers=srv.kafka, group_id=group, group_instance_id=instance,
                                     client_id=instance, session_timeout_ms=30000, heartbeat_interval_ms=1000,
                                     enable_auto_commit=False, request_timeout_ms=45000)
        self.c.subscribe([topic], listener=Listener())

    def run(self) -> None:
        try:
            while not self.stop.is_set():
                self.c.poll(timeout_ms=200)
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            self.error = exc
        finally:
            self.c.close()

    close = StaticMember.close


def test_kafka_python_static_member_restarts_without_rebalance(rokka: harness.ServerProcess) -> None:
    pytest.importorskip("kafka", reason="kafka-python is not installed (interop/install.sh)")
    topic, group = create_topic(rokka), topic_name("sg")
    members = [KpStaticMember(rokka, topic, group, f"kp-{i}") for i in range(2)]
    restarted: KpStaticMember | None = None
    try:
        for m in members:
            m.start()
        wait_until(lambda: settled(members), 60, "two kafka-python static members share the partitions")
        before_gens = generations(rokka, group)
        before = {m.name: (m.assigns, m.revokes, set(m.assigned)) for m in members}
        gone = next(m for m in members if before_gens[-1][1].startswith(m.name + "-"))   # the leader
        other = next(m for m in members if m is not gone)
        gone.close()
        restarted = KpStaticMember(rokka, topic, group, gone.name)
        restarted.start()
        wait_until(lambda: restarted.assigned, 60, "the restarted member is assigned")
        assert restarted.assigned == before[gone.name][2]
        assert (other.assigns, other.revokes, other.assigned) == before[other.name]
        assert generations(rokka, group) == before_gens
    finally:
        for m in [*members, restarted]:
            if m is not None and m.is_alive():
                m.close()
