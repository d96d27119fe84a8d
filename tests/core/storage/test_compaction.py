"""Compacted topics (core.storage.compaction through core.topic_retention) on the disk store."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from rokka.core.storage import compaction, layout
from rokka.core.storage.engine import DiskStore
from rokka.core.topic_retention import TopicRetention
from storage_helpers import msg, small_config


def _key_of(raw: bytes) -> tuple[bytes, bool] | None:
    props = layout.properties_of(raw)
    key = props.get("KEYS")
    return None if key is None else (key.encode(), props.get("DEL") == "1")


@pytest.fixture(autouse=True)
def key_reader() -> Iterator[None]:
    before = compaction.key_reader()
    compaction.set_key_reader(_key_of)
    yield
    compaction.set_key_reader(before)


@pytest.fixture
def disk(tmp_path: Path) -> Iterator[DiskStore]:
    s = DiskStore(small_config(tmp_path / "store")).open()
    yield s
    s.close()


def _put(store: DiskStore, keys: list[str], topic: str = "T", deleted: frozenset[str] = frozenset()) -> None:
    for i, k in enumerate(keys):
        props = {"KEYS": k, **({"DEL": "1"} if k in deleted else {})}
        store.put_messages([msg(i, topic=topic, body=b"" if k in deleted else f"{k}-{i}".encode(), **props)])
    store.flush()


def _visible(store: DiskStore, topic: str = "T") -> list[tuple[int, str]]:
    """(queue offset, KEYS) of every record a reader gets, in order."""
    out, at = [], store.min_offset(topic, 0)
    while at < store.max_offset(topic, 0):
        res = store.get_messages(topic, 0, at, 32)
        out += [(o, layout.properties_of(r).get("KEYS", "")) for o, r in zip(res.queue_offsets, res.records,
                                                                          strict=True)]
        assert res.next_begin_offset > at
        at = res.next_begin_offset
    return out


def _pass(r: TopicRetention, store: DiskStore, now_ms: int, exists: set[str]) -> int:
    """A retention pass and a compaction pass, as the broker's loops run them."""
    r.apply(store, now_ms, exists)
    return r.compact(store, now_ms, exists)


def _compacted(tmp_path: Path, topic: str = "T", **configs: str) -> TopicRetention:
    r = TopicRetention(tmp_path / "config")
    r.compactor.background = False      # the copies are written at once (one pass = one result)
    r.set_config(topic, "cleanup.policy", "compact")
    for name, value in configs.items():
        r.set_config(topic, name.replace("_", "."), value)
    return r


def test_latest_record_per_key_kept_offsets_unchanged(disk: DiskStore, tmp_path: Path) -> None:
    _put(disk, ["a", "b", "a", "c", "b", "a", "d", "a"])
    _put(disk, ["x", "x", "x"], topic="Plain")
    r = _compacted(tmp_path)
    _pass(r, disk, int(time.time() * 1000), {"T", "Plain"})
    assert _visible(disk) == [(3, "c"), (4, "b"), (6, "d"), (7, "a")]
    assert (disk.min_offset("T", 0), disk.max_offset("T", 0)) == (0, 8)      # offsets are never renumbered
    assert [o for o, _ in _visible(disk, "Plain")] == [0, 1, 2]                # other topics untouched
    assert disk.store_time_at("T", 0, 0) is not None                           # a hole still has its time
    runs, nxt = disk.get_runs("T", 0, 0, 100, 1 << 20)
    assert [(run.queue_offset, len(run.sizes)) for run in runs] == [(3, 2), (6, 2)] and nxt == 8
    _put(disk, ["c"])                                                          # a later value supersedes
    _pass(r, disk, int(time.time() * 1000), {"T", "Plain"})
    assert _visible(disk) == [(4, "b"), (6, "d"), (7, "a"), (8, "c")]


def test_holes_survive_a_restart_and_the_min_offset_stays(tmp_path: Path) -> None:
    cfg = small_config(tmp_path / "store")
    s = DiskStore(cfg).open()
    keys = [f"k{i % 7}" for i in range(2600)]           # three ConsumeQueue files (1000 units each)
    _put(s, keys)
    _pass(_compacted(tmp_path), s, int(time.time() * 1000), {"T"})
    want = [(o, keys[o]) for o in range(2600 - 7, 2600)]
    assert _visible(s) == want
    s.close()
    s = DiskStore(cfg).open()
    try:
        assert _visible(s) == want and s.min_offset("T", 0) == 0
        assert not list((tmp_path / "store").rglob("*" + compaction.TMP_SUFFIX))
    finally:
        s.close()


