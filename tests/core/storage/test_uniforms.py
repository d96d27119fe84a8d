"""put_uniforms: the runs of several queues written together are what put_uniform writes for each.

A Kafka Produce request holding batches for several partitions stores their runs with one CommitLog
write (``DiskStore.put_uniforms``).  With the clock held still, the CommitLog bytes, ConsumeQueue
units and answers equal those of ``put_uniform`` called once per batch in the same order; refused
batches, general-path batches, a queue named twice, runs crossing a segment end and a failed write
each keep ``put_uniform``'s outcome.
"""

from __future__ import annotations

import errno
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rokka.core.model import UniformBatch
from rokka.core.storage import layout
from rokka.core.storage.api import PutResult, PutStatus
from rokka.core.storage.engine import DiskStore
from rokka.core.storage.memory import MemoryStore
from storage_helpers import small_config

NOW = 1_700_000_000.123


def _clog(store: DiskStore) -> bytes:
    return b"".join(bytes(store.clog.read_span(seg.base, min(seg.end, store.clog.write_offset)) or b"")
                    for seg in store.clog.files.segments)


def _answers(results: list[PutResult]) -> list[tuple[Any, ...]]:
    return [(r.status, r.remark, [tuple(a) for a in r.appended]) for r in results]


def _units(store: Any, batches: list[UniformBatch]) -> list[Any]:
    return [store.cq_units(t, q, 0, 1000) for t, q in sorted({(b.topic, b.queue_id) for b in batches})]


_batch = st.builds(
    lambda queue, bodies, stamp, keyed, tags, big: UniformBatch(
        "T", queue, bodies + ([bytes(5000)] if big else []), stamp, {"TAGS": "a"} if tags else {},
        keys=[f"q{queue}k{i}" for i in range(len(bodies) + big)] if keyed else None),
    st.integers(0, 5), st.lists(st.binary(max_size=200), min_size=0, max_size=12), st.integers(0, 1 << 40),
    st.booleans(), st.booleans(), st.booleans())


@settings(max_examples=60, deadline=None)
@given(batches=st.lists(_batch, min_size=1, max_size=6, unique_by=lambda b: b.queue_id))
def test_runs_written_together_are_put_uniform_of_each(tmp_path_factory: pytest.TempPathFactory,
                                                       batches: list[UniformBatch]) -> None:
    root = tmp_path_factory.mktemp("uniforms")
    together = DiskStore(small_config(root / "a", max_message_size=4096)).open()
    apart = DiskStore(small_config(root / "b", max_message_size=4096)).open()
    try:
        with mock.patch("time.time", return_value=NOW):
            got = together.put_uniforms(batches)
            want = [apart.put_uniform(b) for b in batches]
        assert _answers(got) == _answers(want)
        assert any(r.status is PutStatus.MESSAGE_ILLEGAL for r in got) == any(len(b.bodies) and max(
            map(len, b.bodies)) > 4096 for b in batches)
        assert _clog(together) == _clog(apart)
        assert _units(together, batches) == _units(apart, batches)
        for b in batches:
            if b.keys and got[batches.index(b)].ok:
                assert len(together.query_by_key("T", b.keys[0], 10, 0, 1 << 62)) == 1
    finally:
        together.close()
        apart.close()


def test_one_queue_twice_is_put_one_after_the_other(store: Any) -> None:
    first, second = UniformBatch("T", 0, [b"a", b"b"], 1), UniformBatch("T", 0, [b"c"], 1)
    got = store.put_uniforms([first, second, UniformBatch("T", 1, [b"d"], 1)])
    assert [r.ok for r in got] == [True] * 3
    assert [[a.queue_offset for a in r.appended] for r in got] == [[0, 1], [2], [0]]
    assert [layout.decode_record(r).body for r in store.get_messages("T", 0, 0, 10).records] == [b"a", b"b", b"c"]


