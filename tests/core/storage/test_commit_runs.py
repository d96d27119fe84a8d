"""A transaction's commit as runs (``rokka.core.txn_runs``) stores what the messages store.

Halves are written to the half topic as ``Broker.prepare`` leaves them (the real destination in
their properties), read back, and committed twice with the clock held still: as ``commit_runs``
through ``put_uniform`` and as ``commit_message`` of each through ``put_messages``.  The CommitLog
bytes (each copy's PREPARED_TRANSACTION_OFFSET and kept store time included), the real queues'
ConsumeQueue units, the index and the answers are the same; so are the op records as one run
(``op_run``) and one by one.  Copies the run path cannot carry make ``commit_runs`` return None.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rokka.core import record
from rokka.core.model import (
    PROP_KEYS,
    PROP_REAL_QID,
    PROP_REAL_TOPIC,
    PROP_TRAN_MSG,
    TOPIC_TRANS_HALF,
    TRANSACTION_COMMIT_TYPE,
    TRANSACTION_MASK,
    Message,
    UniformBatch,
)
from rokka.core.storage import layout
from rokka.core.storage.engine import DiskStore
from rokka.core.storage.memory import MemoryStore
from rokka.core.txn import commit_message, op_message
from rokka.core.txn_runs import commit_runs, op_run
from storage_helpers import small_config

STRIP = (PROP_REAL_TOPIC, PROP_REAL_QID, PROP_TRAN_MSG, "KAFKA_TXN", "WAIT")
HOST = ("10.0.0.9", 10911)

_props = st.dictionaries(st.sampled_from(["KAFKA_HEADERS", "h1", "content-type", "x"]),
                         st.text("abc-_ 0123é", min_size=1, max_size=8), max_size=3)
_half = st.tuples(st.sampled_from([("A", 0), ("A", 1), ("B", 0)]), st.binary(max_size=60),
                  st.one_of(st.none(), st.text("abcxyz019", min_size=1, max_size=6)), _props,
                  st.integers(0, 2**40), st.sampled_from([0, 4]))


def _halves(store: Any, spec: list[tuple[Any, ...]], batch_sizes: list[int]) -> list[Any]:
    """Write the halves of ``spec`` in batches (one store time each), as prepare moves them; read back."""
    offsets: list[int] = []
    at = 0
    for n, size in enumerate(batch_sizes):
        part = spec[at:at + size]
        at += size
        if not part:
            continue
        msgs = [Message(TOPIC_TRANS_HALF, 0, body, {**({PROP_KEYS: key} if key is not None else {}), **props,
                                                     PROP_TRAN_MSG: "true", "KAFKA_TXN": "5:0",
                                                     PROP_REAL_TOPIC: dest[0], PROP_REAL_QID: str(dest[1])},
                        flag, 0, born, ("10.1.1.1", 4000)) for dest, body, key, props, born, flag in part]
        with mock.patch("time.time", return_value=1_700_000_000.0 + n):
            result = store.put_messages(msgs)
        assert result.ok
        offsets += [a.commitlog_offset for a in result.appended]
    return [store.read_message(o) for o in offsets]


def _clog(store: DiskStore) -> bytes:
    return b"".join(bytes(store.clog.read_span(seg.base, min(seg.end, store.clog.write_offset)) or b"")
                    for seg in store.clog.files.segments)


def _units(store: Any) -> list[Any]:
    return [store.cq_units(t, q, 0, 1000) for t, q in (("A", 0), ("A", 1), ("B", 0))]


@settings(max_examples=80, deadline=None)
@given(spec=st.lists(_half, min_size=1, max_size=14), sizes=st.lists(st.integers(1, 6), min_size=1, max_size=4))
def test_commit_runs_store_what_the_messages_store(tmp_path_factory: pytest.TempPathFactory,
                                                   spec: list[Any], sizes: list[int]) -> None:
    root = tmp_path_factory.mktemp("commit")
    runs_store = DiskStore(small_config(root / "runs")).open()
    ref_store = DiskStore(small_config(root / "ref")).open()
    try:
        sizes = sizes + [len(spec)]         # every half is written
        halves = _halves(runs_store, spec, sizes)
        assert [h.commitlog_offset for h in halves] == [h.commitlog_offset for h in _halves(ref_store, spec, sizes)]
        views = [record.record_view(runs_store.read_record(h.commitlog_offset)) for h in halves]
        runs = commit_runs(views, STRIP)
        assert runs is not None
        msgs = [commit_message(h, STRIP) for h in halves]
        assert [dataclasses.astuple(m) for r in runs for m in r.messages()] == [dataclasses.astuple(m) for m in msgs]
        with mock.patch("time.time", return_value=1_700_000_100.0):
            with mock.patch.object(runs_store, "put_messages", side_effect=AssertionError("not runs")):
                got = [a for r in runs for a in runs_store.put_uniform(r).appended]
            want = list(ref_store.put_messages(msgs).appended)
            ops = op_run(views, 1_700_000_100_000, HOST)
            assert ops is not None
            runs_store.put_uniform(ops)
            ref_store.put_messages([op_message(h, 1_700_000_100_000, HOST) for h in halves])
        assert [tuple(a) for a in got] == [tuple(a) for a in want]
        assert _clog(runs_store) == _clog(ref_store)
        assert _units(runs_store) == _units(ref_store)
        for a, h in zip(got, halves, strict=True):
            copy = runs_store.read_message(a.commitlog_offset)
            assert copy.prepared_transaction_offset == h.commitlog_offset
            assert copy.store_timestamp == h.store_timestamp
            assert copy.sysflag & TRANSACTION_MASK == TRANSACTION_COMMIT_TYPE
        for key in {k for *_, k, _, _, _ in spec if k is not None}:
            for topic in ("A", "B"):
                assert runs_store.query_by_key(topic, key, 100, 0, 1 << 62) == \
                    ref_store.query_by_key(topic, key, 100, 0, 1 << 62)
    finally:
        runs_store.close()
        ref_store.close()


@pytest.mark.parametrize("props", [{"TAGS": "t"}, {"DELAY": "3"}, {"UNIQ_KEY": "u"}, {PROP_KEYS: "two words"},
                                   {PROP_REAL_QID: "x"}])
def test_copies_the_run_path_cannot_carry_take_the_messages(tmp_path: Path, props: dict[str, str]) -> None:
    store = MemoryStore(small_config(tmp_path)).open()
    half = Message(TOPIC_TRANS_HALF, 0, b"v", {PROP_TRAN_MSG: "true", PROP_REAL_TOPIC: "A", PROP_REAL_QID: "0",
                                                **props})
    (a,) = store.put_messages([half]).appended
    assert commit_runs([record.record_view(store.read_record(a.commitlog_offset))], STRIP) is None


def test_a_record_view_reads_what_decode_record_reads(tmp_path: Path) -> None:
    store = MemoryStore(small_config(tmp_path)).open()
    msgs = [Message("T", 1, b"body", {"a": "1", "KEYS": "k"}, 3, 0, 77, ("10.0.0.1", 9)),
            Message("T", 1, b"", {}, 0, 0, 78, ("::1", 10), 2, 5, 1234)]
    for a in store.put_messages(msgs).appended:
        raw = store.read_record(a.commitlog_offset)
        v, m = record.record_view(raw), layout.decode_record(raw)
        assert (v.topic, v.queue_id, v.body, layout.decode_properties(v.properties), v.flag, v.sysflag,
                v.born_timestamp, v.born_host, v.store_timestamp, v.reconsume_times, v.queue_offset,
                v.commitlog_offset) == (m.topic, m.queue_id, m.body, m.properties, m.flag, m.sysflag,
                                        m.born_timestamp, m.born_host, m.store_timestamp, m.reconsume_times,
                                        m.queue_offset, m.commitlog_offset)
        for cut in (len(raw) - 1, 30):
            with pytest.raises(record.RecordError):
                record.record_view(raw[:cut])


def test_prepared_offsets_are_written_by_both_encoders() -> None:
    batch = UniformBatch("A", 0, [b"a", b"bb", b""], [1, 2, 3], {"X": "y"}, prepared_offsets=[7, 1 << 40, 0])
    out = [layout.encode_uniform("A", 0, batch.bodies, batch.born_timestamps, b"X\x01y", flag=0, sysflag=8,
                                 born_host=HOST, store_timestamp=9, store_host=("::1", 1), queue_offset=4,
                                 commitlog_offset=100, tags_code=0, prepared_offsets=batch.prepared_offsets,
                                 native=native) for native in (True, False)]
    assert out[0] == out[1]
    records = [layout.decode_record(out[0][0], off - 100) for off in layout.unit_offsets(out[0][1])]
    assert [r.prepared_transaction_offset for r in records] == [7, 1 << 40, 0]
