"""Fetch over a compacted topic (``rokka.core.storage.compaction``): offsets keep their gaps, the
next existing offset is returned, a read window holding only holes answers with an empty control
batch past them (the consumer moves on), and the read-ahead follows the gaps.

Handlers are called directly on a Broker with its DiskStore; the compaction pass runs at once.
"""

from __future__ import annotations

import time
from typing import Any

import pytest
from rokka.gateway.kafka import KafkaServer
from rokka.gateway.kafka.codec import APIS, Struct
from rokka.gateway.kafka.codec import records as R
from rokka.gateway.kafka.handlers import KafkaEnv
from rokka.gateway.kafka.handlers import fetch as F
from rokka.gateway.kafka.handlers import produce as P
from rokka.gateway.kafka.server import KafkaRequestContext


@pytest.fixture
def env(disk_env: KafkaEnv) -> KafkaEnv:
    disk_env.broker.topics.ensure("c", 1)
    disk_env.broker.retention.set_config("c", "cleanup.policy", "compact")
    disk_env.broker.retention.compactor.background = False
    return disk_env


def ctx(conn: dict[str, Any]) -> KafkaRequestContext:
    return KafkaRequestContext(("127.0.0.1", 1), "t", 1, 12, 1, conn, KafkaServer({}, max_frame_bytes=1024))


async def produce(env: KafkaEnv, keyed: list[tuple[bytes, bytes]]) -> None:
    for i in range(0, len(keyed), 500):
        chunk = keyed[i:i + 500]
        batch = R.encode_batch([R.Record(j, j, k, v) for j, (k, v) in enumerate(chunk)], base_timestamp=1000)
        body = APIS[0].request.make(acks=1, timeout_ms=100, topic_data=[Struct(name="c", partition_data=[
            Struct(index=0, records=batch)])])
        c = ctx({})
        c.api_key, c.api_version = 0, 9
        out = await P.handle_produce(env, c, body)
        assert out is not None and out.responses[0].partition_responses[0].error_code == 0
    env.broker.store.flush()


def compact(env: KafkaEnv) -> None:
    env.broker.retention.compact(env.broker.store, int(time.time() * 1000) + 1000, {"c"})


async def consume(env: KafkaEnv, limit: int, max_fetches: int) -> tuple[list[tuple[int, bytes | None]], int]:
    """Fetch from offset 0 to the end as a consumer does (position past every batch, control ones
    included); returns the records and how many Fetches it took."""
    conn: dict[str, Any] = {}
    offset, got, fetches = 0, [], 0
    end = env.broker.store.max_offset("c", 0)
    while offset < end:
        assert fetches < max_fetches, f"stuck at offset {offset}: {got[-3:]}"
        c = ctx(conn)
        req = APIS[1].request.make(max_wait_ms=0, min_bytes=1, topics=[Struct(topic="c", partitions=[
            Struct(partition=0, fetch_offset=offset, partition_max_bytes=limit, current_leader_epoch=-1)])])
        part = (await F.handle_fetch(env, c, req)).responses[0].partitions[0]
        for hook in c.after_response:
            hook()
        fetches += 1
        assert part.error_code == 0
        batches, _ = R.split_batches(bytes(part.records))
        for b in batches:
            if not b.header.attributes & 0x20:      # control batches are skipped, as consumers do
                got += [(b.header.base_offset + r.offset_delta, r.key) for r in b.records()]
            offset = b.header.base_offset + b.header.last_offset_delta + 1
    return got, fetches


async def test_a_window_of_holes_steps_the_consumer_on(env: KafkaEnv) -> None:
    await produce(env, [(b"hot", b"v%d" % i) for i in range(2500)] + [(b"a", b"1"), (b"b", b"2")])
    compact(env)
    got, fetches = await consume(env, 1000, 8)     # 1000 units a read: the first windows are all holes
    assert got == [(2499, b"hot"), (2500, b"a"), (2501, b"b")]
    assert fetches >= 3


async def test_gaps_between_records_keep_their_offsets(env: KafkaEnv) -> None:
    keys = [b"x%d" % (i % 7) for i in range(3000)]
    await produce(env, [(k, b"v" * 50) for k in keys])
    compact(env)
    want = [(o, keys[o]) for o in range(3000 - 7, 3000)]
    for limit in (1 << 20, 600):                    # one big read; many small ones (the read-ahead too)
        got, _ = await consume(env, limit, 50)
        assert got == want
