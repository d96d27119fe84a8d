"""Per-topic configs applied on produce (max.message.bytes, min.insync.replicas, LogAppendTime),
retention.bytes, keys beyond the properties limit, INVALID_RECORD with record_errors, and
CreateTopics with a manual replica assignment: the handlers over a Broker on the in-memory store."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from rokka.compat.kafka_records import kafka_rows
from rokka.core.broker import Broker, now_ms
from rokka.core.config import BrokerConfig
from rokka.core.storage.memory import MemoryStore
from rokka.core.topic_retention import TopicRetention
from rokka.gateway.kafka import KafkaServer
from rokka.gateway.kafka.codec import APIS, Struct
from rokka.gateway.kafka.codec import records as R
from rokka.gateway.kafka.errors import ErrorCode as E
from rokka.gateway.kafka.handlers import KafkaEnv
from rokka.gateway.kafka.handlers import alter_configs as A
from rokka.gateway.kafka.handlers import metadata as M
from rokka.gateway.kafka.handlers import produce as P
from rokka.gateway.kafka.server import KafkaRequestContext

SET = 0


@pytest.fixture
def env(tmp_path: Path) -> KafkaEnv:
    cfg = BrokerConfig(store_path_root_dir=str(tmp_path))
    e = KafkaEnv(Broker(cfg, store=MemoryStore(cfg.store_config())), node_id=7, host="127.0.0.1", port=9092)
    e.broker.topics.ensure("t", 1)
    return e


def ctx(key: int, version: int = 9) -> KafkaRequestContext:
    return KafkaRequestContext(("127.0.0.1", 1), "t", key, version, 1, {}, KafkaServer({}, max_frame_bytes=1024))


async def set_configs(env: KafkaEnv, **configs: str) -> Struct:
    body = APIS[44].request.make(validate_only=False, resources=[Struct(
        resource_type=2, resource_name="t",
        configs=[Struct(name=k.replace("_", "."), config_operation=SET, value=v) for k, v in configs.items()])])
    (out,) = (await A.handle_incremental_alter_configs(env, ctx(44, 1), body)).responses
    return out  # type: ignore[no-any-return]


async def produce(env: KafkaEnv, records: bytes, acks: int = 1) -> Struct:
    body = APIS[0].request.make(acks=acks, timeout_ms=100, topic_data=[Struct(name="t", partition_data=[
        Struct(index=0, records=records)])])
    out = await P.handle_produce(env, ctx(0), body)
    assert out is not None
    for v in (3, 8, 9):
        APIS[0].encode_response(v, out)      # every field encodes at old and new versions
    return out.responses[0].partition_responses[0]  # type: ignore[no-any-return]


def batch(*values: bytes, key: bytes | None = None, ts: int = 1000) -> bytes:
    return R.encode_batch([R.Record(i, i, key, v) for i, v in enumerate(values)], base_timestamp=ts)


def rows(env: KafkaEnv) -> list[Any]:
    return kafka_rows(env.broker.store.get_messages("t", 0, 0, 100).records)


async def test_max_message_bytes_min_insync_and_log_append_time(env: KafkaEnv) -> None:
    assert (await set_configs(env, max_message_bytes="200", min_insync_replicas="2",
                              message_timestamp_type="LogAppendTime")).error_code == 0
    big = await produce(env, batch(b"x" * 300))
    assert (big.error_code, "max.message.bytes" in big.error_message) == (E.MESSAGE_TOO_LARGE, True)
    refused = await produce(env, batch(b"a"), acks=-1)
    assert refused.error_code == E.NOT_ENOUGH_REPLICAS and "min.isr" in refused.error_message
    assert rows(env) == []
    before = now_ms()
    ok = await produce(env, batch(b"a", b"b", ts=1000), acks=1)
    assert ok.error_code == 0 and ok.log_append_time_ms >= before
    assert [(r[1], r[2], r[4]) for r in rows(env)] == [(ok.log_append_time_ms, True, b"a"),
                                                        (ok.log_append_time_ms, True, b"b")]
    assert (await set_configs(env, min_insync_replicas="1", message_timestamp_type="CreateTime")).error_code == 0
    again = await produce(env, batch(b"c", ts=1000), acks=-1)
    assert (again.error_code, again.log_append_time_ms) == (0, -1)
    assert rows(env)[-1][1:3] == (1000, False)


async def test_big_keys_are_stored_and_store_refusals_are_not_retriable(env: KafkaEnv) -> None:
    key = os.urandom(1 << 20)
    out = await produce(env, batch(b"v", key=key))
    assert out.error_code == 0
    assert [(r[3], r[4]) for r in rows(env)] == [(key, b"v")]
    text = b"k" * 40_000        # a text key, on the plain-run path below the properties limit
    assert (await produce(env, batch(b"v1", b"v2", key=text))).error_code == 0
    stored = kafka_rows(env.broker.store.get_messages("t", 0, 1, 10).records)
    assert [(r[3], r[4]) for r in stored] == [(text, b"v1"), (text, b"v2")]
    huge = await produce(env, batch(b"v", key=os.urandom(5 << 20)))      # over maxMessageSize (4 MiB)
    assert huge.error_code == E.MESSAGE_TOO_LARGE


async def test_a_malformed_record_is_invalid_record_with_its_index(env: KafkaEnv) -> None:
    good = R.encode_batch([R.Record(i, i, None, b"v%d" % i) for i in range(3)], base_timestamp=5)
    raw = bytearray(good)
    payload = raw[R.BATCH_HEADER_SIZE:]
    second = 1 + payload[0] // 2        # records: length varint (zigzag, one byte here) + body
    payload[second + 4] = 0x7F          # record 1's key length: -64, invalid
    raw[R.BATCH_HEADER_SIZE:] = payload
    fixed = R.split_batches(bytes(raw))[0][0]
    out = await produce(env, R.wrap_records(fixed.payload(), base_offset=0, last_offset_delta=2, count=3,
                                            base_timestamp=5, max_timestamp=7))
    assert out.error_code == E.INVALID_RECORD
    assert [(e.batch_index, "record 1" in e.batch_index_error_message) for e in out.record_errors] == [(1, True)]
    assert rows(env) == []


async def test_retention_bytes_moves_the_log_start(env: KafkaEnv, tmp_path: Path) -> None:
    for i in range(10):
        assert (await produce(env, batch(b"%03d" % i))).error_code == 0
    size = env.broker.store.cq_units("t", 0, 0, 1)[0].size
    assert (await set_configs(env, retention_bytes=str(3 * size))).error_code == 0
    assert env.broker.retention.apply(env.broker.store, now_ms(), env.broker.topics) == 7
    assert env.broker.store.min_offset("t", 0) == 7
    for i in range(5):      # the next passes read only the new units (the window), with the same result
        assert (await produce(env, batch(b"%03d" % i))).error_code == 0
        assert env.broker.retention.apply(env.broker.store, now_ms(), env.broker.topics) == 1
        assert env.broker.store.min_offset("t", 0) == 8 + i
    assert (await set_configs(env, retention_bytes=str(5 * size))).error_code == 0   # a new limit: walk again
    assert env.broker.retention.apply(env.broker.store, now_ms(), env.broker.topics) == 0
    assert (await set_configs(env, retention_bytes=str(size))).error_code == 0
    assert env.broker.retention.apply(env.broker.store, now_ms(), env.broker.topics) == 2
    assert env.broker.store.min_offset("t", 0) == 14
    reloaded = TopicRetention(Path(tmp_path) / "config")
    assert reloaded.configs("t") == {"retention.bytes": str(size)}


async def test_describe_configs_shows_the_kept_configs(env: KafkaEnv) -> None:
    assert (await set_configs(env, segment_bytes="1048576", max_message_bytes="5000")).error_code == 0
    body = APIS[32].request.make(resources=[Struct(resource_type=2, resource_name="t", configuration_keys=None)])
    (res,) = (await M.handle_describe_configs(env, ctx(32, 1), body)).results
    got = {c.name: (c.value, c.is_default, c.read_only) for c in res.configs}
    assert got["segment.bytes"] == ("1048576", False, False)
    assert got["max.message.bytes"] == ("5000", False, False)
    assert got["retention.bytes"] == ("-1", True, False) and got["min.insync.replicas"] == ("1", True, False)
    assert got["message.timestamp.type"] == ("CreateTime", True, False)
    bad = await set_configs(env, message_timestamp_type="Sometime")
    assert bad.error_code == E.INVALID_CONFIG and "CreateTime, LogAppendTime" in bad.error_message


@pytest.mark.parametrize(("parts", "rf", "assignment", "code", "why"), [
    (-1, -1, {0: [7], 1: [7]}, 0, None),
    (2, -1, {0: [7]}, E.INVALID_REQUEST, "numPartitions was not set to -1"),
    (-1, 1, {0: [7]}, E.INVALID_REQUEST, "replication factor was not set to -1"),
    (-1, -1, {0: [3]}, E.INVALID_REPLICA_ASSIGNMENT, "broker 3, but no such broker is registered"),
    (-1, -1, {0: [7], 2: [7]}, E.INVALID_REPLICA_ASSIGNMENT, "consecutive 0-based"),
    (-1, -1, {0: []}, E.INVALID_REPLICA_ASSIGNMENT, "empty replica list"),
    (-1, -1, {0: [7, 7]}, E.INVALID_REPLICA_ASSIGNMENT, "more than once"),
])
async def test_create_topics_with_a_replica_assignment(env: KafkaEnv, parts: int, rf: int,
                                                        assignment: dict[int, list[int]], code: int,
                                                        why: str | None) -> None:
    body = APIS[19].request.make(timeout_ms=1000, validate_only=False, topics=[Struct(
        name="m", num_partitions=parts, replication_factor=rf, configs=[],
        assignments=[Struct(partition_index=i, broker_ids=b) for i, b in assignment.items()])])
    (out,) = (await M.handle_create_topics(env, ctx(19, 5), body)).topics
    assert out.error_code == code
    if code:
        assert why in out.error_message and "m" not in env.broker.topics
    else:
        assert (out.num_partitions, out.replication_factor) == (2, 1)
        assert env.broker.topics.get("m").read_queue_nums == 2