def test_general_path_batches_follow_the_runs(tmp_path: Path) -> None:
    """A prepared (transaction half) batch takes put_messages, after the runs' one write."""
    s = DiskStore(small_config(tmp_path / "s")).open()
    try:
        half = UniformBatch("T", 2, [b"half"], 1, sysflag=0x4)
        got = s.put_uniforms([UniformBatch("T", 0, [b"a"], 1), half, UniformBatch("T", 1, [b"b"], 1)])
        assert [r.ok for r in got] == [True] * 3
        run0, run1 = got[0].appended[0], got[2].appended[0]
        assert run1.commitlog_offset == run0.commitlog_offset + run0.size     # adjacent: one write
        assert got[1].appended[0].commitlog_offset == run1.commitlog_offset + run1.size
        assert s.max_offset("T", 2) == 0        # a half is not dispatched
    finally:
        s.close()


def test_runs_crossing_the_segment_end_are_put_each_on_its_own(tmp_path: Path) -> None:
    # 64 KiB segments: three runs of 250 x 100 B (~37 KiB each) cannot share one segment.
    s = DiskStore(small_config(tmp_path / "s")).open()
    try:
        batches = [UniformBatch("T", q, [bytes([q]) * 100] * 250, 1) for q in range(3)]
        got = s.put_uniforms(batches)
        assert [r.ok for r in got] == [True] * 3 and len(s.clog.files.segments) >= 2
        for q in range(3):
            bodies = [layout.decode_record(r).body for r in s.get_messages("T", q, 0, 300, 1 << 30).records]
            assert bodies == [bytes([q]) * 100] * 250
    finally:
        s.close()


def test_a_failed_write_fails_every_run_and_dispatches_none(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    s = DiskStore(small_config(tmp_path / "s")).open()
    try:
        s.put_uniform(UniformBatch("T", 0, [b"before"], 1))
        end = s.commitlog_max_offset

        def full(parts: list[bytes]) -> None:
            raise OSError(errno.ENOSPC, "No space left on device")

        monkeypatch.setattr(s.clog, "write_runs", full)
        got = s.put_uniforms([UniformBatch("T", 0, [b"a"], 1), UniformBatch("T", 1, [b"b"], 1)])
        assert [r.ok for r in got] == [False, False] and got[0] is got[1]
        assert (s.max_offset("T", 0), s.max_offset("T", 1), s.commitlog_max_offset) == (1, 0, end)
    finally:
        s.close()


def test_memory_store_puts_each(tmp_path: Path) -> None:
    s = MemoryStore(small_config(tmp_path / "m")).open()
    got = s.put_uniforms([UniformBatch("T", 0, [b"a"], 1), UniformBatch("T", 1, [b"b", b"c"], 1)])
    assert [len(r.appended) for r in got] == [1, 2] and s.max_offset("T", 1) == 2


def test_a_record_without_own_properties_gets_the_shared_ones_alone(tmp_path: Path) -> None:
    # own properties (Kafka's mapped records) beside shared ones (a transaction half's): a record whose
    # own part is empty stores the shared properties with no separator before them, as put_messages
    from array import array

    from rokka.core.model import PackedBodies
    own = PackedBodies(b"KEYS\x01k1", array("i", [0, 7, 7, 0]).tobytes(), 7)    # "KEYS 0x01 k1", then nothing
    batch = UniformBatch("T", 0, [b"a", b"b"], 5, {"X": "y"}, record_props=own)
    run = DiskStore(small_config(tmp_path / "run")).open()
    ref = DiskStore(small_config(tmp_path / "ref")).open()
    try:
        with mock.patch("time.time", return_value=NOW):
            assert run.put_uniform(batch).ok
            assert ref.put_messages(batch.messages()).ok
        assert [m.properties for m in batch.messages()] == [{"KEYS": "k1", "X": "y"}, {"X": "y"}]
        assert _clog(run) == _clog(ref)
    finally:
        run.close()
        ref.close()