def test_a_crash_before_the_swap_leaves_the_original_file(tmp_path: Path) -> None:
    cfg = small_config(tmp_path / "store")
    s = DiskStore(cfg).open()
    _put(s, ["a", "a", "b"])
    q = next(iter(s.cqs.values()))
    leftover = compaction._tmp_path(q, q.files.segments[0])
    leftover.parent.mkdir()
    leftover.write_bytes(b"torn copy")      # what a crash mid-write leaves
    s.close()
    s = DiskStore(cfg).open()
    try:
        assert [o for o, _ in _visible(s)] == [0, 1, 2]
        _pass(_compacted(tmp_path), s, int(time.time() * 1000), {"T"})
        assert _visible(s) == [(1, "a"), (2, "b")]
        assert not leftover.exists()
    finally:
        s.close()


def test_tombstones_go_after_delete_retention(disk: DiskStore, tmp_path: Path) -> None:
    _put(disk, ["a", "b", "a", "c"], deleted=frozenset({"a"}))      # both values of a are tombstones
    r = _compacted(tmp_path, delete_retention_ms="60000")
    now = int(time.time() * 1000)
    _pass(r, disk, now, {"T"})
    assert _visible(disk) == [(1, "b"), (2, "a"), (3, "c")]          # the latest tombstone stays a while
    _pass(r, disk, now + 61_000, {"T"})
    assert _visible(disk) == [(1, "b"), (3, "c")]
    _put(disk, ["c"], deleted=frozenset({"c"}))                     # the last record is never removed
    _pass(r, disk, now + 200_000, {"T"})
    assert _visible(disk) == [(1, "b"), (4, "c")]


def test_min_compaction_lag_keeps_recent_records(disk: DiskStore, tmp_path: Path) -> None:
    _put(disk, ["a", "a", "a"])
    r = _compacted(tmp_path, min_compaction_lag_ms="60000")
    now = int(time.time() * 1000)
    _pass(r, disk, now, {"T"})
    assert [o for o, _ in _visible(disk)] == [0, 1, 2]
    _pass(r, disk, now + 61_000, {"T"})
    assert _visible(disk) == [(2, "a")]


def test_compact_only_topics_skip_retention_and_compact_delete_does_both(disk: DiskStore, tmp_path: Path) -> None:
    _put(disk, ["a", "b", "a"], topic="C")
    _put(disk, ["a", "b", "a"], topic="CD")
    r = TopicRetention(tmp_path / "config")
    r.compactor.background = False
    r.set_config("C", "cleanup.policy", "compact")
    r.set_config("CD", "cleanup.policy", "compact,delete")
    for t in ("C", "CD"):
        r.set(t, 0)
    _pass(r, disk, int(time.time() * 1000) + 10, {"C", "CD"})
    assert _visible(disk, "C") == [(1, "b"), (2, "a")]
    assert disk.min_offset("CD", 0) == disk.max_offset("CD", 0) == 3


def test_without_a_key_reader_nothing_is_compacted(disk: DiskStore, tmp_path: Path) -> None:
    compaction.set_key_reader(None)
    _put(disk, ["a", "a"])
    _pass(_compacted(tmp_path), disk, int(time.time() * 1000), {"T"})
    assert [o for o, _ in _visible(disk)] == [0, 1]


