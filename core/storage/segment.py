"""Fixed-size store files named by their 20-digit base offset.

Theory of operation
-------------------
A ``Segment`` is one preallocated file (``ftruncate`` to its full size, so
it is sparse until written) with a shared read/write ``mmap`` over it.  The
CommitLog appends with ``os.pwrite`` (one syscall per batch; no page-fault
storm on fresh pages) and reads through the mmap (a slice, no syscall);
ConsumeQueue and IndexFile write small fixed units straight into the mmap
with ``struct.pack_into``.  Linux keeps both views coherent (one page cache),
and ``fdatasync`` on the fd writes back pages dirtied either way.

Files written through the map (ConsumeQueue, IndexFile) are opened with
``random_access``: ``MADV_RANDOM``, so the first write to a page of the
sparse file faults in that page only.  By default a fault reads around it --
up to ``read_ahead_kb`` (8 MiB on a virtio disk) of holes, each page zeroed
and, on a VM, faulted in from the host: a new 6 MB ConsumeQueue file was
wholly allocated on its first unit (measured), and an IndexFile (~420 MB of
hashed slots) 8 MiB per first touch of a region.  The CommitLog map is only read, sequentially by
consumers, and keeps the kernel's readahead.

``SegmentFiles`` lists/creates the segments of one directory.  A file whose
name is not 20 digits is ignored with a warning; a file shorter than the
configured size is reported (``structlog`` error with the path) and grown
back to full size with zeros, so the missing tail is treated as "never
written" by the recovery of the owning structure.
"""

from __future__ import annotations

import errno
import mmap
import os
import threading
from bisect import bisect_right
from pathlib import Path

import structlog

log = structlog.get_logger(__name__)

_MADV_RANDOM = getattr(mmap, "MADV_RANDOM", None)

NAME_DIGITS = 20


def segment_name(base: int) -> str:
    return f"{base:0{NAME_DIGITS}d}"


class Segment:
    """One fixed-size file: ``base`` is the logical offset of its first byte."""

    __slots__ = ("path", "base", "size", "fd", "mm", "short_by")

    def __init__(self, path: Path, base: int, size: int, existing: bool = False, random_access: bool = False) -> None:
        self.path = path
        self.base = base
        self.size = size
        self.fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        actual = os.fstat(self.fd).st_size
        self.short_by = max(0, size - actual) if existing else 0
        if actual != size:
            if actual > size:
                os.close(self.fd)
                raise OSError(f"{path}: file is {actual} bytes, larger than the configured {size}")
            os.ftruncate(self.fd, size)
        self.mm = mmap.mmap(self.fd, size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        if random_access and _MADV_RANDOM is not None:
            self.mm.madvise(_MADV_RANDOM)   # a fault maps one page, not read_ahead_kb of zeroed holes

    @property
    def end(self) -> int:
        return self.base + self.size

    def pwrite(self, pos: int, data: bytes) -> None:
        """Write ``data`` at file position ``pos`` (all of it, or raise OSError)."""
        view = memoryview(data)
        while view:
            n = os.pwrite(self.fd, view, pos)
            view = view[n:]
            pos += n

    def pwritev(self, pos: int, parts: list[bytes]) -> None:
        """Write ``parts`` back to back from file position ``pos`` with one ``pwritev`` (all of them,
        or raise OSError; a short write goes on from where it stopped)."""
        bufs: list[bytes | memoryview] = list(parts)
        while bufs:
            n = os.pwritev(self.fd, bufs, pos)
            if n <= 0:
                raise OSError(errno.EIO, f"{self.path}: pwritev wrote nothing")
            pos += n
            while bufs and n >= len(bufs[0]):
                n -= len(bufs.pop(0))
            if n:
                bufs[0] = memoryview(bufs[0])[n:]

    def zero(self, pos: int, end: int | None = None) -> None:
        """Zero ``[pos, end)`` of the file (used to cut a torn tail)."""
        end = self.size if end is None else end
        step = 1 << 20
        while pos < end:
            n = min(step, end - pos)
            self.mm[pos:pos + n] = bytes(n)
            pos += n

    def sync(self) -> None:
        os.fdatasync(self.fd)

    def close(self) -> None:
        try:
            self.mm.close()
        except BufferError:  # a memoryview over the map is still alive; the GC will release it
            log.warning("store.segment_mmap_still_referenced", path=str(self.path))
        os.close(self.fd)

    def destroy(self) -> None:
        self.close()
        self.path.unlink(missing_ok=True)


class SegmentFiles:
    """The ordered segments of one directory (CommitLog or one ConsumeQueue)."""

    def __init__(self, directory: Path, file_size: int, *, strict_size: bool = False,
                 random_access: bool = False) -> None:
        self.directory = directory
        self.file_size = file_size
        self.random_access = random_access
        # CommitLog: an existing file of another size means another mapedFileSizeCommitLog setting, and
        # growing it would make segments overlap: refuse (as RocketMQ's MappedFileQueue.load does).
        self.strict_size = strict_size
        self.segments: list[Segment] = []
        self.bases: list[int] = []
        self.lock = threading.Lock()   # guards close/delete against a flush thread

    def load(self) -> list[Segment]:
        """Open every existing segment file; returns those that were short (already grown)."""
        short: list[Segment] = []
        if not self.directory.is_dir():
            return short
        for p in sorted(self.directory.iterdir()):
            if not (len(p.name) == NAME_DIGITS and p.name.isdigit()):
                log.warning("store.unexpected_file_ignored", path=str(p))
                continue
            if self.strict_size:
                actual = p.stat().st_size
                if (actual and actual != self.file_size) or int(p.name) % self.file_size:
                    raise OSError(f"{p}: existing segment is {actual} bytes but the configured segment size is "
                                  f"{self.file_size}; start with the setting the store was written with "
                                  f"(mapedFileSizeCommitLog={actual})")
            seg = Segment(p, int(p.name), self.file_size, existing=True, random_access=self.random_access)
            if seg.short_by:
                log.error("store.file_shorter_than_configured",
                          path=str(p), missing_bytes=seg.short_by, offset=seg.end - seg.short_by)
                short.append(seg)
            self.segments.append(seg)
            self.bases.append(seg.base)
        return short

    def create(self, base: int) -> Segment:
        self.directory.mkdir(parents=True, exist_ok=True)
        seg = Segment(self.directory / segment_name(base), base, self.file_size, random_access=self.random_access)
        self.segments.append(seg)
        self.bases.append(base)
        return seg

    def find(self, offset: int) -> Segment | None:
        i = bisect_right(self.bases, offset) - 1
        if i < 0:
            return None
        seg = self.segments[i]
        return seg if offset < seg.end else None

    @property
    def last(self) -> Segment | None:
        return self.segments[-1] if self.segments else None

    def drop_first(self) -> Segment:
        with self.lock:
            seg = self.segments.pop(0)
            self.bases.pop(0)
            seg.destroy()
        return seg

    def drop_from(self, index: int) -> None:
        """Delete segments ``index`` and later (recovery cutting a tail)."""
        with self.lock:
            for seg in self.segments[index:]:
                seg.destroy()
            del self.segments[index:]
            del self.bases[index:]

    def sync_range(self, start: int, end: int) -> None:
        """fdatasync every segment overlapping ``[start, end)``."""
        with self.lock:
            for seg in list(self.segments):
                if seg.end > start and seg.base < end:
                    seg.sync()

    def close(self) -> None:
        with self.lock:
            for seg in self.segments:
                seg.close()
            self.segments.clear()
            self.bases.clear()
