"""Compacted topics (Kafka ``cleanup.policy=compact``) on the shared CommitLog.

Theory of operation
-------------------
Anchors: Kafka's log cleaner and RocketMQ 5's compaction topics -- the latest
record per key is kept, older records of the key go, a tombstone (null value)
goes once ``delete.retention.ms`` has passed, and offsets never change:
consumers see gaps, never renumbering.

The CommitLog holds every topic, so records are not copied anywhere: a record
is compacted away by turning its ConsumeQueue unit into a *hole*
(``consumequeue.hole_of``: the CommitLog offset stored negative, size and tags
kept).  Readers of either protocol skip a hole as a removed record (Kafka Fetch
returns the next existing offset; a window holding only holes answers with an
empty control batch past it, so the consumer moves on); ListOffsets, the log
start and the end offset are unchanged; the record's bytes go with its CommitLog
segment (the store-wide retention, ``fileReservedTime``, which applies to
compacted topics as to every other: a Limit).

Per queue a ``Compactor`` keeps, in memory, the offset of the latest record of
every key seen (keys longer than 32 bytes by a 16-byte BLAKE2 digest) and the
latest tombstones with their store times. A pass (``run``, from
``TopicRetention.compact``: a few ms of the event loop every 250 ms) scans the
units from where the last pass stopped up to the *cleanable end*: the first
record stored less than ``min.compaction.lag.ms`` ago; at most ``SCAN_BUDGET``
units per pass and no longer than its deadline, so a big topic is caught up
over several passes without holding the event loop. Every record a later
record of its key supersedes, and every tombstone older than
``delete.retention.ms`` (by store time), becomes a hole -- never the queue's
last record, so the end offset always has a record behind it.
Which records have a key and which are
tombstones is decided by a ``KeyReader`` (raw stored record -> (key, is
tombstone) or None: never dropped), which the Kafka gateway registers
(``set_key_reader``): core does not know Kafka's record mapping.  Kafka
transaction markers and aborted placeholders have no key and stay; data of a
transaction only reach the topic's queue at commit (``rokka.gateway.kafka.txn.coordinator``),
so everything scanned is committed.  After a restart the maps are rebuilt by
scanning from the log start again (holes are skipped).

Crash safety: the holes of one ConsumeQueue file are applied by writing a
patched copy of the file's written units (``<store>/compaction/<topic
hash>-<queue>-<name>.compacting``: same filesystem, outside the queue's
directory, which a topic deletion removes whole), fsyncing it and renaming
it over the original (then the directory is fsynced), and the
queue's map is reopened on the new file.  A crash leaves either the old file
(the next pass compacts again) or the new one, never a torn unit; a left-over
``.compacting`` file is removed by the next pass.  Recovery re-dispatches only
units past a queue's end, so holes survive restarts; a unit is made a hole
only when its record is flushed.  The copy is written and fsynced by a worker
thread (a 6 MB file's fsync would stall the event loop for a few hundred ms);
the next pass, on the event loop thread where appends happen too, copies the
units appended to the original since (and fdatasyncs them), then renames.
Only written units change hands, so no append is lost; the queue is not
scanned again until its swap is finished.  A queue's files are swapped at most
once every ``HOLES_EVERY_S`` (the holes found meanwhile wait for the next
swap), so a busy topic does not rewrite its ConsumeQueue file on every pass.
"""

from __future__ import annotations

import hashlib
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import structlog
from rokka.core.storage.consumequeue import UNIT, UNIT_SIZE, ConsumeQueue, hole_of
from rokka.core.storage.segment import Segment

__all__ = ["Compactor", "KeyReader", "Policy", "HOLES_EVERY_S", "SCAN_BUDGET", "TMP_DIR", "TMP_SUFFIX",
           "key_reader", "remove_leftovers", "set_key_reader", "write_holes"]

log = structlog.get_logger(__name__)

