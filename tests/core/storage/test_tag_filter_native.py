"""Tag-filtered reads: the native walk (``_cqscan.tag_filter`` via ``ConsumeQueue.scan_tags``) answers
``get_messages`` exactly as the Python loop does, and SQL92 reads copy only what matches.

A queue of records with one of ten tags (some with none), interleaved with another queue's, in
CommitLog segments of 64 KiB (a read crosses segment ends) and ConsumeQueue files of 300 units; read
with random tag sets ("||"), random limits, from random offsets, with the CommitLog's minimum offset
moved past some records.  The Python twin runs on the same store through a queue without
``scan_tags``.  The tag string is checked after the hash (a collision never gets through).
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rokka.core.filter import ExpressionFilter, build_subscription
from rokka.core.model import Message, tags_code
from rokka.core.storage import consumequeue, layout, reader
from rokka.core.storage.api import GetStatus
from rokka.core.storage.engine import DiskStore
from rokka.core.storage.memory import MemoryStore
from storage_helpers import small_config

TAGS = [f"Tag{i}" for i in range(10)]


class _Clog:
    """The store's CommitLog with ``min_offset`` moved (as retention would move it)."""

    def __init__(self, clog: Any, min_offset: int) -> None:
        self._clog, self.min_offset = clog, min_offset

    def __getattr__(self, name: str) -> Any:
        return getattr(self._clog, name)


class _PyQueue:
    """The ConsumeQueue as the Python loop sees it (no native walk)."""

    def __init__(self, q: Any) -> None:
        self.max_offset, self.units_per_file, self.units = q.max_offset, q.units_per_file, q.units


@pytest.fixture(scope="module")
def filled(tmp_path_factory: pytest.TempPathFactory) -> Any:
    store = DiskStore(small_config(tmp_path_factory.mktemp("tags"), consumequeue_file_size=20 * 300)).open()
    for i in range(900):
        props = {} if i % 13 == 5 else {"TAGS": TAGS[(i * 7) % 10], "n": str(i)}
        store.put_messages([Message("T", 0, b"x" * (i % 97), properties=props)])
        if i % 3:
            store.put_messages([Message("T", 1, b"other", properties={"TAGS": TAGS[0]})])
    yield store
    store.close()


def _expr(tags: list[str]) -> str:
    return " || ".join(tags) if tags else "*"


SQL = ["TAGS = 'Tag1'", "n > 300 AND n < 600", "TAGS IN ('Tag1', 'Tag2') OR n BETWEEN 10 AND 20",
       "missing IS NULL AND TAGS <> 'Tag0'", "m = 5", "n > TAGS", "TAGS STARTSWITH 'Tag' AND NOT (n < 450)"]


@settings(max_examples=300, deadline=None)
@given(tags=st.lists(st.sampled_from([*TAGS, "Nope"]), max_size=4), offset=st.integers(0, 910),
       max_msgs=st.integers(0, 100), max_bytes=st.integers(1, 20_000), cut=st.integers(0, 900),
       kind=st.sampled_from(["tags", "none", "sql"]), sql=st.sampled_from(SQL))
def test_native_filter_equals_the_python_loop(filled: Any, tags: list[str], offset: int, max_msgs: int,
                                              max_bytes: int, cut: int, kind: str, sql: str) -> None:
    assert consumequeue._cqscan is not None, "the native module was not built"
    q = filled.cqs[("T", 0)]
    unit = q.unit(min(cut, q.max_offset - 1))
    clog = _Clog(filled.clog, unit[0] if cut % 3 == 0 else 0)
    lo = filled.min_offset("T", 0)
    flt = {"none": None, "tags": ExpressionFilter(build_subscription("T", _expr(tags))),
           "sql": ExpressionFilter(build_subscription("T", sql, "SQL92"))}[kind]
    native = reader.get_messages(q, lo, clog, offset, max_msgs, max_bytes, flt)
    python = reader.get_messages(_PyQueue(q), lo, clog, offset, max_msgs, max_bytes, flt)
    assert native == python
    want = set(tags)
    for rec in native.records:     # the hash stage let only the subscribed tags through
        assert kind != "tags" or not want or filled.read_message(_offset_of(rec)).properties.get("TAGS") in want


def _offset_of(rec: bytes) -> int:
    return int.from_bytes(rec[28:36], "big")


def test_tag_filter_skips_to_the_matching_records(filled: Any) -> None:
    """One tag of ten: each answer holds only that tag, and the reads go on to the queue's end."""
    flt = ExpressionFilter(build_subscription("T", "Tag3"))
    offset, got = 0, []
    while offset < filled.max_offset("T", 0):
        res = filled.get_messages("T", 0, offset, 32, 1 << 20, flt)
        assert res.status in (GetStatus.FOUND, GetStatus.NO_MATCHED_MESSAGE)
        got += [filled.read_message(_offset_of(r)) for r in res.records]
        offset = res.next_begin_offset
    assert got and {m.properties["TAGS"] for m in got} == {"Tag3"}
    assert len(got) == sum(1 for i in range(900) if i % 13 != 5 and (i * 7) % 10 == 3)
    assert [m.queue_offset for m in got] == sorted(m.queue_offset for m in got)


