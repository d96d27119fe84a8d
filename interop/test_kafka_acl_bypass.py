"""Kafka authorization holes (issue 19 items 4 and 9, issue 26 item 5) against ``rokka serve`` with SASL
users, closed with real clients:

* a view (``rokka.view.topic``) is no way around the ACLs of its source: a user allowed only on the
  prefix ``alice-`` can neither create ``alice-view`` of ``SecretT`` nor alter a topic into one, nor
  read or write ``SecretT`` through a view the operator made;
* an OffsetFetch v1 (no top-level error code) for a group the user may not describe is answered
  GROUP_AUTHORIZATION_FAILED per partition, on a connection that stays usable;
* the authorized-operations fields (KIP-430) are what the ACLs allow, and every supported operation
  without an authorizer;
* without Kafka ACLs, only kafkaSuperUsers manage other users' SCRAM credentials; a user may change
  its own.

Everything on 127.0.0.1 with free ports; every client call is bounded.
"""

from __future__ import annotations

import json
from typing import Any

import harness
import pytest
from kafka_common import topic_name

USERS = {"admin": "admin-secret", "alice": "alice-secret", "bob": "bob-secret"}
T = 20.0
TAF, GAF = 29, 30


@pytest.fixture
def acl_rokka(configured_rokka: Any) -> harness.ServerProcess:
    return configured_rokka({"kafkaSaslMechanisms": "PLAIN,SCRAM-SHA-256", "kafkaSaslUsers": "{dir}/users.json",
                             "kafkaAclEnable": "true", "kafkaSuperUsers": "User:admin"},
                            {"users.json": json.dumps({"users": USERS})})


@pytest.fixture
def sasl_rokka(configured_rokka: Any) -> harness.ServerProcess:
    return configured_rokka({"kafkaSaslMechanisms": "PLAIN,SCRAM-SHA-256", "kafkaSaslUsers": "{dir}/users.json",
                             "kafkaSuperUsers": "User:admin"},
                            {"users.json": json.dumps({"users": USERS})})


def kp(user: str, password: str | None = None) -> dict[str, Any]:
    return {"security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": "SCRAM-SHA-256",
            "sasl_plain_username": user, "sasl_plain_password": password or USERS[user]}


def ck(srv: harness.ServerProcess, user: str, password: str | None = None) -> dict[str, Any]:
    return {"bootstrap.servers": srv.kafka, "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "SCRAM-SHA-256",
            "sasl.username": user, "sasl.password": password or USERS[user]}


def _grant_alice(srv: harness.ServerProcess, group: str) -> None:
    """alice: ALL on topics prefixed ``alice-``, READ on ``group``; nothing else."""
    from kafka import KafkaAdminClient
    from kafka.admin import ACL, ACLOperation, ACLPermissionType, ACLResourcePatternType, ResourcePattern, ResourceType

    admin = KafkaAdminClient(bootstrap_servers=srv.kafka, request_timeout_ms=15000, **kp("admin"))
    try:
        res = admin.create_acls([
            ACL("User:alice", "*", ACLOperation.ALL, ACLPermissionType.ALLOW,
                ResourcePattern(ResourceType.TOPIC, "alice-", ACLResourcePatternType.PREFIXED)),
            ACL("User:alice", "*", ACLOperation.READ, ACLPermissionType.ALLOW,
                ResourcePattern(ResourceType.GROUP, group, ACLResourcePatternType.LITERAL))])
        assert not res["failed"], res
    finally:
        admin.close()


def _create(admin: Any, name: str, configs: dict[str, str] | None = None) -> None:
    from confluent_kafka.admin import NewTopic

    for f in admin.create_topics([NewTopic(name, 1, 1, config=configs or {})]).values():
        f.result(T)


