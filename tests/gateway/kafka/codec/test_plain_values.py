"""plain_values: the Produce fast path agrees with the general parser, natively and in Python."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from rokka.gateway.kafka.codec import records as R


def test_native_walker_is_built() -> None:
    assert R.NATIVE  # `make test` builds it; a silent Python fallback would hide a broken build


def _split(batch: bytes) -> tuple[bytes, R.BatchHeader]:
    (b,), _ = R.split_batches(batch)
    return b.payload(), b.header


_records = st.lists(st.tuples(
    st.integers(-(1 << 40), 1 << 40),                       # timestamp delta (varlong)
    st.one_of(st.none(), st.binary(max_size=4)),            # key
    st.one_of(st.none(), st.binary(max_size=300)),          # value
    st.lists(st.tuples(st.text(max_size=3), st.one_of(st.none(), st.binary(max_size=3))), max_size=2),
), min_size=1, max_size=30)


@settings(max_examples=150, deadline=None)
@given(recs=_records, codec=st.sampled_from([R.NONE, R.GZIP, R.LZ4, R.ZSTD, R.SNAPPY]),
       base_ts=st.integers(0, 1 << 45))
def test_native_and_python_agree(recs: list[tuple[int, bytes | None, bytes | None, list[tuple[str, bytes | None]]]],
                                 codec: int, base_ts: int) -> None:
    batch = R.encode_batch([R.Record(i, ts, k, v, tuple(R.Header(hk, hv) for hk, hv in h))
                            for i, (ts, k, v, h) in enumerate(recs)], base_timestamp=base_ts, compression=codec)
    payload, header = _split(batch)
    values, stamps = [v for _, _, v, _ in recs], [base_ts + ts for ts, _, _, _ in recs]
    for keyed in (False, True):
        native = R.plain_values(payload, header, keyed=keyed, native=True)
        assert native == R.plain_values(payload, header, keyed=keyed, native=False)
        plain = all((k is not None) is keyed and v is not None and not h for _, k, v, h in recs)
        if plain:
            assert native == (values, stamps, [k for _, k, _, _ in recs] if keyed else None)
        else:
            assert native is None


@settings(max_examples=300, deadline=None)
@given(data=st.binary(max_size=200), count=st.integers(-2, 50))
def test_garbage_never_crashes(data: bytes, count: int) -> None:
    header = R.BatchHeader(0, 0, -1, 2, 0, 0, 0, 0, 0, -1, -1, -1, count)
    for keyed in (False, True):
        native = R.plain_values(data, header, keyed=keyed, native=True)
        assert native is None or native == R.plain_values(data, header, keyed=keyed, native=False)


def test_truncated_plain_batch_is_not_plain() -> None:
    batch = R.encode_batch([R.Record(i, i, None, b"v" * 20) for i in range(5)])
    payload, header = _split(batch)
    assert R.plain_values(payload, header) is not None
    for cut in range(len(payload)):
        assert R.plain_values(payload[:cut], header) is None
        assert R.plain_values(payload[:cut], header, native=False) is None
        assert R.plain_spans(payload[:cut], header) is None


def _from_spans(payload: bytes, got: R.PlainSpans) -> tuple[list[bytes], list[int], list[bytes] | None]:
    spans, stamps, keys, longest = got
    pairs = memoryview(spans).cast("i")
    values = [payload[pairs[i]:pairs[i] + pairs[i + 1]] for i in range(0, len(pairs), 2)]
    assert longest == max(map(len, values), default=0)
    return values, list(memoryview(stamps).cast("q")), keys


@settings(max_examples=150, deadline=None)
@given(recs=_records, base_ts=st.integers(0, 1 << 45))
def test_spans_agree_with_values(recs: list[tuple[int, bytes | None, bytes | None, list[tuple[str, bytes | None]]]],
                                 base_ts: int) -> None:
    # plain_spans is plain_values with the values left in the payload: same verdict, same bytes.
    batch = R.encode_batch([R.Record(i, ts, k, v, tuple(R.Header(hk, hv) for hk, hv in h))
                            for i, (ts, k, v, h) in enumerate(recs)], base_timestamp=base_ts)
    payload, header = _split(batch)
    for keyed in (False, True):
        values = R.plain_values(payload, header, keyed=keyed, native=False)
        spans = R.plain_spans(payload, header, keyed=keyed)
        assert (spans is None) == (values is None)
        if spans is not None:
            assert _from_spans(payload, spans) == values


@settings(max_examples=300, deadline=None)
@given(data=st.binary(max_size=200), count=st.integers(-2, 50))
def test_spans_of_garbage_never_crash(data: bytes, count: int) -> None:
    header = R.BatchHeader(0, 0, -1, 2, 0, 0, 0, 0, 0, -1, -1, -1, count)
    for keyed in (False, True):
        got = R.plain_spans(data, header, keyed=keyed)
        assert got is None or _from_spans(data, got) == R.plain_values(data, header, keyed=keyed, native=False)
