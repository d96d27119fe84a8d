"""Fetch over the disk store: the Kafka byte limit is filled, and the read-ahead for the next Fetch
is used only when it is still what a fresh read would return.

Handlers are called directly on a Broker with its DiskStore (CommitLog views, the production path);
``after_response`` hooks are run as the server runs them once the response is sent.
"""

from __future__ import annotations

from typing import Any

import pytest
from rokka.gateway.kafka import KafkaServer
from rokka.gateway.kafka.codec import APIS, Struct
from rokka.gateway.kafka.codec import records as R
from rokka.gateway.kafka.handlers import KafkaEnv, readahead
from rokka.gateway.kafka.handlers import fetch as F
from rokka.gateway.kafka.handlers import metadata as M
from rokka.gateway.kafka.handlers import produce as P
from rokka.gateway.kafka.server import KafkaRequestContext

VALUE = b"v" * 100


@pytest.fixture
def env(disk_env: KafkaEnv) -> KafkaEnv:
    return disk_env


def ctx(key: int, version: int, conn_state: dict[str, Any] | None = None) -> KafkaRequestContext:
    return KafkaRequestContext(("127.0.0.1", 1), "t", key, version, 1, {} if conn_state is None else conn_state,
                               KafkaServer({}, max_frame_bytes=1024))


async def produce(env: KafkaEnv, topic: str, values: list[bytes]) -> None:
    batch = R.encode_batch([R.Record(i, i, None, v) for i, v in enumerate(values)], base_timestamp=1000)
    body = APIS[0].request.make(acks=1, timeout_ms=100, topic_data=[Struct(name=topic, partition_data=[
        Struct(index=0, records=batch)])])
    out = await P.handle_produce(env, ctx(0, 9), body)
    assert out is not None and out.responses[0].partition_responses[0].error_code == 0


async def fetch(env: KafkaEnv, c: KafkaRequestContext, topic: str, offset: int, limit: int) -> Struct:
    """One Fetch, then what the server does once its response is sent."""
    req = APIS[1].request.make(max_wait_ms=0, min_bytes=1, topics=[Struct(topic=topic, partitions=[
        Struct(partition=0, fetch_offset=offset, partition_max_bytes=limit, current_leader_epoch=-1)])])
    out = await F.handle_fetch(env, c, req)
    for hook in c.after_response:
        hook()
    c.after_response.clear()
    return out.responses[0].partitions[0]  # type: ignore[no-any-return]


def records(part: Struct) -> list[tuple[int, bytes | None]]:
    batches, _ = R.split_batches(bytes(part.records))
    return [(b.header.base_offset + r.offset_delta, r.value) for b in batches for r in b.records()]


async def test_fetch_fills_the_partition_byte_limit_in_kafka_bytes(env: KafkaEnv) -> None:
    env.broker.topics.ensure("t", 1)
    await produce(env, "t", [VALUE] * 3000)
    limit = 64 << 10
    part = await fetch(env, ctx(1, 12), "t", 0, limit)
    got = len(bytes(part.records))
    # a stored record is ~2.2x its Kafka form: counting stored bytes returned under half the limit
    assert 0.8 * limit <= got <= limit
    assert records(part) == [(i, VALUE) for i in range(len(records(part)))]


async def test_the_next_fetch_takes_the_read_ahead_and_gets_what_a_fresh_read_gets(env: KafkaEnv) -> None:
    env.broker.topics.ensure("t", 1)
    values = [b"%06d" % i * 20 for i in range(3000)]
    await produce(env, "t", values)
    conn: dict[str, Any] = {}
    offset, seen, kept = 0, [], 0
    while offset < 3000:
        if offset:
            kept += isinstance(conn.get("fetch.readahead"), readahead.ReadAhead)
        part = await fetch(env, ctx(1, 12, conn), "t", offset, 32 << 10)
        fresh = await fetch(env, ctx(1, 12), "t", offset, 32 << 10)    # another connection: a plain read
        assert records(part) == records(fresh) and part.high_watermark == 3000
        seen += records(part)
        offset = seen[-1][0] + 1
    assert seen == list(enumerate(values))
    assert kept >= 3 and "fetch.readahead" not in conn     # nothing kept once the end was returned


async def test_read_ahead_is_not_used_after_delete_records_or_recreation(env: KafkaEnv) -> None:
    env.broker.topics.ensure("t", 1)
    await produce(env, "t", [b"old"] * 2000)
    conn: dict[str, Any] = {}
    nxt = records(await fetch(env, ctx(1, 12, conn), "t", 0, 4096))[-1][0] + 1
    assert "fetch.readahead" in conn
    dr = await F.handle_delete_records(env, ctx(21, 2), APIS[21].request.make(topics=[Struct(name="t", partitions=[
        Struct(partition_index=0, offset=nxt + 5)])]))
    assert dr.topics[0].partitions[0].low_watermark == nxt + 5
    assert (await fetch(env, ctx(1, 12, conn), "t", nxt, 4096)).error_code == 1    # OFFSET_OUT_OF_RANGE

    nxt = records(await fetch(env, ctx(1, 12, conn), "t", nxt + 5, 4096))[-1][0] + 1
    assert "fetch.readahead" in conn
    deleted = await M.handle_delete_topics(env, ctx(20, 4), APIS[20].request.make(topic_names=["t"], timeout_ms=1000))
    assert deleted.responses[0].error_code == 0
    env.broker.topics.ensure("t", 1)
    await produce(env, "t", [b"new"] * 2000)
    part = await fetch(env, ctx(1, 12, conn), "t", nxt, 4096)
    assert part.error_code == 0 and {v for _, v in records(part)} == {b"new"}


async def test_read_ahead_is_bounded_by_the_process_budget_and_given_back(env: KafkaEnv) -> None:
    from rokka.net.budget import Budget, Limits
    from rokka.gateway.kafka.server import ON_CLOSE

    env.broker.topics.ensure("t", 1)
    await produce(env, "t", [VALUE] * 3000)
    budget = Budget(Limits(max_read_ahead_bytes=48 << 10))
    server = KafkaServer({}, max_frame_bytes=1024, budget=budget)
    a: dict[str, Any] = {ON_CLOSE: []}
    b: dict[str, Any] = {ON_CLOSE: []}
    for conn in (a, b):
        c = KafkaRequestContext(("127.0.0.1", 1), "t", 1, 12, 1, conn, server)
        await fetch(env, c, "t", 0, 32 << 10)
    assert "fetch.readahead" in a and "fetch.readahead" not in b     # the second does not fit
    assert 0 < budget.read_ahead <= 48 << 10
    for hook in a[ON_CLOSE]:       # the connection ends: its read-ahead goes back
        hook()
    assert budget.read_ahead == 0 and "fetch.readahead" not in a
    c = KafkaRequestContext(("127.0.0.1", 1), "t", 1, 12, 1, b, server)
    await fetch(env, c, "t", 0, 32 << 10)
    assert "fetch.readahead" in b and budget.read_ahead > 0
    await fetch(env, c, "t", 0, 32 << 10)     # another Fetch drops (and gives back) the previous one
    assert budget.read_ahead <= 48 << 10
