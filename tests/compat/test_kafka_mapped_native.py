"""The native Kafka -> CommitLog mapping (``_crecords.mapped_spans`` + ``encode_spans`` with packed
properties) writes the same CommitLog bytes as the Python mapping (``messages_from_batch`` +
``encode_record``) for arbitrary keys, values, headers and timestamps."""

from __future__ import annotations

import base64
import dataclasses
import struct
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rokka.compat import kafka_records as K
from rokka.core.model import Message
from rokka.core.storage import layout
from rokka.core.storage.api import StoreConfig
from rokka.core.storage.engine import DiskStore
from rokka.core.storage.memory import MemoryStore
from rokka.gateway.kafka.codec import records as R

_crecords = pytest.importorskip("rokka.gateway.kafka.codec._crecords",
                                reason="the native Kafka record helper is not built (make test builds it)")
if layout._cstore is None:
    pytest.skip("the native store encoder is not built", allow_module_level=True)

TOPIC, QUEUE = "mapped", 3
STORE_TS, STORE_HOST = 1_700_000_000_123, ("10.0.0.7", 10911)

opt_bytes = st.one_of(st.none(), st.binary(max_size=24))
text_bytes = st.text(max_size=12).map(lambda s: s.encode("utf-8"))
# names: plain identifiers (copied to properties), system names, duplicates, JSON escapes, "\n" endings
names = st.one_of(st.sampled_from(["traceparent", "content-type", "h1", "KEYS", "TAGS", "a.b_c-d", "x\n", "q\"\\",
                                   "tab\t", "\x01ctl", "del\x7f", "KAFKA_HEADERS", "rocketmq.TAGS", "é"]),
                  st.text(max_size=10))
# long values too: the text test reads eight bytes at a time, so a separator, a NUL or a non-ASCII
# character lands at every position of a word and in the tail
long_text = st.builds(lambda pre, mid, post: pre + mid + post, st.text("abcdefgh-0123", max_size=24).map(str.encode),
                      st.sampled_from([b"", b"\x00", b"\x01", b"\x02", b"\x03", "é".encode(), b"\xff", b"\x7f"]),
                      st.text("xyz", max_size=9).map(str.encode))
values = st.one_of(st.none(), st.binary(max_size=16), text_bytes, long_text, st.binary(min_size=8, max_size=40),
                   st.sampled_from([b"", b"a\x01b", b"v v"]))
headers_st = st.lists(st.tuples(names, values), max_size=6)
# many headers: repeated names (the first text value of a name is copied) among distinct ones
many_headers_st = st.lists(st.tuples(st.one_of(names, st.sampled_from([f"h{i}" for i in range(12)])), values),
                           min_size=6, max_size=16)
keys = st.one_of(st.none(), st.binary(max_size=20), text_bytes, st.sampled_from([b"", b"k k", b"\xff\xfe", b"ok"]))
record_st = st.tuples(st.integers(-(2**40), 2**40), keys, opt_bytes, headers_st)


def _payload(recs: list) -> tuple[bytes, R.BatchHeader]:  # type: ignore[type-arg]
    rows = [R.Record(i, ts, k, v, tuple(R.Header(hk, hv) for hk, hv in hs)) for i, (ts, k, v, hs) in
            enumerate(recs)]
    raw = R.encode_batch(rows, base_offset=0, base_timestamp=1_600_000_000_000)
    (batch,), _ = R.split_batches(raw)
    return bytes(batch.payload_view(1 << 20)), batch.header


def _python_records(msgs: list[Message]) -> bytes:
    out, pos = [], 1000
    for i, m in enumerate(msgs):
        rec = layout.encode_record(m, queue_offset=50 + i, commitlog_offset=pos, store_timestamp=STORE_TS,
                                   store_host=STORE_HOST)
        out.append(rec)
        pos += len(rec)
    return b"".join(out)


def _declined(msgs: list[Message], recs: list) -> bool:  # type: ignore[type-arg]
    """Would the native mapper leave this batch to the Python rules (module doc of produce.py)?"""
    special = any(n.startswith("rocketmq.") or not n.isascii() for _, _, _, hs in recs for n, _ in hs)
    envelope = any(K.PROP_KAFKA_ENVELOPE in m.properties for m in msgs)
    mixed = len({K.PROP_KEYS in m.properties for m in msgs}) > 1
    return special or envelope or mixed


