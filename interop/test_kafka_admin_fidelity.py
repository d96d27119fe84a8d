"""Admin requests librdkafka's own test suite sends (0081_admin, 0092_mixed_msgver), with kafka-python.

* CreatePartitions with a manual assignment of the new partitions is accepted when it names the
  receiving broker (rokka keeps one replica per partition), refused with INVALID_REPLICA_ASSIGNMENT
  when it names an unknown broker or does not match the partitions added (Kafka's rules).
* ``message.format.version`` (deprecated, ignored by Kafka 3.x brokers) is accepted by AlterConfigs.
"""

from __future__ import annotations

import confluent_kafka.admin as ck
import pytest
from confluent_kafka.admin import AdminClient, ConfigResource
from kafka.admin import KafkaAdminClient, NewPartitions, NewTopic
from kafka.errors import InvalidReplicationAssignmentError

from interop import harness


def test_create_partitions_with_an_assignment(rokka: harness.ServerProcess) -> None:
    admin = KafkaAdminClient(bootstrap_servers=rokka.kafka, request_timeout_ms=10000)
    try:
        admin.create_topics([NewTopic("AssignT", 2, 1)])
        (part,) = [p for p in admin.describe_topics(["AssignT"])[0]["partitions"] if p["partition_index"] == 0]
        node = part["leader_id"]
        with pytest.raises(InvalidReplicationAssignmentError):
            admin.create_partitions({"AssignT": NewPartitions(4, [[node + 1000], [node]])})
        with pytest.raises(InvalidReplicationAssignmentError):
            admin.create_partitions({"AssignT": NewPartitions(4, [[node]])})
        admin.create_partitions({"AssignT": NewPartitions(4, [[node], [node]])})
        (described,) = admin.describe_topics(["AssignT"])
        assert sorted(p["partition_index"] for p in described["partitions"]) == [0, 1, 2, 3]
        assert all(p["replica_nodes"] == [node] for p in described["partitions"])
    finally:
        admin.close()


def test_deprecated_message_format_version_is_accepted(rokka: harness.ServerProcess) -> None:
    admin = AdminClient({"bootstrap.servers": rokka.kafka})
    for f in admin.create_topics([ck.NewTopic("FormatT", 1, 1)]).values():
        f.result(timeout=30)
    res = ConfigResource("topic", "FormatT", incremental_configs=[
        ck.ConfigEntry("message.format.version", "0.10.0.0", incremental_operation=ck.AlterConfigOpType.SET)])
    for f in admin.incremental_alter_configs([res]).values():
        f.result(timeout=30)      # raises KafkaException on INVALID_CONFIG
