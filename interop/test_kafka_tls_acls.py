"""Kafka ACLs with TLS client certificates as principals (no SASL): ``kafkaSslClientAuth=required``
and ``kafkaAclEnable``; the super user is the admin certificate's subject.  kafka-python (admin
certificate) creates a topic and grants another certificate's subject WRITE on it; confluent-kafka
with that certificate may produce there and is refused elsewhere.

Everything on 127.0.0.1 with free ports; every client call is bounded.
"""

from __future__ import annotations

from typing import Any

import pytest
from kafka_common import topic_name

trustme = pytest.importorskip("trustme", reason="trustme is not installed (make test installs it)")


def subject(leaf: Any) -> str:
    """The RFC 4514 subject of a trustme certificate, as rokka (and Kafka) print it."""
    from cryptography import x509

    return x509.load_pem_x509_certificate(leaf.cert_chain_pems[0].bytes()).subject.rfc4514_string()


def test_certificate_subjects_are_principals(configured_rokka: Any) -> None:
    pytest.importorskip("kafka", reason="kafka-python is not installed")
    ck = pytest.importorskip("confluent_kafka", reason="confluent-kafka is not installed")
    from kafka import KafkaAdminClient
    from kafka.admin import ACL, ACLOperation, ACLPermissionType, NewTopic, ResourcePattern, ResourceType

    ca = trustme.CA()
    admin_cert, alice_cert = ca.issue_cert("admin@example.com", common_name="admin"), \
        ca.issue_cert("alice@example.com", common_name="alice")
    files = {"server.pem": ca.issue_cert("127.0.0.1").private_key_and_cert_chain_pem.bytes().decode(),
             "ca.pem": ca.cert_pem.bytes().decode(),
             "admin.pem": admin_cert.private_key_and_cert_chain_pem.bytes().decode(),
             "alice.pem": alice_cert.private_key_and_cert_chain_pem.bytes().decode()}
    srv = configured_rokka({"kafkaSslCertFile": "{dir}/server.pem", "kafkaSslCaFile": "{dir}/ca.pem",
                            "kafkaSslClientAuth": "required", "kafkaAclEnable": "true",
                            "kafkaSuperUsers": f"User:{subject(admin_cert)}"}, files)
    d = srv.workdir
    topic, other = topic_name("tlsacl"), topic_name("tlsacl-no")
    admin = KafkaAdminClient(bootstrap_servers=srv.kafka, security_protocol="SSL", ssl_cafile=str(d / "ca.pem"),
                             ssl_certfile=str(d / "admin.pem"), request_timeout_ms=15000)
    try:
        admin.create_topics([NewTopic(topic, 1, 1), NewTopic(other, 1, 1)])
        res = admin.create_acls([ACL(f"User:{subject(alice_cert)}", "*", ACLOperation.WRITE, ACLPermissionType.ALLOW,
                                     ResourcePattern(ResourceType.TOPIC, topic))])
        assert not res["failed"]
    finally:
        admin.close()
    conf = {"bootstrap.servers": srv.kafka, "security.protocol": "SSL", "ssl.ca.location": str(d / "ca.pem"),
            "ssl.certificate.location": str(d / "alice.pem"), "ssl.key.location": str(d / "alice.pem"),
            "message.timeout.ms": 15000, "enable.idempotence": False}
    errors: dict[str, Any] = {}
    p = ck.Producer(conf)
    for t in (topic, other):
        p.produce(t, b"v", on_delivery=lambda err, msg, t=t: errors.__setitem__(t, err))
    p.flush(20)
    assert errors[topic] is None
    assert errors[other] is not None and errors[other].code() == ck.KafkaError.TOPIC_AUTHORIZATION_FAILED