def test_sql92_reads_match_and_never_copy_dropped_records(filled: Any) -> None:
    """SQL92: the same answer from the in-place property check as from decoding copied records."""
    flt = ExpressionFilter(build_subscription("T", "n > 100 AND n < 140 AND TAGS = 'Tag1'", "SQL92"))
    res = filled.get_messages("T", 0, 0, 32, 1 << 20, flt)
    want = [i for i in range(100, 140) if i % 13 != 5 and (i * 7) % 10 == 1]
    assert res.status is GetStatus.FOUND
    assert [int(filled.read_message(_offset_of(r)).properties["n"]) for r in res.records] == want
    assert all(type(r) is bytes for r in res.records)
    q = filled.cqs[("T", 0)]
    assert reader.get_messages(_PyQueue(q), 0, filled.clog, 0, 32, 1 << 20, flt) == res


_RECORD = st.tuples(st.integers(0, 2), st.one_of(st.none(), st.sampled_from(TAGS[:5])), st.integers(0, 300))


@settings(max_examples=60, deadline=None)
@given(records=st.lists(_RECORD, min_size=1, max_size=120), tags=st.lists(st.sampled_from(TAGS[:6]), max_size=3),
       max_msgs=st.integers(1, 40), max_bytes=st.integers(1, 6000), sql=st.one_of(st.none(), st.sampled_from(SQL)))
def test_random_queues_read_alike(tmp_path_factory: pytest.TempPathFactory, records: list[tuple[int, str | None, int]],
                                  tags: list[str], max_msgs: int, max_bytes: int, sql: str | None) -> None:
    """Random stores (queues interleaved, tags or none, a property ``n`` of a few values, bodies of any
    size, small files): reading a queue to its end with one tag or SQL92 filter (its memo of answers
    kept from call to call) gives the same answers, call by call, natively and in Python."""
    store = DiskStore(small_config(tmp_path_factory.mktemp("rq"), consumequeue_file_size=20 * 7)).open()
    try:
        for qid, tag, size in records:
            props = {"TAGS": tag, "n": str(size % 7 * 100)} if tag else {"n": str(size % 5 * 100)}
            store.put_messages([Message("T", qid, bytes(size), properties=props)])
        flt = ExpressionFilter(build_subscription("T", sql, "SQL92") if sql else build_subscription("T", _expr(tags)))
        for qid in range(3):
            q = store.cqs.get(("T", qid))
            offset = 0
            while q is not None and offset < q.max_offset:
                native = reader.get_messages(q, 0, store.clog, offset, max_msgs, max_bytes, flt)
                assert native == reader.get_messages(_PyQueue(q), 0, store.clog, offset, max_msgs, max_bytes, flt)
                assert native.next_begin_offset > offset
                offset = native.next_begin_offset
    finally:
        store.close()


def test_a_tag_hash_collision_never_reaches_the_client(tmp_path_factory: pytest.TempPathFactory) -> None:
    """"Aa" and "BB" share one Java hash: the ConsumeQueue stage lets both through, the tag string
    check drops "BB" (Java leaves that to the client; clients that do not re-check get it right too)."""
    assert tags_code("Aa") == tags_code("BB")
    for store in (DiskStore(small_config(tmp_path_factory.mktemp("aa"))).open(),
                  MemoryStore(small_config(tmp_path_factory.mktemp("aam"))).open()):
        try:
            for i in range(40):
                store.put_messages([Message("T", 0, f"m{i}".encode(), properties={"TAGS": ["Aa", "BB"][i % 2]})])
            for expr, want in (("Aa", "Aa"), ("BB || Zz", "BB")):
                res = store.get_messages("T", 0, 0, 64, 1 << 20, ExpressionFilter(build_subscription("T", expr)))
                assert res.status is GetStatus.FOUND and res.next_begin_offset == 40
                assert [layout.decode_record(r).properties["TAGS"] for r in res.records] == [want] * 20
            flt = ExpressionFilter(build_subscription("T", "Aa"))     # from a "BB" record: skipped, the next taken
            res = store.get_messages("T", 0, 1, 1, 1 << 20, flt)
            assert len(res.records) == 1 and res.queue_offsets == (2,)
        finally:
            store.close()


_UNIT = st.tuples(st.integers(-5, 400), st.integers(-3, 300), st.integers(-(1 << 40), 1 << 40))


@settings(max_examples=300, deadline=None)
@given(units=st.lists(_UNIT, max_size=40), span=st.binary(max_size=400), span_start=st.integers(0, 50),
       sql=st.booleans(), names=st.sampled_from([None, (b"a",), (b"TAGS", b"a")]), memo=st.booleans())
def test_the_native_walk_survives_any_bytes(units: list[tuple[int, int, int]], span: bytes, span_start: int,
                                            sql: bool, names: tuple[bytes, ...] | None, memo: bool) -> None:
    """Units and CommitLog bytes of any kind (negative or huge sizes, lengths that do not add up): the
    walk never reads outside what it was lent, and every record it takes lies whole within the span."""
    assert consumequeue._cqscan is not None
    raw = b"".join(consumequeue.UNIT.pack(*u) for u in units)
    seen: list[dict[str, str]] = []
    match = (lambda props: seen.append(props) or True) if sql else None
    recs, offs, used, taken, total, _, need = consumequeue._cqscan.tag_filter(
        raw, 7, None, 0, 1000, 1 << 20, 0, 0, span, span_start, match, names if sql else None,
        {} if memo else None)
    assert 0 <= used <= len(units) and taken == len(recs) == len(offs) and total == sum(map(len, recs))
    for rec, qoff in zip(recs, offs, strict=True):
        off, size, _ = units[qoff - 7]
        assert rec == span[off - span_start:off - span_start + size] and len(rec) == size
    assert need == -1 or need == units[used][0]
    assert all(set(d) <= {n.decode() for n in names} for d in seen) if names else True
