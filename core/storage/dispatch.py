"""CommitLog -> ConsumeQueue + IndexFile dispatch (RocketMQ CommitLogDispatcher).

Theory of operation
-------------------
The CommitLog is the source of truth; everything here can be rebuilt from
it.  ``Dispatcher.dispatch`` is called once per appended record, right after
the bytes are committed, and again by recovery for records whose units may
be missing (``replay=True``).  Rules (RocketMQ 4.9):

  * prepared (sysflag 0x4) and rollback (0xC) records get no ConsumeQueue
    unit; rollback records are not indexed either;
  * CQ tags code = Java hashCode(TAGS) (0 without tags), except in
    ``SCHEDULE_TOPIC_XXXX`` where it is the delivery time
    ``store_timestamp + delay_levels_ms[level - 1]`` (level clamped to the
    table; level <= 0 falls back to the tag hash);
  * index keys: every KEYS entry and the UNIQ_KEY, as ``topic#key``;
  * arrival listeners run after the unit is written (never on replay); a
    listener that raises is logged and otherwise ignored.

Replay is idempotent: a unit already present (queue offset below the CQ's
max) is skipped; index entries are only added for records at or beyond
``index_from`` (the first CommitLog offset not yet indexed).
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Sequence
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
    Message,
)
from rokka.core.storage.api import Appended, ArrivalListener
from rokka.core.storage.layout import decode_properties, tags_hash

log = structlog.get_logger(__name__)

_UNIT = struct.Struct(">qiq")   # a raw ConsumeQueue unit: commitlog offset, size, tags code
Keyed = tuple[str, Sequence[str], int, int]     # an index entry to write: topic, keys, commitlog offset, store ts


class ReplayGap(Exception):
    """Recovery found a record whose queue offset is beyond its ConsumeQueue's end."""


def is_dispatched(sysflag: int) -> bool:
    t = sysflag & TRANSACTION_MASK
    return t != TRANSACTION_PREPARED_TYPE and t != TRANSACTION_ROLLBACK_TYPE


def compute_tags_code(topic: str, props: dict[str, str], store_ts: int, delay_levels_ms: list[int]) -> int:
    if topic == TOPIC_SCHEDULE:
        raw = props.get(PROP_DELAY)
        if raw is not None:
            try:
                level = int(raw)
            except ValueError:
                level = 0
            if level > 0:
                return store_ts + delay_levels_ms[min(level, len(delay_levels_ms)) - 1]
    tags = props.get(PROP_TAGS)
    return tags_hash(tags) if tags else 0


def index_keys(props: dict[str, str]) -> list[str]:
    keys = [k for k in props.get(PROP_KEYS, "").split(" ") if k] if PROP_KEYS in props else []
    uniq = props.get(PROP_UNIQ_KEY)
    if uniq:
        keys.append(uniq)
    return keys


class QueueLike:
    """What the dispatcher needs from a ConsumeQueue (both engines provide it)."""

    max_offset: int
    min_offset: int

    def put(self, queue_offset: int, commitlog_offset: int, size: int, tags_code: int) -> None: ...


class IndexLike:
    def put(self, topic: str, keys: list[str], phy_offset: int, store_ts: int) -> None: ...

    def put_batch(self, entries: Sequence[tuple[str, Sequence[str], int, int]]) -> None: ...

    def put_keys(self, topic: str, keys: Sequence[str], phys: Sequence[int], store_ts: int) -> None: ...


