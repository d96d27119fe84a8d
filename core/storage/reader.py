"""Read paths shared by the engines: pull (get_messages) and search by time.

Theory of operation
-------------------
``get_messages`` follows RocketMQ 4.9 ``DefaultMessageStore.getMessage``:

  ============================  =========================  ==================
  situation                     status                     next_begin_offset
  ============================  =========================  ==================
  no queue, or max_offset == 0  NO_MESSAGE_IN_QUEUE        0
  offset < min                  OFFSET_TOO_SMALL           min
  offset == max                 OFFSET_OVERFLOW_ONE        offset
  offset > max                  OFFSET_OVERFLOW_BADLY      min if min == 0 else max (Java)
  unit unreadable               OFFSET_FOUND_NULL          start of the next CQ file
  scanned, nothing matched      NO_MATCHED_MESSAGE         past the scanned units
  otherwise                     FOUND                      past the last taken unit
  ============================  =========================  ==================

At most ``max(16000, 20 * max_msgs)`` bytes of units are scanned per call;
the batch stops at ``max_msgs`` messages or before exceeding ``max_bytes``,
but always holds at least one message.  The tag filter runs on the unit, the
property filter on the record's decoded properties.  Units pointing below
the CommitLog minimum are skipped (MESSAGE_WAS_REMOVING if nothing found).

On a DiskStore the loop runs in C (``_scan_native``: ``ConsumeQueue.scan_tags``
walks the units in place and copies only the matching records, straight from
CommitLog spans lent by ``read_span``) for filters that describe themselves
(``tag_codes``; for SQL92 also ``property_names``): the tag stage compares
the unit's code with the subscription's, the SQL92 stage calls the compiled
selector on a dict of the candidate's properties parsed in place (only the
names it reads).  The Python loop (``_scan``) is its twin (and runs for the
MemoryStore): it too parses properties in place and copies only what
matches (``_matching``).  Neither copies a record it drops.

Queues are duck-typed: anything with ``max_offset``, ``units(offset, n)``
and ``units_per_file`` works (DiskStore's ConsumeQueue, MemoryStore's list).
"""

from __future__ import annotations

from collections.abc import Callable
from operator import itemgetter
from typing import Any, Protocol

from rokka.core.model import BORNHOST_V6_FLAG, PROP_KEYS, PROP_UNIQ_KEY, STOREHOST_V6_FLAG
from rokka.core.storage import layout
from rokka.core.storage.api import GetResult, GetStatus, MessageFilter, RecordRun


class _Queue(Protocol):
    max_offset: int
    units_per_file: int

    def units(self, queue_offset: int, count: int) -> list[tuple[int, int, int]]: ...


class _Log(Protocol):
    @property
    def min_offset(self) -> int: ...

    def read(self, offset: int, size: int | None = None) -> bytes | None: ...


def _empty(status: GetStatus, next_offset: int, lo: int, hi: int) -> GetResult:
    return GetResult(status, (), (), next_offset, lo, hi)