@settings(max_examples=300, deadline=None)
@given(recs=st.lists(record_st, min_size=1, max_size=10))
def test_native_mapping_writes_the_python_bytes(recs: list) -> None:  # type: ignore[type-arg]
    _check(recs)


# every record keyed (binary, text, spaced) or every key null: batches the native path takes
keyed_st = st.tuples(st.integers(-(2**40), 2**40), st.one_of(st.binary(min_size=1, max_size=20),
                                                             text_bytes.filter(bool)), opt_bytes, headers_st)
unkeyed_st = st.tuples(st.integers(-(2**40), 2**40), st.none(), opt_bytes, headers_st)


@settings(max_examples=300, deadline=None)
@given(recs=st.one_of(st.lists(keyed_st, min_size=1, max_size=10), st.lists(unkeyed_st, min_size=1, max_size=10)))
def test_native_mapping_of_uniformly_keyed_batches(recs: list) -> None:  # type: ignore[type-arg]
    _check(recs)


@settings(max_examples=200, deadline=None)
@given(pool=st.lists(headers_st, min_size=1, max_size=3), picks=st.lists(st.integers(0, 2), min_size=1, max_size=12),
       keyed=st.booleans())
def test_native_mapping_of_repeated_header_lists(pool: list, picks: list[int], keyed: bool) -> None:  # type: ignore[type-arg]
    # consecutive records with the same header bytes reuse the previous record's mapped headers
    _check([(i, b"k%d" % i if keyed else None, b"v", pool[p % len(pool)]) for i, p in enumerate(picks)])


@settings(max_examples=200, deadline=None)
@given(recs=st.lists(st.tuples(st.integers(0, 2**40), st.one_of(st.none(), text_bytes.filter(bool)), opt_bytes,
                               many_headers_st), min_size=1, max_size=4))
def test_native_mapping_of_many_headers(recs: list) -> None:  # type: ignore[type-arg]
    _check(recs)


def test_text_values_at_every_position_of_a_word() -> None:
    # a separator, NUL, non-ASCII or DEL byte at each position of the first three words and their tails
    odd = [b"\x00", b"\x01", b"\x02", b"\x03", b"\x1f", b"\x7f", "é".encode(), b"\xff", b"\xc3"]
    values = [b"a" * k + o + b"b" * m for o in odd for k in range(18) for m in range(10)]
    for i in range(0, len(values), 40):
        _check([(n, b"key", b"v", [("h", v), ("t", v[::-1])]) for n, v in enumerate(values[i:i + 40])])


def test_names_alike_but_not_the_same_are_each_copied() -> None:
    # names of one length whose first and last bytes agree or differ by 64 ("0" / "p"), and repeats
    hs = [("0k", b"v1"), ("pk", b"v2"), ("ak", b"v3"), ("Ak", b"v4"), ("0k", b"v5"), ("a-k", b"v6"), ("a_k", b"v7"),
          ("pk", b"v8"), ("h0", b"x"), ("h1", b"y"), ("h0", b"z")]
    _check([(0, b"key", b"v", hs), (1, b"key", b"v", hs[::-1])])


def _check(recs: list) -> None:  # type: ignore[type-arg]
    payload, h = _payload(recs)
    msgs = K.messages_from_batch(TOPIC, QUEUE, R.read_record_fields(payload, h.record_count),
                                 base_timestamp=h.base_timestamp, log_append_time=False, now=0)
    mapped = _crecords.mapped_spans(payload, h.record_count, h.base_timestamp, K.MAPPING_SYSTEM_NAMES,
                                    K.MAPPING_BUDGET)
    if mapped is None:
        assert _declined(msgs, recs)
        return
    assert not _declined(msgs, recs)
    run = K.mapped_span_run(TOPIC, QUEUE, payload, mapped)
    # the same Messages, property order included
    assert [(m.body, list(m.properties.items()), m.born_timestamp) for m in run.messages()] == \
        [(m.body, list(m.properties.items()), m.born_timestamp) for m in msgs]
    assert run.record_props is not None
    assert run.record_props.longest == max(map(len, run.record_props))
    assert run.bodies.longest == max(map(len, run.bodies))     # type: ignore[attr-defined]
    index = [m.properties.get(K.PROP_KEYS) for m in msgs]
    assert (None if run.keys is None else list(run.keys)) == (None if index[0] is None else index)
    expected = _python_records(msgs)
    for native in (True, False):
        data, _ = layout.encode_uniform(TOPIC, QUEUE, run.bodies, run.born_timestamps, b"", flag=0, sysflag=0,
                                        born_host=run.born_host, store_timestamp=STORE_TS, store_host=STORE_HOST,
                                        queue_offset=50, commitlog_offset=1000, tags_code=0,
                                        prefixes=run.record_props, native=native)
        assert data == expected


