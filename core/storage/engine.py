"""DiskStore: the RocketMQ-format store on disk (implements ``MessageStore``).

Theory of operation
-------------------
Directory layout (RocketMQ 4.9 store)::

    root/commitlog/<20-digit offset>            CommitLog segments
    root/consumequeue/<topic>/<qid>/<20 digits>  ConsumeQueue files
    root/index/<yyyyMMddHHmmssSSS>             IndexFiles
    root/checkpoint  root/abort  root/lock  root/config/queueMinOffset.json

``open()`` takes an exclusive ``flock`` on ``lock``, notes whether ``abort``
exists (unclean stop), creates it, and runs recovery (``recovery.py``);
``close()`` flushes everything, writes the checkpoint and removes ``abort``.

Writes: ``put_messages`` validates the whole batch first (nothing is written
for an illegal batch), encodes each record at its final offset, stages the
bytes, commits them with one ``pwrite`` per touched segment, then dispatches
(CQ unit, index keys, arrival listeners).  Before a disk can fill up,
``admission.check_space`` marks it full above 90 % use (RocketMQ's
diskSpaceWarningLevelRatio) or below a small reserve: puts are refused with
SERVICE_NOT_AVAILABLE and RocketMQ's remark, nothing is written, until a
later check sees room again (checks run on each retention pass, every few
MiB appended, and once a second while refusing).  An I/O error while
committing (ENOSPC when something else filled the disk) rolls the CommitLog
back to the start of that put and clears the bytes it may have written
(``CommitLog.rollback``), then puts are refused the same way until a check
finds room: writes resume without a restart.  Only when the failed bytes
cannot be cleared does the store stay read-only until a restart, whose
recovery puts CommitLog and queues back in agreement.  Refusals are logged
at most every ``admission.REFUSAL_LOG_INTERVAL_S`` seconds (``admission``: the
put-path gate).

Thread model: everything runs on the caller's (trio) thread except
``flush()`` and ``checkpoint()``, which may run on a worker thread; they only
read ``write_offset`` and fdatasync files under the segment-list lock.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import structlog
from rokka.core.model import (
    TOPIC_SCHEDULE,
    TOPIC_TRANS_HALF,
    TRANSACTION_MASK,
    TRANSACTION_PREPARED_TYPE,
    TRANSACTION_ROLLBACK_TYPE,
    BatchBody,
    Message,
    StoredMessage,
)
from rokka.core.storage import admission, layout, paths, reader, retention
from rokka.core.storage.api import (
    Appended,
    ArrivalListener,
    CqUnit,
    GetResult,
    MessageFilter,
    PutResult,
    PutStatus,
    RecordRun,
    StoreConfig,
    UnitsAppended,
)
from rokka.core.storage.checkpoint import Checkpoint, read_checkpoint, write_checkpoint
from rokka.core.storage.commitlog import CommitLog
from rokka.core.storage.consumequeue import UNIT_SIZE, ConsumeQueue
from rokka.core.storage.dispatch import Dispatcher
from rokka.core.storage.index import IndexService
from rokka.core.storage.metafile import remove_stale_temps
from rokka.core.storage.min_offsets import QueueMinOffsets
from rokka.core.storage.recovery import StoreCorrupt, cut_tail, scan_and_replay, trim_queues
from rokka.core.storage.uniform_runs import UniformRuns

log = structlog.get_logger(__name__)

__all__ = ["DiskStore", "StoreCorrupt", "StoreLocked"]


# Topics whose dispatch has its own rules (delivery time as tags code, halves): never a raw batch.
_SYSTEM_RUN_TOPICS = frozenset({TOPIC_SCHEDULE, TOPIC_TRANS_HALF})


class StoreLocked(Exception):
    """Another process has this store directory open."""


class DiskStore(reader.TimeQueries, UniformRuns):
    def __init__(self, config: StoreConfig, *, repair: bool = False) -> None:
        self.config = config
        self.root = Path(config.root_dir)
        self.repair = repair
        self.clog = CommitLog(config.commitlog_path, config.commitlog_file_size)
        self.clog.cache_window = config.cache_window_bytes
        self.cqs: dict[tuple[str, int], ConsumeQueue] = {}
        self.index = IndexService(self.root / "index", config.index_hash_slots, config.index_max_entries)
        self.dispatcher = Dispatcher(self.cqs, self._new_queue, self.index,  # type: ignore[arg-type]
                                     config.delay_levels_ms)
        self.min_offsets = QueueMinOffsets(self.root / "config" / "queueMinOffset.json")
        self._last_store_ts = 0
        self._writable = False
        self.disk_full = False          # set by admission.check_space (also another thread: a plain flag)
        self.write_error: str | None = None     # a failed write, cleared by check_space once there is room
        self._space_checked_at = 0      # CommitLog offset of the last put-path space check
        self.space_low = False          # set by check_space: little room left, check before every put
        self._recheck_at = 0.0          # monotonic time of the next put-path check while refusing
        self._refusal_logged_at = -admission.REFUSAL_LOG_INTERVAL_S
        self._lock_fd: int | None = None
        self._checkpoint_lock = threading.Lock()
        self._flush_hooks: list[Callable[[], None]] = []
        self._host = config.store_host
        self.replica_only = False       # a SLAVE's store: puts refused, bytes come from replica.py

    # -- lifecycle ----------------------------------------------------------------
    def open(self) -> DiskStore:
        """Recover and open for writing.

        Raises:
            StoreCorrupt: damaged CommitLog data followed by good data (see recovery.py).
            StoreLocked: another process holds the store.
        """
        self.root.mkdir(parents=True, exist_ok=True)
        self._lock()
        for directory in (self.root, self.root / "config"):    # we hold the lock: no writer is running
            remove_stale_temps(directory)
        abort = self.root / "abort"
        unclean = abort.exists()
        abort.touch()
        if unclean:
            log.warning("store.unclean_shutdown_recovering", path=str(self.root))
        if self.config.clean_file_forcibly_enable:
            log.warning("store.clean_file_forcibly_enabled", path=str(self.root),
                        warning="cleanFileForciblyEnable=true: above 85 % disk use, CommitLog segments that have "
                                "not expired (and may not have been consumed) are DELETED to keep accepting writes")
        try:
            self._recover(unclean)
        except BaseException:
            self._close_files()
            self._unlock()
            raise
        self._writable = True
        self.flush()
        self.checkpoint()
        self.clog.start_warmer(self.config.warm_ahead_bytes)
        return self

    def _recover(self, unclean: bool) -> None:
        cp = read_checkpoint(self.root / "checkpoint")
        self.min_offsets.load()
        self.clog.load()
        starts = [self._checkpoint_start(cp, unclean)]
        starts += self._load_queues()
        index_from, redo = self.index.load()
        self.dispatcher.index_from = index_from
        if redo is not None:
            starts.append(redo)
        start = max(self.clog.min_offset, min(starts))
        t0 = time.monotonic()
        end = scan_and_replay(self.clog, start, self.dispatcher)
        cut_tail(self.clog, end, self.repair)
        self.clog.set_write_offset(end.offset)
        trim_queues(self.cqs.values(), end.offset)
        for q in self.cqs.values():
            q.correct_min(self.clog.min_offset)
        self._last_store_ts = self._tail_timestamp()
        log.info("store.recovered", start=start, end=end.offset, unclean=unclean,
                 queues=len(self.cqs), seconds=round(time.monotonic() - t0, 3))

    def _checkpoint_start(self, cp: Checkpoint | None, unclean: bool) -> int:
        """First record to verify: the start of the checkpoint-era segment (see recovery.py)."""
        files = self.clog.files
        if cp is None or not files.segments:
            return self.clog.min_offset
        if not self.clog.min_offset <= cp.physic_offset <= files.segments[-1].end:
            log.error("store.checkpoint_outside_commitlog_full_scan",
                      path=str(self.root / "checkpoint"), offset=cp.physic_offset)
            return self.clog.min_offset
        seg = files.find(cp.physic_offset) or files.segments[-1]
        start = seg.base
        if unclean:
            start = min(start, max(cp.dispatch_offset, self.clog.min_offset))
        return start

    def _load_queues(self) -> list[int]:
        """Open every ConsumeQueue; returns replay starts for damaged ones."""
        starts: list[int] = []
        cq_root = self.root / "consumequeue"
        if not cq_root.is_dir():
            return starts
        for tdir in sorted(cq_root.iterdir()):
            for qdir in sorted(tdir.iterdir()) if tdir.is_dir() else ():
                if not qdir.name.isdigit():
                    continue
                q = ConsumeQueue(qdir, tdir.name, int(qdir.name), self.config.consumequeue_file_size)
                damaged = q.load()
                self.cqs[(tdir.name, int(qdir.name))] = q
                if damaged is not None:
                    last = q.last_unit()
                    starts.append(last[0] + last[1] if last else self.clog.min_offset)
        return starts

    def _tail_timestamp(self) -> int:
        last = max((q.last_unit() or (-1, 0, 0) for q in self.cqs.values()), default=(-1, 0, 0))
        ts = self.clog.store_timestamp(last[0]) if last[0] >= 0 else None
        return ts or 0

    def _lock(self) -> None:
        fd = os.open(self.root / "lock", os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise StoreLocked(f"{self.root} is in use by another process") from None
        self._lock_fd = fd

    def _unlock(self) -> None:
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None

    def close(self) -> None:
        if not self._writable:
            return
        self._writable = False
        self.flush()
        self.checkpoint()
        self._close_files()
        (self.root / "abort").unlink(missing_ok=True)
        self._unlock()

    def _close_files(self) -> None:
        for q in self.cqs.values():
            q.close()
        self.index.close()
        self.clog.close()

    # -- writing --------------------------------------------------------------------
    def put_messages(self, messages: Sequence[Message]) -> PutResult:
        if (refused := admission.not_accepting(self)) is not None:
            return refused
        if not messages:
            return PutResult(PutStatus.PUT_OK)
        problem = admission.validate(messages, self.config)
        if isinstance(problem, PutResult):
            return problem
        start = self.clog.write_offset
        try:
            appended = self._append(messages, problem)
        except OSError as exc:
            return admission.write_failed(self, exc, start)
        self.dispatcher.dispatch_batch(messages, appended)
        self._last_store_ts = appended[-1].store_timestamp
        return PutResult(PutStatus.PUT_OK, tuple(appended))

    def put_batch_body(self, batch: BatchBody, properties: dict[str, str] | None = None) -> PutResult | None:
        """See ``MessageStore.put_batch_body``: ``layout.encode_elements`` (native) encodes every
        element with its ConsumeQueue unit in one pass; committed with one ``pwrite``; dispatched
        as one run (``Dispatcher.dispatch_elements``)."""
        t = batch.sysflag & TRANSACTION_MASK
        if not layout.NATIVE or batch.topic in _SYSTEM_RUN_TOPICS or t == TRANSACTION_PREPARED_TYPE \
                or t == TRANSACTION_ROLLBACK_TYPE:
            return None
        if (refused := admission.not_accepting(self)) is not None:
            return refused
        if batch.queue_id < 0:
            return PutResult(PutStatus.MESSAGE_ILLEGAL, remark=f"bad queue id {batch.queue_id}")
        if not paths.is_safe_component(batch.topic):
            return PutResult(PutStatus.MESSAGE_ILLEGAL, remark=f"topic {batch.topic!r} is not a valid name")
        extra = layout.encode_properties(batch.properties if properties is None else properties)
        clog = self.clog
        now = int(time.time() * 1000)
        q = self.cqs.get((batch.topic, batch.queue_id))
        qoff = q.max_offset if q is not None else 0
        start = clog.stage_end
        try:
            data, units, keys, phys = layout.encode_elements(
                batch.topic, batch.queue_id, batch.body, extra, sysflag=batch.sysflag,
                born_timestamp=batch.born_timestamp, born_host=batch.born_host,
                reconsume_times=batch.reconsume_times, store_timestamp=now, store_host=self._host,
                queue_offset=qoff, commitlog_offset=start, max_body=self.config.max_message_size)
        except layout.RecordError as exc:
            return PutResult(PutStatus.MESSAGE_ILLEGAL, remark=str(exc))
        except ValueError as exc:
            kind, remark = exc.args if len(exc.args) == 2 else ("malformed", str(exc))
            status = PutStatus.PROPERTIES_SIZE_EXCEEDED if kind == "properties" else PutStatus.MESSAGE_ILLEGAL
            return PutResult(status, remark=remark)
        if not clog.fits(len(data)):
            return None
        if failed := self._commit_runs((data,)):
            return failed
        self.dispatcher.dispatch_elements(batch.topic, batch.queue_id, qoff, units, keys, phys, now)
        self._last_store_ts = now
        return PutResult(PutStatus.PUT_OK, UnitsAppended(units, qoff, now))

    def _commit_runs(self, parts: Sequence[bytes]) -> PutResult | None:
        """Write encoded runs back to back (together they fit the current segment; several in one
        vectored write); a PutResult only if the write failed."""
        start = self.clog.write_offset
        try:
            self.clog.write_runs(parts)
        except OSError as exc:
            return admission.write_failed(self, exc, start)
        return None

    def _append(self, messages: Sequence[Message], props_list: list[bytes]) -> list[Appended]:
        """Encode and commit the batch; one join + one ``pwrite`` when it fits the current segment."""
        clog = self.clog
        now = int(time.time() * 1000)
        qoffs = self._queue_offsets(messages)
        stamps = [now if m.store_timestamp is None else m.store_timestamp for m in messages]
        start = clog.stage_end
        data, sizes = layout.encode_batch(messages, props_list, qoffs, stamps, start, self._host)
        if not clog.fits(len(data)):
            return self._append_rolling(messages, props_list, qoffs, stamps)
        clog.stage(data)
        clog.commit()
        out = []
        pos = start
        for size, qoff, ts in zip(sizes, qoffs, stamps, strict=True):
            out.append(Appended(pos, size, qoff, ts))
            pos += size
        return out

    def _queue_offsets(self, messages: Sequence[Message]) -> list[int]:
        """Queue offset of each message (consecutive per topic/queue; 0 if not dispatched)."""
        cqs = self.cqs
        next_q: dict[tuple[str, int], int] = {}
        out = []
        for m in messages:
            t = m.sysflag & TRANSACTION_MASK
            if t != TRANSACTION_PREPARED_TYPE and t != TRANSACTION_ROLLBACK_TYPE:   # is_dispatched, inlined
                key = (m.topic, m.queue_id)
                qoff = next_q.get(key)
                if qoff is None:
                    q = cqs.get(key)
                    qoff = q.max_offset if q is not None else 0
                next_q[key] = qoff + 1
            else:
                qoff = 0
            out.append(qoff)
        return out

    def _append_rolling(self, messages: Sequence[Message], props_list: list[bytes], qoffs: list[int],
                        stamps: list[int]) -> list[Appended]:
        """Record by record, for a batch that crosses a segment end (``place`` rolls the segment)."""
        clog = self.clog
        encode = layout.encode_record
        host = self._host
        out = []
        for m, props, qoff, ts in zip(messages, props_list, qoffs, stamps, strict=True):
            pos = clog.stage_end
            rec = encode(m, queue_offset=qoff, commitlog_offset=pos, store_timestamp=ts, store_host=host,
                         props=props)
            at = clog.place(len(rec))
            if at != pos:
                rec = encode(m, queue_offset=qoff, commitlog_offset=at, store_timestamp=ts, store_host=host,
                             props=props)
            clog.stage(rec)
            out.append(Appended(at, len(rec), qoff, ts))
        clog.commit()
        return out

    def _new_queue(self, topic: str, queue_id: int) -> ConsumeQueue:
        q = ConsumeQueue(self._queue_dir(topic, queue_id), topic, queue_id, self.config.consumequeue_file_size)
        self.cqs[(topic, queue_id)] = q
        return q

    # -- reading --------------------------------------------------------------------
    def get_messages(self, topic: str, queue_id: int, offset: int, max_msgs: int,
                     max_bytes: int = 256 * 1024, message_filter: MessageFilter | None = None) -> GetResult:
        q = self.cqs.get((topic, queue_id))
        lo = self.min_offset(topic, queue_id)
        return reader.get_messages(q, lo, self.clog, offset, max_msgs, max_bytes, message_filter)

    def get_runs(self, topic: str, queue_id: int, offset: int, max_msgs: int,
                 max_bytes: int = 256 * 1024, *, views: bool = False) -> tuple[list[RecordRun], int]:
        q = self.cqs.get((topic, queue_id))
        return reader.get_runs(q, self.min_offset(topic, queue_id), self.clog, offset, max_msgs, max_bytes,
                               views=views)

    def read_record(self, commitlog_offset: int, size: int | None = None) -> bytes | None:
        return self.clog.read(commitlog_offset, size)

    def read_message(self, commitlog_offset: int) -> StoredMessage | None:
        rec = self.clog.read(commitlog_offset)
        return layout.decode_record(rec) if rec is not None else None

    def cq_units(self, topic: str, queue_id: int, offset: int, count: int) -> list[CqUnit]:
        q = self.cqs.get((topic, queue_id))
        if q is None:
            return []
        return q.cq_units(max(offset, self.min_offset(topic, queue_id)), count)

    # -- offsets ----------------------------------------------------------------------
    def min_offset(self, topic: str, queue_id: int) -> int:
        q = self.cqs.get((topic, queue_id))
        if q is None:
            return 0
        return min(q.max_offset, max(q.min_offset, self.min_offsets.get(topic, queue_id)))

    def max_offset(self, topic: str, queue_id: int) -> int:
        q = self.cqs.get((topic, queue_id))
        return q.max_offset if q is not None else 0

    def store_time_at(self, topic: str, queue_id: int, queue_offset: int) -> int | None:
        q = self.cqs.get((topic, queue_id))
        if q is None or queue_offset < self.min_offset(topic, queue_id):
            return None
        u = q.unit(queue_offset)
        return self.clog.store_timestamp(u[0]) if u is not None else None

    def set_min_offset(self, topic: str, queue_id: int, queue_offset: int) -> None:
        self.min_offsets.raise_to(topic, queue_id, min(max(queue_offset, 0), self.max_offset(topic, queue_id)))

    def queues(self) -> dict[str, list[int]]:
        out: dict[str, list[int]] = {}
        for t, qid in sorted(self.cqs):
            out.setdefault(t, []).append(qid)
        return out

    # -- index ------------------------------------------------------------------------
    def query_by_key(self, topic: str, key: str, max_num: int, begin_ms: int, end_ms: int) -> list[int]:
        out = []
        for off in self.index.lookup(topic, key, max_num + 64, begin_ms, end_ms):
            rec = self.clog.read(off)
            if rec is not None and reader.record_has_key(rec, topic, key):
                out.append(off)
                if len(out) >= max_num:
                    break
        return out

    # -- maintenance --------------------------------------------------------------------
    def add_arrival_listener(self, listener: ArrivalListener) -> None:
        self.dispatcher.listeners.append(listener)

    def _queue_dir(self, topic: str, queue_id: int) -> Path:
        """``consumequeue/<topic>/<queueId>``; a name that would leave it (only records stored before
        names were checked can carry one) gets a directory under ``quarantine/`` instead."""
        try:
            return paths.child(self.root / "consumequeue", topic, str(queue_id))
        except paths.UnsafePathError as exc:
            log.error("store.unsafe_path", op="create_queue", topic=topic, reason=str(exc))
            return paths.child(self.root / "quarantine", topic.encode("utf-8", "replace").hex() or "-", str(queue_id))

    def delete_topic(self, topic: str) -> None:
        try:
            topic_dir = paths.child(self.root / "consumequeue", topic)
        except paths.UnsafePathError as exc:
            log.warning("store.unsafe_path", op="delete_topic", topic=topic, reason=str(exc))
            return
        for key in [k for k in self.cqs if k[0] == topic]:
            self.cqs.pop(key).destroy()
        shutil.rmtree(topic_dir, ignore_errors=True)
        self.min_offsets.drop_topic(topic)

    def run_retention(self, now_ms: int, force: bool = False) -> int:
        return retention.run(self, now_ms, force)

    @property
    def commitlog_min_offset(self) -> int:
        return self.clog.min_offset

    @property
    def commitlog_max_offset(self) -> int:
        return self.clog.write_offset

    @property
    def flushed_offset(self) -> int:
        return self.clog.flushed_offset

    def flush(self, upto: int | None = None) -> int:
        """Run the flush hooks, then fdatasync the CommitLog and report it durable up to ``upto``.

        ``upto`` is read on the appending (trio) thread by the caller: everything a hook makes
        durable for the records below it (the producer journal) was written before it was read,
        so it is durable before those records are reported durable.  None = everything (only
        while nothing appends: open, close)."""
        for hook in self._flush_hooks:
            hook()
        flushed = self.clog.flush(upto)
        self.clog.release_cold()
        return flushed

    def add_flush_hook(self, hook: Callable[[], None]) -> None:
        self._flush_hooks.append(hook)

    def checkpoint(self) -> None:
        # Called from worker threads (the flush service) and from close(): one writer at a time, so the
        # checkpoint never moves backwards.
        with self._checkpoint_lock:
            dispatched = self.clog.write_offset
            ts = self._last_store_ts
            for q in tuple(self.cqs.values()):
                q.sync()
            self.index.sync()
            # What the flush service (or close) made durable; flushing here would report offsets
            # durable past the flush hooks' coverage (see flush).
            physic = self.clog.flushed_offset
            write_checkpoint(self.root / "checkpoint", Checkpoint(ts, ts, ts, physic, min(dispatched, physic)))

    def statistics(self) -> dict[str, int]:
        return {"commitlog_min": self.clog.min_offset, "commitlog_max": self.clog.write_offset,
                "flushed": self.clog.flushed_offset, "queues": len(self.cqs),
                "units_per_cq_file": self.config.consumequeue_file_size // UNIT_SIZE}
