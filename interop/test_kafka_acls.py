"""Kafka ACL authorization (``kafkaAclEnable``) with SASL users: a super user manages ACLs with the
clients' admin APIs (kafka-python, confluent-kafka); another user may then produce, consume, join
a group and see topics exactly as far as the ACLs allow, and is refused with the authorization
errors real clients understand elsewhere; deleting the ACLs takes the rights away.  Without
kafkaAclEnable the ACL APIs answer SECURITY_DISABLED.

Everything on 127.0.0.1 with free ports; every client call is bounded.
"""

from __future__ import annotations

import json
import time
from typing import Any

import harness
import pytest
from kafka_common import topic_name

USERS = {"admin": "admin-secret", "alice": "alice-secret", "bob": "bob-secret"}


@pytest.fixture
def acl_rokka(configured_rokka: Any) -> harness.ServerProcess:
    return configured_rokka({"kafkaSaslMechanisms": "PLAIN,SCRAM-SHA-256", "kafkaSaslUsers": "{dir}/users.json",
                             "kafkaAclEnable": "true", "kafkaSuperUsers": "User:admin"},
                            {"users.json": json.dumps({"users": USERS})})


def kp(user: str) -> dict[str, Any]:
    return {"security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": "SCRAM-SHA-256",
            "sasl_plain_username": user, "sasl_plain_password": USERS[user]}


def test_kafka_python(acl_rokka: harness.ServerProcess) -> None:
    pytest.importorskip("kafka", reason="kafka-python is not installed")
    import kafka.errors as Errors
    from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer
    from kafka.admin import (
        ACL,
        ACLFilter,
        ACLOperation,
        ACLPermissionType,
        ACLResourcePatternType,
        NewTopic,
        ResourcePattern,
        ResourcePatternFilter,
        ResourceType,
    )

    bs = acl_rokka.kafka
    mine, secret, group = topic_name("orders-a"), topic_name("secret"), topic_name("g-alice")
    admin = KafkaAdminClient(bootstrap_servers=bs, request_timeout_ms=15000, **kp("admin"))
    alice_admin = KafkaAdminClient(bootstrap_servers=bs, request_timeout_ms=15000, **kp("alice"))
    try:
        admin.create_topics([NewTopic(mine, 1, 1), NewTopic(secret, 1, 1)])

        def allow(op: ACLOperation, rtype: ResourceType, name: str,
                  pattern: Any = ACLResourcePatternType.LITERAL) -> ACL:
            return ACL("User:alice", "*", op, ACLPermissionType.ALLOW, ResourcePattern(rtype, name, pattern))

        granted = [allow(ACLOperation.WRITE, ResourceType.TOPIC, "orders-", ACLResourcePatternType.PREFIXED),
                   allow(ACLOperation.READ, ResourceType.TOPIC, "orders-", ACLResourcePatternType.PREFIXED),
                   allow(ACLOperation.READ, ResourceType.GROUP, group)]
        res = admin.create_acls(granted)
        assert not res["failed"] and len(res["succeeded"]) == 3
        everything = ACLFilter(None, None, ACLOperation.ANY, ACLPermissionType.ANY,
                               ResourcePatternFilter(ResourceType.ANY, None, ACLResourcePatternType.ANY))
        acls, err = admin.describe_acls(everything)
        assert err is Errors.NoError and set(acls) == set(granted)
        with pytest.raises(Errors.ClusterAuthorizationFailedError):     # alice may not manage ACLs
            alice_admin.describe_acls(everything)
        assert alice_admin.create_acls([allow(ACLOperation.ALL, ResourceType.TOPIC, secret)])["failed"]

        p = KafkaProducer(bootstrap_servers=bs, enable_idempotence=False, max_block_ms=10000, **kp("alice"))
        try:
            for i in range(5):
                p.send(mine, f"a{i}".encode()).get(timeout=20)
            with pytest.raises(Errors.TopicAuthorizationFailedError):
                p.send(secret, b"no").get(timeout=20)
        finally:
            p.close(timeout=10)
        assert alice_admin.list_topics() == [mine]                      # only what alice may describe
        c = KafkaConsumer(mine, bootstrap_servers=bs, group_id=group, auto_offset_reset="earliest",
                          consumer_timeout_ms=8000, **kp("alice"))
        try:
            assert sorted(m.value for m in c) == [f"a{i}".encode() for i in range(5)]
            c.commit()
        finally:
            c.close()
        other = KafkaConsumer(mine, bootstrap_servers=bs, group_id=topic_name("other"), auto_offset_reset="earliest",
                              consumer_timeout_ms=8000, **kp("alice"))
        try:
            with pytest.raises(Errors.GroupAuthorizationFailedError):
                list(other)
        finally:
            other.close()
        bob = KafkaProducer(bootstrap_servers=bs, enable_idempotence=False, max_block_ms=10000, **kp("bob"))
        try:
            with pytest.raises(Errors.TopicAuthorizationFailedError):
                bob.send(mine, b"bob").get(timeout=20)
        finally:
            bob.close(timeout=10)

        deleted = admin.delete_acls([ACLFilter("User:alice", None, ACLOperation.WRITE, ACLPermissionType.ANY,
                                               ResourcePatternFilter(ResourceType.TOPIC, None,
                                                                     ACLResourcePatternType.ANY))])
        assert [len(d[1]) for d in deleted] == [1]
        p = KafkaProducer(bootstrap_servers=bs, enable_idempotence=False, max_block_ms=10000, **kp("alice"))
        try:
            with pytest.raises(Errors.TopicAuthorizationFailedError):
                p.send(mine, b"again").get(timeout=20)
        finally:
            p.close(timeout=10)
    finally:
        admin.close()
        alice_admin.close()
    assert "kafka.authz_denied" in acl_rokka.stderr_tail(400)