def test_big_headers_are_left_to_the_envelope() -> None:
    recs = [(0, b"k", b"v", [("big", b"x" * 40_000)])]
    payload, h = _payload(recs)
    assert _crecords.mapped_spans(payload, 1, h.base_timestamp, K.MAPPING_SYSTEM_NAMES, K.MAPPING_BUDGET) is None


def test_malformed_payload_is_declined() -> None:
    payload, h = _payload([(0, b"\xff", b"v", [("traceparent", b"00-abc")])])
    for cut in range(len(payload)):
        assert _crecords.mapped_spans(payload[:cut], 1, h.base_timestamp, K.MAPPING_SYSTEM_NAMES,
                                      K.MAPPING_BUDGET) is None


def _stored(store: object, topic: str, queue: int = QUEUE) -> list[tuple[object, ...]]:
    res = store.get_messages(topic, queue, 0, 10_000, 1 << 30)  # type: ignore[attr-defined]
    out = []
    for raw in res.records:
        m = layout.decode_record(raw)
        out.append((m.queue_offset, m.commitlog_offset, m.body, list(m.properties.items()), m.born_timestamp,
                    m.body_crc))
    return out


def _mapped_and_stores(tmp_path: Path, engine: str, recs: list[Any]) -> tuple[bytes, Any, list[Message], list[Any]]:
    """``recs`` as a batch payload, its native mapping (asserted not declined), the Python mapping's
    messages, and two open stores of ``engine`` (small segments): ``[run, ref]``."""
    payload, h = _payload(recs)
    mapped = _crecords.mapped_spans(payload, h.record_count, h.base_timestamp, K.MAPPING_SYSTEM_NAMES,
                                    K.MAPPING_BUDGET)
    assert mapped is not None
    msgs = K.messages_from_batch(TOPIC, QUEUE, R.read_record_fields(payload, h.record_count),
                                 base_timestamp=h.base_timestamp, log_append_time=False, now=0)
    stores = []
    for name in ("run", "ref"):
        cfg = StoreConfig(root_dir=tmp_path / name, commitlog_file_size=64 * 1024, consumequeue_file_size=20 * 1000)
        stores.append((DiskStore(cfg) if engine == "disk" else MemoryStore(cfg)).open())
    return payload, mapped, msgs, stores


@pytest.mark.parametrize("engine", ["disk", "memory"])
def test_store_run_equals_python_messages(tmp_path: Path, engine: str) -> None:
    """A mapped run through ``put_uniform`` (one pass) stores what ``put_messages`` of the Python mapping
    stores; its binary and text keys are indexed (queryable) as the Python path indexes them."""
    recs = [(i, k, v, hs) for i, (k, v, hs) in enumerate([
        (b"\xff\x00bin", b"v1", [("traceparent", b"00-4bf9-01"), ("content-type", b"application/json")]),
        (b"order 7", None, [("h", None), ("h", b"x"), ("h", b"y")]),
        (b"plain-key", b"", [("KEYS", b"not-copied"), ("bin", b"\xc3\x28")]),
    ])]
    payload, mapped, msgs, stores = _mapped_and_stores(tmp_path, engine, recs)
    run_store, ref_store = stores
    try:
        for s in stores:
            s.put_messages([Message(TOPIC, QUEUE, b"first")])     # the run starts mid-log
        assert run_store.put_uniform(K.mapped_span_run(TOPIC, QUEUE, payload, mapped)).ok
        assert ref_store.put_messages(msgs).ok
        assert _stored(run_store, TOPIC) == _stored(ref_store, TOPIC)
        b64 = base64.b64encode(b"\xff\x00bin").decode()
        for s in stores:
            if engine == "disk":
                assert len(s.query_by_key(TOPIC, b64, 10, 0, 1 << 62)) == 1
                assert len(s.query_by_key(TOPIC, "plain-key", 10, 0, 1 << 62)) == 1
    finally:
        for s in stores:
            s.close()