#: raw stored record -> (key, is a tombstone), or None when the record is never compacted away.
KeyReader = Callable[[bytes], "tuple[bytes, bool] | None"]
#: Units a pass scans per queue at most.
SCAN_BUDGET = 10_000
TMP_SUFFIX = ".compacting"
TMP_DIR = "compaction"
#: Seconds between two file swaps of one queue at most (holes found meanwhile wait for the next).
HOLES_EVERY_S = 5.0
_CHUNK = 256
_DIGEST_FROM = 32

_reader: KeyReader | None = None


def set_key_reader(reader: KeyReader | None) -> None:
    """Register how keys and tombstones are read from stored records (the Kafka gateway does)."""
    global _reader
    _reader = reader


def key_reader() -> KeyReader | None:
    return _reader


@dataclass(frozen=True)
class Policy:
    """A compacted topic's settings (Kafka's names, ms)."""

    delete_retention_ms: int = 86_400_000
    min_compaction_lag_ms: int = 0


@dataclass
class _QueueState:
    queue: ConsumeQueue | None = None       # the maps are of this queue (a topic deleted and made again: another)
    scanned_to: int = 0
    latest: dict[bytes, int] = field(default_factory=dict)          # key id -> offset of its latest record
    tombstones: dict[int, tuple[int, bytes]] = field(default_factory=dict)   # offset -> (store ms, key id)
    pending: list[int] = field(default_factory=list)    # offsets to make holes at the next swap
    last_swap: float = float("-inf")                    # time.monotonic() of the last one


def _key_id(key: bytes) -> bytes:
    return key if len(key) < _DIGEST_FROM else b"\xff" + hashlib.blake2b(key, digest_size=16).digest()


