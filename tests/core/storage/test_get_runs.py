"""get_runs: the native ConsumeQueue walk (``_cstore.cq_runs``) returns what the Python loop returns.

A queue whose records are interleaved with another queue's (runs break there), read with random
limits, from random offsets, with the CommitLog's minimum offset moved past some of its records.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rokka.core.model import Message
from rokka.core.storage import layout, reader
from rokka.core.storage.api import release_runs
from rokka.core.storage.engine import DiskStore
from storage_helpers import small_config


class _ClogView:
    """The store's CommitLog with ``min_offset`` moved (as retention would move it)."""

    def __init__(self, clog: Any, min_offset: int) -> None:
        self._clog, self.min_offset = clog, min_offset

    def read_span(self, start: int, end: int, *, view: bool = False) -> bytes | memoryview | None:
        return self._clog.read_span(start, end, view=view)  # type: ignore[no-any-return]

    def read_spans(self, spans: list[tuple[int, int]], *, view: bool = False) -> list[bytes | memoryview | None]:
        return self._clog.read_spans(spans, view=view)  # type: ignore[no-any-return]


@pytest.fixture(scope="module")
def filled(tmp_path_factory: pytest.TempPathFactory) -> Any:
    store = DiskStore(small_config(tmp_path_factory.mktemp("runs"), commitlog_file_size=1 << 20,
                                   consumequeue_file_size=20 * 300)).open()
    for i in range(700):    # queue 0 in stretches of 1-4 records, queue 1 in between
        store.put_messages([Message("T", 0, b"x" * (i % 37))])
        if i % 4 == 3 or i % 7 == 0:
            store.put_messages([Message("T", 1, b"other")])
    yield store
    store.close()


def _flat(result: tuple[list[Any], int]) -> tuple[list[tuple[int, bytes]], int]:
    """(queue offset, record bytes) of every record of the runs, and the next offset."""
    runs, nxt = result
    out = []
    for r in runs:
        assert len(r.data) == sum(r.sizes)
        pos = 0
        for i, size in enumerate(r.sizes):
            out.append((r.queue_offset + i, bytes(r.data[pos:pos + size])))
            pos += size
    return out, nxt


@settings(max_examples=200, deadline=None)
@given(offset=st.integers(0, 720), max_msgs=st.integers(0, 900), max_bytes=st.integers(1, 40_000),
       cut=st.integers(0, 700))
def test_native_walk_keeps_the_contract(filled: Any, offset: int, max_msgs: int, max_bytes: int, cut: int) -> None:
    assert layout.NATIVE
    q = filled.cqs[("T", 0)]
    unit = q.unit(min(cut, q.max_offset - 1))
    clog = _ClogView(filled.clog, unit[0] if cut % 3 else 0)   # some records below the CommitLog's start
    lo = filled.min_offset("T", 0)
    native, nxt = _flat(reader.get_runs(q, lo, clog, offset, max_msgs, max_bytes))
    # Exactly the records of [offset, nxt) still in the CommitLog, each as stored, within the limits.
    units = q.cq_units(offset, max(0, nxt - offset))
    assert [(u.queue_offset, filled.read_record(u.commitlog_offset, u.size)) for u in units
            if u.commitlog_offset >= clog.min_offset] == native
    assert len(native) <= max(1, max_msgs)
    assert len(native) <= 1 or sum(len(d) for _, d in native) <= max_bytes
    if native and nxt < q.max_offset and nxt % 300:   # stopped by a limit (not a file end): the next one is over it
        after = q.cq_units(nxt, 1)[0]
        assert len(native) >= max(1, max_msgs) or sum(len(d) for _, d in native) + after.size > max_bytes
    q.walk_runs = None          # the Python loop: reads units 64 at a time and may stop earlier
    try:
        python, _ = _flat(reader.get_runs(q, lo, clog, offset, max_msgs, max_bytes))
    finally:
        del q.walk_runs
    assert native[:len(python)] == python


def test_walk_goes_on_across_file_ends(filled: Any) -> None:
    q = filled.cqs[("T", 0)]
    assert q.walk_runs(250, 10_000, 0, 10_000, 1 << 30)[1] == 50      # one call: up to its file's end (300 units)
    runs, nxt = filled.get_runs("T", 0, 250, 10_000, 1 << 30)          # get_runs: on through the next files
    assert nxt == 700 and sum(len(r.sizes) for r in runs) == 450
    assert layout.decode_record(bytes(runs[0].data[:runs[0].sizes[0]])).queue_offset == 250
    runs, nxt = filled.get_runs("T", 0, 250, 60, 1 << 30)
    assert nxt == 310 and sum(len(r.sizes) for r in runs) == 60
    assert q.walk_runs(700, 10, 0, 10, 100) is None                   # past the end: nothing to walk


