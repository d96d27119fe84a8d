"""Per-topic time retention on top of the shared CommitLog.

Theory of operation
-------------------
Segments of the CommitLog hold every topic, so they can only expire store-wide
(``fileReservedTime``, ``rokka.core.storage.retention``).  A topic may ask to keep its
records for a *shorter* time (Kafka's ``retention.ms``): that is done logically,
the way Kafka's DeleteRecords is, by moving each of its queues' minimum offset
(``MessageStore.set_min_offset``) past the records stored more than
``retention_ms`` ago.  Readers of either protocol then start at the new minimum
(Kafka: log start offset, OFFSET_OUT_OF_RANGE below it; RocketMQ: the queue's
min offset); the bytes go when the store-wide retention removes their segment.
A retention longer than the store-wide one cannot be given: the segment goes
first (callers warn about that).

Age is the *store* time (when the broker wrote the record), not the
producer's timestamp, so a producer with a wrong clock neither keeps records
forever nor loses them at once.  ``apply`` finds, per queue, the first offset
stored at or after ``now - retention_ms`` by binary search over the
ConsumeQueue (store times grow with the offset within a queue); a record whose
store time cannot be read any more (its segment is gone) counts as expired.
Kafka deletes whole segments, so it may keep records somewhat longer; rokka's
cut is exact.

The table (topic -> ms) is rokka's own state: ``config/topicRetention.msgpack``,
written atomically on every change.  Entries of topics that no longer exist are
dropped by ``apply``.
"""

from __future__ import annotations

from collections.abc import Callable, Container
from pathlib import Path

import structlog
from rokka.core.storage.api import MessageStore
from rokka.core.storage.packfile import read_msgpack, write_msgpack_atomic

__all__ = ["FILE_NAME", "TopicRetention", "first_offset_stored_since"]

log = structlog.get_logger(__name__)

FILE_NAME = "topicRetention.msgpack"
VERSION = 1


class TopicRetention:
    def __init__(self, config_dir: Path | None) -> None:
        self._path = config_dir / FILE_NAME if config_dir is not None else None
        self._ms: dict[str, int] = {}
        if self._path is not None:
            data = read_msgpack(self._path) or {}
            self._ms = {str(t): int(ms) for t, ms in (data.get("topics") or {}).items()}

    def get(self, topic: str) -> int | None:
        """The topic's retention in ms, or None (the store-wide retention alone)."""
        return self._ms.get(topic)

    def set(self, topic: str, retention_ms: int | None) -> None:
        """Set (``retention_ms`` >= 0) or clear (None) a topic's retention."""
        if retention_ms is not None and retention_ms < 0:
            raise ValueError("retention_ms must be >= 0 (None: the store-wide retention alone)")
        if self._ms.get(topic) == retention_ms:
            return
        if retention_ms is None:
            self._ms.pop(topic, None)
        else:
            self._ms[topic] = retention_ms
        log.info("topic retention set", topic=topic, retention_ms=retention_ms)
        self._save()

    def delete(self, topic: str) -> None:
        if self._ms.pop(topic, None) is not None:
            self._save()

    def apply(self, store: MessageStore, now_ms: int, exists: Container[str]) -> int:
        """Move the min offset of every queue of every topic with a retention past its expired
        records; returns how many records were cut off.  Topics not in ``exists`` are forgotten."""
        gone = [t for t in self._ms if t not in exists]
        for t in gone:
            del self._ms[t]
        if gone:
            self._save()
        if not self._ms:
            return 0
        queues = store.queues()
        cut = 0
        for topic, ms in self._ms.items():
            for qid in queues.get(topic, ()):
                lo, hi = store.min_offset(topic, qid), store.max_offset(topic, qid)
                new = first_offset_stored_since(lambda o, t=topic, q=qid: store.store_time_at(t, q, o),
                                                lo, hi, now_ms - ms)
                if new > lo:
                    store.set_min_offset(topic, qid, new)
                    cut += new - lo
                    log.info("topic retention cut", topic=topic, queue=qid, min_offset=new, records=new - lo)
        return cut

    def _save(self) -> None:
        if self._path is not None:
            write_msgpack_atomic(self._path, {"version": VERSION, "topics": dict(self._ms)})


def first_offset_stored_since(store_time_at: Callable[[int], int | None], lo: int, hi: int, since_ms: int) -> int:
    """The first offset in [lo, hi) whose store time is >= ``since_ms`` (``hi`` if none); an offset
    whose time cannot be read counts as older."""
    a, b = lo, hi
    while a < b:
        mid = (a + b) // 2
        t = store_time_at(mid)
        if t is None or t < since_ms:
            a = mid + 1
        else:
            b = mid
    return a
