"""Per-topic retention (time and size) and per-topic Kafka configs on top of the shared CommitLog.

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

A topic may also cap its size (Kafka's ``retention.bytes``, per partition):
``apply`` walks each queue's ConsumeQueue back from the end, summing the stored
record sizes, and moves the minimum offset past the records beyond the cap
(sizes are CommitLog bytes, RocketMQ's header and properties included; Kafka
counts its own log bytes and deletes whole segments, so it may keep more).

Besides the two retentions the table keeps the other per-topic configs a
Kafka client set (``max.message.bytes``, ``message.timestamp.type``, ...) as
strings, validated by the Kafka gateway, which applies them (``configs``).

A topic whose ``cleanup.policy`` holds ``compact`` is compacted by ``compact``
(``rokka.core.storage.compaction``: the latest record per key kept, tombstones
removed after ``delete.retention.ms``, nothing sooner than ``min.compaction.lag.ms``),
which the broker runs every ``COMPACT_INTERVAL_S`` for at most ``COMPACT_SLICE_S``
of event-loop time (``compaction_loop``: a pass stops at its time and the next
goes on, queue after queue); with ``compact`` alone a topic's retention.ms /
retention.bytes are not applied (as Kafka), with ``compact,delete`` both are.

The table is rokka's own state: ``config/topicRetention.msgpack``
(``{"version": 2, "topics": {topic: ms}, "configs": {topic: {name: value}}}``;
version 1 files have no ``configs``), written atomically on every change.
Entries of topics that no longer exist are dropped by ``apply``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Container
from pathlib import Path

import structlog
import trio
from rokka.core.storage.api import MessageStore
from rokka.core.storage.compaction import Compactor, Policy
from rokka.core.storage.packfile import read_msgpack, write_msgpack_atomic

__all__ = ["CLEANUP_POLICY", "FILE_NAME", "RETENTION_BYTES", "TopicRetention", "compaction_policy",
           "first_offset_stored_since", "first_offset_within_bytes"]

log = structlog.get_logger(__name__)

FILE_NAME = "topicRetention.msgpack"
VERSION = 2
RETENTION_BYTES = "retention.bytes"
CLEANUP_POLICY = "cleanup.policy"
DELETE_RETENTION_MS = "delete.retention.ms"
MIN_COMPACTION_LAG_MS = "min.compaction.lag.ms"
_SCAN = 4096        # ConsumeQueue units read at a time by the retention.bytes walk
#: Seconds between two compaction passes (``compaction_loop``).
COMPACT_INTERVAL_S = 0.25
#: Event-loop seconds one compaction pass may take (then it stops; the next one goes on).
COMPACT_SLICE_S = 0.01


class TopicRetention:
    def __init__(self, config_dir: Path | None) -> None:
        self._path = config_dir / FILE_NAME if config_dir is not None else None
        self._ms: dict[str, int] = {}
        self._configs: dict[str, dict[str, str]] = {}
        self._windows: dict[tuple[str, int], tuple[int, int, int, int]] = {}    # retention.bytes: see _within_bytes
        self.compactor = Compactor()
        self._next_queue = 0        # compact: where a pass that ran out of time goes on
        if self._path is not None:
            data = read_msgpack(self._path) or {}
            self._ms = {str(t): int(ms) for t, ms in (data.get("topics") or {}).items()}
            self._configs = {str(t): {str(k): str(v) for k, v in c.items()}
                             for t, c in (data.get("configs") or {}).items() if c}

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
        log.info("topic_retention.set", topic=topic, retention_ms=retention_ms)
        self._save()

    def configs(self, topic: str) -> dict[str, str] | None:
        """The configs a client set on the topic (besides retention.ms), or None: read only, the
        produce path looks here for every batch."""
        return self._configs.get(topic)

    def set_config(self, topic: str, name: str, value: str | None) -> None:
        """Set (a string) or clear (None) one per-topic config; the caller has validated it."""
        own = self._configs.get(topic, {})
        if own.get(name) == value:
            return
        own = dict(own)     # replaced, never changed in place: readers may hold the old dict
        if value is None:
            own.pop(name, None)
        else:
            own[name] = value
        if own:
            self._configs[topic] = own
        else:
            self._configs.pop(topic, None)
        log.info("topic_config.set", topic=topic, name=name, value=value)
        self._save()

    def snapshot(self) -> tuple[dict[str, int], dict[str, dict[str, str]]]:
        """(retention ms by topic, other configs by topic): copies, for a slave to adopt."""
        return dict(self._ms), {t: dict(c) for t, c in self._configs.items()}

    def adopt(self, retention_ms: dict[str, int], configs: dict[str, dict[str, str]]) -> int:
        """Make the table exactly another broker's ``snapshot`` (a slave copying its master's); returns
        how many topics changed."""
        configs = {t: dict(c) for t, c in configs.items() if c}
        changed = len({t for t in {*self._ms, *retention_ms} if self._ms.get(t) != retention_ms.get(t)}
                      | {t for t in {*self._configs, *configs} if self._configs.get(t) != configs.get(t)})
        if changed:
            self._ms, self._configs = dict(retention_ms), configs
            log.info("topic_config.adopted", topics=changed)
            self._save()
        return changed

    def delete(self, topic: str) -> None:
        had_ms, had_configs = self._ms.pop(topic, None), self._configs.pop(topic, None)
        if had_ms is not None or had_configs is not None:
            self._save()

    def apply(self, store: MessageStore, now_ms: int, exists: Container[str]) -> int:
        """Move the min offset of every queue of every topic with a retention past its expired
        records; returns how many records were cut off.  Topics not in ``exists`` are forgotten."""
        gone = [t for t in {*self._ms, *self._configs} if t not in exists]
        for t in gone:
            self._ms.pop(t, None)
            self._configs.pop(t, None)
        for key in [k for k in self._windows if k[0] not in exists]:
            del self._windows[key]
        if gone:
            self._save()
        sized = {t: int(c[RETENTION_BYTES]) for t, c in self._configs.items()
                 if c.get(RETENTION_BYTES, "").lstrip("-").isdigit()      # a hand-edited file cannot stop the pass
                 and not _compact_only(c)}
        timed = {t: ms for t, ms in self._ms.items() if not _compact_only(self._configs.get(t))}
        if not timed and not sized:
            return 0
        queues = store.queues()
        cut = self._apply_bytes(store, queues, sized)
        for topic, ms in timed.items():
            for qid in queues.get(topic, ()):
                lo, hi = store.min_offset(topic, qid), store.max_offset(topic, qid)
                new = first_offset_stored_since(lambda o, t=topic, q=qid: store.store_time_at(t, q, o),
                                                lo, hi, now_ms - ms)
                if new > lo:
                    store.set_min_offset(topic, qid, new)
                    cut += new - lo
                    log.info("topic_retention.cut", topic=topic, queue=qid, min_offset=new, records=new - lo)
        return cut

    def compact(self, store: MessageStore, now_ms: int, exists: Container[str],
                budget_s: float | None = None) -> int:
        """One compaction pass over the queues of the compacted topics (``rokka.core.storage.compaction``);
        with ``budget_s`` it stops once that much time went (the next call goes on with the queue after
        the last one served).  Returns how many records became holes."""
        compacted = {t: p for t, c in self._configs.items()
                     if t in exists and (p := compaction_policy(c)) is not None}
        self.compactor.forget(compacted.__contains__)
        if not compacted:
            return 0
        queues = store.queues()
        work = [(t, q, p) for t, p in sorted(compacted.items()) for q in queues.get(t, ())]
        start = self._next_queue % len(work) if work else 0
        deadline = time.perf_counter() + budget_s if budget_s is not None else None
        holes = 0
        for i in range(len(work)):
            topic, qid, policy = work[(start + i) % len(work)]
            holes += self.compactor.run(store, topic, qid, policy, now_ms, deadline)
            if deadline is not None and time.perf_counter() >= deadline:
                self._next_queue = start + i + 1
                break
        return holes

    async def compaction_loop(self, store: MessageStore, exists: Container[str]) -> None:
        """``compact`` every ``COMPACT_INTERVAL_S`` for at most ``COMPACT_SLICE_S`` (the broker runs it)."""
        while True:
            await trio.sleep(COMPACT_INTERVAL_S)
            self.compact(store, int(time.time() * 1000), exists, COMPACT_SLICE_S)

    def _apply_bytes(self, store: MessageStore, queues: dict[str, list[int]], sized: dict[str, int]) -> int:
        cut = 0
        for topic, limit in sized.items():
            if limit < 0:
                continue
            for qid in queues.get(topic, ()):
                lo, hi = store.min_offset(topic, qid), store.max_offset(topic, qid)
                new = self._within_bytes(store, topic, qid, lo, hi, limit)
                if new > lo:
                    store.set_min_offset(topic, qid, new)
                    cut += new - lo
                    log.info("topic_retention.bytes_cut", topic=topic, queue=qid, min_offset=new, records=new - lo)
        return cut

    def _within_bytes(self, store: MessageStore, topic: str, qid: int, lo: int, hi: int, limit: int) -> int:
        """``first_offset_within_bytes`` for one queue, incrementally: the last pass's window
        (start, end, bytes) is extended by the records appended since and shrunk from its start,
        so a pass reads only new units; anything else (the log start moved for another reason, a
        different limit) walks back from the end again."""
        def sizes(o: int, n: int) -> list[int]:
            return [u.size for u in store.cq_units(topic, qid, o, n)]

        last = self._windows.get((topic, qid))
        if last is not None and last[0] == lo and last[1] <= hi and last[3] == limit:
            start, kept = lo, last[2]
            for o in range(last[1], hi, _SCAN):
                got = sizes(o, min(_SCAN, hi - o))
                kept += sum(got)
            while kept > limit and start < hi:
                got = sizes(start, min(_SCAN, hi - start))
                for size in got:
                    if kept <= limit:
                        break
                    kept -= size
                    start += 1
                if not got:
                    break
        else:
            start = first_offset_within_bytes(sizes, lo, hi, limit)
            kept = sum(sum(sizes(o, min(_SCAN, hi - o))) for o in range(start, hi, _SCAN))
        self._windows[(topic, qid)] = (start, hi, kept, limit)
        return start

    def _save(self) -> None:
        if self._path is not None:
            write_msgpack_atomic(self._path, {"version": VERSION, "topics": dict(self._ms),
                                              "configs": {t: dict(c) for t, c in self._configs.items()}})


def _compact_only(configs: dict[str, str] | None) -> bool:
    """True when the topic is compacted and not also deleted by age or size."""
    policy = {p.strip().lower() for p in (configs or {}).get(CLEANUP_POLICY, "delete").split(",")}
    return "compact" in policy and "delete" not in policy


def compaction_policy(configs: dict[str, str] | None) -> Policy | None:
    """The compaction settings of a topic's configs, or None when it is not compacted."""
    if configs is None or "compact" not in configs.get(CLEANUP_POLICY, "").lower():
        return None
    base = Policy()

    def ms(name: str, default: int) -> int:
        value = configs.get(name, "")
        return int(value) if value.isdigit() else default      # a hand-edited file cannot stop the pass

    return Policy(delete_retention_ms=ms(DELETE_RETENTION_MS, base.delete_retention_ms),
                  min_compaction_lag_ms=ms(MIN_COMPACTION_LAG_MS, base.min_compaction_lag_ms))


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


def first_offset_within_bytes(sizes_at: Callable[[int, int], list[int]], lo: int, hi: int, limit: int) -> int:
    """The first offset in [lo, hi] from which the records up to ``hi`` take at most ``limit`` bytes;
    ``sizes_at(offset, count)`` gives the stored sizes from ``offset`` (fewer when some are gone:
    then nothing is cut)."""
    kept, end = 0, hi
    while end > lo:
        start = max(lo, end - _SCAN)
        sizes = sizes_at(start, end - start)
        if len(sizes) != end - start:
            return lo
        for i in range(len(sizes) - 1, -1, -1):
            kept += sizes[i]
            if kept > limit:
                return start + i + 1
        end = start
    return lo
