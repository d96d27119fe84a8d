"""The CommitLog: every record of every topic, appended to fixed-size segments.

Theory of operation
-------------------
Offsets are global byte offsets; segment ``n`` holds ``[base, base + size)``
and is named by ``base`` (20 digits).  A record never spans segments: when
``record + 8`` bytes do not fit (RocketMQ ``END_FILE_MIN_BLANK_LENGTH``) the
rest of the segment is filled with a BLANK record and the writer moves to
the next segment.

Appending is two-phase so that one ``put_messages`` call costs one
``pwrite`` per touched segment: ``place(size)`` returns where a record of
that size will go (rolling if needed) and ``stage(data)`` queues its bytes;
``commit()`` writes the staged bytes and only then advances
``write_offset`` -- readers never see staged data.  Runs encoded whole (``write_run``) skip the
staging; ``write_runs`` writes several back to back (a Kafka Produce request's partitions) with one
``pwritev``, so neither a syscall per run nor a joined copy is paid.  ``flushed_offset`` moves
only in ``flush()``, which may run on a worker thread: it snapshots
``write_offset`` first, then fdatasyncs the segments below it.

Invariants: ``min_offset <= flushed_offset <= write_offset``; bytes in
``[write_offset, segment end)`` of the active segment are zero.  A write
that fails half way (ENOSPC) would break the second one; ``rollback(start)``
restores both: the offsets go back to the start of the failed put, its
bytes are deallocated (``fallocate`` PUNCH_HOLE needs no free blocks) and
segments created after it are deleted, so neither a later shorter write nor
a recovery finds records of a put that was refused.

``flush(upto)`` fdatasyncs, then reports durable only up to ``upto`` when
given: an offset read on the appending thread before the flush started; the
store runs its flush hooks before this call (see ``DiskStore.flush``).

Warm-ahead: ``start_warmer(ahead)`` starts a ``TailWarmer`` (warmer.py): a
native idle-priority thread reads the sparse range just past the write
offset, so appends find their page-cache pages already there;
``_write_staged`` kicks it when the writer has used half of the requested
range.

Cache window: after each flush, ``release_cold()`` (same worker thread) asks
the kernel to drop the cached pages of bytes more than ``cache_window``
below ``flushed_offset`` (``MADV_DONTNEED`` on our read mapping, then
``POSIX_FADV_DONTNEED``; those pages are clean, so nothing is lost: a later
read faults them back from disk).  The freed pages are what the next appends
get, so a long write stream recycles a bounded set of page-cache pages
instead of taking fresh ones.  Fresh pages are not free: the kernel zeroes
and accounts each one, and on a VM whose host reclaims guest memory (free
page reporting, ballooning) every first touch is a host fault, several times
the cost of the copy itself.  The cost of the window: consumers more than
``cache_window`` behind the tail read from disk, as a Kafka or RocketMQ
consumer does once its data has left the page cache; ``read_span`` below the
window starts readahead for the next 16 MiB (``POSIX_FADV_WILLNEED``) so a
catching-up consumer mostly finds its pages already read.  0 = leave it all
to the kernel.
"""

from __future__ import annotations

import ctypes
import mmap
import os
from bisect import bisect_right
from collections.abc import Sequence
from pathlib import Path

import structlog
from rokka.core.storage import layout
from rokka.core.storage.segment import Segment, SegmentFiles
from rokka.core.storage.warmer import TailWarmer
from rokka.core.storage.warmer import available as warmer_available

#: The most runs ``write_runs`` hands to one ``pwritev`` (IOV_MAX is 1024 on Linux).
MAX_IOV = 512

log = structlog.get_logger(__name__)


