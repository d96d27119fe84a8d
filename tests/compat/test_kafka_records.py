"""Kafka record <-> core message mapping: lossless round trips and the documented rocketmq.* headers."""

import zlib

from hypothesis import given
from hypothesis import strategies as st
from rokka.compat.kafka_records import apply_delay, message_from_record, record_from_message
from rokka.core.model import COMPRESSED_FLAG, Message, StoredMessage
from rokka.core.storage.api import DEFAULT_DELAY_LEVELS, parse_delay_levels
from rokka.core.storage.layout import decode_record, encode_record

LEVELS = parse_delay_levels(DEFAULT_DELAY_LEVELS)


def _store(msg: Message, offset: int = 0) -> StoredMessage:
    raw = encode_record(msg, queue_offset=offset, commitlog_offset=0, store_timestamp=msg.born_timestamp + 5,
                        store_host=("127.0.0.1", 10911))
    return decode_record(raw)


headers_st = st.lists(st.tuples(st.text(max_size=12), st.one_of(st.none(), st.binary(max_size=20))), max_size=5)


@given(key=st.one_of(st.none(), st.binary(max_size=24), st.text(max_size=12).map(str.encode)),
       value=st.one_of(st.none(), st.binary(max_size=64)), headers=headers_st,
       ts=st.integers(min_value=0, max_value=2**41))
def test_kafka_store_kafka_is_lossless(key: bytes | None, value: bytes | None,
                                       headers: list[tuple[str, bytes | None]], ts: int) -> None:
    msg = message_from_record("T", 1, key=key, value=value, headers=tuple(headers), timestamp=ts,
                              log_append_time=False)
    rec = record_from_message(_store(msg, offset=7))
    assert (rec.offset, rec.key, rec.value, rec.timestamp) == (7, key, value, ts)
    assert list(rec.headers) == headers


def test_kafka_tags_keys_and_rocketmq_view() -> None:
    msg = message_from_record("T", 0, key=b"order-1", value=b"v",
                              headers=(("rocketmq.TAGS", b"TagA"), ("rocketmq.KEYS", b"k2"), ("color", b"red")),
                              timestamp=1000, log_append_time=False)
    assert msg.properties["TAGS"] == "TagA"
    assert msg.keys == ["order-1", "k2"]
    assert msg.properties["color"] == "red"  # RocketMQ consumers see safe headers as properties
    rec = record_from_message(_store(msg))
    assert rec.headers == (("rocketmq.TAGS", b"TagA"), ("rocketmq.KEYS", b"k2"), ("color", b"red"))


def test_binary_key_is_indexed_and_exact() -> None:
    msg = message_from_record("T", 0, key=b"\x00\xff a", value=b"v", headers=(), timestamp=1,
                              log_append_time=False)
    assert msg.keys and msg.keys[0] == "AP8gYQ=="
    assert record_from_message(_store(msg)).key == b"\x00\xff a"


def test_rocketmq_message_seen_by_kafka() -> None:
    body = b"x" * 5000
    msg = Message("T", 0, zlib.compress(body), {"TAGS": "TagB", "KEYS": "k1", "UNIQ_KEY": "AB", "shop": "s1"},
                  sysflag=COMPRESSED_FLAG, born_timestamp=42)
    rec = record_from_message(_store(msg))
    assert rec.value == body
    assert rec.key == b"k1"
    headers = dict(rec.headers)
    assert headers["rocketmq.TAGS"] == b"TagB" and headers["rocketmq.UNIQ_KEY"] == b"AB"
    assert headers["shop"] == b"s1"


def test_delay_headers() -> None:
    msg = message_from_record("T", 0, key=None, value=b"v", headers=(("rocketmq.DELAY", b"3"),), timestamp=1,
                              log_append_time=False)
    assert msg.properties["DELAY"] == "3"
    at = message_from_record("T", 0, key=None, value=b"v", headers=(("rocketmq.DELIVER_AT", b"100000"),),
                             timestamp=1, log_append_time=False)
    resolved = apply_delay(at, LEVELS, now_ms=100000 - 7000)  # 7 s from now -> level 3 (10 s)
    assert resolved.properties["DELAY"] == "3" and "rocketmq.DELIVER_AT" not in resolved.properties
    past = apply_delay(at, LEVELS, now_ms=200000)
    assert "DELAY" not in past.properties
