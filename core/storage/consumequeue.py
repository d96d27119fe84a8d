"""ConsumeQueue: per topic/queue index of 20-byte units into the CommitLog.

Theory of operation
-------------------
Unit ``n`` (queue offset n) sits at byte ``n * 20`` of the queue's logical
byte space, split into files of ``consumequeue_file_size`` bytes named by
their base byte offset (``consumequeue/<topic>/<queueId>/<20 digits>``)::

    +----------------------+-------------+-------------------+
    | commitlog offset i64 | size  i32   | tags code   i64   |   (big-endian)
    +----------------------+-------------+-------------------+

(upstream: rocketmq ``ConsumeQueue.java``, ``CQ_STORE_UNIT_SIZE = 20``).
Single units are written into the mmap with ``pack_into``; a run of units
(``put_units``, one per stored batch) with one ``pwrite`` on the file: on
this kind of VM a write fault on a fresh page of a shared file map costs
~4x what ``pwrite`` pays to add the same page to the page cache (measured:
4.7 vs 1.2 us per 4 KiB page), and the map sees the written bytes either
way (one page cache).  A run that continues the previous write inside the
same page (small batches: a Kafka partition batch of a few records) is
stored through the map instead: that page is already in the file, so the
store costs neither a fault that allocates nor a syscall.  A unit with size 0 is "never written", so the end
of a queue is the first zero unit after the last file's start (binary
search, units are written in order).  Reads of many units for a fetch or pull
(``walk_runs``) hand the units of one file, in place in the map, to the C
walker ``_cstore.cq_runs`` (see ``reader.get_runs``); reads that filter on the tags code
(``scan_tags``) hand them to ``_cqscan.tag_filter`` (see ``reader.get_messages``).

``max_offset`` is the next unit to write.  ``min_offset`` is the first unit
whose record is still in the CommitLog (``correct_min``), never below the
first file's base.  The queue never rewrites a written unit except through
``truncate`` (recovery) which zeroes units past a point, and compaction
(``rokka.core.storage.compaction``) which turns a unit into a *hole*: its
CommitLog offset ``o`` stored as ``-o - 1`` (``hole_of``), size and tags code
kept.  Readers of records (``units``, ``walk_runs``) see the raw negative
offset, below any CommitLog minimum, and skip the unit as a removed record;
``unit``, ``cq_units`` and ``delete_below`` give the original offset
(``live_offset``), so searches over CommitLog offsets and store times stay
monotone.
"""

from __future__ import annotations

import functools
import mmap
import struct
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import structlog
from rokka.core.storage.api import CqUnit
from rokka.core.storage.segment import Segment, SegmentFiles

log = structlog.get_logger(__name__)
_T = TypeVar("_T")

try:    # the run walker in C (core/storage/_cstore.c, cq_runs); absent when the extension was not built
    import rokka.core.storage._cstore as _cstore
except ImportError:     # pragma: no cover - depends on the build
    _cstore = None  # type: ignore[assignment]
try:    # the tag-filtered walk in C (core/storage/_cqscan.c, tag_filter)
    import rokka.core.storage._cqscan as _cqscan
except ImportError:     # pragma: no cover - depends on the build
    _cqscan = None  # type: ignore[assignment]

UNIT_SIZE = 20
UNIT = struct.Struct(">qiq")


def hole_of(commitlog_offset: int) -> int:
    """The stored CommitLog offset of a compacted-away unit (negative: readers skip it)."""
    return -commitlog_offset - 1


def live_offset(stored: int) -> int:
    """The CommitLog offset a unit points at, a hole's included."""
    return stored if stored >= 0 else -stored - 1


@functools.lru_cache(maxsize=256)
def _units_struct(n: int) -> struct.Struct:
    """``n`` consecutive units as one struct (one pack_into per append batch)."""
    return struct.Struct(">" + "qiq" * n)


