"""put_uniform: a run stored in one go must be indistinguishable from the same messages put one by one.

Both engines; the native encoder (``_cstore.c``) and its Python twin give the same bytes.
"""

from __future__ import annotations

import zlib
from array import array
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rokka.core.model import Message, PackedBodies, UniformBatch
from rokka.core.storage import layout
from rokka.core.storage.api import MessageStore, PutStatus
from rokka.core.storage.engine import DiskStore
from storage_helpers import small_config


def test_native_encoder_is_built() -> None:
    # `make test` builds the extension; a silent fallback to Python would hide a broken build.
    assert layout.NATIVE


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=5000), st.integers(0, 64))
def test_native_crc32_is_zlibs(data: bytes, skip: int) -> None:
    # BODYCRC is java.util.zip.CRC32 = zlib.crc32, whichever backend _cstore linked (libdeflate or zlib);
    # memoryview slices (recovery's input) at every alignment.
    assert layout.crc32(data) == zlib.crc32(data)
    assert layout.crc32(memoryview(data)[skip:]) == zlib.crc32(data[skip:])


def _strip_store_ts(rec: bytes) -> tuple[object, ...]:
    m = layout.decode_record(rec)
    return (m.topic, m.queue_id, m.queue_offset, m.commitlog_offset, m.body, m.properties, m.flag, m.sysflag,
            m.born_timestamp, m.born_host, m.body_crc)


def _records(store: MessageStore, topic: str, qid: int) -> list[tuple[object, ...]]:
    res = store.get_messages(topic, qid, 0, 10_000, 1 << 30)
    return [_strip_store_ts(r) for r in res.records]


@pytest.mark.parametrize("props", [{}, {"TAGS": "tagA"}, {"KEYS": "k1 k2", "UNIQ_KEY": "U1"}])
def test_uniform_equals_put_messages(store: MessageStore, tmp_path: Path, props: dict[str, str]) -> None:
    bodies = [b"", b"x", bytes(range(256)) * 3] + [f"body-{i}".encode() for i in range(40)]
    stamps = [1000 + 7 * i for i in range(len(bodies))]
    store.put_messages([Message("T", 1, b"first")])   # the run starts mid-log
    batch = UniformBatch("T", 1, bodies, stamps, dict(props), flag=3, born_host=("10.0.0.9", 77))
    res = store.put_uniform(batch)
    assert res.ok and len(res.appended) == len(bodies)
    assert [a.queue_offset for a in res.appended] == list(range(1, len(bodies) + 1))
    assert list(res.appended)[5] == res.appended[5] and res.appended[-1] == list(res.appended)[-1]
    assert res.end_offset == store.commitlog_max_offset

    ref = DiskStore(small_config(tmp_path / "ref")).open()
    try:
        ref.put_messages([Message("T", 1, b"first")])
        ref.put_messages(batch.messages())
        assert _records(store, "T", 1) == _records(ref, "T", 1)
        assert store.cq_units("T", 1, 0, 100) == ref.cq_units("T", 1, 0, 100)
    finally:
        ref.close()
    if "KEYS" in props:     # every record of the run is indexed under the shared keys
        assert len(store.query_by_key("T", "k2", 100, 0, 1 << 62)) == len(bodies)
        assert len(store.query_by_key("T", "U1", 100, 0, 1 << 62)) == len(bodies)


def test_uniform_one_arrival_per_run(store: MessageStore) -> None:
    seen: list[tuple[object, ...]] = []
    store.add_arrival_listener(lambda *a: seen.append(a))  # type: ignore[arg-type]
    store.put_uniform(UniformBatch("T", 0, [b"a", b"b", b"c"], 5, {"TAGS": "x"}))
    assert seen[-1] == ("T", 0, 2, layout.java_hash("x"), {"TAGS": "x"})


def test_uniform_refusals_write_nothing(store: MessageStore) -> None:
    before = store.commitlog_max_offset
    big = bytes(store.config.max_message_size + 1)
    cases = [(UniformBatch("T", 0, [b"ok", big], 1), PutStatus.MESSAGE_ILLEGAL),
             (UniformBatch("t" * 128, 0, [b"ok"], 1), PutStatus.MESSAGE_ILLEGAL),
             (UniformBatch("T", 0, [b"ok"], 1, {"big": "v" * 33000}), PutStatus.PROPERTIES_SIZE_EXCEEDED),
             (UniformBatch("T", -1, [b"ok"], 1), PutStatus.MESSAGE_ILLEGAL)]
    for batch, status in cases:
        res = store.put_uniform(batch)
        assert res.status is status and res.remark and not res.appended
    assert store.commitlog_max_offset == before and store.max_offset("T", 0) == 0
    assert store.put_uniform(UniformBatch("T", 0, [], 1)).ok