@pytest.mark.parametrize("key_kind", ["text", "binary"])
def test_envelope_boundary_is_the_python_one(key_kind: str) -> None:
    """Around the properties budget the native mapper declines exactly the records the Python mapping
    puts in an envelope, and maps the others to the same bytes."""
    # "KEYS 0x01 key 0x02 KAFKA_HEADERS 0x01 []" (text) or "KAFKA_KEY 0x01 b<b64> 0x02 KEYS 0x01 <b64> ..." (binary)
    fixed = len("KEYS\x01\x02KAFKA_HEADERS\x01[]") + 1
    base = K.MAPPING_BUDGET - fixed if key_kind == "text" else (K.MAPPING_BUDGET - 40) * 3 // 8
    seen = set()
    for n in range(base - 6, base + 6):
        key = b"k" * n if key_kind == "text" else b"\xff" * n
        payload, h = _payload([(0, key, b"v", [])])
        msgs = K.messages_from_batch(TOPIC, QUEUE, R.read_record_fields(payload, 1), base_timestamp=h.base_timestamp,
                                     log_append_time=False, now=0)
        mapped = _crecords.mapped_spans(payload, 1, h.base_timestamp, K.MAPPING_SYSTEM_NAMES, K.MAPPING_BUDGET)
        enveloped = K.PROP_KAFKA_ENVELOPE in msgs[0].properties
        seen.add(enveloped)
        assert (mapped is None) == enveloped, n
        if mapped is not None:
            run = K.mapped_span_run(TOPIC, QUEUE, payload, mapped)
            assert [list(m.properties.items()) for m in run.messages()] == [list(msgs[0].properties.items())]
    assert seen == {True, False}    # the range crosses the boundary


def test_timestamp_varint_past_64_bits_is_declined() -> None:
    # a record whose timestamp delta varint holds more than 64 bits is malformed for the Python reader
    # (INVALID_RECORD); the native walker must not read it as some other number
    body = b"\x00" + b"\xff" * 9 + b"\x7f" + b"\x00" + b"\x01" + b"\x02v" + b"\x00"
    payload = bytes([len(body) << 1]) + body
    with pytest.raises(R.DecodeError):
        R.read_record_fields(payload, 1)
    assert _crecords.mapped_spans(payload, 1, 0, K.MAPPING_SYSTEM_NAMES, K.MAPPING_BUDGET) is None


@pytest.mark.parametrize("engine", ["disk", "memory"])
def test_store_run_across_segment_ends(tmp_path: Path, engine: str) -> None:
    """Runs that do not fit the current CommitLog segment take the per-message path
    (``UniformBatch.messages``, each record's own properties decoded back): same records as the
    Python mapping's, keys still indexed."""
    recs = [(i, b"\xfe%d" % i, b"v" * 300, [("traceparent", b"00-%d-01" % i), ("h", b"x")]) for i in range(150)]
    payload, mapped, msgs, stores = _mapped_and_stores(tmp_path, engine, recs)
    run_store, ref_store = stores
    try:
        for _ in range(2):      # twice: the second run starts near a segment end
            assert run_store.put_uniform(K.mapped_span_run(TOPIC, QUEUE, payload, mapped)).ok
            assert ref_store.put_messages([dataclasses.replace(m, properties=dict(m.properties)) for m in msgs]).ok
        assert len(_stored(run_store, TOPIC)) == 2 * len(recs)
        assert _stored(run_store, TOPIC) == _stored(ref_store, TOPIC)
        if engine == "disk":
            key = base64.b64encode(b"\xfe7").decode()
            assert len(run_store.query_by_key(TOPIC, key, 10, 0, 1 << 62)) == 2
    finally:
        for s in stores:
            s.close()


@settings(max_examples=100, deadline=None)
@given(units=st.lists(st.tuples(st.integers(0, 2**63 - 1), st.integers(-(2**31), 2**31 - 1),
                                st.integers(-(2**63), 2**63 - 1)), max_size=50))
