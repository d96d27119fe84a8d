"""TailWarmer: page-cache pages ready ahead of the CommitLog write offset, made on idle CPU.

Theory of operation
-------------------
An append into a part of the active segment that has never been cached makes
the kernel allocate, zero and account a fresh page-cache page inside
``pwrite``; on a VM whose host reclaims free guest memory (free page
reporting, ballooning) that first touch is also a host fault.  Measured on
the project's machine: ~3 ms of system time per MiB of fresh file range,
against ~0.2 ms per MiB when the pages are already cached -- for 1 KiB
records that is most of the broker's cost per message, paid on the event
loop thread.

RocketMQ meets the same cost with its AllocateMappedFileService (the next
file is created and optionally pre-touched by a service thread).  Here a
native thread (``_cwarm.Warmer``, C: it never takes the GIL, and it runs
under ``SCHED_IDLE``) reads the not-yet-written range just past the write
offset of the active segment -- only once the store has been quiet (no read,
no write: ``touch()``) for ``QUIET_S``.  On a VM idle CPU is not free: the
reads fault fresh memory in from the host, and the vCPU stuck in those
faults delays the threads that wake up on it (measured: client-bound Kafka
produce runs ~35 % slower with the warmer reading during them).  So it
prepares pages in the gaps between bursts, and a burst finds them ready.  The
segment is sparse there, so the kernel only inserts zeroed pages into the
page cache, and the appends that follow find their pages present.  Nothing
is written, so stored data cannot change; the pages are clean and the kernel
may drop them at any time (the append then simply pays the cost itself).

This class runs on the writer's thread and decides what to warm:
``CommitLog`` compares one integer per write (``kick_at``) and calls
``kick()`` once the writer has used half the requested range, or has rolled
into a new segment.  The range starts at 4 MiB and doubles at every kick up
to ``ahead``, so an idle or slow broker holds a few MiB of such pages and
only a broker that keeps writing holds the whole window.  ``request`` never
waits: when the thread is busy it returns False and the next write kicks
again.  Without the native module there is no warm-ahead (appends pay their
pages, as before).

Off by default (``commitLogWarmAhead=0``).  Measured with the Kafka benchmark
(3 rounds, BENCHMARKS.md): a burst that starts with a warmed lead is faster
(1 KiB produce 470k vs 330k msg/s), but the burst after it, which finds the
lead used up, is slower than with no warmer at all (207k vs 327k msg/s; the
cause is not established -- see BENCHMARKS.md).  Worth trying for a broker
whose writes come in bursts with idle time between them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import structlog

try:
    from rokka.core.storage._cwarm import Warmer as _NativeWarmer
except ImportError:         # the C extension was not built: no warm-ahead
    _NativeWarmer = None

if TYPE_CHECKING:
    from rokka.core.storage.commitlog import CommitLog

log = structlog.get_logger(__name__)

START_WINDOW = 4 << 20
QUIET_S = 0.100
NEVER = 1 << 62

available = _NativeWarmer is not None


class TailWarmer:
    def __init__(self, clog: CommitLog, ahead: int) -> None:
        assert _NativeWarmer is not None
        self.clog = clog
        self.ahead = ahead
        self.window = min(ahead, START_WINDOW)   # grows towards ``ahead`` as the writer uses it
        self.kick_at = 0                 # the writer calls kick() once write_offset reaches this
        self.requested_to = 0            # commitlog offset up to which reads were requested
        self._seg_base = -1
        self._native = _NativeWarmer(QUIET_S)
        self.touch = self._native.touch     # the store calls it on every read and write
        self.kick(grow=False)

    def kick(self, grow: bool = True) -> None:
        """Request the next range past the write offset (called on the writer's thread)."""
        seg = self.clog.files.last
        write = self.clog.write_offset
        if seg is None or write < seg.base:
            self.kick_at = 0 if seg is None else seg.base   # nothing to warm before the first segment
            return
        if seg.base != self._seg_base:
            self._seg_base, self.requested_to = seg.base, seg.base
        elif grow:
            self.window = min(self.ahead, self.window * 2)
        start = max(self.requested_to, write)
        end = min(write + self.window, seg.end)
        if end > start:
            try:
                if not self._native.request(seg.fd, seg.base, start - seg.base, end - seg.base):
                    return               # the thread is between reads: the next write asks again
            except OSError as exc:       # dup failed (out of descriptors?): a hint only, never the write
                log.warning("store.warm_ahead_off", error=str(exc))
                self.kick_at = NEVER
                return
            self.requested_to = end
        # the next kick: half the window written, or (segment fully requested) the roll to the next one
        self.kick_at = seg.end if self.requested_to >= seg.end else self.requested_to - self.window // 2

    def progress(self) -> int:
        """CommitLog offset up to which pages were read (of the current segment; tests, statistics)."""
        base, pos = self._native.progress()
        return base + pos if base >= 0 else 0

    def stop(self) -> None:
        self.kick_at = NEVER
        self._native.close()