def test_uniform_crossing_segments_and_cq_files(tmp_path: Path) -> None:
    # 64 KiB segments, 1000-unit CQ files: a run of 1500 x 100 B crosses both boundaries.
    s = DiskStore(small_config(tmp_path / "s")).open()
    try:
        for _ in range(3):
            res = s.put_uniform(UniformBatch("T", 0, [bytes(100)] * 500, 1))
            assert res.ok
        assert s.max_offset("T", 0) == 1500
        seen, off = [], 0
        while off < 1500:       # a pull stops at a CQ file end: walk the whole queue
            got = s.get_messages("T", 0, off, 400, 1 << 20)
            seen += [layout.decode_record(r).queue_offset for r in got.records]
            off = got.next_begin_offset
        assert seen == list(range(1500))
    finally:
        s.close()
    s = DiskStore(small_config(tmp_path / "s")).open()     # and it all survives a reopen
    try:
        assert s.max_offset("T", 0) == 1500
    finally:
        s.close()


_hosts = st.sampled_from([("127.0.0.1", 1), ("::1", 65535), ("192.168.7.7", 0), ("fe80::1", 9)])


@settings(max_examples=60, deadline=None)
@given(bodies=st.lists(st.binary(max_size=300), min_size=1, max_size=20),
       stamps=st.integers(0, 1 << 62), born=_hosts, stored=_hosts, qoff=st.integers(0, 1 << 40),
       pos=st.integers(0, 1 << 50), code=st.integers(-(1 << 63), (1 << 63) - 1), flag=st.integers(-5, 5),
       sysflag=st.sampled_from([0, 0x1, 0x8, 0x30]))
def test_native_and_python_encoders_agree(bodies: list[bytes], stamps: int, born: tuple[str, int],
                                          stored: tuple[str, int], qoff: int, pos: int, code: int, flag: int,
                                          sysflag: int) -> None:
    per_body = [stamps + i for i in range(len(bodies))]
    props = layout.encode_properties({"A": "b", "KAFKA_HEADERS": "[]"})
    args = dict(flag=flag, sysflag=sysflag, born_host=born, store_timestamp=42, store_host=stored,
                queue_offset=qoff, commitlog_offset=pos, tags_code=code)
    native = layout.encode_uniform("T", 3, bodies, per_body, props, native=True, **args)  # type: ignore[arg-type]
    python = layout.encode_uniform("T", 3, bodies, per_body, props, native=False, **args)  # type: ignore[arg-type]
    assert native == python
    expect, at = [], pos
    for i, body in enumerate(bodies):
        m = Message("T", 3, body, {"A": "b", "KAFKA_HEADERS": "[]"}, flag, sysflag, per_body[i], born)
        rec = layout.encode_record(m, queue_offset=qoff + i, commitlog_offset=at, store_timestamp=42,
                                   store_host=stored)
        expect.append(rec)
        at += len(rec)
    assert native[0] == b"".join(expect)
    one = layout.encode_uniform("T", 3, bodies, stamps, props, native=True, **args)  # type: ignore[arg-type]
    assert one == layout.encode_uniform("T", 3, bodies, [stamps] * len(bodies), props, native=False,
                                        **args)  # type: ignore[arg-type]


@pytest.mark.parametrize("props", [{}, {"KAFKA_HEADERS": "[]", "CLUSTER": "c"}])
def test_keyed_run_equals_put_messages(store: MessageStore, tmp_path: Path, props: dict[str, str]) -> None:
    keys = ["k0", "ключ", "k\U0001F600", "k0"] + [f"key-{i}" for i in range(20)]
    bodies = [f"v{i}".encode() for i in range(len(keys))]
    batch = UniformBatch("T", 0, bodies, [5 + i for i in range(len(keys))], dict(props), keys=keys)
    res = store.put_uniform(batch)
    assert res.ok and [a.queue_offset for a in res.appended] == list(range(len(keys)))
    assert res.end_offset == store.commitlog_max_offset
    ref = DiskStore(small_config(tmp_path / "ref")).open()
    try:
        ref.put_messages(batch.messages())
        assert _records(store, "T", 0) == _records(ref, "T", 0)
        assert store.cq_units("T", 0, 0, 100) == ref.cq_units("T", 0, 0, 100)
        for k in set(keys):
            assert sorted(store.query_by_key("T", k, 100, 0, 1 << 62)) == sorted(
                ref.query_by_key("T", k, 100, 0, 1 << 62)) != []
    finally:
        ref.close()


def test_keyed_run_with_shared_keys_takes_the_general_path(store: MessageStore) -> None:
    res = store.put_uniform(UniformBatch("T", 0, [b"a", b"b"], 1, {"KEYS": "shared"}, keys=["x", "y"]))
    assert res.ok
    msgs = [layout.decode_record(r) for r in store.get_messages("T", 0, 0, 10).records]
    assert [m.properties["KEYS"] for m in msgs] == ["shared", "shared"]   # the dict merge, as messages() builds