def test_runs_survive_a_reopen(tmp_path: Path) -> None:
    cfg = small_config(tmp_path)
    s = DiskStore(cfg).open()
    s.put_messages([Message("T", 0, b"a"), Message("T", 0, b"bb")])
    s.close()
    s = DiskStore(cfg).open()
    try:
        runs, nxt = s.get_runs("T", 0, 0, 10, 1 << 20)
        assert nxt == 2 and len(runs) == 1 and list(runs[0].sizes) == [len(r) for r in
                                                                      s.get_messages("T", 0, 0, 10).records]
    finally:
        s.close()


def test_lent_views_hold_the_same_bytes_and_are_released(filled: Any) -> None:
    """get_runs(views=True): memoryviews into the map with the bytes a copy would hold; release_runs
    lets go of every one of them."""
    copies, _ = filled.get_runs("T", 0, 5, 700, 1 << 20)
    views, _ = filled.get_runs("T", 0, 5, 700, 1 << 20, views=True)
    assert views and all(type(r.data) is memoryview for r in views)
    assert [(r.queue_offset, bytes(r.data), list(r.sizes)) for r in views] == \
           [(r.queue_offset, r.data, list(r.sizes)) for r in copies]
    release_runs(views)
    with pytest.raises(ValueError):
        bytes(views[0].data)


@pytest.fixture(scope="module")
def segmented(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """Two queues' records interleaved over CommitLog segments of 4 KiB."""
    store = DiskStore(small_config(tmp_path_factory.mktemp("spans"), commitlog_file_size=4096)).open()
    for i in range(400):
        store.put_messages([Message("T", i % 3 and 1, b"y" * (i % 53))])
    assert len(store.clog.files.segments) > 5
    yield store
    store.close()


def _expected(clog: Any, start: int, end: int) -> bytes | None:
    """What a read of ``[start, end)`` must give, from the segment files on disk: the bytes where the
    span is non-empty, within one segment and between the minimum and the write offset; else None."""
    if not clog.min_offset <= start < end <= clog.write_offset:
        return None
    for seg in clog.files.segments:
        if seg.base <= start < seg.end:
            if end > seg.end:
                return None
            with open(seg.path, "rb") as f:
                f.seek(start - seg.base)
                return f.read(end - start)
    return None


@settings(max_examples=150, deadline=None)
@given(picks=st.lists(st.tuples(st.integers(-50, 450), st.integers(-3, 40)), max_size=40), view=st.booleans())
def test_read_spans_reads_each_span_from_its_segment(segmented: Any, picks: list[tuple[int, int]],
                                                     view: bool) -> None:
    """Spans of whole records, across the CommitLog's segment ends, out of order, empty, past the write
    offset or below the start: the batched read and the single read give the bytes the segment files
    hold there, or None."""
    clog = segmented.clog
    starts = [u.commitlog_offset for q in (segmented.cqs[("T", 0)], segmented.cqs[("T", 1)])
              for u in q.cq_units(q.min_offset, q.max_offset - q.min_offset)]
    starts.sort()
    spans = []
    for i, n in picks:
        if 0 <= i < len(starts) and 0 <= i + n < len(starts):
            spans.append((starts[i], starts[i + n]))            # records i .. i+n-1 (n <= 0: empty / reversed)
        else:
            spans.append((i * 97 - 500, i * 97 + n * 50))       # anywhere, valid or not
    spans.append((starts[-1], clog.write_offset + 1))           # past the write offset
    spans.append((starts[-1], clog.write_offset))               # the last record
    last = len(spans) - 1
    for seg in clog.files.segments[:2]:                          # a segment whole, one byte past its end
        spans += [(seg.base + 1, seg.end), (seg.base, seg.end + 1)]
    got = clog.read_spans(spans, view=view)
    one = [clog.read_span(a, b, view=view) for a, b in spans]
    want = [_expected(clog, a, b) for a, b in spans]
    assert [None if g is None else bytes(g) for g in got] == want
    assert [None if g is None else bytes(g) for g in one] == want
    assert want[last] is not None and all(type(g) is (memoryview if view else bytes) for g in got if g is not None)
    for g in got + one:
        if isinstance(g, memoryview):
            g.release()