class Compactor:
    """The per-queue maps of the compacted topics and the passes over them."""

    def __init__(self, background: bool = True) -> None:
        self.background = background
        self._state: dict[tuple[str, int], _QueueState] = {}
        self._swaps: dict[tuple[str, int], _Swaps] = {}

    def settle(self) -> None:
        """Wait for the copies being written and finish their swaps (tests; a clean stop)."""
        for key, swaps in list(self._swaps.items()):
            swaps.join()
            swaps.finish()
            del self._swaps[key]

    def forget(self, keep: Callable[[str], bool]) -> None:
        """Drop the maps of topics ``keep`` refuses (deleted, or no longer compacted)."""
        for key in [k for k in self._state if not keep(k[0])]:
            del self._state[key]
        for key in [k for k in self._swaps if not keep(k[0])]:
            self._swaps.pop(key).discard()      # its topic is gone or no longer compacted

    def run(self, store: Any, topic: str, qid: int, policy: Policy, now_ms: int,
            deadline: float | None = None) -> int:
        """One pass over a queue of a compacted topic (its scan stops at ``deadline``, a
        ``time.perf_counter`` value); returns how many records became holes."""
        q: ConsumeQueue | None = getattr(store, "cqs", {}).get((topic, qid))
        reader = _reader
        if q is None or reader is None:
            return 0
        pending = self._swaps.get((topic, qid))
        if pending is not None:
            if not pending.done():
                return 0        # the last pass's copies are still being written
            pending.finish()
            del self._swaps[(topic, qid)]
        lo, hi = store.min_offset(topic, qid), store.max_offset(topic, qid)
        st = self._state.get((topic, qid))
        if st is None or st.queue is not q:
            remove_leftovers(q)
            st = self._state[(topic, qid)] = _QueueState(queue=q, scanned_to=lo)
        if st.scanned_to < lo or st.scanned_to > hi:     # the log start moved past the scan, or a truncation
            st.scanned_to, st.latest, st.tombstones, st.pending = lo, {}, {}, []
        end = self._cleanable_end(store, topic, qid, st.scanned_to, hi, now_ms - policy.min_compaction_lag_ms)
        drops = self._scan(store, q, reader, st, end, store.flushed_offset, deadline)
        cutoff = now_ms - policy.delete_retention_ms
        for off, (ts, kid) in list(st.tombstones.items()):     # in offset order, so in store time order
            if ts > cutoff or off >= hi - 1:
                break
            drops.append(off)
            del st.tombstones[off]
            if st.latest.get(kid) == off:
                del st.latest[kid]
        st.pending += drops
        if not st.pending or (self.background and time.monotonic() - st.last_swap < HOLES_EVERY_S):
            return 0
        holes = sorted(o for o in set(st.pending) if lo <= o < hi - 1)
        st.pending, st.last_swap = [], time.monotonic()
        if holes:
            swaps = write_holes(q, holes, self.background)
            if self.background:
                self._swaps[(topic, qid)] = swaps
            log.info("compaction.pass", topic=topic, queue=qid, holes=len(holes), scanned_to=st.scanned_to,
                     keys=len(st.latest))
        return len(holes)

    @staticmethod
    def _cleanable_end(store: Any, topic: str, qid: int, start: int, hi: int, since_ms: int) -> int:
        """The first offset in [start, hi] stored after ``since_ms``, at most ``SCAN_BUDGET`` past ``start``."""
        a, b = start, max(start, min(hi, start + SCAN_BUDGET))
        while a < b:
            mid = (a + b) // 2
            t = store.store_time_at(topic, qid, mid)
            if t is not None and t > since_ms:
                b = mid
            else:
                a = mid + 1
        return a

    @staticmethod
    def _scan(store: Any, q: ConsumeQueue, reader: KeyReader, st: _QueueState, end: int, flushed: int,
              deadline: float | None) -> list[int]:
        drops: list[int] = []
        o = st.scanned_to
        while o < end and (deadline is None or time.perf_counter() < deadline):
            units = q.units(o, min(_CHUNK, end - o))
            if not units:
                break
            for i, (coff, size, _) in enumerate(units):
                if coff < 0:
                    continue            # a hole already
                if coff + size > flushed:
                    st.scanned_to = o + i
                    return drops        # not durable yet: the next pass goes on from here
                raw = store.read_record(coff, size)
                got = reader(raw) if raw is not None else None
                if got is None:
                    continue
                kid = _key_id(got[0])
                prev = st.latest.get(kid)
                if prev is not None:
                    drops.append(prev)
                    st.tombstones.pop(prev, None)
                st.latest[kid] = o + i
                if got[1]:
                    ts = store.store_time_at(q.topic, q.queue_id, o + i)
                    st.tombstones[o + i] = (ts if ts is not None else 0, kid)
            o += len(units)
        st.scanned_to = max(st.scanned_to, o)
        return drops


def write_holes(q: ConsumeQueue, offsets: list[int], background: bool = False) -> _Swaps:
    """Make the units at ``offsets`` (sorted) holes, one atomic file swap per ConsumeQueue file
    (module doc).  With ``background`` the copies are written and fsynced by a worker thread: call
    ``finish`` on the returned swaps (on this thread) once ``done``; else they are finished at once."""
    by_base: dict[int, list[int]] = {}
    for o in offsets:
        by_base.setdefault(o * UNIT_SIZE - (o * UNIT_SIZE) % q.file_size, []).append(o)
    copies: list[tuple[Segment, bytes]] = []
    for base, offs in by_base.items():
        seg = q.files.find(base)
        if seg is None:
            continue
        written = min(seg.size, max(0, q.max_offset * UNIT_SIZE - seg.base))
        data = bytearray(seg.mm[:written])
        for o in offs:
            pos = o * UNIT_SIZE - base
            if pos + UNIT_SIZE > written:
                continue
            coff, size, code = UNIT.unpack_from(data, pos)
            if coff >= 0 and size > 0:
                UNIT.pack_into(data, pos, hole_of(coff), size, code)
        copies.append((seg, bytes(data)))
    swaps = _Swaps(q, copies)
    if background:
        swaps.start()
    else:
        swaps.write()
        swaps.finish()
    return swaps