@settings(max_examples=40, deadline=None)
@given(bodies=st.lists(st.binary(max_size=50), min_size=1, max_size=10), data=st.data())
def test_native_and_python_agree_with_prefixes(bodies: list[bytes], data: st.DataObject) -> None:
    prefixes = data.draw(st.lists(st.binary(max_size=30), min_size=len(bodies), max_size=len(bodies)))
    args = dict(flag=0, sysflag=0, born_host=("127.0.0.1", 1), store_timestamp=1, store_host=("127.0.0.1", 2),
                queue_offset=0, commitlog_offset=0, tags_code=0, prefixes=prefixes)
    assert layout.encode_uniform("T", 0, bodies, 7, b"A\x01b", native=True, **args) == \
        layout.encode_uniform("T", 0, bodies, 7, b"A\x01b", native=False, **args)  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        layout.encode_uniform("T", 0, [b"x"], 7, b"A" * 32760, native=True,
                              **{**args, "prefixes": [b"B" * 10]})  # type: ignore[arg-type]


def _packed(bodies: list[bytes], lead: bytes = b"") -> PackedBodies:
    """``bodies`` as spans of one buffer (with ``lead`` bytes before the first, as in a Kafka payload)."""
    buf, spans = bytearray(lead), array("i")
    for b in bodies:
        spans += array("i", [len(buf), len(b)])
        buf += b + b"|"
    return PackedBodies(bytes(buf), spans.tobytes(), max(map(len, bodies), default=0))


@settings(max_examples=60, deadline=None)
@given(bodies=st.lists(st.binary(max_size=300), max_size=20), lead=st.binary(max_size=9), data=st.data())
def test_packed_bodies_encode_as_their_list(bodies: list[bytes], lead: bytes, data: st.DataObject) -> None:
    # encode_spans (bodies left in one buffer, stamps an int64 array) == encode_uniform over the same bytes.
    packed = _packed(bodies, lead)
    assert list(packed) == bodies and len(packed) == len(bodies) and packed[-1:] == bodies[-1:]
    stamps = data.draw(st.lists(st.integers(-(1 << 63), (1 << 63) - 1), min_size=len(bodies), max_size=len(bodies)))
    prefixes = data.draw(st.none() | st.lists(st.binary(max_size=9), min_size=len(bodies), max_size=len(bodies)))
    args = dict(flag=1, sysflag=0, born_host=("::1", 3), store_timestamp=9, store_host=("127.0.0.1", 2),
                queue_offset=4, commitlog_offset=1 << 33, tags_code=-7, prefixes=prefixes)
    ref = layout.encode_uniform("T", 2, bodies, stamps, b"A\x01b", native=False, **args)  # type: ignore[arg-type]
    q = memoryview(array("q", stamps).tobytes()).cast("q")
    assert layout.encode_uniform("T", 2, packed, q, b"A\x01b", native=True, **args) == ref  # type: ignore[arg-type]
    assert layout.encode_uniform("T", 2, packed, q, b"A\x01b", native=False, **args) == ref  # type: ignore[arg-type]
    if bodies:
        one = layout.encode_uniform("T", 2, packed, 5, b"", native=True, **args)  # type: ignore[arg-type]
        assert one == layout.encode_uniform("T", 2, bodies, 5, b"", native=False, **args)  # type: ignore[arg-type]


def test_spans_outside_the_buffer_are_refused() -> None:
    args = dict(flag=0, sysflag=0, born_host=("127.0.0.1", 1), store_timestamp=1, store_host=("127.0.0.1", 2),
                queue_offset=0, commitlog_offset=0, tags_code=0)
    for spans in ([0, 11], [-1, 2], [5, -1], [2**31 - 1, 1]):
        bad = PackedBodies(b"0123456789", array("i", spans).tobytes(), 10)
        with pytest.raises(ValueError, match="outside"):
            layout.encode_uniform("T", 0, bad, 1, b"", native=True, **args)  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        PackedBodies(b"x", array("i", [0]).tobytes(), 1)
    ok = PackedBodies(b"0123456789", array("i", [0, 2, 8, 2]).tobytes(), 2)
    with pytest.raises(ValueError, match="int64"):
        layout.encode_uniform("T", 0, ok, memoryview(array("q", [1]).tobytes()).cast("q"), b"", native=True,
                              **args)  # type: ignore[arg-type]
    assert ok[1] == b"89" and ok[-2] == b"01"
    with pytest.raises(IndexError):
        ok[2]


def test_packed_run_equals_put_messages(store: MessageStore, tmp_path: Path) -> None:
    bodies = [b"", b"x" * 700, *(f"b{i}".encode() for i in range(30))]
    stamps = memoryview(array("q", range(100, 100 + len(bodies))).tobytes()).cast("q")
    batch = UniformBatch("T", 1, _packed(bodies, b"hdr"), stamps, {"KAFKA_HEADERS": "[]"})
    assert batch.longest() == 700
    res = store.put_uniform(batch)
    assert res.ok and [a.queue_offset for a in res.appended] == list(range(len(bodies)))
    ref = DiskStore(small_config(tmp_path / "ref")).open()
    try:
        ref.put_messages(batch.messages())
        assert _records(store, "T", 1) == _records(ref, "T", 1)
    finally:
        ref.close()
