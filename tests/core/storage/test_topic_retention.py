"""Per-topic retention (core.topic_retention) over both store engines."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from rokka.core.storage.api import MessageStore
from rokka.core.topic_retention import TopicRetention, first_offset_stored_since
from storage_helpers import msg


def test_first_offset_stored_since() -> None:
    times = [10, 10, 20, 30, 30, 40]
    at = times.__getitem__
    assert first_offset_stored_since(at, 0, 6, 5) == 0
    assert first_offset_stored_since(at, 0, 6, 10) == 0
    assert first_offset_stored_since(at, 0, 6, 11) == 2
    assert first_offset_stored_since(at, 0, 6, 30) == 3
    assert first_offset_stored_since(at, 0, 6, 41) == 6
    assert first_offset_stored_since(at, 2, 6, 0) == 2          # never below lo
    assert first_offset_stored_since(at, 3, 3, 100) == 3        # empty range
    assert first_offset_stored_since(lambda o: None if o < 4 else times[o], 0, 6, 0) == 4  # unreadable = old


def test_apply_cuts_each_queue_of_the_topic_only(store: MessageStore, tmp_path: Path) -> None:
    for q in (0, 1):
        store.put_messages([msg(i, topic="T", queue_id=q) for i in range(5)])
    store.put_messages([msg(i, topic="Other", queue_id=0) for i in range(5)])
    time.sleep(0.02)
    for q in (0, 1):
        store.put_messages([msg(i, topic="T", queue_id=q) for i in range(5, 8)])
    old, new = store.store_time_at("T", 0, 4), store.store_time_at("T", 0, 5)
    assert old is not None and new is not None and old < new
    r = TopicRetention(tmp_path)
    r.set("T", 1000)
    assert r.apply(store, new + 1000, {"T", "Other"}) == 10      # 5 old records in each of 2 queues
    assert [store.min_offset("T", q) for q in (0, 1)] == [5, 5]
    assert store.min_offset("Other", 0) == 0
    assert r.apply(store, new + 1000, {"T", "Other"}) == 0       # nothing more is due
    newest = max(store.store_time_at("T", q, 7) or 0 for q in (0, 1))
    assert r.apply(store, newest + 1001, {"T", "Other"}) == 6    # now everything is
    assert store.min_offset("T", 0) == store.max_offset("T", 0) == 8


def test_table_persists_and_forgets_deleted_topics(store: MessageStore, tmp_path: Path) -> None:
    r = TopicRetention(tmp_path)
    r.set("A", 60_000)
    r.set("B", 0)
    assert TopicRetention(tmp_path).get("A") == 60_000 and TopicRetention(tmp_path).get("B") == 0
    r.set("A", None)
    assert TopicRetention(tmp_path).get("A") is None
    r.apply(store, 0, {"C"})                                     # B no longer exists
    assert TopicRetention(tmp_path).get("B") is None
    with pytest.raises(ValueError):
        r.set("A", -1)
    assert TopicRetention(None).get("A") is None                 # memory only
