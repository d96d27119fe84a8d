"""Produce on the disk store when retention has marked the disk full: KAFKA_STORAGE_ERROR (a
retriable error), nothing stored, and produce works again once the disk has room."""

from __future__ import annotations

import os

import pytest
from rokka.gateway.kafka import KafkaServer
from rokka.gateway.kafka.codec import APIS, Struct
from rokka.gateway.kafka.codec import records as R
from rokka.gateway.kafka.errors import ErrorCode as E
from rokka.gateway.kafka.handlers import KafkaEnv
from rokka.gateway.kafka.handlers import produce as P
from rokka.gateway.kafka.server import KafkaRequestContext


async def produce(env: KafkaEnv, values: list[bytes]) -> int:
    batch = R.encode_batch([R.Record(i, i, None, v) for i, v in enumerate(values)], base_timestamp=1000)
    body = APIS[0].request.make(acks=1, timeout_ms=100, topic_data=[Struct(name="full", partition_data=[
        Struct(index=0, records=batch)])])
    ctx = KafkaRequestContext(("127.0.0.1", 1), "t", 0, 9, 1, {}, KafkaServer({}, max_frame_bytes=1024))
    out = await P.handle_produce(env, ctx, body)
    assert out is not None
    return int(out.responses[0].partition_responses[0].error_code)


async def test_full_disk_is_a_storage_error(disk_env: KafkaEnv, monkeypatch: pytest.MonkeyPatch) -> None:
    env = disk_env
    env.broker.topics.ensure("full", 1)
    store = env.broker.store
    free = {"blocks": 30}       # of 1000, all available to us: 97 % in use
    monkeypatch.setattr(os, "statvfs", lambda _path: os.statvfs_result(
        (4096, 4096, 1000, free["blocks"], free["blocks"], 0, 0, 0, 0, 255)))
    store.run_retention(0)
    assert await produce(env, [b"a", b"b"]) == E.KAFKA_STORAGE_ERROR
    assert store.max_offset("full", 0) == 0
    free["blocks"] = 600
    store.run_retention(0)
    assert await produce(env, [b"a", b"b"]) == 0
    assert store.max_offset("full", 0) == 2
