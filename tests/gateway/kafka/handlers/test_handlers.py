"""Handler behaviour at the edges, called directly on a Broker over the in-memory store.

Requests are built with the codec's own declarations (``StructType.make``); the
context is a real KafkaRequestContext.  Long-poll tests use trio's autojump clock.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing
from rokka.compat.kafka_records import message_from_record, record_from_message
from rokka.core.broker import Broker
from rokka.core.config import BrokerConfig
from rokka.core.model import Message
from rokka.core.storage.layout import decode_record
from rokka.core.storage.memory import MemoryStore
from rokka.gateway.kafka import KafkaServer
from rokka.gateway.kafka.codec import APIS, Struct
from rokka.gateway.kafka.codec import records as R
from rokka.gateway.kafka.handlers import KafkaEnv
from rokka.gateway.kafka.handlers import fetch as F
from rokka.gateway.kafka.handlers import metadata as M
from rokka.gateway.kafka.handlers import produce as P
from rokka.gateway.kafka.server import KafkaRequestContext


@pytest.fixture
def env(tmp_path: Path) -> KafkaEnv:
    cfg = BrokerConfig(store_path_root_dir=str(tmp_path))
    return KafkaEnv(Broker(cfg, store=MemoryStore(cfg.store_config())), node_id=0, host="127.0.0.1", port=9092)


def ctx(key: int, version: int) -> KafkaRequestContext:
    return KafkaRequestContext(("127.0.0.1", 1), "t", key, version, 1, {}, KafkaServer({}, max_frame_bytes=1024))


def req(key: int, **kw: Any) -> Struct:
    return APIS[key].request.make(**kw)


async def produce(env: KafkaEnv, topic: str, values: list[bytes], ts: int = 1000) -> Struct:
    batch = R.encode_batch([R.Record(i, i, None, v) for i, v in enumerate(values)], base_timestamp=ts)
    body = req(0, acks=1, timeout_ms=100, topic_data=[Struct(name=topic, partition_data=[
        Struct(index=0, records=batch)])])
    out = await P.handle_produce(env, ctx(0, 9), body)
    assert out is not None
    return out.responses[0].partition_responses[0]  # type: ignore[no-any-return]


def fetch_req(topic: str, offset: int, *, max_wait_ms: int = 0, min_bytes: int = 1) -> Struct:
    return req(1, max_wait_ms=max_wait_ms, min_bytes=min_bytes, topics=[Struct(topic=topic, partitions=[
        Struct(partition=0, fetch_offset=offset, partition_max_bytes=1 << 20, current_leader_epoch=-1)])])


async def test_produce_fetch_out_of_range_and_delete_records(env: KafkaEnv) -> None:
    env.broker.topics.ensure("t", 1)
    assert (await produce(env, "t", [b"a", b"b", b"c"])).base_offset == 0
    assert (await produce(env, "nope", [b"x"])).error_code == 3
    out = await F.handle_fetch(env, ctx(1, 12), fetch_req("t", 1))
    part = out.responses[0].partitions[0]
    assert (part.error_code, part.high_watermark, part.log_start_offset) == (0, 3, 0)
    batches, _ = R.split_batches(bytes(part.records))
    assert [(b.header.base_offset, [r.value for r in b.records()]) for b in batches] == [(1, [b"b", b"c"])]
    assert (await F.handle_fetch(env, ctx(1, 12), fetch_req("t", 4))).responses[0].partitions[0].error_code == 1
    dr = await F.handle_delete_records(env, ctx(21, 2), req(21, topics=[Struct(name="t", partitions=[
        Struct(partition_index=0, offset=2)])]))
    assert dr.topics[0].partitions[0].low_watermark == 2
    assert (await F.handle_fetch(env, ctx(1, 12), fetch_req("t", 0))).responses[0].partitions[0].error_code == 1


async def test_fetch_long_poll_wakes_on_produce(env: KafkaEnv, autojump_clock: trio.testing.MockClock) -> None:
    env.broker.topics.ensure("t", 1)
    result: list[Struct] = []

    async def poll() -> None:
        result.append(await F.handle_fetch(env, ctx(1, 12), fetch_req("t", 0, max_wait_ms=60_000)))

    with trio.fail_after(120):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(poll)
            await trio.testing.wait_all_tasks_blocked()
            assert not result
            await produce(env, "t", [b"late"])
    part = result[0].responses[0].partitions[0]
    assert [r.value for r in R.split_batches(bytes(part.records))[0][0].records()] == [b"late"]


async def test_fetch_long_poll_times_out_empty(env: KafkaEnv, autojump_clock: trio.testing.MockClock) -> None:
    env.broker.topics.ensure("t", 1)
    with trio.fail_after(120):
        out = await F.handle_fetch(env, ctx(1, 12), fetch_req("t", 0, max_wait_ms=500))
    assert out.responses[0].partitions[0].records == b""


async def test_list_offsets_and_leader_epoch(env: KafkaEnv) -> None:
    env.broker.topics.ensure("t", 1)
    await produce(env, "t", [b"a", b"b", b"c"], ts=5000)  # timestamps 5000, 5001, 5002

    async def lo(ts: int) -> tuple[int, int, int]:
        out = await F.handle_list_offsets(env, ctx(2, 7), req(2, topics=[Struct(name="t", partitions=[
            Struct(partition_index=0, timestamp=ts, current_leader_epoch=-1)])]))
        p = out.topics[0].partitions[0]
        return p.error_code, p.offset, p.timestamp

    assert await lo(-1) == (0, 3, -1)
    assert await lo(-2) == (0, 0, -1)
    assert await lo(-3) == (0, 2, 5002)
    assert await lo(5001) == (0, 1, 5001)
    assert await lo(9999) == (0, -1, -1)
    ofe = await F.handle_offset_for_leader_epoch(env, ctx(23, 4), req(23, topics=[Struct(topic="t", partitions=[
        Struct(partition=0, leader_epoch=0, current_leader_epoch=-1),
        Struct(partition=0, leader_epoch=3, current_leader_epoch=-1),
        Struct(partition=0, leader_epoch=0, current_leader_epoch=7)])]))
    assert [(p.error_code, p.leader_epoch, p.end_offset) for p in ofe.topics[0].partitions] == [
        (0, 0, 3), (0, -1, -1), (75, -1, -1)]


async def test_admin_errors_and_metadata(env: KafkaEnv) -> None:
    ct = await M.handle_create_topics(env, ctx(19, 7), req(19, topics=[
        Struct(name="ok", num_partitions=3, replication_factor=1, assignments=[], configs=[]),
        Struct(name="ok", num_partitions=3, replication_factor=1, assignments=[], configs=[]),
        Struct(name="bad name", num_partitions=1, replication_factor=1, assignments=[], configs=[]),
        Struct(name="zero", num_partitions=0, replication_factor=1, assignments=[], configs=[]),
        Struct(name="rf", num_partitions=1, replication_factor=3, assignments=[], configs=[])]))
    assert [t.error_code for t in ct.topics] == [0, 36, 17, 37, 38]
    cp = await M.handle_create_partitions(env, ctx(37, 3), req(37, topics=[
        Struct(name="ok", count=5, assignments=None), Struct(name="ok", count=2, assignments=None)]))
    assert [r.error_code for r in cp.results] == [0, 37]
    md = await M.handle_metadata(env, ctx(3, 12), req(3, topics=[Struct(name="ok"), Struct(name="new1")]))
    assert [(t.name, t.error_code, len(t.partitions)) for t in md.topics] == [("ok", 0, 5), ("new1", 0, 4)]
    assert md.controller_id == 0 and md.brokers[0].port == 9092
    md_all = await M.handle_metadata(env, ctx(3, 1), req(3, topics=None))
    names = [t.name for t in md_all.topics]
    assert "ok" in names and not any(n.startswith(("%", "rmq_sys_")) for n in names)
    dc = await M.handle_describe_configs(env, ctx(32, 4), req(32, resources=[
        Struct(resource_type=2, resource_name="ok", configuration_keys=None),
        Struct(resource_type=2, resource_name="missing", configuration_keys=None)]))
    assert dc.results[0].error_code == 0 and dc.results[0].configs and dc.results[1].error_code == 3
    dt = await M.handle_delete_topics(env, ctx(20, 5), req(20, topic_names=["ok", "missing"]))
    assert [r.error_code for r in dt.responses] == [0, 3]
    for v in (0, 4, 9, 12):  # every response encodes at the versions clients use
        APIS[3].encode_response(v, md)


async def test_create_topics_checks_topic_configs(env: KafkaEnv) -> None:
    def topic(name: str, **configs: str) -> Struct:
        return Struct(name=name, num_partitions=2, replication_factor=-1, assignments=[],
                      configs=[Struct(name=k.replace("_", "."), value=v) for k, v in configs.items()])

    ct = await M.handle_create_topics(env, ctx(19, 7), req(19, topics=[
        topic("compacted", cleanup_policy="compact"),
        topic("both", cleanup_policy="delete,compact"),
        topic("appendtime", message_timestamp_type="LogAppendTime"),
        topic("typo", retention_msec="1000"),
        topic("plain", cleanup_policy="delete", retention_ms="3600000", min_insync_replicas="2"),
        topic("badpolicy", cleanup_policy="compact,shred")]))
    assert [(t.name, t.error_code) for t in ct.topics] == [
        ("compacted", 0), ("both", 0), ("appendtime", 0), ("typo", 40), ("plain", 0),  # compaction, LogAppendTime apply
        ("badpolicy", 40)]
    assert ct.topics[3].error_message == "Unknown topic config name: retention.msec"
    assert "String must be one of: compact, delete" in ct.topics[5].error_message
    assert [n for n in ("compacted", "both", "appendtime", "typo", "plain", "badpolicy")
            if n in env.broker.topics] == ["compacted", "both", "appendtime", "plain"]
    assert (env.broker.retention.configs("both") or {}).get("cleanup.policy") == "compact,delete"


async def test_kafka_records_store_only_their_mapping(env: KafkaEnv) -> None:
    """A key-less, header-less record is stored with KAFKA_HEADERS=[] alone (no CLUSTER: RocketMQ's
    send path stamps that, Kafka's Produce does not), on the run path and on the general path alike."""
    env.broker.topics.ensure("p", 1)
    assert (await produce(env, "p", [b"a" * 100, b"b"])).error_code == 0         # the run path
    mixed = R.encode_batch([R.Record(0, 0, None, b"c"), R.Record(1, 1, b"k", b"d"),
                            R.Record(2, 2, None, b"e", (R.Header("h", b"1"),)), R.Record(3, 3, None, None)],
                           base_timestamp=2000)
    out = await P.handle_produce(env, ctx(0, 9), req(0, acks=1, timeout_ms=100, topic_data=[
        Struct(name="p", partition_data=[Struct(index=0, records=mixed)])]))
    assert out.responses[0].partition_responses[0].error_code == 0
    got = env.broker.store.get_messages("p", 0, 0, 10)
    stored = [decode_record(r) for r in got.records]
    plain = {"KAFKA_HEADERS": "[]"}
    assert [m.properties for m in stored] == [
        plain, plain, plain,
        {"KEYS": "k", "KAFKA_HEADERS": "[]"},
        {"KAFKA_HEADERS": '[["h","MQ=="]]', "h": "1"},
        {"KAFKA_NULL_VALUE": "1", "KAFKA_HEADERS": "[]"}]
    assert len(got.records[0]) == len(got.records[1]) + 99      # nothing but the body differs
    assert [(r.key, r.value, r.headers) for r in map(record_from_message, stored)] == [
        (None, b"a" * 100, ()), (None, b"b", ()), (None, b"c", ()), (b"k", b"d", ()),
        (None, b"e", (("h", b"1"),)), (None, None, ())]
    rmq = env.broker.prepare(Message("p", 0, b"r", {"WAIT": "true"}))         # RocketMQ's send path
    assert rmq.properties == {"CLUSTER": env.broker.cfg.broker_cluster_name}


@pytest.mark.parametrize("key", [None, b"", b"plain", b"with space", b"\xff\x00bin"])
@pytest.mark.parametrize("value", [None, b"", b"v"])
def test_compat_mapping_roundtrip(env: KafkaEnv, key: bytes | None, value: bytes | None) -> None:
    env.broker.topics.ensure("m", 1)
    headers = (("a", b"1"), ("a", None), ("KEYS", b"x"), ("bin", b"\x01\xff"))
    msg = message_from_record("m", 0, key=key, value=value, headers=headers, timestamp=42, log_append_time=False)
    res = env.broker.store.put_messages([env.broker.prepare(msg)])
    stored = decode_record(env.broker.store.read_record(res.appended[0].commitlog_offset))  # type: ignore[arg-type]
    rec = record_from_message(stored)
    assert (rec.key, rec.value, rec.headers, rec.timestamp) == (key, value, headers, 42)
    assert stored.properties.get("a") == "1"  # visible to RocketMQ consumers
    if key == b"plain":
        assert stored.keys == ["plain"]
