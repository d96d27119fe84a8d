"""Produce fidelity: a compacted topic refuses records without a key as Kafka's LogValidator does
(INVALID_RECORD, one record error per keyless record, nothing of the batch stored), on every produce
path (the native runs, the Python rows, compressed batches, legacy message sets)."""

from __future__ import annotations

import struct
import zlib
from pathlib import Path

import pytest
from rokka.compat.kafka_records import kafka_rows
from rokka.core.broker import Broker
from rokka.core.config import BrokerConfig
from rokka.core.storage.memory import MemoryStore
from rokka.gateway.kafka import KafkaServer
from rokka.gateway.kafka.codec import APIS, Struct
from rokka.gateway.kafka.codec import records as R
from rokka.gateway.kafka.errors import ErrorCode as E
from rokka.gateway.kafka.handlers import KafkaEnv
from rokka.gateway.kafka.handlers import alter_configs as A
from rokka.gateway.kafka.handlers import produce as P
from rokka.gateway.kafka.server import KafkaRequestContext

WHY = "Compacted topic cannot accept message without key in topic partition t-0."


@pytest.fixture
def env(tmp_path: Path) -> KafkaEnv:
    cfg = BrokerConfig(store_path_root_dir=str(tmp_path))
    e = KafkaEnv(Broker(cfg, store=MemoryStore(cfg.store_config())), node_id=7, host="127.0.0.1", port=9092)
    e.broker.topics.ensure("t", 1)
    return e


def ctx(key: int, version: int = 9) -> KafkaRequestContext:
    return KafkaRequestContext(("127.0.0.1", 1), "t", key, version, 1, {}, KafkaServer({}, max_frame_bytes=1024))


async def set_policy(env: KafkaEnv, policy: str) -> None:
    body = APIS[44].request.make(validate_only=False, resources=[Struct(
        resource_type=2, resource_name="t",
        configs=[Struct(name="cleanup.policy", config_operation=0, value=policy)])])
    (out,) = (await A.handle_incremental_alter_configs(env, ctx(44, 1), body)).responses
    assert out.error_code == 0


async def produce(env: KafkaEnv, records: bytes, version: int = 9) -> Struct:
    body = APIS[0].request.make(acks=1, timeout_ms=100, topic_data=[Struct(name="t", partition_data=[
        Struct(index=0, records=records)])])
    out = await P.handle_produce(env, ctx(0, version), body)
    assert out is not None
    for v in (3, 8, 9):
        APIS[0].encode_response(v, out)
    return out.responses[0].partition_responses[0]  # type: ignore[no-any-return]


def batch(*keys: bytes | None, compression: int = R.NONE) -> bytes:
    return R.encode_batch([R.Record(i, i, k, b"v%d" % i) for i, k in enumerate(keys)], base_timestamp=1000,
                          compression=compression)


def legacy(*keys: bytes | None) -> bytes:
    """A magic-1 message set (Produce v2 and older)."""
    out = b""
    for i, key in enumerate(keys):
        k = struct.pack(">i", -1) if key is None else struct.pack(">i", len(key)) + key
        body = struct.pack(">bbq", 1, 0, 1000) + k + struct.pack(">i", 1) + b"v"
        msg = struct.pack(">I", zlib.crc32(body)) + body
        out += struct.pack(">qi", i, len(msg)) + msg
    return out


def stored(env: KafkaEnv) -> int:
    return len(kafka_rows(env.broker.store.get_messages("t", 0, 0, 100).records))


@pytest.mark.parametrize("policy", ["compact", "compact,delete"])
@pytest.mark.parametrize(("keys", "compression"), [
    ((None, None), R.NONE),                 # no keys, no headers: the native uniform run
    ((b"k", None, b"k2", None), R.NONE),    # keyed and keyless: the mapped spans / Python rows
    ((None, b"k"), R.GZIP),                 # compressed
])
async def test_keyless_record_refused_on_compacted_topic(env: KafkaEnv, policy: str,
                                                         keys: tuple[bytes | None, ...], compression: int) -> None:
    await set_policy(env, policy)
    out = await produce(env, batch(*keys, compression=compression))
    keyless = [i for i, k in enumerate(keys) if k is None]
    assert out.error_code == E.INVALID_RECORD and out.base_offset == -1
    assert [(r.batch_index, r.batch_index_error_message) for r in out.record_errors] == [(i, WHY) for i in keyless]
    assert out.error_message.startswith(f"One or more records have been rejected due to {len(keyless)} record errors")
    assert WHY in out.error_message
    assert stored(env) == 0
    ok = await produce(env, batch(b"a", b"", b"b"))     # an empty key is a key
    assert (ok.error_code, ok.base_offset, stored(env)) == (0, 0, 3)


async def test_keyless_legacy_set_refused_on_compacted_topic(env: KafkaEnv) -> None:
    await set_policy(env, "compact")
    out = await produce(env, legacy(b"k", None), version=2)
    assert out.error_code == E.INVALID_RECORD and stored(env) == 0
    assert (await produce(env, legacy(b"k", b"j"), version=2)).error_code == 0
    assert stored(env) == 2


async def test_keyless_record_accepted_on_delete_topic(env: KafkaEnv) -> None:
    await set_policy(env, "delete")
    assert (await produce(env, batch(None, None))).error_code == 0
    assert stored(env) == 2


async def test_compacted_topic_takes_the_native_run_when_every_record_has_a_key(
        env: KafkaEnv, monkeypatch: pytest.MonkeyPatch) -> None:
    """Kafka Streams' changelogs: keyed records (text and binary keys, headers, tombstones) on a compacted
    topic are mapped natively (the per-record Python rows are never built) and read back as sent."""
    await set_policy(env, "compact")

    def python_rows(*args: object, **kwargs: object) -> None:
        raise AssertionError("the per-record Python mapping was used")

    monkeypatch.setattr(P, "messages_from_batch", python_rows)
    recs = [R.Record(0, 0, b"store-key-1", b"v1", (R.Header("h", b"\x00\xff"),)),
            R.Record(1, 1, b"\xff\xfe binary", None),                    # a tombstone
            R.Record(2, 2, b"store-key-1", b"v1b")]
    out = await produce(env, R.encode_batch(recs, base_timestamp=1000))
    assert (out.error_code, out.base_offset) == (0, 0)
    rows = kafka_rows(env.broker.store.get_messages("t", 0, 0, 100).records)
    assert [(r[3], r[4], r[5]) for r in rows] == [(b"store-key-1", b"v1", (("h", b"\x00\xff"),)),
                                                  (b"\xff\xfe binary", None, ()), (b"store-key-1", b"v1b", ())]
    # a keyless record still reaches the Python check, which refuses it
    monkeypatch.undo()
    await set_policy(env, "compact")
    refused = await produce(env, R.encode_batch([R.Record(0, 0, b"k", b"v"), R.Record(1, 1, None, b"w")],
                                                base_timestamp=1000))
    assert refused.error_code == E.INVALID_RECORD and stored(env) == 3
