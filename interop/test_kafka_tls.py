"""Kafka over TLS (SSL, SASL_SSL): ``rokka serve -c broker.conf`` with kafkaSslCertFile and a
certificate from a test CA (trustme); each real client connects with its own TLS code, verifies
rokka's certificate against the CA, produces and reads back.  Client certificates
(kafkaSslClientAuth), SASL over TLS, certificate rotation without a restart, and what happens to a
plaintext client, an untrusting client and a client without a required certificate.

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

trustme = pytest.importorskip("trustme", reason="trustme is not installed (make test installs it)")

T = 20.0
CLIENT_CN = "alice"


@pytest.fixture
def ca() -> Any:
    return trustme.CA()


def tls_files(ca: Any) -> dict[str, str]:
    """server.pem (key + chain for 127.0.0.1), ca.pem, client.pem (key + chain, CN=alice)."""
    server = ca.issue_cert("127.0.0.1", "localhost")
    client = ca.issue_cert("alice@example.com", common_name=CLIENT_CN)
    return {"server.pem": server.private_key_and_cert_chain_pem.bytes().decode(),
            "ca.pem": ca.cert_pem.bytes().decode(),
            "client.pem": client.private_key_and_cert_chain_pem.bytes().decode()}


TLS_CONF = {"kafkaSslCertFile": "{dir}/server.pem", "kafkaSslCaFile": "{dir}/ca.pem"}


@pytest.fixture
def tls_rokka(configured_rokka: Any, ca: Any) -> harness.ServerProcess:
    """Client certificates checked when sent (kafkaSslClientAuth=requested)."""
    return configured_rokka({**TLS_CONF, "kafkaSslClientAuth": "requested"}, tls_files(ca))


@pytest.fixture
def mtls_rokka(configured_rokka: Any, ca: Any) -> harness.ServerProcess:
    """Every client must present a certificate from the CA (kafkaSslClientAuth=required)."""
    return configured_rokka({**TLS_CONF, "kafkaSslClientAuth": "required"}, tls_files(ca))


def consume_ck(ck: Any, conf: dict[str, Any], topic: str, want: int) -> list[bytes]:
    c = ck.Consumer({**conf, "group.id": topic_name("g"), "auto.offset.reset": "earliest"})
    c.subscribe([topic])
    got: list[bytes] = []
    deadline = time.monotonic() + 40
    try:
        while len(got) < want and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is not None and not m.error():
                got.append(m.value())
    finally:
        c.close()
    return got


def test_kafka_python(tls_rokka: harness.ServerProcess) -> None:
    pytest.importorskip("kafka", reason="kafka-python is not installed")
    from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer
    from kafka.admin import NewTopic

    d = tls_rokka.workdir
    conf = {"security_protocol": "SSL", "ssl_cafile": str(d / "ca.pem"), "ssl_certfile": str(d / "client.pem")}
    topic = topic_name("tls")
    admin = KafkaAdminClient(bootstrap_servers=tls_rokka.kafka, request_timeout_ms=15000, **conf)
    try:
        admin.create_topics([NewTopic(topic, 2, 1)])
    finally:
        admin.close()
    p = KafkaProducer(bootstrap_servers=tls_rokka.kafka, **conf)
    for i in range(200):        # some 16 KiB values: responses of many TLS records
        p.send(topic, key=f"k{i}".encode(), value=bytes([i % 256]) * (16384 if i % 10 == 0 else 10),
               headers=[("h", str(i).encode())])
    p.flush(timeout=30)
    p.close(timeout=10)
    c = KafkaConsumer(topic, bootstrap_servers=tls_rokka.kafka, auto_offset_reset="earliest",
                      consumer_timeout_ms=5000, **conf)
    try:
        got = {m.key: (m.value, m.headers) for m in c}
    finally:
        c.close()
    assert got == {f"k{i}".encode(): (bytes([i % 256]) * (16384 if i % 10 == 0 else 10), [("h", str(i).encode())])
                   for i in range(200)}
    assert f'"principal": "CN={CLIENT_CN},' in tls_rokka.stderr_tail(400)      # the client certificate's subject


def test_confluent_kafka_client_certificate_required(mtls_rokka: harness.ServerProcess) -> None:
    ck = pytest.importorskip("confluent_kafka", reason="confluent-kafka is not installed")
    d = mtls_rokka.workdir
    conf = {"bootstrap.servers": mtls_rokka.kafka, "security.protocol": "SSL",
            "ssl.ca.location": str(d / "ca.pem")}
    mutual = {**conf, "ssl.certificate.location": str(d / "client.pem"), "ssl.key.location": str(d / "client.pem")}
    topic = topic_name("tls")
    p = ck.Producer({**mutual, "message.timeout.ms": 20000, "compression.type": "zstd"})
    for i in range(50):
        p.produce(topic, f"ck-{i}".encode())
    assert p.flush(T) == 0
    assert sorted(consume_ck(ck, mutual, topic, 50)) == sorted(f"ck-{i}".encode() for i in range(50))
    errors: list[Any] = []      # no client certificate: the handshake is refused
    anon = ck.Producer({**conf, "error_cb": errors.append})
    deadline = time.monotonic() + 15
    while not errors and time.monotonic() < deadline:
        anon.poll(0.5)
    assert errors and all(e.code() in (ck.KafkaError._TRANSPORT, ck.KafkaError._SSL,
                                       ck.KafkaError._ALL_BROKERS_DOWN) for e in errors), errors
    # The refusal is logged as the handshake fails, which can be just after the client reports it.
    deadline = time.monotonic() + 10
    while "PEER_DID_NOT_RETURN_A_CERTIFICATE" not in mtls_rokka.stderr_tail(400) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert "PEER_DID_NOT_RETURN_A_CERTIFICATE" in mtls_rokka.stderr_tail(400)


def test_kcat(tls_rokka: harness.ServerProcess, need_kcat: str) -> None:
    tls = ["-X", "security.protocol=SSL", "-X", f"ssl.ca.location={tls_rokka.workdir / 'ca.pem'}"]
    topic = topic_name("tls")
    harness.run_kcat(["-b", tls_rokka.kafka, *tls, "-P", "-t", topic], input="a\nb\nc\n")
    out = harness.run_kcat(["-b", tls_rokka.kafka, *tls, "-C", "-t", topic, "-e", "-o", "beginning", "-q"])
    assert sorted(out.stdout.split()) == ["a", "b", "c"]
    # a plaintext client and a client that does not trust the CA get nowhere; the log says why
    assert harness.run_kcat(["-b", tls_rokka.kafka, "-m", "3", "-L"], check=False).returncode != 0
    assert harness.run_kcat(["-b", tls_rokka.kafka, "-X", "security.protocol=SSL", "-m", "3", "-L"],
                            check=False).returncode != 0
    tail = tls_rokka.stderr_tail(400)
    assert "not TLS: a plaintext client?" in tail
    assert "TLSV1_ALERT_UNKNOWN_CA" in tail


def test_kafkajs_with_client_certificate(mtls_rokka: harness.ServerProcess, workdir: Path) -> None:
    harness.skip_unless_node("kafkajs")
    d = mtls_rokka.workdir
    topic = topic_name("tls")
    common = {"brokers": [mtls_rokka.kafka], "topic": topic,
              "ssl": {"ca": str(d / "ca.pem"), "cert": str(d / "client.pem"), "key": str(d / "client.pem")}}
    created = harness.run_node("kafkajs_client", {"action": "create", "partitions": 2, **common},
                               workdir=workdir / "create", timeout=60)
    assert [e for e in created if e.get("event") == "created"]
    sent = harness.run_node("kafkajs_client", {"action": "produce", **common, "compression": "gzip",
                                               "messages": [{"value": f"kj-{i}"} for i in range(6)]},
                            workdir=workdir / "produce", timeout=60)
    assert [e for e in sent if e.get("event") == "sent"]
    marks = harness.run_node("kafkajs_client", {"action": "watermarks", **common},
                             workdir=workdir / "marks", timeout=60)
    (offsets,) = [e["offsets"] for e in marks if e.get("event") == "offsets"]
    assert sum(o["high"] for o in offsets) == 6


def test_aiokafka(tls_rokka: harness.ServerProcess) -> None:
    pytest.importorskip("aiokafka", reason="aiokafka is not installed")
    from aiokafka.helpers import create_ssl_context

    conf = {"bootstrap_servers": tls_rokka.kafka, "security_protocol": "SSL",
            "ssl_context": create_ssl_context(cafile=str(tls_rokka.workdir / "ca.pem"))}
    got = aiokafka_round_trip(conf, topic_name("tls"))
    assert sorted(got) == sorted(f"ai-{i}".encode() for i in range(5))


def test_sasl_ssl(configured_rokka: Any, ca: Any) -> None:
    ck = pytest.importorskip("confluent_kafka", reason="confluent-kafka is not installed")
    pytest.importorskip("kafka", reason="kafka-python is not installed")
    from kafka import KafkaConsumer

    srv = configured_rokka({**TLS_CONF, "kafkaSaslMechanisms": "PLAIN,SCRAM-SHA-256",
                            "kafkaSaslUsers": "{dir}/users.json"},
                           {**tls_files(ca), "users.json": json.dumps({"users": {"bob": "bob-secret"}})})
    ca_pem = str(srv.workdir / "ca.pem")
    topic = topic_name("saslssl")
    p = ck.Producer({"bootstrap.servers": srv.kafka, "security.protocol": "SASL_SSL", "ssl.ca.location": ca_pem,
                     "sasl.mechanism": "PLAIN", "sasl.username": "bob", "sasl.password": "bob-secret",
                     "message.timeout.ms": 20000})
    for i in range(10):
        p.produce(topic, f"s-{i}".encode())
    assert p.flush(T) == 0
    c = KafkaConsumer(topic, bootstrap_servers=srv.kafka, auto_offset_reset="earliest", consumer_timeout_ms=5000,
                      security_protocol="SASL_SSL", ssl_cafile=ca_pem, sasl_mechanism="SCRAM-SHA-256",
                      sasl_plain_username="bob", sasl_plain_password="bob-secret")
    try:
        assert sorted(m.value for m in c) == sorted(f"s-{i}".encode() for i in range(10))
    finally:
        c.close()
    # TLS alone is not enough: without SASL the connection is closed after the handshake
    assert harness.run_kcat(["-b", srv.kafka, "-X", "security.protocol=SSL", "-X", f"ssl.ca.location={ca_pem}",
                             "-m", "3", "-L"], check=False).returncode != 0
    assert "before SASL authentication" in srv.stderr_tail(300)


def test_certificate_rotation_without_restart(tls_rokka: harness.ServerProcess, need_kcat: str) -> None:
    """A new certificate (here from another CA) in kafkaSslCertFile serves new connections within
    seconds; the old one stops being offered."""
    d = tls_rokka.workdir
    new_ca = trustme.CA()
    (d / "new-ca.pem").write_bytes(new_ca.cert_pem.bytes())

    def metadata_trusting(ca_file: str) -> int:
        return harness.run_kcat(["-b", tls_rokka.kafka, "-X", "security.protocol=SSL", "-X",
                                 f"ssl.ca.location={d / ca_file}", "-m", "5", "-L"], check=False).returncode

    assert metadata_trusting("ca.pem") == 0 and metadata_trusting("new-ca.pem") != 0
    staged = d / "server.pem.new"
    staged.write_bytes(new_ca.issue_cert("127.0.0.1").private_key_and_cert_chain_pem.bytes())
    staged.replace(d / "server.pem")
    deadline = time.monotonic() + 20
    while metadata_trusting("new-ca.pem") != 0:
        assert time.monotonic() < deadline, "the new certificate was never served"
        time.sleep(0.5)
    assert metadata_trusting("ca.pem") != 0
    assert "kafka TLS files reloaded" in tls_rokka.stderr_tail(400)


def test_unusable_tls_settings_refuse_the_start(configured_rokka: Any, ca: Any) -> None:
    with pytest.raises(harness.HarnessError, match="kafkaSslClientAuth=required needs kafkaSslCaFile"):
        configured_rokka({"kafkaSslCertFile": "{dir}/server.pem", "kafkaSslClientAuth": "required"}, tls_files(ca))
