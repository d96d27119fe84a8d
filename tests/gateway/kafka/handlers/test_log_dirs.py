"""DescribeLogDirs (key 35): the store root as the one log dir, partition sizes, filters, authz."""

from __future__ import annotations

from pathlib import Path

import pytest
import trio
from rokka.core.model import Message
from rokka.gateway.kafka import KafkaRequestContext, KafkaServer
from rokka.gateway.kafka.acls import Acl, AclStore, Op, Pattern, Perm, Res
from rokka.gateway.kafka.apis import ADAPTERS, SPECS, ApiKey
from rokka.gateway.kafka.authz import Authz
from rokka.gateway.kafka.codec import APIS, Struct, decode_response_frame, encode_response_frame
from rokka.gateway.kafka.handlers import KafkaEnv, log_dirs

API = APIS[35]


def ctx(version: int, user: str = "alice") -> KafkaRequestContext:
    return KafkaRequestContext(("127.0.0.1", 1), "c", 35, version, 1, {"sasl": Struct(principal=f"User:{user}")},
                               KafkaServer({}, max_frame_bytes=1024))


def roundtrip(version: int, out: Struct) -> Struct:
    _, decoded = decode_response_frame(API, version, encode_response_frame(API, version, 7, out)[4:])
    return decoded


def absolute(path: Path) -> str:
    return str(path.resolve())


async def fill(env: KafkaEnv) -> list[int]:
    env.broker.topics.ensure("T", 2)
    env.broker.topics.ensure("U", 1)
    sizes = []
    for i in range(5):
        r = await env.broker.put([Message("T", 0, b"x" * (10 + i), {"KEYS": f"k{i}"})])
        assert r.ok
        sizes.append(r.appended[0].size)
    return sizes


def test_registered_with_kafka_4x_versions_and_cluster_describe() -> None:
    assert (API.min_version, API.max_version) == (1, 5)
    assert SPECS[ApiKey.DESCRIBE_LOG_DIRS].versions == (1, 5)


@pytest.mark.parametrize("version", [1, 3, 4, 5])
async def test_one_log_dir_with_partition_sizes(disk_env: KafkaEnv, tmp_path: Path, version: int) -> None:
    with trio.fail_after(10):
        sizes = await fill(disk_env)
        out = await log_dirs.describe_log_dirs(disk_env, ctx(version), API.request.make(topics=None))
    got = roundtrip(version, out)
    [res] = got.results
    assert res.error_code == 0 and res.log_dir == absolute(tmp_path)
    by = {t.name: {p.partition_index: p for p in t.partitions} for t in res.topics}
    assert {"T", "U"} <= set(by)               # the Kafka-visible topics, as Metadata lists them
    assert not [n for n in by if n.startswith(("RMQ_SYS", "SCHEDULE_TOPIC", "%RETRY%", "TBW102"))]
    assert by["T"][0].partition_size == sum(sizes) and by["T"][1].partition_size == 0
    assert all(p.offset_lag == 0 and p.is_future_key is False for t in by.values() for p in t.values())
    if version >= 4:
        assert res.total_bytes > 0 and 0 <= res.usable_bytes <= res.total_bytes
    if version >= 3:
        assert got.error_code == 0


async def test_requested_partitions_only_hosted_ones(disk_env: KafkaEnv) -> None:
    with trio.fail_after(10):
        await fill(disk_env)
        req = API.request.make(topics=[Struct(topic="T", partitions=[1, 7, 1]), Struct(topic="nope", partitions=[0])])
        out = await log_dirs.describe_log_dirs(disk_env, ctx(4), req)
    [res] = roundtrip(4, out).results
    assert [(t.name, [p.partition_index for p in t.partitions]) for t in res.topics] == [("T", [1])]


async def test_long_partition_is_estimated_from_a_sample(disk_env: KafkaEnv,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(log_dirs, "EXACT_UNITS", 3)
    monkeypatch.setattr(log_dirs, "SAMPLE_UNITS", 2)
    with trio.fail_after(10):
        disk_env.broker.topics.ensure("E", 1)
        r = await disk_env.broker.put([Message("E", 0, b"y" * 20, {}) for _ in range(9)])
        assert r.ok
        assert await log_dirs.partition_size(disk_env.broker.store, "E", 0) == 9 * r.appended[0].size


async def test_refused_without_describe_on_the_cluster() -> None:
    store = AclStore(None)
    store.add([Acl(Res.CLUSTER, "kafka-cluster", Pattern.LITERAL, "User:bob", "*", Op.DESCRIBE, Perm.ALLOW)])

    async def handler(c: KafkaRequestContext, body: Struct) -> Struct:
        return Struct(throttle_time_ms=0, error_code=0, results=[Struct(error_code=0, log_dir="/d", topics=[])])

    body = API.request.make(topics=None)
    refused = await ADAPTERS[35](Authz(store), handler, ctx(4, "alice"), body)
    got = roundtrip(4, refused)
    assert got.error_code == 31 and got.results == []          # CLUSTER_AUTHORIZATION_FAILED
    allowed = roundtrip(4, await ADAPTERS[35](Authz(store), handler, ctx(4, "bob"), body))
    assert allowed.error_code == 0 and [r.log_dir for r in allowed.results] == ["/d"]
