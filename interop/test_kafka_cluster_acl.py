"""A two-broker cluster with RocketMQ ACL on (``aclEnable``, one plain_acl.yml for both brokers, no
white-listed addresses): a Kafka group's offsets for partitions on the other broker are forwarded
with the broker's own signature (the file's admin account), so kafka-python commits for every
partition and confluent-kafka, bootstrapped on the other broker, reads them back.  Without an admin
account in the file the forwards are refused by the other broker and the broker says why at start.

Everything on 127.0.0.1 with free ports; every client call is bounded.
"""

from __future__ import annotations

import os
import subprocess
from typing import Any

import harness
import pytest
from kafka_common import topic_name

pytest.importorskip("kafka", reason="kafka-python is not installed (interop/install.sh installs it)")
pytest.importorskip("confluent_kafka", reason="confluent-kafka is not installed (interop/install.sh)")
from rokka.gateway.kafka.cluster import derive_node_id  # noqa: E402
from test_kafka_cluster import (  # noqa: E402
    PARTITIONS,
    QUEUES,
    ck_committed,
    group_consume_and_commit,
    kp_view,
    produce_kp,
    wait_layout,
)

ADMIN = ("ops-key", "ops-secret-1234")
ACL = f"""\
accounts:
  - accessKey: {ADMIN[0]}
    secretKey: {ADMIN[1]}
    admin: true
  - accessKey: app-key
    secretKey: app-secret-1234
    defaultTopicPerm: PUB|SUB
    defaultGroupPerm: SUB
"""
# No admin account: the admin tool's requests pass by white-listed address instead (as an operator
# might set it up), the brokers' own forwards carry no accessKey at all.
NO_ADMIN = ACL.replace("admin: true", "admin: false\n    whiteRemoteAddress: 127.0.0.1")


ACL_CONF = {"aclEnable": "true", "plainAclFile": "{dir}/plain_acl.yml"}


@pytest.fixture
def signed_cluster(configured_cluster: Any) -> harness.Cluster:
    return configured_cluster(ACL_CONF, {"plain_acl.yml": ACL})


@pytest.fixture
def unsigned_cluster(configured_cluster: Any) -> harness.Cluster:
    return configured_cluster(ACL_CONF, {"plain_acl.yml": NO_ADMIN})


def create_topic(cluster: harness.Cluster, topic: str) -> None:
    env = dict(os.environ, ROKKA_ACCESS_KEY=ADMIN[0], ROKKA_SECRET_KEY=ADMIN[1])
    res = subprocess.run([harness.rokka_executable(), "admin", "-n", cluster.namesrv_addr, "updateTopic",
                          "-t", topic, "-c", "DefaultCluster", "-r", str(QUEUES), "-w", str(QUEUES)],
                         capture_output=True, text=True, timeout=60, check=False, env=env)
    assert res.returncode == 0, res.stderr
    a_id, b_id = derive_node_id("broker-a"), derive_node_id("broker-b")
    leaders = {p: a_id if p < QUEUES else b_id for p in range(PARTITIONS)}
    for srv in cluster.brokers.values():
        wait_layout(kp_view, srv.kafka, topic, {a_id, b_id}, leaders)


def test_group_offsets_cross_brokers_signed(signed_cluster: harness.Cluster) -> None:
    cluster = signed_cluster
    topic, group = topic_name("acl"), topic_name("acl-g")
    create_topic(cluster, topic)
    a_boot, b_boot = cluster.brokers["broker-a"].kafka, cluster.brokers["broker-b"].kafka
    produce_kp(a_boot, topic, "kp")
    committed = group_consume_and_commit(a_boot, topic, group, PARTITIONS * 5)
    assert committed == {p: 5 for p in range(PARTITIONS)}
    assert ck_committed(b_boot, topic, group) == committed
    for srv in cluster.brokers.values():
        assert "AclException" not in srv.stderr_tail(2000)


def test_without_an_admin_account_forwards_are_refused(unsigned_cluster: harness.Cluster) -> None:
    cluster = unsigned_cluster
    for srv in cluster.brokers.values():
        assert "no admin account" in srv.stderr_tail(400)
    topic, group = topic_name("acl"), topic_name("acl-g")
    create_topic(cluster, topic)
    a_boot, b_boot = cluster.brokers["broker-a"].kafka, cluster.brokers["broker-b"].kafka
    produce_kp(a_boot, topic, "kp")
    try:                # the commit fails for the partitions on the coordinator's peer
        group_consume_and_commit(a_boot, topic, group, PARTITIONS * 5)
    except Exception:   # noqa: BLE001 - how kafka-python reports it is not the point
        pass
    assert -1001 in ck_committed(b_boot, topic, group).values()
    assert any("No accessKey is configured" in srv.stderr_tail(2000) for srv in cluster.brokers.values())