def get_messages(q: Any, lo: int, clog: _Log, offset: int, max_msgs: int, max_bytes: int,
                 message_filter: MessageFilter | None) -> GetResult:
    hi = q.max_offset if q is not None else 0
    if q is None or hi == 0:
        return _empty(GetStatus.NO_MESSAGE_IN_QUEUE, 0, 0, 0)
    if offset < lo:
        return _empty(GetStatus.OFFSET_TOO_SMALL, lo, lo, hi)
    if offset == hi:
        return _empty(GetStatus.OFFSET_OVERFLOW_ONE, offset, lo, hi)
    if offset > hi:
        return _empty(GetStatus.OFFSET_OVERFLOW_BADLY, lo if lo == 0 else hi, lo, hi)
    max_msgs = max(1, max_msgs)
    want = max(16000, 20 * max_msgs) // 20
    found = _scan_native(q, clog, offset, want, max_msgs, max_bytes, message_filter)
    if found is None:
        units = q.units(offset, want)
        if not units:
            upf = q.units_per_file
            return _empty(GetStatus.OFFSET_FOUND_NULL, (offset // upf + 1) * upf, lo, hi)
        found = _scan(units, offset, clog, max_msgs, max_bytes, message_filter)
    status, records, qoffs, next_offset = found
    return GetResult(status, tuple(records), tuple(qoffs), next_offset, lo, hi)


_V6_BITS = BORNHOST_V6_FLAG | STOREHOST_V6_FLAG
_Scan = tuple[GetStatus, list[bytes], list[int], int]   # status, records, their queue offsets, next offset


def _scan(units: list[tuple[int, int, int]], offset: int, clog: _Log, max_msgs: int, max_bytes: int,
          message_filter: MessageFilter | None) -> _Scan:
    """``get_messages``' loop over the units from ``offset`` (the Python twin of ``_scan_native``).
    A filter on properties (SQL92) reads each candidate in place and copies only what matches."""
    status = GetStatus.NO_MATCHED_MESSAGE
    records: list[bytes] = []
    qoffs: list[int] = []
    total = 0
    clog_min = clog.min_offset
    next_offset = offset + len(units)
    on_props = message_filter is not None and getattr(message_filter, "needs_properties", True)
    for i, (off, size, code) in enumerate(units):
        if records and (len(records) >= max_msgs or total + size > max_bytes):
            next_offset = offset + i
            break
        if off < clog_min:
            if not records:
                status = GetStatus.MESSAGE_WAS_REMOVING
            continue
        if message_filter is not None and not message_filter.match_tags_code(code):
            continue
        rec = _matching(clog, off, size, message_filter) if on_props else clog.read(off, size)
        if rec is None:
            if not records:
                status = GetStatus.MESSAGE_WAS_REMOVING
            continue
        if rec:
            records.append(rec)
            qoffs.append(offset + i)
            total += size
    if records:
        status = GetStatus.FOUND
    return status, records, qoffs, next_offset


def _matching(clog: Any, off: int, size: int, message_filter: Any) -> bytes | None:
    """The record at ``off`` if its properties match, ``b""`` if they do not, None if unreadable.
    The properties are parsed from the record in place (a view, when the log lends one): a record
    that does not match is never copied."""
    span = getattr(clog, "read_span", None)
    if span is None:
        rec = clog.read(off, size)
        props = None if rec is None else _properties(rec)
        return None if props is None else (rec if message_filter.match_properties(props) else b"")
    view = span(off, off + size, view=True)
    if view is None:
        return None
    try:
        if size < 8 or layout.SIZE_MAGIC.unpack_from(view)[1] != layout.MESSAGE_MAGIC:
            return None
        props = _properties(view)
        if props is None:
            return None
        return bytes(view) if message_filter.match_properties(props) else b""
    finally:
        if type(view) is memoryview:
            view.release()


def _properties(rec: bytes | memoryview) -> dict[str, str] | None:
    """``layout.properties_of`` of a whole record, None when its lengths do not add up within it
    (the record is then unreadable; ``_cqscan`` checks the same)."""
    size = len(rec)
    if size < 40:
        return None
    hs = layout.HEADERS[layout.INT32.unpack_from(rec, layout.OFF_SYSFLAG)[0] & _V6_BITS].size
    if size < hs:
        return None
    pos = hs + layout.INT32.unpack_from(rec, hs - 4)[0]     # the topic length byte
    if pos < hs or pos + 1 > size:
        return None
    pos += 1 + rec[pos]
    if pos + 2 > size:
        return None
    plen = layout.PROPS_LEN.unpack_from(rec, pos)[0]
    if plen < 0 or pos + 2 + plen > size:
        return None
    return layout.decode_properties(rec[pos + 2:pos + 2 + plen])


_NO = object()


def _native_plan(message_filter: Any) -> tuple[bytes | None, Callable[..., Any] | None, Any, Any] | None:
    """What ``_cqscan.tag_filter`` takes for this filter: (the tags codes a unit must have, None for
    every unit; the properties predicate, None for none; the property names it reads, None for all;
    a dict for its answers by those names' values, or None), or None when the filter does not say
    (the Python loop runs)."""
    if message_filter is None or getattr(message_filter, "matches_all", False):
        return None, None, None, None
    codes = getattr(message_filter, "tag_codes", _NO)
    if codes is _NO:
        return None
    if not getattr(message_filter, "needs_properties", True):
        return codes, None, None, None
    names = getattr(message_filter, "property_names", _NO)
    if names is _NO:
        return None
    return codes, message_filter.match_properties, names, getattr(message_filter, "answers", None)


def _scan_native(q: Any, clog: Any, offset: int, want: int, max_msgs: int, max_bytes: int,
                 message_filter: MessageFilter | None) -> _Scan | None:
    """``_scan`` in C (``ConsumeQueue.scan_tags``: the units in place, the records copied straight
    from CommitLog spans lent by ``read_span``; a properties predicate is called on each candidate's
    properties parsed in place); None when it cannot (no native module, a store without maps, a
    filter that does not describe itself, no unit at ``offset``)."""
    plan = _native_plan(message_filter)
    scan = getattr(q, "scan_tags", None)
    if plan is None or scan is None or getattr(clog, "files", None) is None:
        return None
    codes, match, names, answers = plan
    upf = q.units_per_file
    end = min(offset + want, q.max_offset, (offset // upf + 1) * upf)    # one ConsumeQueue file, as q.units
    records: list[bytes] = []
    qoffs: list[int] = []
    taken = total = 0
    removed = False
    at, span, span_start = offset, None, 0
    try:
        while at < end:
            got = scan(at, end - at, codes, clog.min_offset, max_msgs, max_bytes, taken, total, span, span_start,
                       match, names, answers)
            if got is None:
                if at == offset:
                    return None
                break
            recs, offs, used, taken, total, rem, need = got
            records += recs
            qoffs += offs
            removed |= rem
            at += used
            if need < 0:
                break
            if span is not None:
                span.release()
            span, span_start = _span_at(q, clog, at, need), need
            if span is None:    # the record is not readable: skipped, as the Python loop does
                removed |= not taken
                at += 1
    finally:
        if span is not None:
            span.release()
    status = GetStatus.FOUND if records else (GetStatus.MESSAGE_WAS_REMOVING if removed
                                              else GetStatus.NO_MATCHED_MESSAGE)
    return status, records, qoffs, at


def _span_at(q: Any, clog: Any, queue_offset: int, start: int) -> memoryview | None:
    """CommitLog bytes from ``start`` to its segment's end (or the write offset), lent in place,
    if the record of unit ``queue_offset`` (at ``start``) lies whole within them; else None."""
    unit = q.unit(queue_offset)
    seg = clog.files.find(start)
    if unit is None or seg is None:
        return None
    end = min(seg.end, clog.write_offset)
    size = unit[1]
    if size <= 0 or start + size > end:
        return None
    view = clog.read_span(start, end, view=True)
    return view if type(view) is memoryview else None


_SIZE = itemgetter(1)     # of a ConsumeQueue unit (commitlog offset, size, tags code)


def get_runs(q: Any, lo: int, clog: Any, offset: int, max_msgs: int, max_bytes: int,
             *, views: bool = False) -> tuple[list[RecordRun], int]:
    """``get_messages`` without a filter, as runs of adjacent records (``clog.read_spans`` copies each
    run out in one go, or with ``views`` lends it as a memoryview: ``MessageStore.get_runs``): same
    records, same limits, same next offset."""
    hi = q.max_offset if q is not None else 0
    if q is None or not lo <= offset < hi:
        return [], offset
    max_msgs = max(1, max_msgs)
    want = max(16000, 20 * max_msgs) // 20
    walk = getattr(q, "walk_runs", None)
    if walk is not None and (native := _walk_native(walk, clog, offset, want, hi, max_msgs, max_bytes,
                                                    views)) is not None:
        return native
    units = q.units(offset, min(want, 64))
    if not units:
        upf = q.units_per_file
        return [], (offset // upf + 1) * upf
    # Take more units only while the byte budget may need them (a big max_msgs is a ceiling,
    # not an estimate: reading all its units would cost more than the records themselves).
    used = sum(map(_SIZE, units))
    while len(units) < want and used < max_bytes and len(units) < max_msgs:
        more = q.units(offset + len(units), min(want - len(units), max(64, len(units))))
        if not more:
            break
        units += more
        used += sum(map(_SIZE, more))
    clog_min = clog.min_offset
    spans: list[tuple[int, int, int, list[int]]] = []   # (queue offset, start, end, sizes)
    taken = total = 0
    next_offset = offset + len(units)
    start = end = -1
    sizes: list[int] = []
    first = 0
    for i, (off, size, _) in enumerate(units):
        if taken and (taken >= max_msgs or total + size > max_bytes):
            next_offset = offset + i
            break
        if off < clog_min:  # a removed record or a hole: a run holds consecutive queue offsets only
            if sizes:
                spans.append((first, start, end, sizes))
                sizes = []
            end = -1
            continue
        if off != end:      # not adjacent to the run so far (or no run yet: end is -1)
            if sizes:
                spans.append((first, start, end, sizes))
            first, start, sizes = offset + i, off, []
        sizes.append(size)
        end = off + size
        taken += 1
        total += size
    if sizes:
        spans.append((first, start, end, sizes))
    datas = clog.read_spans([(start, end) for _, start, end, _ in spans], view=views)
    runs = [RecordRun(first, data, tuple(sizes))
            for (first, _, _, sizes), data in zip(spans, datas, strict=True) if data is not None]
    return runs, next_offset


def _walk_native(walk: Callable[..., Any], clog: Any, offset: int, want: int, hi: int, max_msgs: int,
                 max_bytes: int, views: bool) -> tuple[list[RecordRun], int] | None:
    """``get_runs``' loop in C (``ConsumeQueue.walk_runs``: ``_cstore.cq_runs`` over the units in
    place), one ConsumeQueue file at a time; None if there is no unit at ``offset`` to walk."""
    clog_min = clog.min_offset
    runs: list[RecordRun] = []
    at = offset
    taken = total = 0
    while at < hi and at - offset < want:
        got = walk(at, want - (at - offset), clog_min, max_msgs, max_bytes, taken, total)
        if got is None:
            break
        found, used, taken, total = got
        datas = clog.read_spans([(start, end) for _, start, end, _ in found], view=views)    # one per segment
        for (first, _, _, sizes), data in zip(found, datas, strict=True):
            if data is not None:
                runs.append(RecordRun(at + first, data, memoryview(sizes).cast("i")))
        at += used
        if taken >= max_msgs or total >= max_bytes or not used:
            break
    return None if at == offset else (runs, at)


def offset_by_time(store_time_at: Callable[[int], int | None], lo: int, hi: int, ts: int) -> int:
    """RocketMQ getOffsetInQueueByTime over ``[lo, hi)``: exact, else the nearer neighbour, else 0."""
    if hi <= lo:
        return 0
    a, b = lo, hi           # first offset whose store time >= ts
    while a < b:
        mid = (a + b) // 2
        t = store_time_at(mid)
        if t is None:
            return 0
        if t < ts:
            a = mid + 1
        else:
            b = mid
    right_t = store_time_at(a) if a < hi else None
    if right_t == ts:
        return a
    left_t = store_time_at(a - 1) if a > lo else None
    if left_t is None:
        return a if right_t is not None else 0
    if right_t is None:
        return a - 1
    return a if abs(ts - left_t) > abs(ts - right_t) else a - 1


def record_has_key(rec: bytes, topic: str, key: str) -> bool:
    """True if the record is in ``topic`` and ``key`` is one of its KEYS or its UNIQ_KEY."""
    if layout.topic_of(rec) != topic:
        return False
    props = layout.properties_of(rec)
    return props.get(PROP_UNIQ_KEY) == key or key in props.get(PROP_KEYS, "").split(" ")


class TimeQueries:
    """Time lookups derived from ``store_time_at`` / ``min_offset`` / ``max_offset``; shared by both engines."""

    def store_time_at(self, topic: str, queue_id: int, queue_offset: int) -> int | None:
        raise NotImplementedError

    def min_offset(self, topic: str, queue_id: int) -> int:
        raise NotImplementedError

    def max_offset(self, topic: str, queue_id: int) -> int:
        raise NotImplementedError

    def earliest_store_time(self, topic: str, queue_id: int) -> int:
        t = self.store_time_at(topic, queue_id, self.min_offset(topic, queue_id))
        return -1 if t is None else t

    def offset_by_time(self, topic: str, queue_id: int, timestamp_ms: int) -> int:
        return offset_by_time(lambda o: self.store_time_at(topic, queue_id, o),
                              self.min_offset(topic, queue_id), self.max_offset(topic, queue_id), timestamp_ms)
