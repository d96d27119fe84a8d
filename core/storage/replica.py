"""Raw CommitLog replication for RocketMQ's HA (master -> slave), on a ``DiskStore``.

Theory of operation
-------------------
Master side: ``read_transfer(store, offset, max_bytes)`` returns the raw
CommitLog bytes from ``offset`` up to the write offset, never crossing the
end of the segment holding ``offset`` and at most ``max_bytes`` (Java's
``haTransferBatchSize``); the bytes may end inside a record, as Java's do.

Slave side: ``ReplicaAppender`` takes the frames' bytes in order.  Bytes of
an incomplete record wait in memory; only whole records (and the BLANK that
ends a segment) are written to the CommitLog, at exactly the offset the
master gave, so the slave's CommitLog is byte for byte the master's.  The
written range is then verified and dispatched by recovery's own segment
scan (magic, TOTALSIZE, blob lengths, PHYSICALOFFSET == position, BODYCRC),
so ConsumeQueue units and index entries come out as on the master; a range
that does not verify is cut off again (``CommitLog.rollback``) and
``ReplicaError`` is raised: the caller closes the connection, and the next
one starts again from the slave's (unchanged) max offset.

An empty slave accepts a first offset that starts a segment (the master
starts an empty slave at the start of its last segment): the slave's first
segment is created there.  A ConsumeQueue whose first record on the slave
has a queue offset above 0 gets *hole* units (see ``consumequeue.hole_of``)
from the start of its file up to that offset, so the queue file keeps
units written from its start (what ``ConsumeQueue.load`` relies on) and the
queue's min offset is the first real unit.

``truncate(store, offset)`` (``ReplicaAppender.truncate``) cuts a CommitLog (and the ConsumeQueue units
pointing past the cut) back to ``offset``: an old master that the failover
controller turned into a slave drops what it wrote after the new master's
epoch began (``gateway/ha/controlled.py``) before it replicates again.
Index entries past the cut stay (a key lookup reads the record at the
offset and finds another key or nothing).

``max_offset`` is the offset the slave reports: just past the last whole
record written (the bytes still waiting are not reported; after a
reconnect the master sends them again).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import structlog
from rokka.core.storage import layout
from rokka.core.storage.consumequeue import UNIT, hole_of
from rokka.core.storage.dispatch import Keyed, is_dispatched
from rokka.core.storage.recovery import _scan_segment, scan_native, trim_queues

if TYPE_CHECKING:
    from rokka.core.storage.engine import DiskStore
    from rokka.core.storage.segment import Segment

log = structlog.get_logger(__name__)

_HOLE_UNIT = UNIT.pack(hole_of(0), 1, 0)


class ReplicaError(Exception):
    """Replicated bytes that cannot be placed or do not verify; nothing of them was kept."""


def read_transfer(store: DiskStore, offset: int, max_bytes: int) -> bytes | None:
    """Master: raw CommitLog bytes ``[offset, ...)`` within one segment, at most ``max_bytes``.

    ``b""`` when nothing was written past ``offset`` yet; ``None`` when ``offset``
    is not in the CommitLog (below its minimum or past its end)."""
    clog = store.clog
    end = clog.write_offset
    if offset == end:
        return b""
    if offset < clog.min_offset or offset > end:
        return None
    seg = clog.files.find(offset)
    if seg is None:
        return b"" if offset % clog.segment_size == 0 and offset == end else None
    stop = min(end, seg.end, offset + max_bytes)
    return seg.mm[offset - seg.base:stop - seg.base]


def truncate(store: DiskStore, offset: int) -> int:
    """Cut the CommitLog at ``offset`` (a record boundary) and the queue units past it; returns the
    bytes removed.  The store must take no puts meanwhile (a slave's store refuses them)."""
    clog = store.clog
    if offset >= clog.write_offset:
        return 0
    removed = clog.write_offset - offset
    clog.rollback(offset)
    trim_queues(store.cqs.values(), offset)
    store.checkpoint()
    log.warning("ha.commitlog_truncated", offset=offset, removed_bytes=removed)
    return removed


class _ReplicaDispatch:
    """What ``recovery._scan_segment`` calls for each verified record: creates queues that start
    above offset 0 (with hole units) and dispatches as a live put (listeners are told)."""

    def __init__(self, store: DiskStore) -> None:
        self.store = store
        self.queues = store.cqs
        self.index_from = 0
        self.on_new_queue: list[Callable[[str, int], None]] = []

    def dispatch(self, topic: str, queue_id: int, queue_offset: int, commitlog_offset: int, size: int,
                 sysflag: int, props: dict[str, str], store_ts: int, replay: bool = False,
                 keyed: list[Keyed] | None = None) -> None:
        del replay
        if not is_dispatched(sysflag):      # a transaction half: no unit, no queue (its index keys only)
            self.store.dispatcher.dispatch(topic, queue_id, queue_offset, commitlog_offset, size, sysflag, props,
                                           store_ts, keyed=keyed)
            self.store._last_store_ts = store_ts
            return
        q = self.store.cqs.get((topic, queue_id))
        new = q is None
        if q is None:
            q = self.store._new_queue(topic, queue_id)
            q.max_offset = queue_offset - queue_offset % q.units_per_file
        if queue_offset > q.max_offset:
            start = q.max_offset
            q.put_units(start, _HOLE_UNIT * (queue_offset - start))
            log.info("ha.replica_queue_holes", topic=topic, queue_id=queue_id, queue_offset=queue_offset,
                     holes=queue_offset - start)
        if new:
            q.min_offset = queue_offset
            for callback in self.on_new_queue:
                callback(topic, queue_id)
        self.store.dispatcher.dispatch(topic, queue_id, queue_offset, commitlog_offset, size, sysflag, props,
                                       store_ts, keyed=keyed)
        self.store._last_store_ts = store_ts

    def put_keyed(self, keyed: list[Keyed]) -> None:
        self.store.dispatcher.put_keyed(keyed)


def _scan(seg: Segment, pos: int, sink: _ReplicaDispatch) -> tuple[int, str | None, bool]:
    """Recovery's segment scan over the replicated range, natively when built (``recovery.scan_native``:
    the same checks, the records' units and index keys in runs per queue: ``Dispatcher.dispatch_runs``)."""
    found = scan_native(seg, pos)
    if found is None:
        return _scan_segment(seg, pos, sink)  # type: ignore[arg-type]
    end, damage, blank, items = found
    if items:
        sink.store.dispatcher.dispatch_runs(seg.mm, items, sink.dispatch)
        sink.store._last_store_ts = items[-1][7]      # a record's store timestamp, a run's last one
    return end, damage, blank


class ReplicaAppender:
    """Slave: append the master's CommitLog bytes to ``store`` (see the module docstring)."""

    def __init__(self, store: DiskStore) -> None:
        self.store = store
        self._pending = bytearray()
        self._pending_at = store.clog.write_offset
        self._dispatch = _ReplicaDispatch(store)

    @property
    def on_new_queue(self) -> list[Callable[[str, int], None]]:
        """Callbacks for a (topic, queue id) the slave sees for the first time (topic config sync)."""
        return self._dispatch.on_new_queue

    @property
    def empty(self) -> bool:
        return not self.store.clog.files.segments

    @property
    def max_offset(self) -> int:
        """What the slave reports: the end of its last whole record."""
        return self.store.clog.write_offset

    @property
    def expected_offset(self) -> int:
        """Where the next replicated byte belongs (the written end plus the waiting bytes)."""
        return self._pending_at + len(self._pending)

    def truncate(self, offset: int) -> int:
        """Cut the store back to ``offset`` (module ``truncate``) and forget waiting bytes."""
        removed = truncate(self.store, offset)
        self.reset()
        return removed

    def reset(self) -> None:
        """Forget waiting bytes (a new connection starts again at ``max_offset``)."""
        self._pending.clear()
        self._pending_at = self.store.clog.write_offset

    def append(self, offset: int, data: bytes) -> int:
        """Take the bytes the master sent for ``offset``; returns the new ``max_offset``.

        Raises:
            ReplicaError: the offset does not follow, or the bytes do not verify.
        """
        clog = self.store.clog
        if self.empty and not self._pending and clog.write_offset == 0 and offset:
            if offset % clog.segment_size:
                raise ReplicaError(f"an empty slave starts at a segment start, master sent offset {offset}")
            clog.files.create(offset)
            clog.set_write_offset(offset)
            self._pending_at = offset
            log.info("ha.replica_starts", offset=offset)
        if offset != self.expected_offset:
            raise ReplicaError(f"master sent offset {offset}, slave expects {self.expected_offset}")
        self._pending += data
        whole = self._whole_prefix()
        if whole:
            self._write(bytes(self._pending[:whole]))
            del self._pending[:whole]
            self._pending_at += whole
        return clog.write_offset

    def _whole_prefix(self) -> int:
        """Bytes of ``_pending`` that are whole records (or a segment's closing BLANK)."""
        buf, seg_size, at = self._pending, self.store.clog.segment_size, self._pending_at
        native = layout._cstore
        if native is not None:
            pos, problem = native.record_prefix(buf, at, seg_size, (layout.MESSAGE_MAGIC, layout.BLANK_MAGIC))
            if problem is not None:
                raise ReplicaError(problem)
            return int(pos)
        pos = 0
        while len(buf) - pos >= 8:
            total, magic = layout.SIZE_MAGIC.unpack_from(buf, pos)
            if magic == layout.BLANK_MAGIC:
                room = seg_size - (at + pos) % seg_size
                if total != room:
                    raise ReplicaError(f"BLANK of {total} bytes at {at + pos}, {room} left in the segment")
            elif magic != layout.MESSAGE_MAGIC or total < 91:
                raise ReplicaError(f"no record at {at + pos} (magic 0x{magic:08X}, size {total})")
            if total > len(buf) - pos:
                break
            pos += total
        return pos

    def _write(self, data: bytes) -> None:
        clog, start = self.store.clog, self._pending_at
        seg = clog.files.find(start) or clog.files.create(start - start % clog.segment_size)
        if start + len(data) > seg.end:
            raise ReplicaError(f"replicated bytes at {start} cross the segment end {seg.end}")
        seg.pwrite(start - seg.base, data)
        flushed = clog.flushed_offset
        clog.set_write_offset(start + len(data))
        clog.flushed_offset = min(flushed, start)
        end, damage, blank = _scan(seg, start - seg.base, self._dispatch)
        stop = seg.base + end if not blank else seg.end
        if stop < start + len(data):
            clog.rollback(seg.base + end)
            raise ReplicaError(f"replicated record at {seg.base + end} does not verify: {damage}")