def test_views_need_the_rights_on_their_source(acl_rokka: harness.ServerProcess) -> None:
    pytest.importorskip("kafka", reason="kafka-python is not installed")
    ckafka = pytest.importorskip("confluent_kafka", reason="confluent-kafka is not installed")
    import kafka.errors as Errors
    from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    secret, group = topic_name("SecretT"), topic_name("alice-g")
    _grant_alice(acl_rokka, group)
    root, alice = AdminClient(ck(acl_rokka, "admin")), AdminClient(ck(acl_rokka, "alice"))
    _create(root, secret)
    p = KafkaProducer(bootstrap_servers=acl_rokka.kafka, enable_idempotence=False, max_block_ms=10000, **kp("admin"))
    try:
        p.send(secret, b"the secret").get(timeout=T)
    finally:
        p.close(timeout=10)

    made = alice.create_topics([ckafka.admin.NewTopic("alice-view", 1, 1, config={"rokka.view.topic": secret})])
    with pytest.raises(ckafka.KafkaException) as refused:
        made["alice-view"].result(T)
    assert refused.value.args[0].code() == ckafka.KafkaError.TOPIC_AUTHORIZATION_FAILED
    _create(alice, "alice-plain")                       # her own topics she may create
    into = ConfigResource(ResourceType.TOPIC, "alice-plain", incremental_configs=[
        ConfigEntry("rokka.view.topic", secret, incremental_operation=AlterConfigOpType.SET)])
    with pytest.raises(ckafka.KafkaException) as refused:
        alice.incremental_alter_configs([into])[into].result(T)
    assert refused.value.args[0].code() == ckafka.KafkaError.TOPIC_AUTHORIZATION_FAILED

    _create(root, "alice-view2", {"rokka.view.topic": secret})     # a view the operator made
    c = KafkaConsumer(bootstrap_servers=acl_rokka.kafka, group_id=group, auto_offset_reset="earliest",
                      enable_auto_commit=False, consumer_timeout_ms=5000, **kp("alice"))
    got: list[bytes] = []
    try:
        c.assign([TopicPartition("alice-view2", 0)])
        with pytest.raises(Errors.TopicAuthorizationFailedError):
            for _ in range(10):
                got += [r.value for rs in c.poll(timeout_ms=1000).values() for r in rs]
    finally:
        c.close()
    assert got == []
    w = KafkaProducer(bootstrap_servers=acl_rokka.kafka, enable_idempotence=False, max_block_ms=8000, **kp("alice"))
    try:
        with pytest.raises((Errors.TopicAuthorizationFailedError, Errors.KafkaTimeoutError)):
            w.send("alice-view2", b"planted").get(timeout=T)
    finally:
        w.close(timeout=10)
    check = KafkaConsumer(secret, bootstrap_servers=acl_rokka.kafka, auto_offset_reset="earliest",
                          consumer_timeout_ms=4000, **kp("admin"))
    try:
        assert [m.value for m in check] == [b"the secret"]          # nothing written through the view
    finally:
        check.close()
    assert "view_source" in acl_rokka.stderr_tail(400)


def test_offset_fetch_v1_refusal_is_answered(acl_rokka: harness.ServerProcess) -> None:
    pytest.importorskip("kafka", reason="kafka-python is not installed")
    from kafka import KafkaAdminClient
    from kafka.protocol.consumer.group import OffsetFetchRequest

    _grant_alice(acl_rokka, topic_name("alice-g"))
    admin = KafkaAdminClient(bootstrap_servers=acl_rokka.kafka, request_timeout_ms=15000, **kp("alice"))
    try:
        node = next(iter(admin._client.cluster.brokers())).node_id
        for version in (1, 2):           # v0 (ZooKeeper offsets) is not offered; v2 has a top-level code too
            req = OffsetFetchRequest(group_id="not-alices", topics=[OffsetFetchRequest.OffsetFetchRequestTopic(
                name="alice-t", partition_indexes=[0, 1])], min_version=version, max_version=version)
            resp = admin._manager.run(admin._manager.send, req, node)   # kafka-python's own send path
            got = [(t.name, [(p.partition_index, p.error_code) for p in t.partitions]) for t in resp.topics]
            if version == 1:    # no top-level code: the refusal in every requested partition (as Kafka)
                assert got == [("alice-t", [(0, GAF), (1, GAF)])]
            else:
                assert (got, resp.error_code) == ([], GAF)
    finally:
        admin.close()
    assert "Traceback" not in acl_rokka.stderr_tail(400)


def _ops(ops: Any) -> set[str]:
    return {o.name for o in ops or []}


