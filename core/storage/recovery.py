"""Start-up recovery: find the true CommitLog end and make CQ/index agree with it.

Theory of operation
-------------------
The CommitLog is the source of truth.  On every open (clean or not):

1. **Where to start scanning.**  From the start of the segment holding the
   checkpoint's ``physic_offset`` (the "checkpoint-era segment"), moved back
   to the earliest record whose ConsumeQueue unit or index entry might be
   missing: the checkpoint's ``dispatch_offset`` after an unclean stop (the
   ``abort`` marker exists), the end of the last good unit of any damaged
   ConsumeQueue, and the first record the index has not seen.  Without a
   usable checkpoint the scan starts at the first segment.
2. **Scan** forward verifying every record: magic, TOTALSIZE, blob lengths,
   PHYSICALOFFSET == its position, and BODYCRC.  A BLANK record moves to the
   next segment.  Each good record is replayed into the dispatcher (units
   already present are skipped, so replay is idempotent).
3. **The end.**  The scan stops at the first position that is not a good
   record.  If it is zeros (TOTALSIZE 0, magic 0) and nothing valid follows,
   that is the clean end.  Otherwise it is damage, and the rule is:

   * damage with **no valid record after it** (in this or any later segment)
     is a torn tail: it is logged (path + offset) and zeroed; empty later
     segments are deleted;
   * damage **followed by valid records** would drop good data if cut, so
     ``StoreCorrupt`` is raised naming the file and offset -- unless the
     operator opened the store with ``repair=True``, which truncates there.

4. **ConsumeQueues** are then cut back so no unit points past the CommitLog
   end (logged as a warning with the count).

Everything reported goes through structlog at error level with ``path`` and
``offset`` keys; nothing in here raises anything but ``StoreCorrupt`` for
bad data (I/O errors propagate as OSError).
"""

from __future__ import annotations

import errno
import mmap
import os
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import structlog
from rokka.core.model import (
    PROP_DELAY,
    PROP_KEYS,
    PROP_TAGS,
    PROP_UNIQ_KEY,
    TOPIC_SCHEDULE,
    TRANSACTION_MASK,
    TRANSACTION_PREPARED_TYPE,
    TRANSACTION_ROLLBACK_TYPE,
)
from rokka.core.storage import layout
from rokka.core.storage.commitlog import CommitLog
from rokka.core.storage.consumequeue import ConsumeQueue
from rokka.core.storage.dispatch import Dispatcher, Keyed, ReplayGap, is_dispatched
from rokka.core.storage.segment import Segment

log = structlog.get_logger(__name__)

_MAGIC_BYTES = layout.UINT32.pack(layout.MESSAGE_MAGIC)
_ZERO_CHUNK = 1 << 20


class StoreCorrupt(Exception):
    """The store holds damaged data that cannot be cut without losing good records."""


@dataclass
class ScanEnd:
    offset: int                 # CommitLog offset just past the last good record
    damage: str | None = None   # why the scan stopped, if not a clean zero end


_NAMES = tuple(n.encode("ascii") for n in (PROP_TAGS, PROP_KEYS, PROP_UNIQ_KEY, PROP_DELAY))
_PLAIN = (TRANSACTION_MASK, TRANSACTION_PREPARED_TYPE, TRANSACTION_ROLLBACK_TYPE, TOPIC_SCHEDULE.encode("utf-8"))
NATIVE_SCAN_RECORDS = 100_000      # records per native call: bounded memory for the runs it returns


def scan_native(seg: Segment, pos: int, max_records: int = 0) -> tuple[int, str | None, bool, list[Any]] | None:
    """``_cstore.scan_runs`` over ``seg`` from ``pos``: this module's checks, natively, and the verified
    records as runs per queue (``Dispatcher.dispatch_runs`` / ``replay_runs``); None when the extension
    is not built."""
    native = layout._cstore
    if native is None:
        return None
    return native.scan_runs(seg.mm, pos, seg.size, seg.base, layout.SCAN_LAYOUTS,  # type: ignore[no-any-return]
                            (layout.MESSAGE_MAGIC, layout.BLANK_MAGIC), _NAMES, _PLAIN, max_records)


def _scan_replay(seg: Segment, pos: int, dispatcher: Dispatcher | None) -> tuple[int, str | None, bool]:
    """``_scan_segment``, natively when built: the same end, damage and replay (``Dispatcher.replay_runs``),
    ``NATIVE_SCAN_RECORDS`` records at a time."""
    while True:
        found = scan_native(seg, pos, NATIVE_SCAN_RECORDS)
        if found is None:
            return _scan_segment(seg, pos, dispatcher)
        end, damage, blank, items = found
        if dispatcher is not None and items:
            dispatcher.replay_runs(seg.mm, items)
        if damage is not None or blank or end == pos:
            return end, damage, blank
        pos = end


