"""MemoryStore: the in-memory twin of DiskStore (same contract, no files).

Theory of operation
-------------------
Records are encoded with ``layout.encode_record`` exactly as on disk (so a
pull body is byte-identical) and kept in a dict by CommitLog offset; the
CommitLog is one endless segment (no BLANK fillers).  ConsumeQueues are
lists of ``(commitlog offset, size, tags code)`` tuples; dispatch rules,
pull semantics and search-by-time are shared with DiskStore (``dispatch``
and ``reader``), so the contract suite exercises the same logic twice.
Retention drops records older than ``fileReservedTime`` when forced or at a
``deleteWhen`` hour.  Durability is immediate: ``flushed_offset`` always
equals ``commitlog_max_offset``.
"""

from __future__ import annotations

import time
from bisect import bisect_left
from collections.abc import Callable, Sequence

from rokka.core.model import BatchBody, Message, StoredMessage, UniformBatch
from rokka.core.storage import layout, reader
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
)
from rokka.core.storage.dispatch import Dispatcher, is_dispatched
from rokka.core.storage.retention import delete_hours


class _Queue:
    units_per_file = 300_000

    def __init__(self) -> None:
        self.base = 0
        self.items: list[tuple[int, int, int]] = []
        self.min_offset = 0

    @property
    def max_offset(self) -> int:
        return self.base + len(self.items)

    def put(self, queue_offset: int, commitlog_offset: int, size: int, tags_code: int) -> None:
        assert queue_offset == self.max_offset
        self.items.append((commitlog_offset, size, tags_code))

    def units(self, queue_offset: int, count: int) -> list[tuple[int, int, int]]:
        if not self.min_offset <= queue_offset < self.max_offset:
            return []
        i = queue_offset - self.base
        return self.items[i:i + count]


class _Index:
    def __init__(self) -> None:
        self.entries: dict[str, list[tuple[int, int]]] = {}

    def put(self, topic: str, keys: list[str], phy_offset: int, store_ts: int) -> None:
        for k in keys:
            self.entries.setdefault(f"{topic}#{k}", []).append((phy_offset, store_ts))