def test_confluent_kafka(acl_rokka: harness.ServerProcess) -> None:
    ck = pytest.importorskip("confluent_kafka", reason="confluent-kafka is not installed")
    from confluent_kafka.admin import (
        AclBinding,
        AclBindingFilter,
        AclOperation,
        AclPermissionType,
        AdminClient,
        NewTopic,
        ResourcePatternType,
        ResourceType,
    )

    def conf(user: str) -> dict[str, Any]:
        return {"bootstrap.servers": acl_rokka.kafka, "security.protocol": "SASL_PLAINTEXT",
                "sasl.mechanism": "PLAIN", "sasl.username": user, "sasl.password": USERS[user]}

    topic, denied_topic, group = topic_name("ck"), topic_name("ck-no"), topic_name("ck-g")
    admin = AdminClient(conf("admin"))
    for f in admin.create_topics([NewTopic(topic, 1, 1), NewTopic(denied_topic, 1, 1)]).values():
        f.result(20)
    bindings = [AclBinding(ResourceType.TOPIC, topic, ResourcePatternType.LITERAL, "User:alice", "*", op,
                           AclPermissionType.ALLOW) for op in (AclOperation.WRITE, AclOperation.READ)]
    bindings.append(AclBinding(ResourceType.GROUP, group, ResourcePatternType.LITERAL, "User:alice", "*",
                               AclOperation.READ, AclPermissionType.ALLOW))
    for f in admin.create_acls(bindings).values():
        f.result(20)
    match = AclBindingFilter(ResourceType.TOPIC, topic, ResourcePatternType.MATCH, None, None, AclOperation.ANY,
                             AclPermissionType.ANY)
    assert len(admin.describe_acls(match).result(20)) == 2

    errors: dict[str, Any] = {}
    p = ck.Producer({**conf("alice"), "message.timeout.ms": 15000, "enable.idempotence": True})
    for t in (topic, denied_topic):
        p.produce(t, b"v", on_delivery=lambda err, msg, t=t: errors.__setitem__(t, err))
    p.flush(20)
    assert errors[topic] is None
    assert errors[denied_topic] is not None and errors[denied_topic].code() == ck.KafkaError.TOPIC_AUTHORIZATION_FAILED
    c = ck.Consumer({**conf("alice"), "group.id": group, "auto.offset.reset": "earliest"})
    c.subscribe([topic])
    got = None
    deadline = time.monotonic() + 40
    try:
        while got is None and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is not None and not m.error():
                got = m.value()
    finally:
        c.close()
    assert got == b"v"
    gone = admin.delete_acls([AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, "User:alice", None,
                                               AclOperation.ANY, AclPermissionType.ANY)])
    assert sum(len(f.result(20)) for f in gone.values()) == 3


def test_acl_apis_without_an_authorizer(rokka: harness.ServerProcess) -> None:
    pytest.importorskip("kafka", reason="kafka-python is not installed")
    import kafka.errors as Errors
    from kafka import KafkaAdminClient
    from kafka.admin import (
        ACLFilter,
        ACLOperation,
        ACLPermissionType,
        ACLResourcePatternType,
        ResourcePatternFilter,
        ResourceType,
    )

    admin = KafkaAdminClient(bootstrap_servers=rokka.kafka, request_timeout_ms=15000)
    try:
        with pytest.raises(Errors.SecurityDisabledError):
            admin.describe_acls(ACLFilter(None, None, ACLOperation.ANY, ACLPermissionType.ANY,
                                          ResourcePatternFilter(ResourceType.ANY, None, ACLResourcePatternType.ANY)))
    finally:
        admin.close()


def test_kafkajs(acl_rokka: harness.ServerProcess, workdir: Any) -> None:
    harness.skip_unless_node("kafkajs")
    topic = topic_name("kj")

    def run(user: str, action: str, **params: Any) -> list[dict[str, Any]]:
        sasl = {"mechanism": "scram-sha-256", "username": user, "password": USERS[user]}
        return harness.run_node("kafkajs_client", {"action": action, "brokers": [acl_rokka.kafka], "sasl": sasl,
                                                   "topic": topic, **params},
                                workdir=workdir / f"{user}-{action}-{time.monotonic_ns()}", timeout=60)

    assert [e for e in run("admin", "create", partitions=1) if e.get("event") == "created"]
    write = {"resourceType": 2, "resourceName": topic, "resourcePatternType": 3, "principal": "User:alice",
             "host": "*", "operation": 4, "permissionType": 3}
    assert [e for e in run("alice", "create_acls", acls=[write]) if e.get("event") == "refused"]   # not a super user
    assert [e for e in run("admin", "create_acls", acls=[write]) if e.get("event") == "created_acls"]
    (acls,) = [e for e in run("admin", "describe_acls", filter={
        "resourceType": 1, "resourcePatternType": 1, "operation": 1, "permissionType": 1}) if e.get("event") == "acls"]
    assert [r["resourceName"] for r in acls["resources"]] == [topic]
    sent = run("alice", "produce", messages=[{"value": "kj-0"}])
    assert [e for e in sent if e.get("event") == "sent"]
    with pytest.raises(harness.HarnessError, match="Not authorized to access topics"):
        run("bob", "produce", messages=[{"value": "kj-1"}])