class CommitLog:
    def __init__(self, directory: Path, segment_size: int) -> None:
        self.files = SegmentFiles(directory, segment_size, strict_size=True)
        self.segment_size = segment_size
        self.write_offset = 0
        self.flushed_offset = 0
        self._staged: list[bytes] = []
        self._stage_start = 0       # commitlog offset of the first staged byte
        self._stage_end = 0         # offset just past the staged bytes
        self.cache_window = 0       # bytes kept cached below flushed_offset (0: no release); see release_cold
        self._released_to = 0       # pages below this offset were released (worker thread writes it)
        self._prefetch_lo = self._prefetch_hi = 0   # the range last handed to readahead by _prefetch
        self.warmer: TailWarmer | None = None       # see start_warmer

    # -- opening --------------------------------------------------------------
    def load(self) -> list[Segment]:
        """Open existing segments; ``write_offset`` is set later by recovery."""
        return self.files.load()

    @property
    def min_offset(self) -> int:
        return self.files.bases[0] if self.files.bases else 0

    def set_write_offset(self, offset: int) -> None:
        self.write_offset = self._stage_start = self._stage_end = offset
        self.flushed_offset = self.min_offset  # the next flush() syncs everything once

    # -- appending ------------------------------------------------------------
    def place(self, size: int) -> int:
        """Offset at which a record of ``size`` bytes will be staged (rolls segments)."""
        pos = self._stage_end
        seg_base = pos - pos % self.segment_size
        room = seg_base + self.segment_size - pos
        if size + layout.BLANK_SIZE > room:
            if room:
                self._staged.append(layout.encode_blank(room))
            self._write_staged()
            pos = seg_base + self.segment_size
            self._stage_start = self._stage_end = pos
        return pos

    @property
    def stage_end(self) -> int:
        """Offset just past the staged bytes (where the next staged record goes)."""
        return self._stage_end

    def fits(self, size: int) -> bool:
        """True if ``size`` bytes staged at ``stage_end`` stay in its segment with room for a BLANK."""
        pos = self._stage_end
        return size + layout.BLANK_SIZE <= self.segment_size - pos % self.segment_size

    def stage(self, data: bytes) -> None:
        self._staged.append(data)
        self._stage_end += len(data)

    def commit(self) -> None:
        """Write everything staged; raises OSError (staged bytes are then discarded)."""
        self._write_staged()

    def write_run(self, data: bytes) -> None:
        """``stage(data)`` then ``commit()``: a run that ``fits`` the current segment, in one ``pwrite``."""
        if self._staged:
            self.stage(data)
            self._write_staged()
            return
        self._stage_end += len(data)
        self._write(data)

    def write_runs(self, parts: Sequence[bytes]) -> None:
        """``write_run`` of the parts back to back (together they ``fit`` the current segment), with
        one vectored write (``pwritev``) instead of a joined copy; more parts than ``MAX_IOV`` are
        joined first."""
        if len(parts) == 1 or len(parts) > MAX_IOV or self._staged:
            self.write_run(parts[0] if len(parts) == 1 else b"".join(parts))
            return
        self._stage_end += sum(map(len, parts))
        self._write(parts)

    def discard(self) -> None:
        self._staged.clear()
        self._stage_start = self._stage_end = self.write_offset

    def rollback(self, offset: int) -> None:
        """Forget everything from ``offset`` (the start of a put whose write failed) and make those
        bytes zero again, so neither a later shorter write nor a recovery finds records of it.

        The range is deallocated (``fallocate`` PUNCH_HOLE: no new blocks needed on a full disk);
        segments created after ``offset``'s segment are deleted.  Raises OSError if the bytes could
        not be cleared (the caller then stays read-only)."""
        self._staged.clear()
        offset = max(offset, self.min_offset)
        self.write_offset = self._stage_start = self._stage_end = offset
        self.flushed_offset = min(self.flushed_offset, offset)
        later = bisect_right(self.files.bases, offset)
        if later < len(self.files.segments):
            self.files.drop_from(later)
        seg = self.files.find(offset)
        if seg is not None:
            _punch_hole(seg.fd, offset - seg.base, seg.end - offset)

    def _write_staged(self) -> None:
        if not self._staged:
            return
        data = self._staged[0] if len(self._staged) == 1 else b"".join(self._staged)
        self._staged.clear()
        self._write(data)

    def _write(self, data: bytes | Sequence[bytes]) -> None:
        """The staged bytes ``data`` (taken off ``_staged``; or a list of parts, back to back) at
        ``_stage_start``."""
        start = self._stage_start
        vector = type(data) is list
        end = start + (sum(map(len, data)) if vector else len(data))
        seg = self.files.find(start) or self.files.create(start - start % self.segment_size)
        try:
            if vector:
                seg.pwritev(start - seg.base, data)  # type: ignore[arg-type]
            else:
                seg.pwrite(start - seg.base, data)  # type: ignore[arg-type]
        except OSError:
            self._stage_start = self._stage_end = self.write_offset
            raise
        self.write_offset = end
        self._stage_start = end
        warmer = self.warmer
        if warmer is not None:
            warmer.touch()
            if end >= warmer.kick_at:
                warmer.kick()

    # -- reading --------------------------------------------------------------
    def read(self, offset: int, size: int | None = None) -> bytes | None:
        """Raw bytes of the record at ``offset`` (size from TOTALSIZE if None); None if absent."""
        if offset < self.min_offset or offset + 8 > self.write_offset:
            return None
        seg = self.files.find(offset)
        if seg is None:
            return None
        pos = offset - seg.base
        mm = seg.mm
        if self.warmer is not None:
            self.warmer.touch()
        if offset < self._released_to:
            self._prefetch(seg, offset)
        total, magic = layout.SIZE_MAGIC.unpack_from(mm, pos)
        if magic != layout.MESSAGE_MAGIC:
            return None
        if size is None:
            size = total
        if size <= 0 or pos + size > seg.size or offset + size > self.write_offset:
            return None
        return mm[pos:pos + size]

    def read_span(self, start: int, end: int, *, view: bool = False) -> bytes | memoryview | None:
        """Bytes ``[start, end)`` (whole records within one segment, below the write offset) or None.

        ``view``: a memoryview into the segment's map instead of a copy; the caller releases it before
        the segment can be closed (``api.release_runs``), that is before it yields."""
        return self.read_spans(((start, end),), view=view)[0]

    def read_spans(self, spans: Sequence[tuple[int, int]], *, view: bool = False) -> list[bytes | memoryview | None]:
        """``read_span`` of each ``(start, end)``, in order: the bytes, or None where a span is not whole
        records within one segment below the write offset. The checks, the segment lookup and the map's
        memoryview are done once per segment instead of once per span (a pull of records that single
        senders interleaved is one span per record)."""
        out: list[bytes | memoryview | None] = []
        lo, hi, released = self.min_offset, self.write_offset, self._released_to
        seg: Segment | None = None
        base = seg_end = 0
        whole: memoryview | None = None
        try:
            for start, end in spans:
                if start < lo or end > hi or end <= start:
                    out.append(None)
                    continue
                if seg is None or not base <= start < seg_end:
                    seg = self.files.find(start)
                    if whole is not None:
                        whole.release()
                        whole = None
                    if seg is None:
                        out.append(None)
                        continue
                    base, seg_end = seg.base, seg.end
                    if start < released:
                        self._prefetch(seg, start)
                    if view:
                        whole = memoryview(seg.mm)
                if end > seg_end:
                    out.append(None)
                    continue
                out.append(whole[start - base:end - base] if whole is not None else seg.mm[start - base:end - base])
        finally:
            if whole is not None:
                whole.release()
        if out and self.warmer is not None:
            self.warmer.touch()
        return out

    def store_timestamp(self, offset: int) -> int | None:
        if offset < self.min_offset or offset + layout.HEADER_V4.size > self.write_offset:
            return None
        seg = self.files.find(offset)
        if seg is None:
            return None
        return layout.store_timestamp_of(seg.mm, offset - seg.base)

    # -- durability / lifecycle ----------------------------------------------------
    def flush(self, upto: int | None = None) -> int:
        """fdatasync up to the current write offset (thread-safe); returns the durable offset.

        ``upto``: report durable only up to this offset (read by the caller on the appending
        thread, after it made what goes with those records durable; see ``DiskStore.flush``)."""
        target = self.write_offset if upto is None else min(upto, self.write_offset)
        if target > self.flushed_offset:
            self.files.sync_range(self.flushed_offset, target)
            # min: a failed write may have rolled write_offset back while this flush ran (see rollback)
            self.flushed_offset = max(self.flushed_offset, min(target, self.write_offset))
        return self.flushed_offset

    RELEASE_CHUNK = 16 << 20
    PREFETCH = 16 << 20

    def _prefetch(self, seg: Segment, offset: int) -> None:
        """A read below the cache window: start the disk reads for what follows it (asynchronous
        readahead), so a catching-up consumer finds the pages in the cache instead of stalling the
        event loop on one page fault after another."""
        if self._prefetch_lo <= offset < self._prefetch_hi - self.PREFETCH // 2:
            return
        n = min(self.PREFETCH, seg.end - offset)
        try:
            os.posix_fadvise(seg.fd, offset - seg.base, n, os.POSIX_FADV_WILLNEED)
        except OSError:         # a hint only: the read itself goes on through the mapping
            return
        self._prefetch_lo, self._prefetch_hi = offset, offset + n

    def release_cold(self) -> int:
        """Drop cached pages more than ``cache_window`` below ``flushed_offset`` (blocking; call after
        ``flush()`` on its thread).  Returns the bytes released."""
        if not self.cache_window or not _FADVISE:
            return 0
        page = mmap.PAGESIZE
        limit = (self.flushed_offset - self.cache_window) // page * page
        start = max(self._released_to, self.min_offset)
        if limit - start < min(self.RELEASE_CHUNK, self.segment_size):
            return 0
        with self.files.lock:           # segments cannot be closed or deleted under us
            for seg in self.files.segments:
                lo, hi = max(start, seg.base), min(limit, seg.end)
                if lo >= hi:
                    continue
                lo -= (lo - seg.base) % page
                seg.mm.madvise(mmap.MADV_DONTNEED, lo - seg.base, hi - lo)
                os.posix_fadvise(seg.fd, lo - seg.base, hi - lo, os.POSIX_FADV_DONTNEED)
        self._released_to = limit
        return limit - start

    def start_warmer(self, ahead: int) -> None:
        """Keep ``ahead`` bytes past the write offset in the page cache (see warmer.py); 0 = off."""
        if ahead <= 0 or self.warmer is not None:
            return
        if not warmer_available:
            log.warning("store.warm_ahead_not_built")
            return
        try:
            self.warmer = TailWarmer(self, ahead)
        except OSError as exc:          # no thread to be had: a hint, never a reason not to start
            log.warning("store.warm_ahead_not_started", error=str(exc))

    def close(self) -> None:
        if self.warmer is not None:
            self.warmer.stop()
            self.warmer = None
        self.files.close()


_FADVISE = hasattr(os, "posix_fadvise") and hasattr(mmap, "MADV_DONTNEED")

_FALLOC_FL_KEEP_SIZE = 0x01
_FALLOC_FL_PUNCH_HOLE = 0x02
try:
    _libc = ctypes.CDLL(None, use_errno=True)
    _fallocate = _libc.fallocate
    _fallocate.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int64, ctypes.c_int64]
    _fallocate.restype = ctypes.c_int
except (OSError, AttributeError):      # not Linux/glibc: a failed write leaves the store read-only
    _fallocate = None


def _punch_hole(fd: int, pos: int, length: int) -> None:
    """Make ``[pos, pos + length)`` of the file read as zeros, freeing its blocks."""
    if length <= 0:
        return
    if _fallocate is None:
        raise OSError("fallocate is not available: cannot clear a failed write")
    if _fallocate(fd, _FALLOC_FL_PUNCH_HOLE | _FALLOC_FL_KEEP_SIZE, pos, length) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"fallocate(PUNCH_HOLE) failed: {os.strerror(err)}")