def _put_run(q: QueueLike, queue_offset: int, flat: list[int]) -> None:
    """Write consecutive units (``flat`` = offset, size, code, ...) from ``queue_offset``."""
    put_many = getattr(q, "put_many", None)
    if put_many is not None:
        put_many(queue_offset, flat)
        return
    for i in range(0, len(flat), 3):
        q.put(queue_offset + i // 3, flat[i], flat[i + 1], flat[i + 2])


class Dispatcher:
    """Writes CQ units / index entries for records; ``queues`` is the engine's (topic, qid) map."""

    def __init__(self, queues: dict[tuple[str, int], QueueLike],
                 create_queue: Callable[[str, int], QueueLike],
                 index: IndexLike | None, delay_levels_ms: list[int]) -> None:
        self.queues = queues
        self.create_queue = create_queue
        self.index = index
        self.delay_levels_ms = delay_levels_ms
        self.listeners: list[ArrivalListener] = []
        self.index_from = 0

    def dispatch(self, topic: str, queue_id: int, queue_offset: int, commitlog_offset: int, size: int,
                 sysflag: int, props: dict[str, str], store_ts: int, replay: bool = False,
                 keyed: list[Keyed] | None = None) -> None:
        """One record's unit, arrival and index entries; ``keyed``: collect the index entries there
        instead, for one ``put_keyed`` after a scan of many records (the same entries, written natively)."""
        t = sysflag & TRANSACTION_MASK
        if t != TRANSACTION_PREPARED_TYPE and t != TRANSACTION_ROLLBACK_TYPE:
            if topic == TOPIC_SCHEDULE:
                code = compute_tags_code(topic, props, store_ts, self.delay_levels_ms)
            else:
                tags = props.get(PROP_TAGS)
                code = tags_hash(tags) if tags else 0
            if replay:
                self._replay_unit(topic, queue_id, queue_offset, commitlog_offset, size, code)
            else:
                q = self.queues.get((topic, queue_id))
                if q is None:
                    q = self.create_queue(topic, queue_id)
                q.put(queue_offset, commitlog_offset, size, code)
                if self.listeners:
                    self._notify(topic, queue_id, queue_offset, code, props)
        if (self.index is not None and t != TRANSACTION_ROLLBACK_TYPE
                and (PROP_KEYS in props or PROP_UNIQ_KEY in props)
                and (not replay or commitlog_offset >= self.index_from)):
            keys = index_keys(props)
            if keys:
                if keyed is not None:
                    keyed.append((topic, keys, commitlog_offset, store_ts))
                else:
                    self.index.put(topic, keys, commitlog_offset, store_ts)

    def put_keyed(self, keyed: Sequence[Keyed]) -> None:
        """The index entries ``dispatch(..., keyed=)`` collected, in their order."""
        if keyed and self.index is not None:
            self.index.put_batch(keyed)

    def dispatch_batch(self, messages: Sequence[Message], appended: Sequence[Appended]) -> None:
        """``dispatch`` for every record of one append (same effects, in the same order per record).

        The hot path: the units of each queue (consecutive queue offsets) are written in one go,
        the index entries of the whole batch with one header update; listeners are told after all
        of it is written (they only wake waiters, which run later anyway).
        """
        queues = self.queues
        listeners = self.listeners
        index = self.index
        keyed: list[Keyed] = []
        arrived: list[tuple[str, int, int, int, dict[str, str]]] = []
        runs: dict[tuple[str, int], tuple[QueueLike, int, list[int]]] = {}
        run: tuple[QueueLike, int, list[int]] | None = None
        last_topic, last_qid = None, -1
        for m, a in zip(messages, appended, strict=True):
            props = m.properties
            topic = m.topic
            t = m.sysflag & TRANSACTION_MASK
            if t != TRANSACTION_PREPARED_TYPE and t != TRANSACTION_ROLLBACK_TYPE:
                if topic == TOPIC_SCHEDULE:
                    code = compute_tags_code(topic, props, a.store_timestamp, self.delay_levels_ms)
                else:
                    tags = props.get(PROP_TAGS)
                    code = tags_hash(tags) if tags else 0
                qid = m.queue_id
                if qid != last_qid or topic != last_topic:
                    last_topic, last_qid = topic, qid
                    run = runs.get((topic, qid))
                if run is None or a.queue_offset != run[1] + len(run[2]) // 3:
                    key = (topic, qid)
                    if run is not None:
                        _put_run(*run)
                    q = queues.get(key)
                    if q is None:
                        q = self.create_queue(topic, m.queue_id)
                    run = runs[key] = (q, a.queue_offset, [])
                run[2].extend((a.commitlog_offset, a.size, code))
                if listeners:
                    arrived.append((topic, m.queue_id, a.queue_offset, code, props))
            if index is not None and t != TRANSACTION_ROLLBACK_TYPE:
                if PROP_KEYS in props:
                    keys = index_keys(props)
                    if keys:
                        keyed.append((topic, keys, a.commitlog_offset, a.store_timestamp))
                else:
                    uniq = props.get(PROP_UNIQ_KEY)
                    if uniq:
                        keyed.append((topic, (uniq,), a.commitlog_offset, a.store_timestamp))
        for run in runs.values():
            _put_run(*run)
        if keyed:
            index.put_batch(keyed)  # type: ignore[union-attr]
        for arrival in arrived:
            self._notify(*arrival)

    def dispatch_runs(self, mm: Any, items: Sequence[tuple[Any, ...]], slow: Callable[..., None]) -> None:
        """``dispatch`` for what ``_cstore.scan_runs`` walked in ``mm`` (the same units, index entries and
        arrivals), with no Python object per record where it can: a run (records of one queue with
        consecutive queue offsets) whose first unit goes where its queue ends is written in one go, its
        index keys per store timestamp as the scan grouped them; a run that starts a queue not there yet
        or after a gap hands its first record to ``slow(topic, queue_id, queue_offset, commitlog_offset,
        size, sysflag, props, store_ts, keyed=)`` (with its decoded properties: queue creation and holes
        are the caller's; its index keys are in the run's groups), then goes on; so does any record the
        scan kept out of runs (a transaction half, the schedule topic).  Arrivals: one per run (code and
        properties None: waiters re-read)."""
        queues, index = self.queues, self.index
        keyed: list[Keyed] = []
        for item in items:
            if item[0]:
                _, topic, qid, qoff, phys, size, sysflag, ts, ps, pe = item
                slow(topic, qid, qoff, phys, size, sysflag, decode_properties(mm[ps:pe]), ts, keyed=keyed)
                continue
            _, topic, qid, qoff, units, groups, first, _ = item
            q = queues.get((topic, qid))
            if q is None or q.max_offset != qoff:
                phys, size, sysflag, ts, ps, pe = first
                slow(topic, qid, qoff, phys, size, sysflag, decode_properties(mm[ps:pe]), ts, keyed=[])
                units, qoff = units[_UNIT.size:], qoff + 1
            if units:
                self._put_units(topic, qid, qoff, units)
                if self.listeners:
                    self._notify(topic, qid, qoff + len(units) // _UNIT.size - 1, None, None)
            if groups and index is not None:
                for keys, phys_list, ts in groups:
                    index.put_keys(topic, keys, phys_list, ts)
        if keyed:
            self.put_keyed(keyed)

    def replay_runs(self, mm: Any, items: Sequence[tuple[Any, ...]]) -> None:
        """Recovery's replay (``dispatch(..., replay=True)`` of each record, with recovery's skip of records
        already dispatched) for what ``_cstore.scan_runs`` walked in ``mm``: a run's units already in its
        queue are skipped, the rest written in one go where the queue ends (a queue that is not there is
        created only by a run from offset 0: a deleted queue is not resurrected; a run beyond the queue's
        end raises ``ReplayGap``), index entries only for records at or past ``index_from``; no
        arrivals.  Records the scan kept out of runs take ``dispatch``."""
        queues, index, index_from = self.queues, self.index, self.index_from
        keyed: list[Keyed] = []
        try:
            for item in items:
                if item[0]:
                    _, topic, qid, qoff, phys, size, sysflag, ts, ps, pe = item
                    if phys < index_from:       # recovery's cheap skip (recovery._replay)
                        q = queues.get((topic, qid))
                        if q is not None and qoff < q.max_offset or not is_dispatched(sysflag):
                            continue
                    self.dispatch(topic, qid, qoff, phys, size, sysflag, decode_properties(mm[ps:pe]), ts,
                                  replay=True, keyed=keyed)
                    continue
                _, topic, qid, qoff, units, groups, _, _ = item
                q = queues.get((topic, qid))
                if q is None and qoff == 0:
                    q = self.create_queue(topic, qid)
                if q is not None:
                    skip = min(len(units) // _UNIT.size, max(0, q.max_offset - qoff))
                    if skip < len(units) // _UNIT.size:
                        if qoff + skip > q.max_offset:
                            phys = _UNIT.unpack_from(units, skip * _UNIT.size)[0]
                            raise ReplayGap(f"{topic}/{qid}: record queue offset {qoff + skip} beyond "
                                            f"consumequeue end {q.max_offset} (commitlog offset {phys})")
                        self._put_units(topic, qid, qoff + skip, units[skip * _UNIT.size:])
                if groups and index is not None:
                    for keys, phys_list, ts in groups:
                        if phys_list[0] < index_from:
                            pairs = [(k, p) for k, p in zip(keys, phys_list, strict=True) if p >= index_from]
                            if not pairs:
                                continue
                            keys, phys_list = [k for k, _ in pairs], [p for _, p in pairs]
                        index.put_keys(topic, keys, phys_list, ts)
        finally:
            if keyed:
                self.put_keyed(keyed)

    def tags_code(self, topic: str, props: dict[str, str], store_ts: int) -> int:
        return compute_tags_code(topic, props, store_ts, self.delay_levels_ms)

    def dispatch_run(self, topic: str, queue_id: int, queue_offset: int, units: bytes, code: int,
                     props: dict[str, str], store_ts: int, keys: Sequence[str] | None = None) -> None:
        """``dispatch`` for a ``put_uniform`` run: its raw CQ ``units`` (consecutive from
        ``queue_offset``) in one write, index entries for each record's own key (``keys``) or the
        shared properties' keys, one arrival notification for the last record (every record
        shares its tags, and a waiter matching on properties re-reads: props None when records
        have keys of their own)."""
        self._put_units(topic, queue_id, queue_offset, units)
        if keys is not None:
            if self.index is not None:
                self.index.put_keys(topic, keys, units, store_ts)    # offsets read from the units
            if self.listeners:
                self._notify(topic, queue_id, queue_offset + len(units) // _UNIT.size - 1, code, None)
            return
        if self.index is not None and (PROP_KEYS in props or PROP_UNIQ_KEY in props):
            keys = index_keys(props)
            if keys:
                self.index.put_batch([(topic, keys, off, store_ts) for off, _, _ in _UNIT.iter_unpack(units)])
        if self.listeners:
            self._notify(topic, queue_id, queue_offset + len(units) // _UNIT.size - 1, code, props)

    def dispatch_elements(self, topic: str, queue_id: int, queue_offset: int, units: bytes, keys: list[str],
                          phys: list[int], store_ts: int) -> None:
        """``dispatch`` for a ``put_batch_body`` run: raw CQ ``units`` in one write, an index entry for
        each of ``keys`` (pointing at ``phys``), one arrival notification for the run with tags code
        and properties None (waiters re-read: see ``ArrivalListener``)."""
        self._put_units(topic, queue_id, queue_offset, units)
        if self.index is not None and keys:
            self.index.put_keys(topic, keys, phys, store_ts)
        if self.listeners:
            self._notify(topic, queue_id, queue_offset + len(units) // _UNIT.size - 1, None, None)

    def _put_units(self, topic: str, queue_id: int, queue_offset: int, units: bytes) -> None:
        """Raw consecutive CQ units from ``queue_offset`` (one write when the queue can take them so)."""
        q = self.queues.get((topic, queue_id))
        if q is None:
            q = self.create_queue(topic, queue_id)
        put_units = getattr(q, "put_units", None)
        if put_units is not None:
            put_units(queue_offset, units)
        else:
            for i, (off, size, c) in enumerate(_UNIT.iter_unpack(units), queue_offset):
                q.put(i, off, size, c)

    def _notify(self, topic: str, queue_id: int, queue_offset: int, code: int | None,
                props: dict[str, str] | None) -> None:
        for listener in self.listeners:
            try:
                listener(topic, queue_id, queue_offset, code, props)
            except Exception:  # noqa: BLE001 - a listener must never break a put
                log.exception("store.arrival_listener_failed", topic=topic, queue_id=queue_id)

    def _replay_unit(self, topic: str, queue_id: int, queue_offset: int, commitlog_offset: int,
                     size: int, code: int) -> None:
        q = self.queues.get((topic, queue_id))
        if q is None:
            if queue_offset != 0:
                return  # queue deleted (delete_topic) or never existed from offset 0: do not resurrect
            q = self.create_queue(topic, queue_id)
        if queue_offset < q.max_offset:
            return      # already present
        if queue_offset > q.max_offset:
            raise ReplayGap(f"{topic}/{queue_id}: record queue offset {queue_offset} beyond "
                            f"consumequeue end {q.max_offset} (commitlog offset {commitlog_offset})")
        q.put(queue_offset, commitlog_offset, size, code)
