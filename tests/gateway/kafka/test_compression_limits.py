"""Decompression bombs (issue 19 item 2) and Fetch's byte limits and empty record sets (issue 26 items 1, 2).

The codec is checked directly (every codec, within and past the limit, memory bounded); the rest
runs against the real stack (``runtime.BrokerRole``: RocketMQ and Kafka listeners on 127.0.0.1
port 0, a disk store) with raw Kafka frames from our codec and rokka's RocketMQ client (real clients:
``interop/test_kafka_fetch_fidelity.py``).
Every test is bounded by ``trio.fail_after``.
"""

from __future__ import annotations

import struct
import tracemalloc
import zlib
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import cramjam
import crc32c
import lz4.frame
import pytest
import rokka.gateway.runtime as runtime
import trio
import zstandard
from rokka.core.config import BrokerConfig
from rokka.core.model import COMPRESSED_FLAG, Message
from rokka.gateway.kafka.codec import APIS, Struct, decode_response_frame, encode_request_frame
from rokka.gateway.kafka.codec import compression as C
from rokka.gateway.kafka.codec import records as R
from rokka.gateway.kafka.codec.fetch_limits import truncate_batches
from rokka.gateway.kafka.codec.legacy import decode_legacy_message_set
from rokka.gateway.namesrv.server import NamesrvServer
from rokka.net.remoting.client import NamesrvClient, Producer, RemotingClient
from rokka.net.remoting.client.remoting import ResponseError

MiB = 1 << 20
LIMIT = 1 * MiB                 # the broker's maxMessageSize in these tests
BOMB = 64 * MiB                 # what the bombs inflate to
PRODUCE, FETCH = APIS[0], APIS[1]
RECORD_TOO_LARGE, OFFSET_OUT_OF_RANGE, UNKNOWN_TOPIC = 10, 1, 3


