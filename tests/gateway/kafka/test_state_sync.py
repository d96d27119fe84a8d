"""A slave's copy of its master's Kafka state (gateway/kafka/state_sync.py): topic configs, ACLs and the
SASL users file travel in GET_KAFKA_STATE's body and are adopted only where they differ."""

from __future__ import annotations

from pathlib import Path

import msgpack
import pytest
from rokka.compat.views import KafkaView, ViewRegistry
from rokka.core.topic_retention import TopicRetention
from rokka.gateway.kafka.acls import Acl, AclStore
from rokka.gateway.kafka.state_sync import KafkaState

ALLOW_READ = Acl(2, "orders", 3, "User:alice", "*", 3, 3)
DENY_WRITE = Acl(2, "orders", 3, "User:bob", "*", 4, 2)


def _state(tmp_path: Path, name: str, *, acls: bool = True, users: bytes | None = None) -> KafkaState:
    d = tmp_path / name
    d.mkdir()
    state = KafkaState(TopicRetention(d), AclStore(d) if acls else None, ViewRegistry(d))
    if users is not None:
        state.users_file = d / "users.json"
        state.users_file.write_bytes(users)
    return state


def test_a_slave_adopts_topic_configs_acls_and_users(tmp_path: Path) -> None:
    master = _state(tmp_path, "m", users=b'{"users": {"alice": "secret"}}')
    master.retention.set("orders", 60_000)
    master.retention.set_config("orders", "min.insync.replicas", "2")
    master.retention.set_config("events", "cleanup.policy", "compact")
    assert master.acls is not None
    master.acls.add([ALLOW_READ, DENY_WRITE])
    reloaded: list[bool] = []
    slave = _state(tmp_path, "s", users=b'{"users": {}}')
    slave.reload_users = lambda: reloaded.append(True)
    slave.retention.set_config("stale", "max.message.bytes", "100")      # gone on the master: dropped
    assert master.views is not None and slave.views is not None
    master.views.put(KafkaView("paid", "orders", "TAGS = 'paid'", "SQL92"))
    slave.views.put(KafkaView("old", "orders"))

    # 3 topics, the ACL table, 2 views, the users file
    assert slave.apply(master.body(with_users=True)) == 7
    assert slave.retention.get("orders") == 60_000
    assert slave.retention.configs("orders") == {"min.insync.replicas": "2"}
    assert slave.retention.configs("events") == {"cleanup.policy": "compact"}
    assert slave.retention.configs("stale") is None
    assert slave.acls is not None and slave.acls.all() == sorted([ALLOW_READ, DENY_WRITE])
    assert slave.users_file is not None and slave.users_file.read_bytes() == b'{"users": {"alice": "secret"}}'
    assert reloaded == [True]
    assert slave.views.all() == {"paid": KafkaView("paid", "orders", "TAGS = 'paid'", "SQL92")}
    assert slave.views.filter_of("paid") is not None
    # Kept across a restart (each table is the slave's own file), and a second round changes nothing.
    again = KafkaState(TopicRetention(tmp_path / "s"), AclStore(tmp_path / "s"), ViewRegistry(tmp_path / "s"))
    assert again.views is not None and "paid" in again.views.all()
    assert again.retention.configs("orders") == {"min.insync.replicas": "2"}
    assert again.acls is not None and len(again.acls.all()) == 2
    assert slave.apply(master.body(with_users=True)) == 0
    assert reloaded == [True]
    # A binding deleted on the master goes on the slave too.
    from rokka.gateway.kafka.acls import AclFilter
    master.acls.delete(AclFilter(2, "orders", 3, "User:bob", "*", 4, 2))
    assert slave.apply(master.body(with_users=True)) == 1
    assert slave.acls.all() == [ALLOW_READ]


def test_the_users_file_travels_only_when_asked_for(tmp_path: Path) -> None:
    master = _state(tmp_path, "m", users=b'{"users": {"alice": "secret"}}')
    body = msgpack.unpackb(master.body(with_users=False), raw=False)
    assert body["users"] is None
    slave = _state(tmp_path, "s", users=b'{"users": {}}')
    slave.apply(master.body(with_users=False))
    assert slave.users_file is not None and slave.users_file.read_bytes() == b'{"users": {}}'


def test_features_off_on_the_slave_are_left_alone(tmp_path: Path) -> None:
    master = _state(tmp_path, "m", users=b'{"users": {"alice": "secret"}}')
    assert master.acls is not None
    master.acls.add([ALLOW_READ])
    slave = _state(tmp_path, "s", acls=False)        # no kafkaAclEnable, no SASL
    assert slave.apply(master.body(with_users=True)) == 0
    assert not (tmp_path / "s" / "kafkaAcls.msgpack").exists()


def test_a_bad_body_is_refused(tmp_path: Path) -> None:
    slave = _state(tmp_path, "s")
    with pytest.raises(ValueError):
        slave.apply(msgpack.packb([1, 2, 3]))
    with pytest.raises(ValueError):
        slave.apply(b"\xc1")


async def test_a_slave_never_hands_out_a_producer_id_its_master_did(tmp_path: Path) -> None:
    from rokka.gateway.kafka.producers.state import ProducerStateManager
    from rokka.gateway.kafka.state_sync import PRODUCER_ID_MARGIN

    master = _state(tmp_path, "m")
    master.producers = ProducerStateManager(tmp_path / "m")
    issued = {(await master.producers.init_producer_id(None, 60_000)).producer_id for _ in range(5)}
    slave = _state(tmp_path, "s")
    slave.producers = ProducerStateManager(tmp_path / "s")
    assert slave.apply(master.body(with_users=False)) == 1
    fresh = (await slave.producers.init_producer_id(None, 60_000)).producer_id
    assert fresh not in issued and fresh >= master.producers.reserved_until + PRODUCER_ID_MARGIN
    assert slave.apply(master.body(with_users=False)) == 0      # already past it
    slave.producers.close()
    master.producers.close()