class ConsumeQueue:
    def __init__(self, directory: Path, topic: str, queue_id: int, file_size: int) -> None:
        if file_size % UNIT_SIZE:
            raise ValueError(f"consumequeue_file_size {file_size} is not a multiple of 20")
        self.topic = topic
        self.queue_id = queue_id
        self.files = SegmentFiles(directory, file_size, random_access=True)
        self.file_size = file_size
        self.units_per_file = file_size // UNIT_SIZE
        self.max_offset = 0
        self.min_offset = 0
        self.dirty = False
        self._tail_mm: mmap.mmap | None = None
        self._tail_seg: Segment | None = None
        self._tail_end = -1
        self._tail_lo = 0   # first queue offset of the tail file
        self._tail_hi = 0   # one past its last unit

    # -- load / repair ------------------------------------------------------------
    def load(self) -> int | None:
        """Open files and find the end.  Returns the first damaged queue offset, or None.

        Damage = a file that was short on disk, or a gap (a file not starting
        where the previous one ended).  Units from the damage on are dropped
        (the caller re-dispatches them from the CommitLog).
        """
        short = self.files.load()
        damaged: int | None = None
        bases = self.files.bases
        for i, seg in enumerate(self.files.segments):
            if i and bases[i] != bases[i - 1] + self.file_size:
                damaged = bases[i - 1] // UNIT_SIZE + self.units_per_file
                log.error("store.consumequeue_file_missing", topic=self.topic, queue_id=self.queue_id,
                          path=str(seg.path), expected_base=bases[i - 1] + self.file_size)
                break
            if seg in short:
                damaged = (seg.base + seg.size - seg.short_by) // UNIT_SIZE
                break
        if not bases:
            return None
        self.min_offset = bases[0] // UNIT_SIZE
        if damaged is not None:
            self.max_offset = damaged
            self.truncate(max(damaged, self.min_offset))
            damaged = max(damaged, self.min_offset)
        else:
            self.max_offset = self._find_end()
        self._set_tail()
        return damaged

    def _find_end(self) -> int:
        segs = self.files.segments
        for seg in reversed(segs):
            mm = seg.mm
            lo, hi = 0, self.units_per_file      # first zero unit in [lo, hi]
            while lo < hi:
                mid = (lo + hi) // 2
                if UNIT.unpack_from(mm, mid * UNIT_SIZE)[1] > 0:
                    lo = mid + 1
                else:
                    hi = mid
            if lo or seg is segs[0]:
                return seg.base // UNIT_SIZE + lo
        return self.min_offset

    def truncate(self, queue_offset: int) -> None:
        """Drop units at ``queue_offset`` and after (zero them; delete later files)."""
        queue_offset = max(queue_offset, self.min_offset)
        byte = queue_offset * UNIT_SIZE
        segs = self.files.segments
        keep = 0
        for i, seg in enumerate(segs):
            if seg.base < byte or (i == 0):
                keep = i + 1
        for seg in segs[:keep]:
            if seg.end > byte:
                seg.zero(max(0, byte - seg.base))
        self.files.drop_from(keep)
        self.max_offset = min(self.max_offset, queue_offset)
        self._set_tail()

    def _set_tail(self) -> None:
        self._tail_end = -1         # byte (in the tail file) just past the last write; -1 unknown
        seg = self.files.last
        if seg is None:
            self._tail_mm, self._tail_seg, self._tail_lo, self._tail_hi = None, None, 0, 0
        else:
            self._tail_mm, self._tail_seg = seg.mm, seg
            self._tail_lo = seg.base // UNIT_SIZE
            self._tail_hi = self._tail_lo + self.units_per_file

    # -- writing ----------------------------------------------------------------
    def put(self, queue_offset: int, commitlog_offset: int, size: int, tags_code: int) -> None:
        """Write unit ``queue_offset`` (must be ``max_offset``, or a re-dispatch of it)."""
        if not (self._tail_lo <= queue_offset < self._tail_hi) or self._tail_mm is None:
            self._ensure_file(queue_offset)
        at = (queue_offset - self._tail_lo) * UNIT_SIZE
        UNIT.pack_into(self._tail_mm, at, commitlog_offset, size, tags_code)  # type: ignore[arg-type]
        self._tail_end = at + UNIT_SIZE
        self.max_offset = queue_offset + 1
        self.dirty = True

    def put_many(self, queue_offset: int, flat: list[int]) -> None:
        """Write consecutive units from ``queue_offset``; ``flat`` = commitlog offset, size, tags code, ..."""
        n = len(flat) // 3
        if (self._tail_seg is not None and self._tail_lo <= queue_offset
                and queue_offset + n <= self._tail_hi):
            self._write_tail((queue_offset - self._tail_lo) * UNIT_SIZE, _units_struct(n).pack(*flat))
            self.max_offset = queue_offset + n
            self.dirty = True
            return
        for i in range(n):
            self.put(queue_offset + i, flat[3 * i], flat[3 * i + 1], flat[3 * i + 2])

    def put_units(self, queue_offset: int, units: bytes) -> None:
        """Write consecutive raw 20-byte units (as ``layout.encode_uniform`` makes them) from ``queue_offset``."""
        n = len(units) // UNIT_SIZE
        if not n:
            return
        if (self._tail_mm is None or not self._tail_lo <= queue_offset < self._tail_hi):
            self._ensure_file(queue_offset)
        fit = min(n, self._tail_hi - queue_offset)
        at = (queue_offset - self._tail_lo) * UNIT_SIZE
        self._write_tail(at, units if fit == n else units[:fit * UNIT_SIZE])
        self.max_offset = queue_offset + fit
        self.dirty = True
        if fit == n:
            return
        for i, (off, size, code) in enumerate(UNIT.iter_unpack(units[fit * UNIT_SIZE:]), queue_offset + fit):
            self.put(i, off, size, code)

    def _write_tail(self, at: int, data: bytes) -> None:
        """Units at byte ``at`` of the tail file: stored through the map when they continue the last
        write inside its page (a page the file already holds: no fault allocates it, and no syscall),
        else one ``pwrite`` (module doc)."""
        inside = at % mmap.PAGESIZE
        if at == self._tail_end and inside and inside + len(data) <= mmap.PAGESIZE:
            self._tail_mm[at:at + len(data)] = data  # type: ignore[index]
        else:
            assert self._tail_seg is not None
            self._tail_seg.pwrite(at, data)
        self._tail_end = at + len(data)

    def _ensure_file(self, queue_offset: int) -> None:
        byte = queue_offset * UNIT_SIZE
        base = byte - byte % self.file_size
        seg = self.files.find(byte)
        if seg is None:
            if not self.files.segments:
                self.min_offset = base // UNIT_SIZE
            seg = self.files.create(base)
        if seg is not self.files.last:
            raise RuntimeError(f"consumequeue {self.topic}/{self.queue_id}: write at {queue_offset} "
                               "is not in the tail file")
        self._set_tail()

    # -- reading ----------------------------------------------------------------
    def unit(self, queue_offset: int) -> tuple[int, int, int] | None:
        if not (self.min_offset <= queue_offset < self.max_offset):
            return None
        if self._tail_lo <= queue_offset < self._tail_hi and self._tail_mm is not None:
            u = UNIT.unpack_from(self._tail_mm, (queue_offset - self._tail_lo) * UNIT_SIZE)
        else:
            seg = self.files.find(queue_offset * UNIT_SIZE)
            if seg is None:
                return None
            u = UNIT.unpack_from(seg.mm, queue_offset * UNIT_SIZE - seg.base)
        return u if u[0] >= 0 else (live_offset(u[0]), u[1], u[2])

    def units(self, queue_offset: int, count: int) -> list[tuple[int, int, int]]:
        """Up to ``count`` units from ``queue_offset``, stopping at a file end or max_offset."""
        if not (self.min_offset <= queue_offset < self.max_offset) or count <= 0:
            return []
        byte = queue_offset * UNIT_SIZE
        seg = self.files.find(byte)
        if seg is None:
            return []
        n = min(count, self.max_offset - queue_offset, (seg.end - byte) // UNIT_SIZE)
        pos = byte - seg.base
        return list(UNIT.iter_unpack(seg.mm[pos:pos + n * UNIT_SIZE]))

    def walk_runs(self, queue_offset: int, count: int, clog_min: int, max_msgs: int, max_bytes: int,
                  taken: int = 0, total: int = 0) -> tuple[list[tuple[int, int, int, bytes]], int, int, int] | None:
        """``_cstore.cq_runs`` over up to ``count`` units from ``queue_offset`` (stopping at a file end
        or max_offset), read in place from the map; None when there is no unit there (or no native
        module)."""
        if _cstore is None:
            return None
        return self._lend_units(queue_offset, count, lambda view: _cstore.cq_runs(
            view, clog_min, max_msgs, max_bytes, taken, total))

    def scan_tags(self, queue_offset: int, count: int, codes: bytes | None, clog_min: int, max_msgs: int,
                  max_bytes: int, taken: int, total: int, span: memoryview | None, span_start: int,
                  match: Callable[[dict[str, str]], bool] | None = None, names: tuple[bytes, ...] | None = None,
                  answers: dict[bytes, bool] | None = None,
                  ) -> tuple[list[bytes], list[int], int, int, int, bool, int] | None:
        """``_cqscan.tag_filter`` over up to ``count`` units from ``queue_offset`` (stopping at a file end
        or max_offset), read in place from the map; None when there is no unit there (or no native
        module).  ``reader.get_messages`` drives it, lending the CommitLog ``span`` (and, for SQL92,
        the properties predicate ``match``, the names it reads and its memo of answers)."""
        if _cqscan is None:
            return None
        return self._lend_units(queue_offset, count, lambda view: _cqscan.tag_filter(
            view, queue_offset, codes, clog_min, max_msgs, max_bytes, taken, total, span, span_start,
            match, names, answers))

    def _lend_units(self, queue_offset: int, count: int, use: Callable[[memoryview], _T]) -> _T | None:
        """``use`` a view of up to ``count`` units from ``queue_offset`` (stopping at a file end or
        max_offset), in place in the map; None when there is no unit there."""
        if not (self.min_offset <= queue_offset < self.max_offset) or count <= 0:
            return None
        byte = queue_offset * UNIT_SIZE
        seg = self.files.find(byte)
        if seg is None:
            return None
        n = min(count, self.max_offset - queue_offset, (seg.end - byte) // UNIT_SIZE)
        pos = byte - seg.base
        whole = memoryview(seg.mm)
        try:
            with whole[pos:pos + n * UNIT_SIZE] as view:
                return use(view)
        finally:
            whole.release()     # no export may outlive this call: the map is closed at a file drop

    def cq_units(self, queue_offset: int, count: int) -> list[CqUnit]:
        out: list[CqUnit] = []
        while len(out) < count:
            got = self.units(queue_offset, count - len(out))
            if not got:
                break
            out.extend(CqUnit(queue_offset + i, live_offset(u[0]), u[1], u[2]) for i, u in enumerate(got))
            queue_offset += len(got)
        return out

    def last_unit(self) -> tuple[int, int, int] | None:
        return self.unit(self.max_offset - 1)

    # -- retention ----------------------------------------------------------------
    def correct_min(self, commitlog_min: int) -> None:
        """Move ``min_offset`` to the first unit whose record is still in the CommitLog."""
        lo, hi = self.min_offset, self.max_offset
        while lo < hi:
            mid = (lo + hi) // 2
            u = self.unit(mid)
            if u is not None and u[0] >= commitlog_min:
                hi = mid
            else:
                lo = mid + 1
        self.min_offset = lo

    def delete_below(self, commitlog_min: int) -> int:
        """Delete whole files (never the last) whose units all point below ``commitlog_min``."""
        removed = 0
        while len(self.files.segments) > 1:
            seg = self.files.segments[0]
            last = UNIT.unpack_from(seg.mm, seg.size - UNIT_SIZE)
            if last[1] <= 0 or live_offset(last[0]) + last[1] > commitlog_min:
                break
            self.files.drop_first()
            removed += 1
        if self.files.bases:
            self.min_offset = max(self.min_offset, self.files.bases[0] // UNIT_SIZE)
        self.correct_min(commitlog_min)
        return removed

    def sync(self) -> None:
        if self.dirty:
            self.dirty = False
            self.files.sync_range(0, 1 << 62)

    def close(self) -> None:
        self._tail_mm = self._tail_seg = None
        self.files.close()

    def destroy(self) -> None:
        self.close()
        d = self.files.directory
        for p in d.glob("*"):
            p.unlink()
        d.rmdir()