def _zeros(n: int, chunk: int = 4 * MiB) -> list[bytes]:
    z = bytes(chunk)
    return [z] * (n // chunk)


def bomb(codec: int, n: int = BOMB) -> bytes:
    """``n`` zero bytes compressed with ``codec``, built chunk by chunk (never ``n`` bytes at once)."""
    if codec == C.GZIP:
        c = zlib.compressobj(9, wbits=31)
        return b"".join([c.compress(z) for z in _zeros(n)] + [c.flush()])
    if codec == C.SNAPPY:           # xerial framing, 32 KiB blocks, as Java writes it
        block = bytes(cramjam.snappy.compress_raw(bytes(32 * 1024)))
        return b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1) + (struct.pack(">i", len(block)) + block) * (n // 32768)
    if codec == C.LZ4:
        c4 = lz4.frame.LZ4FrameCompressor()
        return b"".join([c4.begin()] + [c4.compress(z) for z in _zeros(n)] + [c4.flush()])
    cz = zstandard.ZstdCompressor().compressobj()
    return b"".join([cz.compress(z) for z in _zeros(n)] + [cz.flush()])


CODECS = [C.GZIP, C.SNAPPY, C.LZ4, C.ZSTD]


# -- the codec -----------------------------------------------------------------------------------

@pytest.mark.parametrize("codec", CODECS)
def test_decompress_stops_at_the_limit_without_inflating_the_bomb(codec: int) -> None:
    data = bomb(codec)
    tracemalloc.start()
    try:
        with pytest.raises(C.InflateLimitError):
            C.decompress(codec, data, LIMIT)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 4 * LIMIT, f"{peak} bytes allocated to refuse a {BOMB}-byte bomb"


@pytest.mark.parametrize("codec", CODECS)
def test_decompress_within_the_limit_is_exact(codec: int) -> None:
    text = b"".join(b"record %06d lorem ipsum " % i for i in range(40_000))     # ~1 MB
    packed = C.compress(codec, text)
    assert C.decompress(codec, packed, len(text)) == text
    with pytest.raises(C.InflateLimitError):
        C.decompress(codec, packed, len(text) - 1)


def test_raw_snappy_multi_member_gzip_and_corrupt_data() -> None:
    raw = bytes(cramjam.snappy.compress_raw(b"abc" * 1000))           # librdkafka's framing
    assert C.decompress(C.SNAPPY, raw, 3000) == b"abc" * 1000
    with pytest.raises(C.InflateLimitError):
        C.decompress(C.SNAPPY, raw, 2999)
    two = bytes(cramjam.gzip.compress(b"one ")) + bytes(cramjam.gzip.compress(b"two"))
    assert C.decompress(C.GZIP, two, 7) == b"one two"
    with pytest.raises(C.InflateLimitError):
        C.decompress(C.GZIP, two, 6)
    for codec in CODECS:
        with pytest.raises(R.DecodeError) as info:
            C.decompress(codec, b"\x00garbage" * 20, LIMIT)
        assert not isinstance(info.value, C.InflateLimitError)


def _legacy_message(value: bytes, attrs: int = 0, offset: int = 0) -> bytes:
    body = struct.pack(">bbq", 1, attrs, 1000) + struct.pack(">i", -1) + struct.pack(">i", len(value)) + value
    msg = struct.pack(">I", zlib.crc32(body)) + body
    return struct.pack(">qi", offset, len(msg)) + msg


def legacy_bomb(wrappers: int = 1) -> bytes:
    inner = _legacy_message(bytes(LIMIT // 2))
    wrapped = bytes(cramjam.gzip.compress(inner * 4))        # 2 MiB of inner messages per wrapper
    return b"".join(_legacy_message(wrapped, attrs=C.GZIP, offset=i) for i in range(wrappers))


def test_legacy_wrappers_share_one_inflation_budget() -> None:
    with pytest.raises(C.InflateLimitError):
        decode_legacy_message_set(legacy_bomb(), limit=LIMIT)
    small = _legacy_message(bytes(cramjam.gzip.compress(_legacy_message(b"x" * 1000) * 3)), attrs=C.GZIP)
    assert len(decode_legacy_message_set(small * 2, limit=7000)) == 6   # two wrappers of 3102 bytes
    with pytest.raises(C.InflateLimitError):
        decode_legacy_message_set(small * 3, limit=7000)


# -- the stack -----------------------------------------------------------------------------------

@asynccontextmanager
async def stack(root: Path, **cfg_kw: Any) -> AsyncIterator[tuple[str, tuple[str, int], Any]]:
    """(namesrv address, Kafka address, BrokerRole) of a running node on 127.0.0.1."""
    async with trio.open_nursery() as nursery:
        ns = NamesrvServer()
        host, port = await nursery.start(ns.serve, "127.0.0.1", 0)
        cfg = BrokerConfig()
        cfg.listen_port = cfg.kafka_listen_port = 0
        cfg.store_path_root_dir, cfg.namesrv_addr, cfg.max_message_size = str(root), f"{host}:{port}", LIMIT
        for key, value in cfg_kw.items():
            setattr(cfg, key, value)
        role = runtime.BrokerRole(cfg)
        await nursery.start(role.run)
        try:
            yield f"{host}:{port}", role.kafka_addr, role
        finally:
            nursery.cancel_scope.cancel()
    role.broker.close()


class KafkaWire:
    """Raw Kafka requests over one connection (our codec as the client)."""

    def __init__(self, stream: trio.SocketStream) -> None:
        self.stream, self.buf, self.cid = stream, b"", 0

    async def call(self, api: Any, version: int, body: Struct) -> Struct:
        self.cid += 1
        await self.stream.send_all(encode_request_frame(api, version, self.cid, body))
        while len(self.buf) < 4 or len(self.buf) < 4 + int.from_bytes(self.buf[:4], "big"):
            chunk = await self.stream.receive_some(1 << 20)
            assert chunk, "the server closed the connection"
            self.buf += chunk
        size = int.from_bytes(self.buf[:4], "big")
        payload, self.buf = self.buf[4:4 + size], self.buf[4 + size:]
        cid, out = decode_response_frame(api, version, payload)
        assert cid == self.cid
        return out


@asynccontextmanager
async def wire(addr: tuple[str, int]) -> AsyncIterator[KafkaWire]:
    stream = await trio.open_tcp_stream(*addr)
    try:
        yield KafkaWire(stream)
    finally:
        await stream.aclose()


def produce_req(topic: str, records: bytes, partition: int = 0) -> Struct:
    return PRODUCE.request.make(acks=1, timeout_ms=5000, topic_data=[Struct(name=topic, partition_data=[
        Struct(index=partition, records=records)])])


def fetch_req(parts: list[tuple[str, int, int]], *, max_bytes: int = 50 * MiB, part_max: int = 10 * MiB) -> Struct:
    topics: dict[str, list[Struct]] = {}
    for topic, partition, offset in parts:
        topics.setdefault(topic, []).append(Struct(partition=partition, fetch_offset=offset, log_start_offset=-1,
                                                   partition_max_bytes=part_max, current_leader_epoch=-1))
    return FETCH.request.make(max_wait_ms=0, min_bytes=1, max_bytes=max_bytes, isolation_level=0,
                              topics=[Struct(topic=t, partitions=ps) for t, ps in topics.items()])


def batch_with(codec: int, payload: bytes, count: int) -> bytes:
    """A v2 batch whose records blob is ``payload`` (already compressed), claiming ``count`` records."""
    tail = struct.pack(">hiqqqhii", codec, count - 1, 1000, 1000, -1, -1, -1, count) + payload
    return struct.pack(">qiibI", 0, len(tail) + 9, -1, 2, crc32c.crc32c(tail)) + tail


@pytest.mark.parametrize("codec", CODECS)
async def test_produce_of_a_bomb_is_record_too_large_and_stores_nothing(tmp_path: Path, codec: int) -> None:
    with trio.fail_after(60):
        async with stack(tmp_path) as (_, kafka, role):
            role.broker.topics.ensure("bombs", 1)
            async with wire(kafka) as k:
                out = await k.call(PRODUCE, 9, produce_req("bombs", batch_with(codec, bomb(codec), 1000)))
                assert out.responses[0].partition_responses[0].error_code == RECORD_TOO_LARGE
                ok = R.encode_batch([R.Record(0, 0, None, b"fine")], compression=codec)
                out = await k.call(PRODUCE, 9, produce_req("bombs", ok))
                assert out.responses[0].partition_responses[0].error_code == 0
            assert role.broker.store.max_offset("bombs", 0) == 1


async def test_legacy_wrapper_bomb_is_record_too_large(tmp_path: Path) -> None:
    with trio.fail_after(60):
        async with stack(tmp_path) as (_, kafka, role):
            role.broker.topics.ensure("old", 1)
            async with wire(kafka) as k:
                out = await k.call(PRODUCE, 2, produce_req("old", legacy_bomb(2)))
                assert out.responses[0].partition_responses[0].error_code == RECORD_TOO_LARGE
            assert role.broker.store.max_offset("old", 0) == 0


async def test_rocketmq_compressed_bomb_is_refused_at_send(tmp_path: Path) -> None:
    packed = zlib.compress(bytes(BOMB), 9)
    assert len(packed) < LIMIT
    with trio.fail_after(60):
        async with stack(tmp_path) as (ns_addr, _, role):
            role.broker.topics.ensure("rq", 1)
            async with RemotingClient() as rc:
                producer = Producer(rc, NamesrvClient(rc, [ns_addr]), "pg")
                with pytest.raises(ResponseError) as info:
                    await producer.send("rq", packed, queue=0, sys_flag=COMPRESSED_FLAG)
                assert info.value.code == 13 and "maxMessageSize" in str(info.value)
                fits = zlib.compress(b"hello " * 1000)
                assert (await producer.send("rq", fits, queue=0, sys_flag=COMPRESSED_FLAG)).status == "SEND_OK"
            assert role.broker.store.max_offset("rq", 0) == 1


async def test_a_stored_bomb_is_fetched_as_stored_within_the_limits(tmp_path: Path) -> None:
    """Old data (stored before sends were checked): Fetch returns the compressed bytes, bounded."""
    packed = zlib.compress(bytes(BOMB), 9)
    fits = zlib.compress(b"hello " * 1000)
    with trio.fail_after(60):
        async with stack(tmp_path) as (_, kafka, role):
            role.broker.topics.ensure("old", 1)
            role.broker.store.put_messages([role.broker.prepare(Message("old", 0, body, {}, sysflag=COMPRESSED_FLAG))
                                            for body in (packed, fits)])
            async with wire(kafka) as k:
                out = await k.call(FETCH, 12, fetch_req([("old", 0, 0)], max_bytes=LIMIT, part_max=LIMIT))
                part = out.responses[0].partitions[0]
                assert part.error_code == 0 and len(part.records) <= LIMIT
                values = [r.value for b in R.split_batches(bytes(part.records))[0] for r in b.records()]
                assert values == [packed, b"hello " * 1000]


# -- Fetch: empty record sets and byte limits ----------------------------------------------------

@pytest.mark.parametrize("version", [4, 7, 11, 12])
async def test_errored_partitions_carry_an_empty_record_set(tmp_path: Path, version: int) -> None:
    with trio.fail_after(30):
        async with stack(tmp_path) as (_, kafka, role):
            role.broker.topics.ensure("t", 1)
            async with wire(kafka) as k:
                await k.call(PRODUCE, 9, produce_req("t", R.encode_batch([R.Record(0, 0, None, b"v")])))
                out = await k.call(FETCH, version, fetch_req([("t", 0, 5), ("gone", 0, 0), ("t", 0, 1)]))
                got = [(p.error_code, p.records) for t in out.responses for p in t.partitions]
                assert got == [(OFFSET_OUT_OF_RANGE, b""), (0, b""), (UNKNOWN_TOPIC, b"")]


def _records_of(out: Struct) -> list[tuple[str, int, int, int]]:
    """(topic, partition, records bytes, record count) per partition of a Fetch response."""
    rows = []
    for t in out.responses:
        for p in t.partitions:
            batches, trailing = R.split_batches(bytes(p.records))
            assert trailing == 0 and p.error_code == 0
            rows.append((t.topic, p.partition_index, len(p.records), sum(len(b.records()) for b in batches)))
    return rows


async def _fill(k: KafkaWire, topic: str, partitions: int, per: int, size: int) -> None:
    for part in range(partitions):
        batch = R.encode_batch([R.Record(i, 0, None, b"%05d" % i + bytes(size - 5)) for i in range(per)])
        out = await k.call(PRODUCE, 9, produce_req(topic, batch, part))
        assert out.responses[0].partition_responses[0].error_code == 0


async def test_fetch_max_bytes_only_the_first_partition_may_exceed(tmp_path: Path) -> None:
    with trio.fail_after(60):
        async with stack(tmp_path) as (_, kafka, role):
            role.broker.topics.ensure("many", 10)
            async with wire(kafka) as k:
                await _fill(k, "many", 10, 50, 1000)
                parts = [("many", p, 0) for p in range(10)]
                rows = _records_of(await k.call(FETCH, 12, fetch_req(parts, max_bytes=5000)))
                assert sum(r[2] for r in rows) <= 5000 and rows[0][3] >= 1
                assert sum(r[3] for r in rows) >= 4
                # partition_max_bytes: each partition alone within it, whole records
                rows = _records_of(await k.call(FETCH, 12, fetch_req(parts, max_bytes=50 * MiB, part_max=3000)))
                assert all(r[2] <= 3000 and r[3] >= 1 for r in rows)
                # a first record larger than both limits: it alone, and nothing from later partitions
                rows = _records_of(await k.call(FETCH, 12, fetch_req(parts, max_bytes=500, part_max=500)))
                assert rows[0][3] == 1 and all(r[2] == 0 for r in rows[1:])


async def test_fetch_max_bytes_holds_for_rocketmq_compressed_bodies(tmp_path: Path) -> None:
    """Stored small, inflated large: the store's byte count says nothing about the Kafka size."""
    body = b"".join(b"line %06d of a compressible body\n" % i for i in range(3000))     # ~100 KB
    with trio.fail_after(60):
        async with stack(tmp_path) as (ns_addr, kafka, role):
            role.broker.topics.ensure("rz", 4)
            async with RemotingClient() as rc:
                producer = Producer(rc, NamesrvClient(rc, [ns_addr]), "pg")
                for q in range(4):
                    for _ in range(20):
                        await producer.send("rz", zlib.compress(body), queue=q, sys_flag=COMPRESSED_FLAG)
            async with wire(kafka) as k:
                parts = [("rz", p, 0) for p in range(4)]
                out = await k.call(FETCH, 12, fetch_req(parts, max_bytes=350_000, part_max=10 * MiB))
                rows = _records_of(out)
                assert sum(r[2] for r in rows) <= 350_000 and sum(r[3] for r in rows) == 3
                values = [r.value for b in R.split_batches(bytes(out.responses[0].partitions[0].records))[0]
                          for r in b.records()]
                assert values and all(v == body for v in values)



async def test_fetch_inflates_no_more_stored_bodies_than_it_may_send(tmp_path: Path) -> None:
    """50 stored bodies of ~1 KB that inflate to 1 MiB each, a 100 KB Fetch: one record read, one sent."""
    packed = zlib.compress(bytes(LIMIT), 9)
    with trio.fail_after(60):
        async with stack(tmp_path) as (_, kafka, role):
            role.broker.topics.ensure("z", 1)
            role.broker.store.put_messages([role.broker.prepare(Message("z", 0, packed, {}, sysflag=COMPRESSED_FLAG))
                                            for _ in range(50)])
            async with wire(kafka) as k:
                tracemalloc.start()
                try:
                    out = await k.call(FETCH, 12, fetch_req([("z", 0, 0)], max_bytes=100_000, part_max=100_000))
                    _, peak = tracemalloc.get_traced_memory()
                finally:
                    tracemalloc.stop()
    rows = _records_of(out)
    assert rows[0][3] == 1 and rows[0][2] < LIMIT + 200
    assert peak < 8 * LIMIT, f"{peak} bytes held to answer a 100 KB Fetch"


def _rows(data: bytes) -> list[tuple[int, bytes | None]]:
    batches, trailing = R.split_batches(data)
    assert trailing == 0 and all(b.crc_ok() for b in batches)
    return [(b.header.base_offset + r.offset_delta, r.value) for b in batches for r in b.records()]


def test_truncate_batches_cuts_at_record_boundaries() -> None:
    rows = [(10 + i, 5000 + i * 7, False, None, b"v%03d" % i + bytes(95), ()) for i in range(10)]
    data = R.encode_rows_batch(rows[:4]) + R.encode_rows_batch(rows[4:])
    every = _rows(data)
    assert truncate_batches(data, len(data), min_one=False) == (data, 10)
    for limit in range(0, len(data), 37):
        cut, n = truncate_batches(data, limit, min_one=False)
        assert len(cut) <= limit and _rows(cut) == every[:n]
        longer, m = truncate_batches(data, limit + 200, min_one=False)
        assert m >= n
    cut, n = truncate_batches(data, 1, min_one=True)          # the first record alone
    assert n == 1 and _rows(cut) == every[:1]
    batches, _ = R.split_batches(truncate_batches(data, 300, min_one=False)[0])
    h = batches[0].header
    assert (h.base_offset, h.base_timestamp, h.max_timestamp, h.last_offset_delta) == (10, 5000, 5007, 1)


async def test_rocketmq_compressed_batch_bomb_is_refused_at_send(tmp_path: Path) -> None:
    """A C++-client style batch body (sysFlag COMPRESSED over the whole batch) that inflates past the limit."""
    from rokka.net.remoting.codec.batch import encode_batch
    from rokka.net.remoting.codec.codes import RequestCode
    from rokka.net.remoting.codec.remoting import RemotingCommand

    elements = encode_batch([(0, bytes(256 << 10), b"") for _ in range(64)])    # 16 MiB of batch body
    with trio.fail_after(60):
        async with stack(tmp_path) as (ns_addr, _, role):
            role.broker.topics.ensure("rb", 1)
            async with RemotingClient() as rc:
                producer = Producer(rc, NamesrvClient(rc, [ns_addr]), "pg")
                await producer.send("rb", b"warm-up", queue=0)      # the route
                addr, mq = (await producer._targets("rb", 0))[0]
                header = producer._header("rb", mq, props={}, flag=0, sys_flag=COMPRESSED_FLAG, batch=True)
                cmd = RemotingCommand(RequestCode.SEND_BATCH_MESSAGE, body=zlib.compress(elements, 9),
                                      ext_fields=header)
                resp = await rc.invoke(addr, cmd, 10)
                assert resp.code == 13 and "maxMessageSize" in (resp.remark or "")
            assert role.broker.store.max_offset("rb", 0) == 1


def test_a_compressed_register_broker_body_bomb_is_refused() -> None:
    """The name server's REGISTER_BROKER accepts zlib bodies (compressedRegister): bounded too."""
    from rokka.net.remoting.codec.bodies import MAX_REGISTER_BODY, BodyFormatError, RegisterBrokerBody

    bomb = zlib.compress(bytes(4 * MAX_REGISTER_BODY), 9)
    tracemalloc.start()
    try:
        with pytest.raises(BodyFormatError, match="inflates past"):
            RegisterBrokerBody.decode(bomb, compressed=True)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 3 * MAX_REGISTER_BODY        # the output buffer of at most limit + 1 bytes, grown by doubling
