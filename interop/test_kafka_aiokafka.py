"""aiokafka against rokka's Kafka listener: admin create topic, keys/headers, every codec, earliest and
latest, a 3-member group that rebalances, commit + resume across client and broker restarts, the
idempotent producer, offsets_for_times.

aiokafka needs asyncio; pytest runs trio here, so each test is sync and drives its own
``asyncio.run(...)`` under ``asyncio.timeout``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import Any

import harness
import pytest
from kafka_common import (
    GroupLog,
    Rec,
    compressible,
    keys_stick_to_partitions,
    same_records,
    sample_records,
    timestamps,
    topic_name,
)

aiokafka = pytest.importorskip("aiokafka", reason="aiokafka is not installed (interop/install.sh installs it)")
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition  # noqa: E402
from aiokafka.admin import AIOKafkaAdminClient, NewTopic  # noqa: E402
from aiokafka.errors import CommitFailedError  # noqa: E402

TIMEOUT_MS = 15000


def run(coro: Awaitable[Any], timeout: float = 120) -> Any:
    async def bounded() -> Any:
        async with asyncio.timeout(timeout):
            return await coro
    return asyncio.run(bounded())


async def create_topic(srv: harness.ServerProcess, partitions: int = 3) -> str:
    name = topic_name("ak")
    admin = AIOKafkaAdminClient(bootstrap_servers=srv.kafka, request_timeout_ms=TIMEOUT_MS)
    await admin.start()
    try:
        await admin.create_topics([NewTopic(name, num_partitions=partitions, replication_factor=1)])
        for _ in range(75):
            if name in await admin.list_topics():
                break
            await asyncio.sleep(0.2)
        else:
            raise AssertionError(f"{name} not listed after create")
    finally:
        await admin.close()
    return name


async def producer(srv: harness.ServerProcess, **kw: Any) -> AIOKafkaProducer:
    p = AIOKafkaProducer(bootstrap_servers=srv.kafka, request_timeout_ms=TIMEOUT_MS, **kw)
    await p.start()
    return p


async def consumer(srv: harness.ServerProcess, *topics: str, **kw: Any) -> AIOKafkaConsumer:
    kw.setdefault("auto_offset_reset", "earliest")
    kw.setdefault("enable_auto_commit", False)
    c = AIOKafkaConsumer(*topics, bootstrap_servers=srv.kafka, request_timeout_ms=TIMEOUT_MS + 5000, **kw)
    await c.start()
    return c


async def send_all(p: AIOKafkaProducer, topic: str, recs: list[Rec], **kw: Any) -> list[Any]:
    futs = [await p.send(topic, value=r.value, key=r.key, headers=list(r.headers) or None, **kw) for r in recs]
    return list(await asyncio.gather(*futs))


async def get_n(c: AIOKafkaConsumer, n: int, timeout: float = 30) -> list[Any]:
    out: list[Any] = []
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while len(out) < n and loop.time() < deadline:
        for batch in (await c.getmany(timeout_ms=500)).values():
            out.extend(batch)
    assert len(out) >= n, f"got {len(out)} of {n} records"
    return out


def as_rec(m: Any) -> Rec:
    return Rec(m.key, m.value, tuple((k, v) for k, v in m.headers))


def test_admin_create_topic(rokka: harness.ServerProcess) -> None:
    async def scenario() -> None:
        name = await create_topic(rokka, partitions=4)
        admin = AIOKafkaAdminClient(bootstrap_servers=rokka.kafka, request_timeout_ms=TIMEOUT_MS)
        await admin.start()
        try:
            (t,) = await admin.describe_topics([name])
        finally:
            await admin.close()
        assert t["topic"] == name and t["error_code"] == 0
        assert sorted(p["partition"] for p in t["partitions"]) == [0, 1, 2, 3]
        c = await consumer(rokka)
        try:
            assert name in await c.topics()
        finally:
            await c.stop()
    run(scenario())


def test_keys_and_headers(rokka: harness.ServerProcess) -> None:
    async def scenario() -> None:
        topic = await create_topic(rokka)
        recs = sample_records()
        p = await producer(rokka)
        try:
            metas = await send_all(p, topic, recs)
        finally:
            await p.stop()
        keys_stick_to_partitions([(r.key, m.partition) for r, m in zip(recs, metas, strict=True)])
        c = await consumer(rokka, topic)
        try:
            got = await get_n(c, len(recs))
        finally:
            await c.stop()
        same_records([as_rec(m) for m in got], recs)
    run(scenario())


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4", "zstd"])
def test_compression(rokka: harness.ServerProcess, codec: str) -> None:
    async def scenario() -> None:
        topic = await create_topic(rokka, partitions=1)
        values = [compressible(i) for i in range(200)]
        p = await producer(rokka, compression_type=codec, linger_ms=20)
        try:
            await send_all(p, topic, [Rec(None, v) for v in values])
        finally:
            await p.stop()
        c = await consumer(rokka, topic)
        try:
            got = await get_n(c, len(values))
        finally:
            await c.stop()
        assert [m.value for m in got] == values
        assert [m.offset for m in got] == list(range(len(values)))
    run(scenario())


def test_earliest_and_latest(rokka: harness.ServerProcess) -> None:
    async def scenario() -> None:
        topic = await create_topic(rokka, partitions=1)
        tp = TopicPartition(topic, 0)
        p = await producer(rokka)
        try:
            await send_all(p, topic, [Rec(None, b"old-%d" % i) for i in range(5)])
            latest = await consumer(rokka, auto_offset_reset="latest")
            latest.assign([tp])
            assert await latest.position(tp) == 5
            await send_all(p, topic, [Rec(None, b"new-%d" % i) for i in range(5)])
        finally:
            await p.stop()
        try:
            assert [m.value for m in await get_n(latest, 5)] == [b"new-%d" % i for i in range(5)]
        finally:
            await latest.stop()
        earliest = await consumer(rokka)
        earliest.assign([tp])
        try:
            assert len(await get_n(earliest, 10)) == 10
            assert await earliest.end_offsets([tp]) == {tp: 10}
            assert await earliest.beginning_offsets([tp]) == {tp: 0}
        finally:
            await earliest.stop()
    run(scenario())


async def member(srv: harness.ServerProcess, topic: str, group: str, name: str, log: GroupLog,
                 stop: asyncio.Event) -> None:
    c = await consumer(srv, topic, group_id=group, client_id=name, session_timeout_ms=10000,
                       heartbeat_interval_ms=1000)
    try:
        while not stop.is_set():
            batch = [m for ms in (await c.getmany(timeout_ms=200, max_records=20)).values() for m in ms]
            if not batch:
                continue
            try:
                await c.commit()
                ok = True
            except CommitFailedError:
                ok = False
            log.add(name, [m.value for m in batch], ok)
    finally:
        await c.stop()


def test_group_of_three_rebalances(rokka: harness.ServerProcess) -> None:
    async def scenario() -> None:
        topic = await create_topic(rokka, partitions=6)
        group = topic_name("g")
        log = GroupLog()
        produced: list[bytes] = []
        p = await producer(rokka)

        async def produce(tag: str, n: int = 60) -> None:
            vals = [f"{tag}-{i}".encode() for i in range(n)]
            await send_all(p, topic, [Rec(f"k{i}".encode(), v) for i, v in enumerate(vals)])
            produced.extend(vals)

        async def caught_up(what: str, pred: Any = None) -> None:
            async with asyncio.timeout(60):
                while not (pred() if pred else set(produced) <= log.values()):
                    await asyncio.sleep(0.2)

        stops = [asyncio.Event() for _ in range(3)]
        tasks: list[asyncio.Task[None]] = []
        try:
            await produce("a")
            for i in range(3):
                tasks.append(asyncio.create_task(member(rokka, topic, group, f"m{i}", log, stops[i])))
                rounds = 0
                async with asyncio.timeout(60):  # feed until the new member got records (it is assigned)
                    while f"m{i}" not in log.members_that_consumed():
                        await produce(f"join{i}r{rounds}", 12)
                        rounds += 1
                        await asyncio.sleep(0.5)
                await caught_up(f"m{i} joined")
            for i in range(2):
                stops[i].set()
                await asyncio.wait_for(tasks[i], 30)
                await produce(f"leave{i}")
                await caught_up(f"m{i} left")
        finally:
            for s in stops:
                s.set()
            await asyncio.wait_for(asyncio.gather(*tasks, return_exceptions=True), 30)
            await p.stop()
        for t in tasks:
            assert t.exception() is None, repr(t.exception())
        log.check(produced)
    run(scenario(), timeout=400)


def test_commit_and_resume_after_restarts(rokka: harness.ServerProcess) -> None:
    topic = ""
    group = topic_name("g")

    async def before() -> None:
        nonlocal topic
        topic = await create_topic(rokka, partitions=2)
        p = await producer(rokka)
        await send_all(p, topic, [Rec(None, b"first-%d" % i) for i in range(10)])
        await p.stop()
        c = await consumer(rokka, topic, group_id=group)
        assert len(await get_n(c, 10)) == 10
        await c.commit()
        await c.stop()

    async def after() -> None:
        p = await producer(rokka)
        await send_all(p, topic, [Rec(None, b"second-%d" % i) for i in range(10)])
        await p.stop()
        c = await consumer(rokka, topic, group_id=group)
        try:
            got = await get_n(c, 10)
            got += [m for ms in (await c.getmany(timeout_ms=1500)).values() for m in ms]
            assert sorted(m.value for m in got) == sorted(b"second-%d" % i for i in range(10))
            await c.commit()
            total = 0
            for i in range(2):
                total += await c.committed(TopicPartition(topic, i)) or 0
            assert total == 20
        finally:
            await c.stop()

    run(before())
    rokka.restart()
    run(after())


def test_idempotent_producer(rokka: harness.ServerProcess) -> None:
    async def scenario() -> None:
        topic = await create_topic(rokka, partitions=2)
        p = await producer(rokka, enable_idempotence=True, linger_ms=5, max_batch_size=512)
        vals = [b"idem-%04d" % i for i in range(300)]
        try:
            metas = await send_all(p, topic, [Rec(b"k%d" % (i % 2), v) for i, v in enumerate(vals)])
        finally:
            await p.stop()
        c = await consumer(rokka, topic)
        try:
            got = await get_n(c, len(vals))
            got += [m for ms in (await c.getmany(timeout_ms=1000)).values() for m in ms]
        finally:
            await c.stop()
        assert sorted(m.value for m in got) == vals
        for part in (0, 1):
            in_part = [m for m in got if m.partition == part]
            assert [m.offset for m in in_part] == list(range(len(in_part)))
            assert [m.value for m in in_part] == sorted(m.value for m in in_part)
        assert {(m.partition, m.offset) for m in metas} == {(m.partition, m.offset) for m in got}
    run(scenario())


def test_offsets_for_times(rokka: harness.ServerProcess) -> None:
    async def scenario() -> None:
        topic = await create_topic(rokka, partitions=1)
        tp = TopicPartition(topic, 0)
        ts = timestamps(6)
        p = await producer(rokka)
        try:
            for i, t in enumerate(ts):
                await p.send_and_wait(topic, value=b"t%d" % i, timestamp_ms=t, partition=0)
        finally:
            await p.stop()
        c = await consumer(rokka)
        try:
            res = await c.offsets_for_times({tp: ts[2] + 500})
            assert res[tp].offset == 3 and res[tp].timestamp == ts[3]
            assert (await c.offsets_for_times({tp: ts[0] - 10_000}))[tp].offset == 0
            assert (await c.offsets_for_times({tp: ts[-1]}))[tp].offset == 5
            assert (await c.offsets_for_times({tp: ts[-1] + 1}))[tp] is None
            c.assign([tp])
            c.seek(tp, 4)
            got = await get_n(c, 2)
            assert [(m.value, m.timestamp) for m in got] == [(b"t4", ts[4]), (b"t5", ts[5])]
        finally:
            await c.stop()
    run(scenario())
