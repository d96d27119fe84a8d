"""Keys and headers beyond RocketMQ's properties limit: the envelope in the body (``KAFKA_ENVELOPE``),
exact for Kafka readers on every read path, and laid out as documented for RocketMQ readers."""

from __future__ import annotations

import os

import pytest
from rokka.compat.kafka_pieces import kafka_pieces
from rokka.compat.kafka_records import (
    ENVELOPE_BUDGET,
    kafka_rows,
    message_from_record,
    record_from_message,
)
from rokka.core.model import Message
from rokka.core.storage.api import RecordRun
from rokka.core.storage.layout import MAX_PROPERTIES_BYTES, decode_record, encode_properties, encode_record
from rokka.gateway.kafka.codec import records as R
from rokka.gateway.kafka.codec import stored_records as S


def _raw(msg: Message, offset: int = 0) -> bytes:
    return encode_record(msg, queue_offset=offset, commitlog_offset=0, store_timestamp=msg.born_timestamp + 5,
                         store_host=("127.0.0.1", 10911))


def _all_paths(msgs: list[Message]) -> list[tuple[bytes | None, bytes | None, tuple[tuple[str, bytes | None], ...]]]:
    """(key, value, headers) of each message through record_from_message, kafka_rows and kafka_pieces
    (native and Python walks), checking they agree."""
    raws = [_raw(m, i) for i, m in enumerate(msgs)]
    one = [record_from_message(decode_record(r)) for r in raws]
    got = [(r.key, r.value, r.headers) for r in one]
    assert [(k, v, h) for _, _, _, k, v, h in kafka_rows(raws)] == got
    run = RecordRun(0, b"".join(raws), [len(r) for r in raws])
    for walker in (S.walk_native, S.walk_py, None):   # every record, whichever maps it (walker or kafka_rows)
        rows = _piece_rows(kafka_pieces(run, walker=walker))
        assert [(k, v, h) for _, _, _, k, v, h in rows] == got
    return got


def _piece_rows(pieces: list) -> list:  # type: ignore[type-arg]
    rows = []
    for p in pieces:
        if isinstance(p, list):
            rows += p
            continue
        raw = R.wrap_records(p.payload, base_offset=p.offset, last_offset_delta=p.count - 1, count=p.count,
                             base_timestamp=p.first_timestamp, max_timestamp=p.max_timestamp)
        (batch,), _ = R.split_batches(raw)
        rows += [(p.offset + r.offset_delta, p.first_timestamp + r.timestamp_delta, False, r.key, r.value,
                  tuple((h.key, h.value) for h in r.headers)) for r in batch.records()]
    return rows


@pytest.mark.parametrize("key", [os.urandom(1 << 20), ("k" * 40_000).encode(), ("k" * 40_000 + " x").encode()])
def test_big_key_round_trips_and_rocketmq_sees_the_value_after_the_envelope(key: bytes) -> None:
    headers = (("h", b"small"), ("rocketmq.TAGS", b"TagA"), ("bin", b"\x00\xff"), ("nul", None))
    msg = message_from_record("T", 0, key=key, value=b"the value", headers=headers, timestamp=7,
                              log_append_time=False)
    props = msg.properties
    assert len(encode_properties(props)) <= ENVELOPE_BUDGET < MAX_PROPERTIES_BYTES
    klen, hlen = (int(x) for x in props["KAFKA_ENVELOPE"].split(","))
    assert klen == len(key) and msg.body[:klen] == key
    assert msg.body[klen + hlen:] == b"the value"                 # what a RocketMQ consumer slices
    assert props["TAGS"] == "TagA" and props["h"] == "small"     # features and copies that fit are kept
    assert "KAFKA_KEY" not in props and "KAFKA_HEADERS" not in props
    plain = message_from_record("T", 0, key=None, value=b"p", headers=(), timestamp=8, log_append_time=False)
    assert _all_paths([plain, msg, plain]) == [(None, b"p", ()), (key, b"the value", headers), (None, b"p", ())]


def test_big_headers_null_key_null_value_and_empty_key() -> None:
    big = (("a", os.urandom(50_000)), ("b", None), ("a", b""))
    cases = [(None, None, big), (b"", b"v", big), (b"k", b"", big), (None, b"v", (("x" * 40_000, b"1"),))]
    msgs = [message_from_record("T", 0, key=k, value=v, headers=h, timestamp=1, log_append_time=True)
            for k, v, h in cases]
    assert all("KAFKA_ENVELOPE" in m.properties for m in msgs)
    assert msgs[0].properties["KAFKA_NULL_VALUE"] == "1" and msgs[0].properties["KAFKA_TS_TYPE"] == "1"
    assert msgs[0].properties["KAFKA_ENVELOPE"].startswith("-1,")
    assert _all_paths(msgs) == [(k, v, h) for k, v, h in cases]
    assert record_from_message(decode_record(_raw(msgs[0]))).log_append_time


def test_small_records_keep_the_property_mapping() -> None:
    msg = message_from_record("T", 0, key=b"k" * 30_000, value=b"v", headers=(), timestamp=1, log_append_time=False)
    assert "KAFKA_ENVELOPE" not in msg.properties and msg.body == b"v"     # still fits: unchanged


def test_a_broken_envelope_reads_as_a_plain_value() -> None:
    """A RocketMQ producer may send any property: lengths the body cannot hold never break a fetch."""
    for spec in ("99,5", "x", "-5,0", "2,3"):
        msg = Message("T", 0, b"abcd", {"KAFKA_ENVELOPE": spec}, born_timestamp=3)
        rec = record_from_message(decode_record(_raw(msg)))
        assert rec.value == b"abcd" and rec.key is None
        assert [row[4] for row in kafka_rows([_raw(msg)])] == [b"abcd"]
