"""Recovery's replay natively (``recovery.scan_native`` + ``Dispatcher.replay_runs``) against the Python
scan: for any records, a store reopened after losing its checkpoint, ConsumeQueues and index (everything
replayed), after losing only its index (the index replayed, units skipped) or cleanly (units skipped) ends
with the same ConsumeQueue units, index answers and CommitLog end either way; a torn tail is cut alike."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rokka.core.model import TOPIC_SCHEDULE, TRANSACTION_PREPARED_TYPE, TRANSACTION_ROLLBACK_TYPE, Message
from rokka.core.storage import layout, recovery
from rokka.core.storage.engine import DiskStore
from storage_helpers import small_config

pytestmark = pytest.mark.skipif(layout._cstore is None, reason="the native extension is not built")

_text = st.text(st.characters(blacklist_characters="\x00\x01\x02", blacklist_categories=("Cs",)), max_size=10)
_props = st.fixed_dictionaries({}, optional={
    "TAGS": st.one_of(_text, st.sampled_from(["TagA", "标签"])),
    "KEYS": st.lists(st.text("abc xyz", max_size=5), max_size=3).map(" ".join),
    "UNIQ_KEY": st.text("0123456789ABCDEF", min_size=1, max_size=8),
    "DELAY": st.sampled_from(["1", "3"]),
})
_record = st.tuples(st.sampled_from(["T", "U", TOPIC_SCHEDULE]), st.integers(0, 2), _props,
                    st.sampled_from([0, 0, 0, TRANSACTION_PREPARED_TYPE, TRANSACTION_ROLLBACK_TYPE]),
                    st.binary(max_size=300))
_LOSSES = ["everything", "index", "nothing"]


def _fill(root: Path, records: list[tuple[str, int, dict[str, str], int, bytes]]) -> None:
    store = DiskStore(small_config(root)).open()
    for i, (topic, qid, props, txn, body) in enumerate(records):
        m = Message(topic=topic, queue_id=qid, body=body, properties=dict(props), born_timestamp=1000 + i,
                    born_host=("10.0.0.1", 4000 + i), sysflag=txn)
        assert store.put_messages([m]).status.name == "PUT_OK"
    store.close()


def _lose(root: Path, what: str) -> None:
    if what in ("everything", "index"):
        shutil.rmtree(root / "index", ignore_errors=True)
    if what == "everything":
        shutil.rmtree(root / "consumequeue", ignore_errors=True)
        (root / "checkpoint").unlink(missing_ok=True)


def _state(root: Path, keys: list[str], native: bool, monkeypatch: pytest.MonkeyPatch) -> tuple[object, ...]:
    with monkeypatch.context() as m:
        if not native:
            m.setattr(recovery.layout, "_cstore", None)
        store = DiskStore(small_config(root)).open()
    try:
        queues = {k: (q.min_offset, q.max_offset, q.units(q.min_offset, q.max_offset - q.min_offset))
                  for k, q in sorted(store.cqs.items())}
        found = {(t, k): sorted(store.query_by_key(t, k, 64, 0, 1 << 62)) for t in ("T", "U") for k in keys}
        return store.clog.write_offset, queues, found
    finally:
        store.close()


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(_record, min_size=1, max_size=60), st.sampled_from(_LOSSES))
def test_native_and_python_replay_recover_the_same(tmp_path_factory: pytest.TempPathFactory,
                                                    monkeypatch: pytest.MonkeyPatch,
                                                    records: list[tuple[str, int, dict[str, str], int, bytes]],
                                                    loss: str) -> None:
    root = tmp_path_factory.mktemp("r")
    _fill(root / "orig", records)
    keys = sorted({k for _, _, p, _, _ in records for k in (p.get("KEYS", "").split() + [p.get("UNIQ_KEY", "")]) if k})
    want = _state(root / "orig", keys, False, monkeypatch)
    for native in (True, False):
        copy = root / f"copy{native}"
        shutil.copytree(root / "orig", copy)
        _lose(copy, loss)
        assert _state(copy, keys, native, monkeypatch) == want


def test_bounded_native_calls_and_a_torn_tail(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """More records than one native call takes, then a record torn at the end: both scans keep the same."""
    monkeypatch.setattr(recovery, "NATIVE_SCAN_RECORDS", 7)
    records = [("T", i % 3, {"KEYS": f"k{i}", "TAGS": f"t{i % 4}"}, 0, b"x" * 40) for i in range(100)]
    _fill(tmp_path / "orig", records)
    seg = sorted((tmp_path / "orig" / "commitlog").iterdir())[-1]
    with open(seg, "r+b") as f:      # tear the last record: its body bytes changed, its CRC no longer holds
        data = f.read()
        end = len(data.rstrip(b"\0"))
        f.seek(end - 10)
        f.write(b"\xff" * 4)
    keys = [f"k{i}" for i in range(100)]
    states = []
    for native in (True, False):
        copy = tmp_path / f"copy{native}"
        shutil.copytree(tmp_path / "orig", copy)
        _lose(copy, "everything")
        (copy / "abort").touch()
        states.append(_state(copy, keys, native, monkeypatch))
    assert states[0] == states[1]
    assert sum(len(v) for v in states[0][2].values()) >= 90      # only the torn tail is gone