def test_unit_offsets_native_and_python_agree(units: list[tuple[int, int, int]]) -> None:
    # the index's phys list of a run (dispatch_run): the CommitLog offset of each ConsumeQueue unit
    raw = b"".join(struct.pack(">qiq", *u) for u in units)
    assert layout.unit_offsets(raw) == layout.unit_offsets(raw, native=False) == [u[0] for u in units]
    for native in (True, False):
        with pytest.raises(ValueError):
            layout.unit_offsets(raw + b"\x00", native=native)


@settings(max_examples=120, deadline=None)
@given(recs=st.one_of(st.lists(keyed_st, min_size=1, max_size=8), st.lists(unkeyed_st, min_size=1, max_size=8),
                      st.lists(st.tuples(st.integers(0, 2**40), st.none(), opt_bytes, st.just([])), min_size=1,
                               max_size=5)),
       wait=st.booleans())
def test_a_transaction_half_run_stores_the_python_halves(tmp_path_factory: pytest.TempPathFactory, recs: list,  # type: ignore[type-arg]
                                                         wait: bool) -> None:
    """A transactional Kafka batch taken natively (``append_halves`` of a run: ``Broker.append_uniform``
    moves it to the half topic as a whole) stores the bytes, ConsumeQueue units and index keys that
    the Python rows store (each message marked and moved by ``Broker.prepare``)."""
    from rokka.core.broker import Broker
    from rokka.core.config import BrokerConfig
    from rokka.core.model import PROP_TRAN_MSG, PROP_WAIT, TOPIC_TRANS_HALF
    payload, h = _payload(recs)
    mapped = _crecords.mapped_spans(payload, h.record_count, h.base_timestamp, K.MAPPING_SYSTEM_NAMES,
                                    K.MAPPING_BUDGET)
    msgs = K.messages_from_batch(TOPIC, QUEUE, R.read_record_fields(payload, h.record_count),
                                 base_timestamp=h.base_timestamp, log_append_time=False, now=0)
    if mapped is None:
        assert _declined(msgs, recs)
        return
    spans = R.plain_spans(payload, h)      # keyless, headerless batches take the plain run
    run = (K.plain_span_run(TOPIC, QUEUE, payload, *spans) if spans is not None else None) \
        or K.mapped_span_run(TOPIC, QUEUE, payload, mapped)
    half = {PROP_TRAN_MSG: "true", "KAFKA_TXN": "7:1:0", **({PROP_WAIT: "false"} if wait else {})}
    root = tmp_path_factory.mktemp("halves")
    native, python = (Broker(BrokerConfig(store_path_root_dir=str(root / n))) for n in ("native", "python"))
    try:
        with mock.patch("time.time", return_value=1_700_000_000.5):
            for b in (native, python):
                b.append([Message(TOPIC, QUEUE, b"first")], stamp_cluster=False)    # the halves start mid-log
            with mock.patch.object(native.store, "put_messages", side_effect=AssertionError("not one run")):
                got = native.append_uniform(dataclasses.replace(run, properties={**run.properties, **half}),
                                            stamp_cluster=False)
            want = python.append([dataclasses.replace(m, properties={**m.properties, **half}) for m in msgs],
                                 stamp_cluster=False)
        assert got.ok and want.ok
        assert [tuple(a) for a in got.appended] == [tuple(a) for a in want.appended]
        assert _stored(native.store, TOPIC_TRANS_HALF, 0) == _stored(python.store, TOPIC_TRANS_HALF, 0)
        stored = _stored(native.store, TOPIC_TRANS_HALF, 0)
        for m, (*_, props, _, _) in zip(msgs, stored, strict=True):
            tail = [(k, v) for k, v in props if k not in m.properties]
            assert tail == [("TRAN_MSG", "true"), ("KAFKA_TXN", "7:1:0"), ("REAL_TOPIC", TOPIC),
                            ("REAL_QID", str(QUEUE))] + ([("WAIT", "false")] if wait else [])
        assert native.store.cq_units(TOPIC_TRANS_HALF, 0, 0, 100) == python.store.cq_units(TOPIC_TRANS_HALF, 0, 0, 100)
        for key in {k for m in msgs for k in m.properties.get(K.PROP_KEYS, "").split()}:
            assert list(native.store.query_by_key(TOPIC_TRANS_HALF, key, 100, 0, 1 << 62)) \
                == list(python.store.query_by_key(TOPIC_TRANS_HALF, key, 100, 0, 1 << 62))
    finally:
        native.close()
        python.close()
