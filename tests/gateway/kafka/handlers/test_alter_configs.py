"""AlterConfigs / IncrementalAlterConfigs / DescribeConfigs / CreateTopics around retention.ms,
called directly on a Broker over the in-memory store."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from rokka.core.broker import Broker
from rokka.core.config import BrokerConfig
from rokka.core.storage.memory import MemoryStore
from rokka.gateway.kafka import KafkaServer
from rokka.gateway.kafka.codec import APIS, Struct
from rokka.gateway.kafka.errors import ErrorCode as E
from rokka.gateway.kafka.handlers import KafkaEnv
from rokka.gateway.kafka.handlers import alter_configs as A
from rokka.gateway.kafka.handlers import metadata as M
from rokka.gateway.kafka.server import KafkaRequestContext

TOPIC, BROKER = 2, 4
SET, DELETE, APPEND = 0, 1, 2


@pytest.fixture
def env(tmp_path: Path) -> KafkaEnv:
    cfg = BrokerConfig(store_path_root_dir=str(tmp_path))
    e = KafkaEnv(Broker(cfg, store=MemoryStore(cfg.store_config())), node_id=0, host="127.0.0.1", port=9092)
    e.broker.topics.ensure("t", 2)
    return e


def ctx(key: int) -> KafkaRequestContext:
    return KafkaRequestContext(("127.0.0.1", 1), "t", key, 0, 1, {}, KafkaServer({}, max_frame_bytes=1024))


async def alter(env: KafkaEnv, configs: dict[str, str | None], *, name: str = "t", rtype: int = TOPIC,
                validate_only: bool = False) -> Struct:
    body = APIS[33].request.make(validate_only=validate_only, resources=[Struct(
        resource_type=rtype, resource_name=name, configs=[Struct(name=k, value=v) for k, v in configs.items()])])
    (out,) = (await A.handle_alter_configs(env, ctx(33), body)).responses
    return out  # type: ignore[no-any-return]


async def incremental(env: KafkaEnv, *changes: tuple[str, int, str | None], name: str = "t") -> Struct:
    body = APIS[44].request.make(validate_only=False, resources=[Struct(
        resource_type=TOPIC, resource_name=name,
        configs=[Struct(name=n, config_operation=op, value=v) for n, op, v in changes])])
    (out,) = (await A.handle_incremental_alter_configs(env, ctx(44), body)).responses
    return out  # type: ignore[no-any-return]


async def described(env: KafkaEnv, name: str = "t") -> dict[str, Any]:
    body = APIS[32].request.make(resources=[Struct(resource_type=TOPIC, resource_name=name,
                                                   configuration_keys=None)])
    (res,) = (await M.handle_describe_configs(env, ctx(32), body)).results
    return {c.name: (c.value, c.is_default, c.read_only, c.config_source) for c in res.configs}


async def test_alter_configs_replaces_the_whole_set(env: KafkaEnv) -> None:
    assert (await alter(env, {"retention.ms": "60000"})).error_code == 0
    assert env.broker.retention.get("t") == 60000
    assert (await described(env))["retention.ms"] == ("60000", False, False, 1)
    assert (await described(env))["cleanup.policy"] == ("delete", True, False, 5)   # kept per topic: alterable
    assert (await described(env))["delete.retention.ms"] == ("86400000", True, False, 5)
    assert (await alter(env, {"cleanup.policy": "delete"})).error_code == 0    # resets retention
    assert env.broker.retention.get("t") is None
    default = (await described(env))["retention.ms"]
    assert default == (str(72 * 3600 * 1000), True, False, 5)
    assert (await alter(env, {"retention.ms": "5"}, validate_only=True)).error_code == 0
    assert env.broker.retention.get("t") is None


async def test_refusals_leave_everything_as_it_was(env: KafkaEnv) -> None:
    await alter(env, {"retention.ms": "1000"})
    for configs, code, why in [
        ({"flush.messages": "1", "retention.ms": "7"}, E.INVALID_CONFIG, "not applied per topic"),
        ({"segment.bytes": "1", "retention.ms": "7"}, E.INVALID_CONFIG, "must be >= 14"),
        ({"cleanup.policy": "compact,shred"}, E.INVALID_CONFIG, "String must be one of: compact, delete"),
        ({"retention.ms": "soon"}, E.INVALID_CONFIG, "not a number"),
        ({"no.such.config": "1"}, E.INVALID_CONFIG, "Unknown topic config name"),
    ]:
        out = await alter(env, configs)
        assert (out.error_code, why in out.error_message) == (code, True), out
    assert env.broker.retention.get("t") == 1000
    out = await alter(env, {"retention.ms": "1"}, name="missing")
    assert out.error_code == E.UNKNOWN_TOPIC_OR_PARTITION
    out = await alter(env, {"log.retention.ms": "1"}, name="0", rtype=BROKER)
    assert out.error_code == E.INVALID_CONFIG and "broker.conf" in out.error_message
    assert (await alter(env, {}, rtype=16)).error_code == E.INVALID_REQUEST


async def test_incremental_set_delete_and_list_ops(env: KafkaEnv) -> None:
    assert (await incremental(env, ("retention.ms", SET, "2500"))).error_code == 0
    assert env.broker.retention.get("t") == 2500
    assert (await incremental(env, ("segment.ms", DELETE, None))).error_code == 0     # resetting is a no-op
    assert env.broker.retention.get("t") == 2500
    out = await incremental(env, ("retention.ms", APPEND, "1"))
    assert out.error_code == E.INVALID_CONFIG and "list configs" in out.error_message
    out = await incremental(env, ("retention.ms", SET, "1"), ("retention.ms", DELETE, None))
    assert out.error_code == E.INVALID_REQUEST
    assert (await incremental(env, ("retention.ms", SET, "-1"))).error_code == 0
    assert env.broker.retention.get("t") is None
    await incremental(env, ("retention.ms", SET, "10"))
    assert (await incremental(env, ("retention.ms", DELETE, None))).error_code == 0
    assert env.broker.retention.get("t") is None


async def test_create_topics_applies_and_delete_topics_forgets(env: KafkaEnv) -> None:
    def create(name: str, **configs: str) -> Any:
        return APIS[19].request.make(timeout_ms=1000, validate_only=False, topics=[Struct(
            name=name, num_partitions=1, replication_factor=1, assignments=[],
            configs=[Struct(name=k.replace("_", "."), value=v) for k, v in configs.items()])])

    (ok,) = (await M.handle_create_topics(env, ctx(19), create("r1", retention_ms="3000"))).topics
    assert ok.error_code == 0 and env.broker.retention.get("r1") == 3000
    (bad,) = (await M.handle_create_topics(env, ctx(19), create("r2", retention_ms="-7"))).topics
    assert bad.error_code == E.INVALID_CONFIG and "r2" not in env.broker.topics
    (gone,) = (await M.handle_delete_topics(env, ctx(20), APIS[20].request.make(
        topic_names=["r1"], timeout_ms=1000))).responses
    assert gone.error_code == 0 and env.broker.retention.get("r1") is None
