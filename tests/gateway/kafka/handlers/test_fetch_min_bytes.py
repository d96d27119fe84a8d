"""Fetch min_bytes / max_wait_ms as Kafka's delayed fetch: park until min_bytes, answer what there is at max_wait.

Handlers called directly on a Broker over its DiskStore (``disk_env``), requests built with the
codec's declarations, trio's autojump clock for the long polls (no wall-clock assertion).
"""

from __future__ import annotations

from typing import Any

import trio
import trio.testing
from rokka.gateway.kafka.codec import APIS, Struct
from rokka.gateway.kafka.codec import records as R
from rokka.gateway.kafka.handlers import KafkaEnv
from rokka.gateway.kafka.handlers import fetch as F
from rokka.gateway.kafka.handlers import produce as P
from rokka.gateway.kafka.server import KafkaRequestContext, KafkaServer

VALUE = b"v" * 100


def ctx(key: int, version: int) -> KafkaRequestContext:
    return KafkaRequestContext(("127.0.0.1", 1), "t", key, version, 1, {}, KafkaServer({}, max_frame_bytes=1024))


async def produce(env: KafkaEnv, n: int) -> None:
    """``n`` records of ``VALUE``, one batch, to t/0."""
    batch = R.encode_batch([R.Record(i, i, None, VALUE) for i in range(n)], base_timestamp=1000)
    body = APIS[0].request.make(acks=1, timeout_ms=100, topic_data=[Struct(name="t", partition_data=[
        Struct(index=0, records=batch)])])
    out = await P.handle_produce(env, ctx(0, 9), body)
    assert out is not None and out.responses[0].partition_responses[0].error_code == 0


def fetch_req(*, min_bytes: int, max_wait_ms: int, partition_max_bytes: int = 1 << 20) -> Any:
    return APIS[1].request.make(max_wait_ms=max_wait_ms, min_bytes=min_bytes, max_bytes=50 << 20, topics=[
        Struct(topic="t", partitions=[Struct(partition=0, fetch_offset=0, partition_max_bytes=partition_max_bytes,
                                             current_leader_epoch=-1)])])


def values(out: Any) -> list[bytes]:
    part = out.responses[0].partitions[0]
    assert part.error_code == 0
    batches, _ = R.split_batches(bytes(part.records))
    return [r.value for b in batches for r in b.records()]


async def test_parks_until_min_bytes(disk_env: KafkaEnv, autojump_clock: trio.testing.MockClock) -> None:
    """One record (~170 bytes as a batch) does not answer a Fetch of min_bytes 1,000; the records
    that take it past 1,000 do, and the answer holds all of them."""
    disk_env.broker.topics.ensure("t", 1)
    result: list[Any] = []

    async def poll() -> None:
        result.append(await F.handle_fetch(disk_env, ctx(1, 12), fetch_req(min_bytes=1000, max_wait_ms=600_000)))

    with trio.fail_after(1200):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(poll)
            await trio.testing.wait_all_tasks_blocked()
            await produce(disk_env, 1)
            await trio.testing.wait_all_tasks_blocked()
            assert not result          # 1 record < min_bytes: still parked (Kafka's delayed fetch)
            await produce(disk_env, 1)
            await trio.testing.wait_all_tasks_blocked()
            assert not result
            await produce(disk_env, 10)
    assert values(result[0]) == [VALUE] * 12


async def test_answers_what_there_is_at_max_wait(disk_env: KafkaEnv,
                                                  autojump_clock: trio.testing.MockClock) -> None:
    """min_bytes never reached: at max_wait_ms the answer holds every record that arrived, the
    ones a wake did not read too."""
    disk_env.broker.topics.ensure("t", 1)
    result: list[Any] = []

    async def poll() -> None:
        result.append(await F.handle_fetch(disk_env, ctx(1, 12), fetch_req(min_bytes=1 << 20, max_wait_ms=500)))

    with trio.fail_after(60):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(poll)
            await trio.testing.wait_all_tasks_blocked()
            await produce(disk_env, 1)     # read at once: nothing read yet to estimate by
            await trio.testing.wait_all_tasks_blocked()
            assert not result
            await produce(disk_env, 2)     # estimated short of min_bytes: left for the answer
    assert values(result[0]) == [VALUE] * 3


async def test_min_bytes_beyond_partition_limit(disk_env: KafkaEnv,
                                                autojump_clock: trio.testing.MockClock) -> None:
    """A partition counts toward min_bytes up to its partition_max_bytes (Kafka's count): a
    min_bytes above that is never reached while records arrive, and the answer at max_wait_ms is
    cut to the limit."""
    disk_env.broker.topics.ensure("t", 1)
    result: list[Any] = []

    async def poll() -> None:
        result.append(await F.handle_fetch(disk_env, ctx(1, 12), fetch_req(
            min_bytes=100_000, max_wait_ms=500, partition_max_bytes=1000)))

    with trio.fail_after(60):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(poll)
            await trio.testing.wait_all_tasks_blocked()
            for _ in range(3):
                await produce(disk_env, 10)
                await trio.testing.wait_all_tasks_blocked()
                assert not result
    got = values(result[0])
    assert 0 < len(got) < 30 and len(bytes(result[0].responses[0].partitions[0].records)) <= 1000


async def test_min_bytes_met_at_once(disk_env: KafkaEnv) -> None:
    """Enough bytes already there: answered without waiting (no clock needed)."""
    disk_env.broker.topics.ensure("t", 1)
    await produce(disk_env, 12)
    with trio.fail_after(60):
        out = await F.handle_fetch(disk_env, ctx(1, 12), fetch_req(min_bytes=1000, max_wait_ms=600_000))
    assert values(out) == [VALUE] * 12
