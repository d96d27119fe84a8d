"""Kafka SASL (SASL_PLAINTEXT): ``rokka serve -c broker.conf`` with kafkaSaslMechanisms and a users
file; each real client authenticates with its own SASL code (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512),
produces and reads back; a wrong password and a client without SASL are turned away.

Everything on 127.0.0.1 with free ports; every client call is bounded.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import harness
import pytest
from kafka_common import aiokafka_round_trip, topic_name

USER, PASSWORD = "alice", "alice-secret"
T = 20.0


@pytest.fixture
def sasl_rokka(configured_rokka: Any) -> harness.ServerProcess:
    return configured_rokka({"kafkaSaslMechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
                             "kafkaSaslUsers": "{dir}/kafka-users.json",
                             "kafkaSuperUsers": f"User:{USER}"},     # manages the other users' SCRAM credentials
                            {"kafka-users.json": json.dumps({"users": {USER: PASSWORD, "bob": "bob-secret"}})})


def kp_conf(mechanism: str, password: str = PASSWORD) -> dict[str, Any]:
    return {"security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": mechanism,
            "sasl_plain_username": USER, "sasl_plain_password": password}


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256"])
def test_kafka_python(sasl_rokka: harness.ServerProcess, mechanism: str) -> None:
    pytest.importorskip("kafka", reason="kafka-python is not installed")
    from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer
    from kafka.errors import KafkaError

    topic = topic_name("sasl")
    admin = KafkaAdminClient(bootstrap_servers=sasl_rokka.kafka, request_timeout_ms=15000, **kp_conf(mechanism))
    try:
        from kafka.admin import NewTopic
        admin.create_topics([NewTopic(topic, 2, 1)])
    finally:
        admin.close()
    p = KafkaProducer(bootstrap_servers=sasl_rokka.kafka, enable_idempotence=False, **kp_conf(mechanism))
    for i in range(10):
        p.send(topic, f"kp-{i}".encode())
    p.flush(timeout=30)
    p.close(timeout=10)
    c = KafkaConsumer(topic, bootstrap_servers=sasl_rokka.kafka, auto_offset_reset="earliest",
                      consumer_timeout_ms=5000, **kp_conf(mechanism))
    try:
        assert sorted(m.value for m in c) == sorted(f"kp-{i}".encode() for i in range(10))
    finally:
        c.close()
    with pytest.raises(KafkaError):     # wrong password: no connection gets past authentication
        KafkaProducer(bootstrap_servers=sasl_rokka.kafka, bootstrap_timeout_ms=4000, **kp_conf(mechanism, "wrong"))
    assert "kafka.sasl_failed" in sasl_rokka.stderr_tail(200)


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-512"])
def test_confluent_kafka(sasl_rokka: harness.ServerProcess, mechanism: str) -> None:
    ck = pytest.importorskip("confluent_kafka", reason="confluent-kafka is not installed")
    conf = {"bootstrap.servers": sasl_rokka.kafka, "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": mechanism, "sasl.username": USER, "sasl.password": PASSWORD}
    topic = topic_name("sasl")
    p = ck.Producer({**conf, "message.timeout.ms": 20000})
    for i in range(10):
        p.produce(topic, f"ck-{i}".encode())
    assert p.flush(T) == 0
    c = ck.Consumer({**conf, "group.id": topic_name("g"), "auto.offset.reset": "earliest"})
    c.subscribe([topic])
    got: list[bytes] = []
    deadline = time.monotonic() + 40
    try:
        while len(got) < 10 and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is not None and not m.error():
                got.append(m.value())
    finally:
        c.close()
    assert sorted(got) == sorted(f"ck-{i}".encode() for i in range(10))
    errors: list[Any] = []
    bad = ck.Producer({**conf, "sasl.password": "wrong", "error_cb": errors.append})
    bad.poll(5)
    deadline = time.monotonic() + 15
    while not errors and time.monotonic() < deadline:
        bad.poll(0.5)
    assert any(e.code() == ck.KafkaError._AUTHENTICATION for e in errors), errors


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256"])
def test_kcat(sasl_rokka: harness.ServerProcess, need_kcat: str, mechanism: str) -> None:
    """Debian's kcat links librdkafka 2.0, whose SCRAM client repeats its nonce (fixed in 2.6.1);
    rokka accepts that form as Kafka 3.x does."""
    auth = ["-X", "security.protocol=SASL_PLAINTEXT", "-X", f"sasl.mechanism={mechanism}",
            "-X", f"sasl.username={USER}", "-X", f"sasl.password={PASSWORD}"]
    topic = topic_name("sasl")
    harness.run_kcat(["-b", sasl_rokka.kafka, *auth, "-P", "-t", topic], input="a\nb\nc\n")
    out = harness.run_kcat(["-b", sasl_rokka.kafka, *auth, "-C", "-t", topic, "-e", "-o", "beginning", "-q"])
    assert sorted(out.stdout.split()) == ["a", "b", "c"]


def test_users_file_edits_apply_without_restart(sasl_rokka: harness.ServerProcess, need_kcat: str) -> None:
    def metadata_as(user: str, password: str) -> int:
        return harness.run_kcat(["-b", sasl_rokka.kafka, "-X", "security.protocol=SASL_PLAINTEXT",
                                 "-X", "sasl.mechanism=SCRAM-SHA-256", "-X", f"sasl.username={user}",
                                 "-X", f"sasl.password={password}", "-m", "5", "-L"], check=False).returncode

    assert metadata_as("carol", "carol-secret") != 0
    users = sasl_rokka.workdir / "kafka-users.json"
    users.write_text(json.dumps({"users": {USER: PASSWORD, "carol": "carol-secret"}}))
    deadline = time.monotonic() + 20
    while metadata_as("carol", "carol-secret") != 0:
        assert time.monotonic() < deadline, "the new user never got in"
        time.sleep(0.5)
    assert metadata_as("bob", "bob-secret") != 0                       # removed from the file: refused
    assert "kafka SASL users reloaded" in sasl_rokka.stderr_tail(400)


def test_kafkajs_scram(sasl_rokka: harness.ServerProcess, workdir: Path) -> None:
    harness.skip_unless_node("kafkajs")
    topic = topic_name("sasl")
    sasl = {"mechanism": "scram-sha-256", "username": USER, "password": PASSWORD}
    common = {"brokers": [sasl_rokka.kafka], "sasl": sasl, "topic": topic}
    created = harness.run_node("kafkajs_client", {"action": "create", "partitions": 2, **common},
                               workdir=workdir / "create", timeout=60)
    assert [e for e in created if e.get("event") == "created"]
    sent = harness.run_node("kafkajs_client", {"action": "produce", **common,
                                               "messages": [{"value": f"kj-{i}"} for i in range(6)]},
                            workdir=workdir / "produce", timeout=60)
    assert [e for e in sent if e.get("event") == "sent"]
    marks = harness.run_node("kafkajs_client", {"action": "watermarks", **common},
                             workdir=workdir / "marks", timeout=60)
    (offsets,) = [e["offsets"] for e in marks if e.get("event") == "offsets"]
    assert sum(o["high"] for o in offsets) == 6


def test_aiokafka_plain(sasl_rokka: harness.ServerProcess) -> None:
    pytest.importorskip("aiokafka", reason="aiokafka is not installed")
    conf = {"bootstrap_servers": sasl_rokka.kafka, "security_protocol": "SASL_PLAINTEXT",
            "sasl_mechanism": "PLAIN", "sasl_plain_username": USER, "sasl_plain_password": PASSWORD}
    got = aiokafka_round_trip(conf, topic_name("sasl"))
    assert sorted(got) == sorted(f"ai-{i}".encode() for i in range(5))


def test_client_without_sasl_is_turned_away(sasl_rokka: harness.ServerProcess) -> None:
    pytest.importorskip("kafka", reason="kafka-python is not installed")
    from kafka import KafkaProducer
    from kafka.errors import KafkaError

    with pytest.raises(KafkaError):
        KafkaProducer(bootstrap_servers=sasl_rokka.kafka, bootstrap_timeout_ms=4000)
    assert "before SASL authentication" in sasl_rokka.stderr_tail(200)


def test_scram_users_managed_with_admin_apis(sasl_rokka: harness.ServerProcess, need_kcat: str) -> None:
    """kafka-python creates, describes and deletes a SCRAM user; kcat logs in as it (SCRAM and PLAIN)
    while it exists; confluent-kafka does the same with its own admin API; users with a password in
    the file stay the file's."""
    pytest.importorskip("kafka", reason="kafka-python is not installed")
    ck = pytest.importorskip("confluent_kafka", reason="confluent-kafka is not installed")
    from confluent_kafka.admin import AdminClient, ScramCredentialInfo, ScramMechanism, UserScramCredentialUpsertion
    from kafka import KafkaAdminClient
    from kafka.admin._users import ScramMechanism as KpMechanism
    from kafka.admin._users import UserScramCredentialDeletion
    from kafka.admin._users import UserScramCredentialUpsertion as KpUpsertion

    def login(user: str, password: str, mechanism: str = "SCRAM-SHA-256") -> int:
        return harness.run_kcat(["-b", sasl_rokka.kafka, "-X", "security.protocol=SASL_PLAINTEXT",
                                 "-X", f"sasl.mechanism={mechanism}", "-X", f"sasl.username={user}",
                                 "-X", f"sasl.password={password}", "-m", "3", "-L"], check=False).returncode

    admin = KafkaAdminClient(bootstrap_servers=sasl_rokka.kafka, request_timeout_ms=15000, **kp_conf("SCRAM-SHA-256"))
    try:
        assert login("carol", "carol-pw") != 0
        assert admin.alter_user_scram_credentials([KpUpsertion("carol", KpMechanism.SCRAM_SHA_256, "carol-pw",
                                                               iterations=8192)]) == {"carol": None}
        described = admin.describe_user_scram_credentials(["carol", "alice"])
        assert described["carol"]["credential_infos"] == [{"mechanism": KpMechanism.SCRAM_SHA_256, "iterations": 8192}]
        assert len(described["alice"]["credential_infos"]) == 2
        assert login("carol", "carol-pw") == 0 and login("carol", "carol-pw", "PLAIN") == 0
        assert login("carol", "wrong") != 0 and login("carol", "carol-pw", "SCRAM-SHA-512") != 0
        refused = admin.alter_user_scram_credentials([KpUpsertion("alice", KpMechanism.SCRAM_SHA_256, "x")])
        assert "password in kafkaSaslUsers" in (refused["alice"] or "")
        assert admin.alter_user_scram_credentials([UserScramCredentialDeletion("carol", KpMechanism.SCRAM_SHA_256)]) \
            == {"carol": None}
        assert login("carol", "carol-pw") != 0
    finally:
        admin.close()
    ck_admin = AdminClient({"bootstrap.servers": sasl_rokka.kafka, "security.protocol": "SASL_PLAINTEXT",
                            "sasl.mechanism": "PLAIN", "sasl.username": USER, "sasl.password": PASSWORD})
    up = UserScramCredentialUpsertion("dave", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096), b"dave-pw")
    for f in ck_admin.alter_user_scram_credentials([up]).values():
        f.result(20)
    got = {u: f.result(20) for u, f in ck_admin.describe_user_scram_credentials(["dave"]).items()}
    assert [i.mechanism for i in got["dave"].scram_credential_infos] == [ScramMechanism.SCRAM_SHA_512]
    assert login("dave", "dave-pw", "SCRAM-SHA-512") == 0
    (gone,) = ck_admin.describe_user_scram_credentials(["nobody"]).values()
    with pytest.raises(ck.KafkaException, match="does not exist"):
        gone.result(20)