def scan(clog: CommitLog, start: int, dispatcher: Dispatcher | None) -> ScanEnd:
    """Verify and replay records from ``start`` (a record boundary) to the first non-record."""
    files = clog.files
    idx = max(0, next((i for i, s in enumerate(files.segments) if s.end > start), len(files.segments)))
    pos_global = start
    for seg in files.segments[idx:]:
        if seg.base > pos_global:
            return ScanEnd(pos_global, f"segment {seg.path.name} does not follow the previous one")
        end, damage, blank = _scan_replay(seg, pos_global - seg.base, dispatcher)
        pos_global = seg.base + end
        if not blank:
            return ScanEnd(pos_global, damage)
        pos_global = seg.end
    return ScanEnd(pos_global)


def _scan_segment(seg: Segment, pos: int, dispatcher: Dispatcher | None) -> tuple[int, str | None, bool]:
    """Scan one segment.  Returns (end position, damage or None, ended by BLANK)."""
    mm = seg.mm
    size = seg.size
    base = seg.base
    headers = layout.HEADERS
    v4 = layout.HEADER_V4.unpack_from
    v4_size = layout.HEADER_V4.size
    size_magic = layout.SIZE_MAGIC.unpack_from
    props_len = layout.PROPS_LEN.unpack_from
    crc32 = layout.crc32
    magic_ok = layout.MESSAGE_MAGIC
    view = memoryview(mm)
    keyed: list[Keyed] = []     # index entries of the records replayed, written together at the end
    try:
        while pos + 8 <= size:
            if pos + v4_size <= size:
                f = v4(mm, pos)
                total, magic = f[0], f[1]
            else:
                total, magic = size_magic(mm, pos)
            if magic != magic_ok:
                if magic == layout.BLANK_MAGIC and total == size - pos:
                    return pos, None, True
                if total == 0 and magic == 0:
                    return pos, None, False
                return pos, f"bad magic 0x{magic:08X}", False
            if total < 91 or pos + total > size:
                return pos, f"bad TOTALSIZE {total}", False
            hsize = v4_size
            if f[7] & 0x30:
                h = headers[f[7] & 0x30]
                f, hsize = h.unpack_from(mm, pos), h.size
            body_start = pos + hsize
            topic_pos = body_start + f[16]
            end = pos + total
            if f[16] < 0 or topic_pos + 3 > end:
                return pos, f"bad BODYLENGTH {f[16]}", False
            props_pos = topic_pos + 1 + mm[topic_pos]
            if props_pos + 2 > end or props_pos + 2 + props_len(mm, props_pos)[0] != end:
                return pos, "blob lengths do not add up to TOTALSIZE", False
            if f[6] != base + pos:
                return pos, f"PHYSICALOFFSET {f[6]} != position {base + pos}", False
            if crc32(view[body_start:topic_pos]) & 0x7FFFFFFF != f[2]:
                return pos, "BODYCRC mismatch", False
            if dispatcher is not None:
                _replay(dispatcher, mm, f, topic_pos, props_pos, end, keyed)
            pos = end
        return pos, None, False
    finally:
        view.release()
        if keyed:
            dispatcher.put_keyed(keyed)  # type: ignore[union-attr]


_topic_cache: dict[bytes, str] = {}


def _replay(dispatcher: Dispatcher, mm: mmap.mmap, f: tuple, topic_pos: int, props_pos: int,
            end: int, keyed: list[Keyed]) -> None:
    raw_topic = mm[topic_pos + 1:props_pos]
    topic = _topic_cache.get(raw_topic)
    if topic is None:
        topic = _topic_cache[raw_topic] = raw_topic.decode("utf-8", "replace")
    if f[6] < dispatcher.index_from:       # cheap skip: unit present and already indexed
        q = dispatcher.queues.get((topic, f[3]))
        if q is not None and f[5] < q.max_offset or not is_dispatched(f[7]):
            return
    props = layout.decode_properties(mm[props_pos + 2:end])
    dispatcher.dispatch(topic, f[3], f[5], f[6], f[0], f[7], props, f[11], replay=True, keyed=keyed)


