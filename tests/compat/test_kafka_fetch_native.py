"""The Kafka codec's native walker (``stored_records.walk_native`` with compat's ``FETCH_TABLE``),
its Python twin and the per-record reference (``kafka_rows``) read every stored record shape back
identically: Kafka records
(any key bytes incl. empty and null, any headers incl. duplicates, binary and null values, big ones in
the envelope), RocketMQ producers' messages (any properties) and arbitrary properties blobs."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rokka.compat import kafka_pieces as KP
from rokka.compat.kafka_records import kafka_rows, message_from_record
from rokka.core.model import Message
from rokka.core.storage.api import RecordRun
from rokka.core.storage.layout import encode_properties, encode_record
from rokka.gateway.kafka.codec import records as R
from rokka.gateway.kafka.codec import stored_records as S

if not S.NATIVE:
    pytest.skip("the native Fetch walker is not built (make test builds it)", allow_module_level=True)

opt_bytes = st.one_of(st.none(), st.binary(max_size=24))
text_bytes = st.text(max_size=12).map(lambda s: s.encode("utf-8"))
names = st.one_of(st.sampled_from(["traceparent", "content-type", "h1", "KEYS", "TAGS", "x\n", "q\"\\", "tab\t",
                                   "\x01ctl", "del\x7f", "KAFKA_HEADERS", "rocketmq.TAGS", "rocketmq.KEYS", "é",
                                   "\U0001f600", "\udcff"]), st.text(max_size=10))
values = st.one_of(st.none(), st.binary(max_size=16), text_bytes, st.sampled_from([b"", b"a\x01b", b"v v"]))
headers_st = st.lists(st.tuples(names, values), max_size=6)
keys = st.one_of(st.none(), st.binary(max_size=20), text_bytes, st.sampled_from([b"", b"k k", b"\xff\xfe", b"ok"]))
kafka_st = st.tuples(st.integers(-(2**40), 2**40), keys, opt_bytes, headers_st)
prop_names = st.one_of(st.sampled_from(["KEYS", "TAGS", "UNIQ_KEY", "CLUSTER", "KAFKA_KEY", "KAFKA_HEADERS",
                                        "KAFKA_NULL_VALUE", "KAFKA_TS_TYPE", "KAFKA_ENVELOPE", "KAFKA_CTRL", "a",
                                        "traceparent", "é"]),
                       st.text(st.characters(blacklist_characters="\x01\x02", blacklist_categories=("Cs",)),
                               min_size=1, max_size=8))
prop_values = st.one_of(st.sampled_from(["1", "0", "[]", "b", "bYQ==", "b!!", '[["h","dg=="]]', '[["h",null]]',
                                         '[[1,"dg=="]]', "[ ]", "-1,0", "0,2", "3,4", "x,y", "C:5:1"]),
                        st.text(st.characters(blacklist_characters="\x02", blacklist_categories=("Cs",)),
                                min_size=1, max_size=12))
rocketmq_st = st.tuples(st.integers(0, 2**41), st.dictionaries(prop_names, prop_values, max_size=6),
                        st.binary(max_size=30))


def _run(msgs: list[Message], raw_props: list[bytes | None] | None = None) -> tuple[RecordRun, list[bytes]]:
    recs, pos = [], 0
    for i, m in enumerate(msgs):
        props = raw_props[i] if raw_props is not None else None
        rec = encode_record(m, queue_offset=10 + i, commitlog_offset=pos, store_timestamp=99,
                            store_host=("127.0.0.1", 10911), props=props)
        recs.append(rec)
        pos += len(rec)
    return RecordRun(10, b"".join(recs), tuple(map(len, recs))), recs


def _rows(pieces: list[Any]) -> list[Any]:
    rows = []
    for p in pieces:
        if isinstance(p, KP.PlainPiece):
            raw = R.wrap_records(p.payload, base_offset=p.offset, last_offset_delta=p.count - 1, count=p.count,
                                 base_timestamp=p.first_timestamp, max_timestamp=p.max_timestamp)
            (batch,), _ = R.split_batches(raw)
            assert batch.crc_ok() and batch.header.max_timestamp == max(
                p.first_timestamp + r.timestamp_delta for r in batch.records())
            rows += [(p.offset + r.offset_delta, p.first_timestamp + r.timestamp_delta, False, r.key, r.value,
                      tuple((h.key, h.value) for h in r.headers)) for r in batch.records()]
        else:
            rows += p
    return rows


def _both(run: RecordRun) -> list[Any]:
    """kafka_pieces natively and by the twin, each from the same learned plain blobs: the same
    pieces, byte for byte; returns them."""
    saved = KP._PLAIN_PROPS
    try:
        native = KP.kafka_pieces(run, walker=S.walk_native)
        KP._PLAIN_PROPS = saved
        assert KP.kafka_pieces(run, walker=S.walk_py) == native
    finally:
        KP._PLAIN_PROPS = saved
    return native


def _kafka_msgs(recs: list[Any]) -> list[Message]:
    return [message_from_record("T", 0, key=k, value=v, headers=tuple(hs), timestamp=ts, log_append_time=False)
            for ts, k, v, hs in recs]


@settings(max_examples=300, deadline=None)
@given(recs=st.lists(kafka_st, min_size=1, max_size=10))
def test_kafka_records_read_back_exactly(recs: list[Any]) -> None:
    run, raws = _run(_kafka_msgs(recs))
    pieces = _both(run)
    got = _rows(pieces)
    assert got == kafka_rows(raws)
    want = [(10 + i, ts, False, k, v, tuple((n.encode("utf-8", "surrogateescape").decode("utf-8", "surrogateescape"),
                                              hv) for n, hv in hs)) for i, (ts, k, v, hs) in enumerate(recs)]
    assert got == want


@settings(max_examples=40, deadline=None)
@given(key=st.one_of(st.none(), st.binary(min_size=0, max_size=40_000)), n=st.integers(0, 3),
       value=opt_bytes, ts=st.integers(0, 2**41))
def test_envelope_records_read_back_exactly(key: bytes | None, n: int, value: bytes | None, ts: int) -> None:
    headers = tuple((f"h{i}", b"x" * 12_000) for i in range(n)) + (("h", None),)
    if key is not None and len(key) < 33_000:
        key = key + b"\x00" * (33_000 - len(key))       # past the properties budget: the envelope
    run, raws = _run(_kafka_msgs([(ts, key, value, headers), (ts + 1, b"k", b"v", ())]))
    pieces = _both(run)
    assert len(pieces) == 1 and isinstance(pieces[0], KP.PlainPiece)    # mapped natively
    assert _rows(pieces) == kafka_rows(raws)
    assert _rows(pieces)[0][3:] == (key, value, headers)


@settings(max_examples=300, deadline=None)
@given(recs=st.lists(rocketmq_st, min_size=1, max_size=8))
def test_rocketmq_messages_read_back_as_the_python_mapping(recs: list[Any]) -> None:
    msgs = [Message("T", 0, body, props, born_timestamp=ts) for ts, props, body in recs]
    run, raws = _run(msgs)
    try:
        expect = kafka_rows(raws)
    except ValueError:          # a KAFKA_HEADERS value that is not JSON: the Python rules reject it
        return
    assert _rows(_both(run)) == expect


blob_bytes = st.one_of(
    st.binary(max_size=60),
    st.lists(st.sampled_from([b"KEYS\x01k", b"KAFKA_KEY\x01bAA==", b"KAFKA_KEY\x01\xc3\xa9AA==",
                              b"KAFKA_HEADERS\x01[]", b'KAFKA_HEADERS\x01[["a","YQ=="],["a",null]]',
                              b'KAFKA_HEADERS\x01[["\\ud83d\\ude00",""]]',
                              b'KAFKA_HEADERS\x01[["\\udc80","YR=="]]', b'KAFKA_HEADERS\x01[["\\ud800","YQ=="]]',
                              b'KAFKA_HEADERS\x01[["a","YQ="]]', b"KAFKA_NULL_VALUE\x011", b"KAFKA_ENVELOPE\x01-1,2",
                              b"KAFKA_ENVELOPE\x010,0", b"KAFKA_ENVELOPE\x011,200", b"KAFKA_TS_TYPE\x011", b"TAGS\x01a",
                              b"TAGS\x01b", b"", b"x", b"\x01", b"a\x01b\x01c", b"\xff\x01v"]),
             max_size=5).map(b"\x02".join),
)


@settings(max_examples=400, deadline=None)
@given(blobs=st.lists(blob_bytes, min_size=1, max_size=6), body=st.sampled_from([b"", b"k[]v", b'["a","YQ=="]]v']))
def test_any_properties_blob_walks_alike(blobs: list[bytes], body: bytes) -> None:
    """Native and twin stop at the same record and encode the same bytes; the mapped records read as
    the per-record reference does."""
    for blob in blobs:
        data, start = _run([Message("T", 0, body, {}, born_timestamp=7)], [blob])[0].data, 0
        assert S.walk_native is not None
        native = S.walk_native(data, start, 1, (), KP._FETCH_LAYOUT, KP.FETCH_TABLE)
        assert native == S.walk_py(data, start, 1, (), KP._FETCH_LAYOUT, KP.FETCH_TABLE)
        if native[1]:
            run = RecordRun(10, data, (len(data),))
            try:
                expect = kafka_rows([data])
            except ValueError:
                continue
            assert _rows(_both(run)) == expect


def test_every_benchmark_shape_is_one_native_piece() -> None:
    """Plain, text key, binary key, key + 2 headers, 10 headers, null values and a RocketMQ producer's
    messages: the whole run is mapped by the walker (was: the per-record Python path)."""
    shapes = [
        (None, ()), (b"order-1", ()), (b"\xff\x00\x01", ()),
        (b"order-2", (("traceparent", b"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"),
                      ("content-type", b"application/json"))),
        (None, tuple((f"h{i}", f"value-{i}".encode()) for i in range(10))),
    ]
    msgs = _kafka_msgs([(1000 + i, k, b"v" * 100, hs) for i, (k, hs) in enumerate(shapes)])
    msgs.append(message_from_record("T", 0, key=b"n", value=None, headers=(), timestamp=5, log_append_time=False))
    msgs.append(Message("T", 0, b"body", {"TAGS": "a", "UNIQ_KEY": "U1", "KEYS": "k1 k2", "user": "x"},
                        born_timestamp=9))
    run, raws = _run(msgs)
    pieces = _both(run)
    assert len(pieces) == 1 and isinstance(pieces[0], KP.PlainPiece) and pieces[0].count == len(msgs)
    assert _rows(pieces) == kafka_rows(raws)


def test_walker_leaves_what_it_does_not_map() -> None:
    """LogAppendTime, a duplicated RocketMQ property and non-canonical JSON go to the per-record path,
    and the walk resumes after them."""
    lat = message_from_record("T", 0, key=None, value=b"v", headers=(), timestamp=5, log_append_time=True)
    plain = message_from_record("T", 0, key=None, value=b"v", headers=(), timestamp=5, log_append_time=False)
    spaced = b'KAFKA_HEADERS\x01[["h", "dg=="]]'
    blobs = [None, encode_properties(lat.properties), b"TAGS\x01a\x02TAGS\x01b", spaced, None]
    run, raws = _run([plain, lat, plain, plain, plain], blobs)
    pieces = _both(run)
    assert [type(p) for p in pieces] == [KP.PlainPiece, list, KP.PlainPiece]
    assert len(pieces[1]) == 3
    assert _rows(pieces) == kafka_rows(raws)


@pytest.mark.parametrize("json", [b'[["a\tb","dg=="]]', b'[["a\x1fb",null]]', b'[["\\u00e9","dg=="]]',
                                  b'[["a\\tb","dg=="],["h","eA=="]]', b'[["plain","dg=="],["x\x7f","eA=="]]',
                                  b'[["rocketmq.KEYS","aw=="]]', b'[["a\\"b",null]]', b'[["ab\\', b'[["ab',
                                  '[["\u00e9t\u00e9","dg=="]]'.encode()])
def test_hand_written_headers_json_walks_alike(json: bytes) -> None:
    """Headers JSON a RocketMQ producer wrote itself (raw control characters, escapes, non-ASCII,
    cut short), as the headers property and in an envelope: native and twin agree, record by record."""
    msg = Message("T", 0, b"body", {}, born_timestamp=7)
    envelope = dataclasses.replace(msg, body=b"key" + json + b"value")
    run, _ = _run([msg, msg, envelope], [b"KEYS\x01k\x02KAFKA_HEADERS\x01" + json, b"KAFKA_HEADERS\x01" + json,
                                         b"KAFKA_ENVELOPE\x013,%d" % len(json)])
    assert S.walk_native is not None
    for start, n in ((0, 3), (run.sizes[0], 2), (run.sizes[0] + run.sizes[1], 1)):
        native = S.walk_native(run.data, start, n, (), KP._FETCH_LAYOUT, KP.FETCH_TABLE)
        assert native == S.walk_py(run.data, start, n, (), KP._FETCH_LAYOUT, KP.FETCH_TABLE)


@settings(max_examples=150, deadline=None)
@given(pool=st.lists(headers_st, min_size=1, max_size=3), picks=st.lists(st.tuples(st.integers(0, 2), keys),
                                                                           min_size=1, max_size=12))
def test_repeated_headers_read_back_exactly(pool: list[Any], picks: list[Any]) -> None:
    """Records repeating a few header lists (the walker reuses the last list's encoding)."""
    recs = [(1000 + i, k, b"v%d" % i, pool[j % len(pool)]) for i, (j, k) in enumerate(picks)]
    run, raws = _run(_kafka_msgs(recs))
    assert _rows(_both(run)) == kafka_rows(raws)