class MemoryStore(reader.TimeQueries):
    def __init__(self, config: StoreConfig) -> None:
        self.config = config
        self.replica_only = False       # as DiskStore's (a slave's store; never set on a memory store)
        self._records: dict[int, bytes] = {}
        self._offsets: list[int] = []
        self._times: list[int] = []
        self._end = 0
        self._min = 0
        self._flush_hooks: list[Callable[[], None]] = []
        self._queues: dict[tuple[str, int], _Queue] = {}
        self._logical_min: dict[tuple[str, int], int] = {}
        self._index = _Index()
        self._dispatcher = Dispatcher(self._queues, self._new_queue, self._index,  # type: ignore[arg-type]
                                      config.delay_levels_ms)

    def open(self) -> MemoryStore:
        return self

    def _new_queue(self, topic: str, queue_id: int) -> _Queue:
        q = self._queues[(topic, queue_id)] = _Queue()
        return q

    # -- writing -----------------------------------------------------------------
    def put_messages(self, messages: Sequence[Message]) -> PutResult:
        encoded = []
        now = int(time.time() * 1000)
        next_q: dict[tuple[str, int], int] = {}
        pos = self._end
        for m in messages:
            if len(m.body) > self.config.max_message_size or m.queue_id < 0:
                return PutResult(PutStatus.MESSAGE_ILLEGAL, remark="body too large or bad queue id")
            props = layout.encode_properties(m.properties)
            if len(props) > layout.MAX_PROPERTIES_BYTES:
                return PutResult(PutStatus.PROPERTIES_SIZE_EXCEEDED, remark="properties too large")
            qoff = 0
            if is_dispatched(m.sysflag):
                key = (m.topic, m.queue_id)
                q = self._queues.get(key)
                qoff = next_q.get(key, q.max_offset if q else 0)
                next_q[key] = qoff + 1
            ts = now if m.store_timestamp is None else m.store_timestamp
            try:
                rec = layout.encode_record(m, queue_offset=qoff, commitlog_offset=pos, store_timestamp=ts,
                                           store_host=self.config.store_host, props=props)
            except layout.RecordError as exc:
                return PutResult(PutStatus.MESSAGE_ILLEGAL, remark=str(exc))
            encoded.append((m, rec, Appended(pos, len(rec), qoff, ts)))
            pos += len(rec)
        for m, rec, a in encoded:
            self._records[a.commitlog_offset] = rec
            self._offsets.append(a.commitlog_offset)
            self._times.append(a.store_timestamp)
            self._dispatcher.dispatch(m.topic, m.queue_id, a.queue_offset, a.commitlog_offset, a.size,
                                      m.sysflag, m.properties, a.store_timestamp)
        self._end = pos
        return PutResult(PutStatus.PUT_OK, tuple(a for _, _, a in encoded))

    def put_batch_body(self, batch: BatchBody, properties: dict[str, str] | None = None) -> PutResult | None:
        return None     # the caller decodes the batch and uses put_messages

    def put_uniform(self, batch: UniformBatch) -> PutResult:
        return self.put_messages(batch.messages())

    def put_uniforms(self, batches: Sequence[UniformBatch]) -> list[PutResult]:
        return [self.put_uniform(b) for b in batches]

    # -- reading -----------------------------------------------------------------
    @property
    def min_offset_(self) -> int:
        return self._min

    def read(self, offset: int, size: int | None = None) -> bytes | None:
        rec = self._records.get(offset)
        if rec is None or (size is not None and size != len(rec)):
            return None
        return rec

    def get_messages(self, topic: str, queue_id: int, offset: int, max_msgs: int,
                     max_bytes: int = 256 * 1024, message_filter: MessageFilter | None = None) -> GetResult:
        return reader.get_messages(self._queues.get((topic, queue_id)), self.min_offset(topic, queue_id),
                                   _LogView(self), offset, max_msgs, max_bytes, message_filter)

    def get_runs(self, topic: str, queue_id: int, offset: int, max_msgs: int,
                 max_bytes: int = 256 * 1024, *, views: bool = False) -> tuple[list[RecordRun], int]:
        res = self.get_messages(topic, queue_id, offset, max_msgs, max_bytes)
        runs: list[tuple[int, list[bytes]]] = []
        for q, rec in zip(res.queue_offsets, res.records, strict=True):
            if runs and runs[-1][0] + len(runs[-1][1]) == q:     # consecutive offsets: one run
                runs[-1][1].append(rec)
            else:
                runs.append((q, [rec]))
        return [RecordRun(q, b"".join(recs), tuple(map(len, recs))) for q, recs in runs], res.next_begin_offset

    def read_record(self, commitlog_offset: int, size: int | None = None) -> bytes | None:
        return self.read(commitlog_offset, size)

    def read_message(self, commitlog_offset: int) -> StoredMessage | None:
        rec = self.read(commitlog_offset)
        return layout.decode_record(rec) if rec is not None else None

    def cq_units(self, topic: str, queue_id: int, offset: int, count: int) -> list[CqUnit]:
        q = self._queues.get((topic, queue_id))
        if q is None:
            return []
        offset = max(offset, self.min_offset(topic, queue_id))
        return [CqUnit(offset + i, *u) for i, u in enumerate(q.units(offset, count))]

    # -- offsets -----------------------------------------------------------------
    def min_offset(self, topic: str, queue_id: int) -> int:
        q = self._queues.get((topic, queue_id))
        if q is None:
            return 0
        return min(q.max_offset, max(q.min_offset, self._logical_min.get((topic, queue_id), 0)))

    def max_offset(self, topic: str, queue_id: int) -> int:
        q = self._queues.get((topic, queue_id))
        return q.max_offset if q else 0

    def store_time_at(self, topic: str, queue_id: int, queue_offset: int) -> int | None:
        q = self._queues.get((topic, queue_id))
        if q is None or queue_offset < self.min_offset(topic, queue_id):
            return None
        u = q.units(queue_offset, 1)
        rec = self.read(u[0][0]) if u else None
        return layout.store_timestamp_of(rec) if rec is not None else None

    def set_min_offset(self, topic: str, queue_id: int, queue_offset: int) -> None:
        key = (topic, queue_id)
        new = min(max(queue_offset, 0), self.max_offset(topic, queue_id))
        self._logical_min[key] = max(new, self._logical_min.get(key, 0))

    def queues(self) -> dict[str, list[int]]:
        out: dict[str, list[int]] = {}
        for t, qid in sorted(self._queues):
            out.setdefault(t, []).append(qid)
        return out

    def query_by_key(self, topic: str, key: str, max_num: int, begin_ms: int, end_ms: int) -> list[int]:
        hits = self._index.entries.get(f"{topic}#{key}", [])
        return [off for off, ts in reversed(hits)
                if begin_ms <= ts <= end_ms and off >= self._min][:max_num]

    # -- lifecycle -----------------------------------------------------------------
    def add_arrival_listener(self, listener: ArrivalListener) -> None:
        self._dispatcher.listeners.append(listener)

    def delete_topic(self, topic: str) -> None:
        for key in [k for k in self._queues if k[0] == topic]:
            del self._queues[key]
            self._logical_min.pop(key, None)

    def run_retention(self, now_ms: int, force: bool = False) -> int:
        hour = time.localtime(now_ms / 1000).tm_hour
        if not (force or hour in delete_hours(self.config.delete_when)):
            return 0
        cutoff = now_ms - self.config.file_reserved_time_hours * 3_600_000
        n = bisect_left(self._times, cutoff) if self._times == sorted(self._times) else 0
        n = min(n, len(self._offsets) - 1)      # keep the newest record, like the active segment
        if n <= 0:
            return 0
        for off in self._offsets[:n]:
            del self._records[off]
        self._min = self._offsets[n]
        del self._offsets[:n], self._times[:n]
        for q in self._queues.values():
            while q.items and q.min_offset < q.max_offset and q.items[q.min_offset - q.base][0] < self._min:
                q.min_offset += 1
        return n

    @property
    def commitlog_min_offset(self) -> int:
        return self._min

    @property
    def commitlog_max_offset(self) -> int:
        return self._end

    @property
    def flushed_offset(self) -> int:
        return self._end

    def flush(self, upto: int | None = None) -> int:
        for hook in self._flush_hooks:
            hook()
        return self._end

    def add_flush_hook(self, hook: Callable[[], None]) -> None:
        self._flush_hooks.append(hook)

    def checkpoint(self) -> None:
        return None

    def close(self) -> None:
        return None


class _LogView:
    def __init__(self, store: MemoryStore) -> None:
        self._s = store

    @property
    def min_offset(self) -> int:
        return self._s.commitlog_min_offset

    def read(self, offset: int, size: int | None = None) -> bytes | None:
        return self._s.read(offset, size)