class _Swaps:
    """Patched copies of some files of one ConsumeQueue: written and fsynced (``write``, maybe on a
    worker thread), then renamed over the originals on the event loop thread (``finish``), after
    copying the units appended to the originals meanwhile."""

    def __init__(self, q: ConsumeQueue, copies: list[tuple[Segment, bytes]]) -> None:
        self.q = q
        self.copies = copies
        self.error: OSError | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self.write, name="compaction-copy", daemon=True)
        self._thread.start()

    def done(self) -> bool:
        return self._thread is None or not self._thread.is_alive()

    def join(self) -> None:
        if self._thread is not None:
            self._thread.join()

    def discard(self) -> None:
        self.join()
        for seg, _ in self.copies:
            _tmp_path(self.q, seg).unlink(missing_ok=True)
        self.copies = []

    def write(self) -> None:
        try:
            for seg, data in self.copies:
                _write_copy(_tmp_path(self.q, seg), data, seg.size)
        except OSError as exc:
            self.error = exc

    def finish(self) -> None:
        q = self.q
        for seg, data in self.copies:
            tmp = _tmp_path(q, seg)
            if self.error is not None or seg not in q.files.segments:     # failed, or the file went meanwhile
                tmp.unlink(missing_ok=True)
                if self.error is not None:
                    log.error("compaction.copy_failed", topic=q.topic, queue=q.queue_id, error=str(self.error))
                continue
            end = min(seg.size, max(0, q.max_offset * UNIT_SIZE - seg.base))
            if end > len(data):     # units appended to the original since the copy was taken
                fd = os.open(tmp, os.O_WRONLY)
                try:
                    _pwrite_all(fd, seg.mm[len(data):end], len(data))
                    os.fdatasync(fd)
                finally:
                    os.close(fd)
            os.replace(tmp, seg.path)
            _fsync_dir(seg.path.parent)
            with q.files.lock:
                i = q.files.segments.index(seg)
                q.files.segments[i] = Segment(seg.path, seg.base, seg.size, existing=True,
                                              random_access=q.files.random_access)
                seg.close()
            q._set_tail()   # the tail map may have been the swapped file's
        self.copies = []


def _tmp_prefix(q: ConsumeQueue) -> str:
    return f"{hashlib.blake2b(q.topic.encode(), digest_size=8).hexdigest()}-{q.queue_id}-"


def _tmp_dir(q: ConsumeQueue) -> Path:
    """``<store>/compaction``: beside the ConsumeQueue tree, on its filesystem (the rename is atomic),
    outside the queue's own directory (a topic deleted meanwhile is removed whole)."""
    return q.files.directory.parent.parent.parent / TMP_DIR


def _tmp_path(q: ConsumeQueue, seg: Segment) -> Path:
    return _tmp_dir(q) / (_tmp_prefix(q) + seg.path.name + TMP_SUFFIX)


def _pwrite_all(fd: int, data: bytes | memoryview, pos: int) -> None:
    view = memoryview(data)
    while view:
        n = os.pwrite(fd, view, pos)
        view, pos = view[n:], pos + n


def _write_copy(tmp: Path, data: bytes, size: int) -> None:
    tmp.parent.mkdir(exist_ok=True)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        _pwrite_all(fd, data, 0)
        os.ftruncate(fd, size)
        os.fsync(fd)
    finally:
        os.close(fd)


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def remove_leftovers(q: ConsumeQueue) -> None:
    """Delete a ``.compacting`` copy a crash left behind (the original file is intact)."""
    for p in _tmp_dir(q).glob(_tmp_prefix(q) + "*" + TMP_SUFFIX):
        p.unlink(missing_ok=True)
        log.warning("compaction.leftover_removed", path=str(p))
