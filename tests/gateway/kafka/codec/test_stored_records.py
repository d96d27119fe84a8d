"""The codec's stored-records walker (``stored_records``): native and twin agree byte for byte on
arbitrary bytes and on records with arbitrary properties blobs, and what they encode is valid Kafka
v2 records (the codec's own batch parser reads them, CRC included)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rokka.compat.kafka_pieces import _FETCH_LAYOUT
from rokka.compat.kafka_records import FETCH_TABLE
from rokka.core.model import Message
from rokka.core.storage.layout import encode_record
from rokka.gateway.kafka.codec import records as R
from rokka.gateway.kafka.codec import stored_records as S

if not S.NATIVE:
    pytest.skip("the native walker is not built (make test builds it)", allow_module_level=True)

# property blobs from pieces that hit every branch: names the table knows, JSON, base64, separators
piece = st.sampled_from([b"KEYS", b"KAFKA_KEY", b"KAFKA_HEADERS", b"KAFKA_NULL_VALUE", b"KAFKA_ENVELOPE", b"TAGS",
                         b"KAFKA_TS_TYPE", b"KAFKA_CTRL", b"\x01", b"\x02", b"1", b"b", b"YQ==", b"=", b"[", b"]",
                         b'"', b",", b"null", b"\\u00e9", b"\\ud83d\\ude00", b"\\udcff", b"\xc3\xa9", b"\xff", b"-1",
                         b"0", b"h", b'[["h","YQ=="]]', b"[]"])
blob = st.lists(piece, max_size=14).map(b"".join)
body = st.sampled_from([b"", b"v", b'k[["h","YQ=="]]v', b"\x00" * 40])


def _records(blobs: list[bytes], bodies: list[bytes]) -> bytes:
    out, pos = [], 0
    for i, (props, b) in enumerate(zip(blobs, bodies, strict=True)):
        rec = encode_record(Message("T", 0, b, {}, born_timestamp=1000 + 7 * i), queue_offset=i,
                            commitlog_offset=pos, store_timestamp=5, store_host=("127.0.0.1", 10911), props=props)
        out.append(rec)
        pos += len(rec)
    return b"".join(out)


def _walk_both(data: bytes | memoryview, count: int, accepted: tuple[bytes, ...] = ()) -> Any:
    assert S.walk_native is not None
    got = S.walk_native(data, 0, count, accepted, _FETCH_LAYOUT, FETCH_TABLE)
    assert S.walk_py(data, 0, count, accepted, _FETCH_LAYOUT, FETCH_TABLE) == got
    return got


@settings(max_examples=500, deadline=None)
@given(blobs=st.lists(blob, min_size=1, max_size=5), bodies=st.lists(body, min_size=5, max_size=5))
def test_walkers_agree_on_any_properties(blobs: list[bytes], bodies: list[bytes]) -> None:
    data = _records(blobs, bodies[:len(blobs)])
    payload, n, used, first_ts, max_ts = _walk_both(memoryview(data), len(blobs))
    if n:       # valid Kafka records: the codec reads them back, CRC and all
        raw = R.wrap_records(payload, base_offset=0, last_offset_delta=n - 1, count=n, base_timestamp=first_ts,
                             max_timestamp=max_ts)
        (batch,), rest = R.split_batches(raw)
        assert not rest and batch.crc_ok() and len(list(batch.records())) == n


@settings(max_examples=300, deadline=None)
@given(data=st.binary(max_size=400), count=st.integers(0, 6))
def test_walkers_agree_on_garbage(data: bytes, count: int) -> None:
    _walk_both(data, count, (b"",))


def test_each_mapped_form() -> None:
    """One record of each form the walker maps, read back through the codec."""
    blobs = [b"KAFKA_HEADERS\x01[]", b"KEYS\x01k1\x02KAFKA_HEADERS\x01[]", b"KAFKA_KEY\x01b/w==\x02KAFKA_HEADERS\x01[]",
             b'KAFKA_HEADERS\x01[["a","YQ=="],["a",null],["\\u00e9\\udcff",""]]', b"TAGS\x01t\x02user\x01u",
             b"KAFKA_NULL_VALUE\x011\x02KAFKA_HEADERS\x01[]", b"KAFKA_ENVELOPE\x012,12", b""]
    bodies = [b"v"] * 7 + [b"bare"]
    bodies[6] = b'k1[["h",null]]value'
    payload, n, _, first_ts, max_ts = _walk_both(_records(blobs, bodies), len(blobs))
    assert n == len(blobs)
    raw = R.wrap_records(payload, base_offset=0, last_offset_delta=n - 1, count=n, base_timestamp=first_ts,
                         max_timestamp=max_ts)
    (batch,), _ = R.split_batches(raw)
    got = [(r.key, r.value, tuple((h.key, h.value) for h in r.headers)) for r in batch.records()]
    assert got == [
        (None, b"v", ()), (b"k1", b"v", ()), (b"\xff", b"v", ()),
        (None, b"v", (("a", b"a"), ("a", None), ("é\udcff", b""))),
        (None, b"v", (("rocketmq.TAGS", b"t"), ("user", b"u"))),
        (None, None, ()), (b"k1", b"value", (("h", None),)), (None, b"bare", ()),
    ]
    assert [r.timestamp_delta for r in batch.records()] == [7 * i for i in range(n)]


@pytest.mark.parametrize("props", [b"KAFKA_TS_TYPE\x011", b"KAFKA_CTRL\x01C:1:0", b"TAGS\x01a\x02TAGS\x01b",
                                   b"KAFKA_HEADERS\x01[ ]", b"KAFKA_KEY\x01bYQ=", b"a\x01", b"\xff\x01v",
                                   b'KEYS\x01k\x02KAFKA_HEADERS\x01[["rocketmq.KEYS","eA=="]]'])
def test_walker_stops_at_what_it_leaves_to_the_caller(props: bytes) -> None:
    data = _records([b"KAFKA_HEADERS\x01[]", props], [b"v", b"v"])
    assert _walk_both(data, 2)[1] == 1