def test_authorized_operations_follow_the_acls(acl_rokka: harness.ServerProcess) -> None:
    pytest.importorskip("kafka", reason="kafka-python is not installed")
    pytest.importorskip("confluent_kafka", reason="confluent-kafka is not installed")
    from confluent_kafka import TopicCollection
    from confluent_kafka.admin import AdminClient

    group = topic_name("alice-g")
    _grant_alice(acl_rokka, group)
    alice, root = AdminClient(ck(acl_rokka, "alice")), AdminClient(ck(acl_rokka, "admin"))
    _create(alice, "alice-t")
    topic = alice.describe_topics(TopicCollection(["alice-t"]), include_authorized_operations=True)
    assert _ops(topic["alice-t"].result(T).authorized_operations) == {
        "READ", "WRITE", "CREATE", "DELETE", "ALTER", "DESCRIBE", "DESCRIBE_CONFIGS", "ALTER_CONFIGS"}
    described = alice.describe_consumer_groups([group], include_authorized_operations=True)[group].result(T)
    assert _ops(described.authorized_operations) == {"READ", "DESCRIBE"}
    assert _ops(alice.describe_cluster(include_authorized_operations=True).result(T).authorized_operations) == set()
    assert _ops(root.describe_cluster(include_authorized_operations=True).result(T).authorized_operations) == {
        "CREATE", "CLUSTER_ACTION", "DESCRIBE_CONFIGS", "ALTER_CONFIGS", "IDEMPOTENT_WRITE", "ALTER", "DESCRIBE"}


def test_scram_users_are_managed_by_super_users_or_themselves(sasl_rokka: harness.ServerProcess) -> None:
    ckafka = pytest.importorskip("confluent_kafka", reason="confluent-kafka is not installed")
    from confluent_kafka.admin import AdminClient, ScramCredentialInfo, ScramMechanism, UserScramCredentialUpsertion

    def upsert(admin: AdminClient, user: str, password: bytes) -> None:
        info = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096)
        for f in admin.alter_user_scram_credentials([UserScramCredentialUpsertion(user, info, password)]).values():
            f.result(T)

    root, bob = AdminClient(ck(sasl_rokka, "admin")), AdminClient(ck(sasl_rokka, "bob"))
    upsert(root, "carol", b"carol-pw")
    with pytest.raises(ckafka.KafkaException, match="kafkaSuperUsers"):
        upsert(bob, "carol", b"owned-by-bob")
    (described,) = bob.describe_user_scram_credentials(["carol"]).values()
    with pytest.raises(ckafka.KafkaException):
        described.result(T)
    carol = AdminClient(ck(sasl_rokka, "carol", "carol-pw"))        # carol's password still holds
    upsert(carol, "carol", b"carol-new")                               # and she may change it herself
    assert _ops(AdminClient(ck(sasl_rokka, "carol", "carol-new")).describe_cluster(
        include_authorized_operations=True).result(T).authorized_operations) == {
        "CREATE", "CLUSTER_ACTION", "DESCRIBE_CONFIGS", "ALTER_CONFIGS", "IDEMPOTENT_WRITE", "ALTER", "DESCRIBE"}
    assert "kafka.scram_admin_denied" in sasl_rokka.stderr_tail(400)


def test_authorized_operations_without_an_authorizer(sasl_rokka: harness.ServerProcess) -> None:
    """No kafkaAclEnable: every supported operation (Kafka without an authorizer); not asked: none."""
    pytest.importorskip("confluent_kafka", reason="confluent-kafka is not installed")
    from confluent_kafka import TopicCollection
    from confluent_kafka.admin import AdminClient

    bob = AdminClient(ck(sasl_rokka, "bob"))
    _create(bob, "bobs")
    topic = bob.describe_topics(TopicCollection(["bobs"]), include_authorized_operations=True)["bobs"].result(T)
    assert _ops(topic.authorized_operations) == {
        "READ", "WRITE", "CREATE", "DELETE", "ALTER", "DESCRIBE", "DESCRIBE_CONFIGS", "ALTER_CONFIGS"}
    group = bob.describe_consumer_groups(["g"], include_authorized_operations=True)["g"].result(T)
    assert _ops(group.authorized_operations) == {"READ", "DESCRIBE", "DELETE"}
    plain = bob.describe_topics(TopicCollection(["bobs"]))["bobs"].result(T)
    assert not plain.authorized_operations
