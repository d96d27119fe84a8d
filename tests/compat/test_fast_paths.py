"""The Kafka hot-path fast paths agree with the reference code paths on arbitrary input."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from rokka.compat.kafka_records import FETCH_TABLE, kafka_rows, message_from_record, record_from_message
from rokka.core.model import COMPRESSED_FLAG, Message
from rokka.core.storage.layout import decode_record, encode_record
from rokka.gateway.kafka.codec import records as R
from rokka.gateway.kafka.codec import stored_records as S

opt_bytes = st.one_of(st.none(), st.binary(max_size=40))
headers_st = st.lists(st.tuples(st.text(max_size=8), opt_bytes), max_size=4)
record_st = st.tuples(st.integers(0, 1000), st.integers(-(2**40), 2**40), opt_bytes, opt_bytes, headers_st)


@settings(max_examples=150)
@given(recs=st.lists(record_st, min_size=1, max_size=12), codec=st.sampled_from([R.NONE, R.GZIP]))
def test_record_fields_match_records(recs: list, codec: int) -> None:  # type: ignore[type-arg]
    rows = [R.Record(i, ts, k, v, tuple(R.Header(hk, hv) for hk, hv in hs)) for i, (_, ts, k, v, hs) in
            enumerate(recs)]
    raw = R.encode_batch(rows, base_offset=0, partition_leader_epoch=-1, base_timestamp=0, max_timestamp=0,
                         compression=codec)
    (batch,), _ = R.split_batches(raw)
    full = batch.records()
    fast = batch.record_fields()
    assert [(f[1], f[2], f[3], f[4], tuple((h[0], h[1]) for h in f[5])) for f in fast] == \
        [(r.timestamp_delta, r.offset_delta, r.key, r.value, tuple((h.key, h.value) for h in r.headers))
         for r in full]


@settings(max_examples=150)
@given(recs=st.lists(record_st, min_size=1, max_size=12), lat=st.booleans())
def test_encode_rows_batch_matches_encode_batch(recs: list, lat: bool) -> None:  # type: ignore[type-arg]
    base_off = recs[0][0]
    rows = [(base_off + i, ts, None, k, v, tuple(hs)) for i, (_, ts, k, v, hs) in enumerate(recs)]
    attrs = R.TIMESTAMP_TYPE_BIT if lat else 0
    fast = R.encode_rows_batch(rows, partition_leader_epoch=0, attributes=attrs)
    ref = R.encode_batch([R.Record(o - base_off, ts - rows[0][1], k, v, tuple(R.Header(a, b) for a, b in hs))
                          for o, ts, _, k, v, hs in rows],
                         base_offset=base_off, partition_leader_epoch=0, base_timestamp=rows[0][1],
                         max_timestamp=max(r[1] for r in rows), attributes=attrs)
    assert fast == ref


props_st = st.dictionaries(st.sampled_from(["TAGS", "KEYS", "UNIQ_KEY", "a", "b", "KAFKA_TS_TYPE"]),
                           st.text(alphabet=st.characters(blacklist_characters="\x01\x02",
                                                          blacklist_categories=("Cs",)),  # str -> UTF-8
                                   min_size=1, max_size=10), max_size=5)


@settings(max_examples=200)
@given(kafka=st.booleans(), key=opt_bytes, value=opt_bytes, headers=headers_st, props=props_st,
       compressed=st.booleans(), v6=st.booleans(), ts=st.integers(0, 2**41))
def test_kafka_rows_match_record_from_message(kafka: bool, key: bytes | None, value: bytes | None,
                                              headers: list, props: dict[str, str],  # type: ignore[type-arg]
                                              compressed: bool, v6: bool, ts: int) -> None:
    import zlib

    if kafka:
        msg = message_from_record("T", 0, key=key, value=value, headers=tuple(headers), timestamp=ts,
                                  log_append_time=False)
    else:
        body = value or b"x"
        msg = Message("T", 0, zlib.compress(body) if compressed else body, dict(props),
                      sysflag=COMPRESSED_FLAG if compressed else 0, born_timestamp=ts,
                      born_host=("::1", 5) if v6 else ("127.0.0.1", 5))
    raw = encode_record(msg, queue_offset=9, commitlog_offset=0, store_timestamp=ts + 3,
                        store_host=("::1", 10911) if v6 else ("127.0.0.1", 10911))
    ref = record_from_message(decode_record(raw))
    (fast,) = kafka_rows([raw])
    assert tuple(fast[:3]) == (ref.offset, ref.timestamp, ref.log_append_time)
    assert (fast[3], fast[4], tuple(fast[5])) == (ref.key, ref.value, tuple(ref.headers))


# -- runs -> Kafka pieces (Fetch): native walker, Python twin and the per-record reference agree --------

_kinds = st.sampled_from(["plain", "plain_v6", "keyed", "headers", "null", "lat", "rocketmq", "compressed", "bare"])


def _stored(kind: str, i: int, body: bytes) -> Message:
    born = ("::1", 5) if kind == "plain_v6" else ("10.0.0.1", 5)
    if kind in ("plain", "plain_v6"):
        m = message_from_record("T", 0, key=None, value=body, headers=(), timestamp=1000 + i, log_append_time=False)
        return Message(m.topic, m.queue_id, m.body, {**m.properties, "CLUSTER": "c"}, born_timestamp=1000 + i,
                       born_host=born)
    if kind in ("keyed", "headers", "null", "lat"):
        return message_from_record("T", 0, key=b"k%d" % i if kind == "keyed" else None,
                                   value=None if kind == "null" else body,
                                   headers=(("h", b"v"),) if kind == "headers" else (), timestamp=1000 - i,
                                   log_append_time=kind == "lat")
    if kind == "compressed":
        import zlib
        return Message("T", 0, zlib.compress(body), {"UNIQ_KEY": f"U{i}"}, sysflag=COMPRESSED_FLAG,
                       born_timestamp=7)
    if kind == "bare":
        return Message("T", 0, body, {}, born_timestamp=1 << 41)
    return Message("T", 0, body, {"TAGS": "a", "UNIQ_KEY": f"U{i}", "user": "x"}, born_timestamp=5 + i)


def _rows_of(pieces: list) -> list:  # type: ignore[type-arg]
    from rokka.compat.kafka_pieces import PlainPiece
    rows = []
    for p in pieces:
        if isinstance(p, PlainPiece):
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


@settings(max_examples=120, deadline=None)
@given(kinds=st.lists(_kinds, min_size=1, max_size=25), body=st.binary(max_size=200))
def test_kafka_pieces_match_kafka_rows(kinds: list[str], body: bytes) -> None:
    import rokka.compat.kafka_pieces as K
    from rokka.core.storage.api import RecordRun

    recs, pos = [], 0
    for i, kind in enumerate(kinds):
        rec = encode_record(_stored(kind, i, body), queue_offset=10 + i, commitlog_offset=pos, store_timestamp=99,
                            store_host=("127.0.0.1", 10911))
        recs.append(rec)
        pos += len(rec)
    run = RecordRun(10, b"".join(recs), tuple(map(len, recs)))
    expect = kafka_rows(recs)
    saved = K._PLAIN_PROPS
    try:
        for walker in (S.walk_native, S.walk_py, None):
            K._PLAIN_PROPS = ()         # each walker learns the plain blobs itself
            assert _rows_of(K.kafka_pieces(run, walker=walker)) == expect
    finally:
        K._PLAIN_PROPS = saved


def test_native_fetch_walker_is_built() -> None:
    assert S.NATIVE and S.walk is S.walk_native


@settings(max_examples=200, deadline=None)
@given(data=st.binary(max_size=300), start=st.integers(0, 300), count=st.integers(0, 10))
def test_walkers_agree_on_garbage(data: bytes, start: int, count: int) -> None:
    import rokka.compat.kafka_pieces as K
    start = min(start, len(data))
    accepted = (b"", b"KAFKA_HEADERS\x01[]")
    assert S.walk_native is not None
    native = S.walk_native(data, start, count, accepted, K._FETCH_LAYOUT, FETCH_TABLE)
    assert native == S.walk_py(data, start, count, accepted, K._FETCH_LAYOUT, FETCH_TABLE)
    assert S._cstored.stored_records(data, start, count, accepted, K._FETCH_LAYOUT) == S.walk_py(
        data, start, count, accepted, K._FETCH_LAYOUT)