def test_background_copy_keeps_what_is_appended_meanwhile(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The copy is written by a worker thread; units appended before the swap finishes are carried
    over; the queue is not scanned again until then; after a restart everything is there."""
    monkeypatch.setattr(compaction, "HOLES_EVERY_S", 0.0)      # every pass may swap
    cfg = small_config(tmp_path / "store")
    s = DiskStore(cfg).open()
    try:
        _put(s, ["a", "a", "b"])
        r = TopicRetention(tmp_path / "config")
        r.set_config("T", "cleanup.policy", "compact")
        _pass(r, s, int(time.time() * 1000), {"T"})     # copy started (or done): no swap yet
        _put(s, ["c", "b", "d"])                         # appended to the original meanwhile
        swaps = r.compactor._swaps[("T", 0)]
        swaps.join()
        assert [o for o, _ in _visible(s)] == [0, 1, 2, 3, 4, 5]
        _pass(r, s, int(time.time() * 1000) - 60_000, {"T"})    # finishes the swap (3..5 carried over)
        assert _visible(s) == [(1, "a"), (2, "b"), (3, "c"), (4, "b"), (5, "d")]
        _pass(r, s, int(time.time() * 1000) + 1000, {"T"})      # scans 3..5: b at 2 is superseded
        r.compactor.settle()
        assert _visible(s) == [(1, "a"), (3, "c"), (4, "b"), (5, "d")]
        _put(s, ["e"])
    finally:
        s.close()
    s = DiskStore(cfg).open()
    try:
        assert _visible(s) == [(1, "a"), (3, "c"), (4, "b"), (5, "d"), (6, "e")]
        assert not list((tmp_path / "store").rglob("*" + compaction.TMP_SUFFIX))
    finally:
        s.close()


def test_python_run_walk_closes_a_run_at_a_hole(disk: DiskStore, tmp_path: Path) -> None:
    """``reader.get_runs`` without the native walker (its Python loop) gives the C walker's runs."""
    from rokka.core.storage import reader

    _put(disk, ["a", "b", "a", "c", "b", "a", "d", "a"])
    _pass(_compacted(tmp_path), disk, int(time.time() * 1000), {"T"})
    q = disk.cqs[("T", 0)]

    class PlainQueue:           # no walk_runs: the Python loop
        max_offset, units_per_file, units = q.max_offset, q.units_per_file, q.units

    runs, nxt = reader.get_runs(PlainQueue(), 0, disk.clog, 0, 100, 1 << 20)
    assert [(run.queue_offset, len(run.sizes)) for run in runs] == [(3, 2), (6, 2)] and nxt == 8
    native, _ = disk.get_runs("T", 0, 0, 100, 1 << 20)
    assert [bytes(run.data) for run in runs] == [bytes(run.data) for run in native]


def test_a_topic_deleted_while_its_copy_is_written(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(compaction, "HOLES_EVERY_S", 0.0)
    s = DiskStore(small_config(tmp_path / "store")).open()
    try:
        _put(s, ["a", "a", "b"])
        r = TopicRetention(tmp_path / "config")
        r.set_config("T", "cleanup.policy", "compact")
        _pass(r, s, int(time.time() * 1000), {"T"})      # a copy is being written by a worker thread
        s.delete_topic("T")
        _pass(r, s, int(time.time() * 1000), set())       # forgets the topic, drops its copy
        assert ("T", 0) not in s.cqs and not r.compactor._swaps
        assert not list((tmp_path / "store").rglob("*" + compaction.TMP_SUFFIX))
    finally:
        s.close()


def test_a_topic_made_again_is_scanned_afresh(disk: DiskStore, tmp_path: Path) -> None:
    """The maps of a deleted topic never apply to a new topic of the same name."""
    _put(disk, ["x", "a", "y"])
    r = _compacted(tmp_path)
    _pass(r, disk, int(time.time() * 1000), {"T"})       # the map: a -> 1
    disk.delete_topic("T")
    _put(disk, ["b", "c", "d", "a", "e"])               # a new T, before the next pass
    _pass(r, disk, int(time.time() * 1000), {"T"})
    assert [o for o, _ in _visible(disk)] == [0, 1, 2, 3, 4]


def test_holes_wait_for_the_next_swap_in_the_background(tmp_path: Path) -> None:
    """In the background a queue's files are swapped at most once every HOLES_EVERY_S: holes found
    meanwhile wait (none is lost), so a busy topic does not rewrite its file on every pass."""
    s = DiskStore(small_config(tmp_path / "store")).open()
    try:
        _put(s, ["a", "a", "b"])
        r = TopicRetention(tmp_path / "config")
        r.set_config("T", "cleanup.policy", "compact")
        now = int(time.time() * 1000) + 1000
        assert r.compact(s, now, {"T"}) == 1                               # the first swap goes at once
        r.compactor.settle()
        _put(s, ["b", "c", "c"])
        assert r.compact(s, now + 1000, {"T"}) == 0 and not r.compactor._swaps      # found, waiting
        r.compactor._state[("T", 0)].last_swap -= compaction.HOLES_EVERY_S
        assert r.compact(s, now + 1000, {"T"}) == 2                        # both waiting holes in one swap
        r.compactor.settle()
        assert _visible(s) == [(1, "a"), (3, "b"), (5, "c")]
    finally:
        s.close()