def _data_regions(seg: Segment, pos: int) -> list[tuple[int, int]]:
    """Non-hole ranges of ``seg`` from ``pos`` (SEEK_DATA/SEEK_HOLE; whole rest if unsupported)."""
    out = []
    try:
        while pos < seg.size:
            start = os.lseek(seg.fd, pos, os.SEEK_DATA)
            if start >= seg.size:
                break
            stop = min(os.lseek(seg.fd, start, os.SEEK_HOLE), seg.size)
            out.append((start, stop))
            pos = stop
    except OSError as exc:
        if exc.errno != errno.ENXIO:        # ENXIO: no data after pos
            return [(pos, seg.size)]
    return out


def find_valid_after(clog: CommitLog, offset: int) -> int | None:
    """CommitLog offset of the first verifiable record after ``offset``, or None."""
    for seg in clog.files.segments:
        if seg.end <= offset:
            continue
        mm = seg.mm
        for lo, hi in _data_regions(seg, max(0, offset - seg.base + 1)):
            pos = lo
            while True:
                hit = mm.find(_MAGIC_BYTES, pos + 4, hi)
                if hit < 0:
                    break
                cand = hit - 4
                try:
                    head = layout.check_record(mm, cand)
                    if head.commitlog_offset == seg.base + cand:
                        return seg.base + cand
                except layout.RecordError:
                    pass
                pos = cand + 1
    return None


def zero_tail(clog: CommitLog, offset: int) -> None:
    """Zero non-zero bytes from ``offset`` to its segment end (chunked; sparse stays sparse)."""
    seg = clog.files.find(offset)
    if seg is None:
        return
    for lo, hi in _data_regions(seg, offset - seg.base):
        pos = lo
        while pos < hi:
            n = min(_ZERO_CHUNK, hi - pos)
            if seg.mm[pos:pos + n].count(0) != n:
                seg.mm[pos:pos + n] = bytes(n)
            pos += n


def cut_tail(clog: CommitLog, end: ScanEnd, repair: bool) -> None:
    """Apply the end-of-log rule of the module docstring to ``end``."""
    seg = clog.files.find(end.offset) or clog.files.last
    later = find_valid_after(clog, end.offset)
    path = str(seg.path) if seg else str(clog.files.directory)
    if later is not None:
        msg = (f"CommitLog damaged at offset {end.offset} ({path}, position "
               f"{end.offset - (seg.base if seg else 0)}): {end.damage or 'unexpected zeros'}; valid records "
               f"follow at offset {later}. Refusing to truncate good data. Restore the file, or "
               f"open with repair=True to truncate at {end.offset} (records after it are lost).")
        if not repair:
            log.error("store.commitlog_corrupt_refusing_start", path=path, offset=end.offset,
                      damage=end.damage, next_valid=later)
            raise StoreCorrupt(msg)
        log.error("store.repair_truncating_commitlog", path=path, offset=end.offset,
                  next_valid=later)
    if end.damage is not None:
        log.error("store.commitlog_torn_tail_truncated", path=path, offset=end.offset, damage=end.damage)
    if seg is not None and end.offset < seg.end and (end.damage is not None or later is not None):
        zero_tail(clog, end.offset)
    # segments wholly after the end hold nothing valid (checked above): delete them
    keep = sum(1 for s in clog.files.segments if s.base <= end.offset)
    for s in clog.files.segments[keep:]:
        log.error("store.commitlog_segment_past_end_removed", path=str(s.path))
    clog.files.drop_from(keep)


def trim_queues(queues: Iterable[ConsumeQueue], clog_end: int) -> None:
    """Cut ConsumeQueue units that point past the CommitLog end."""
    for q in queues:
        last = q.last_unit()
        if last is None or last[0] + last[1] <= clog_end:
            continue
        lo, hi = q.min_offset, q.max_offset          # first unit with end > clog_end
        while lo < hi:
            mid = (lo + hi) // 2
            u = q.unit(mid)
            if u is not None and u[0] + u[1] <= clog_end:
                lo = mid + 1
            else:
                hi = mid
        log.warning("store.consumequeue_units_past_end_removed", topic=q.topic,
                    queue_id=q.queue_id, removed=q.max_offset - lo, offset=clog_end)
        q.truncate(lo)


def scan_and_replay(clog: CommitLog, start: int, dispatcher: Dispatcher) -> ScanEnd:
    """``scan`` with replay; on a ReplayGap (a queue behind ``start``) rescans from the first segment.

    The rescan is idempotent: units already present are skipped, index
    entries are only added beyond ``dispatcher.index_from``.
    """
    try:
        return scan(clog, start, dispatcher)
    except ReplayGap as exc:
        log.error("store.consumequeue_behind_replay_start",
                  problem=str(exc), offset=start)
        return scan(clog, clog.min_offset, dispatcher)
