"""The narrow, synchronous storage interface every protocol builds on.

Theory of operation
-------------------
``MessageStore`` is the only door into the store (CommitLog + ConsumeQueues +
IndexFile).  It is synchronous and single-threaded by contract: the trio
thread calls it; only fsync and long scans run on worker threads, behind the
async helpers of ``rokka.core.storage.flush``.  Expected outcomes are enums
(``PutStatus``, ``GetStatus``); exceptions mean bugs or I/O failure.

Offsets:
  * commitlog offset: byte offset of a record in the whole CommitLog.
  * queue offset: index of a 20-byte unit in a ConsumeQueue (= Kafka offset).
  * ``max_offset(topic, q)`` is the *next* queue offset to be written.

Two engines implement it: ``rokka.core.storage.engine.DiskStore`` (the real one)
and ``rokka.core.storage.memory.MemoryStore`` (a twin for fast unit tests); one
contract suite in tests runs on both.
"""

from __future__ import annotations

import enum
import struct
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple, Protocol, overload

from rokka.core.model import BatchBody, HostPort, Message, StoredMessage, UniformBatch

DEFAULT_DELAY_LEVELS = "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h"


def parse_delay_levels(spec: str) -> list[int]:
    """``"1s 5s 1m 2h 1d"`` -> milliseconds per level (level 1 first)."""
    units = {"s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}
    out = []
    for part in spec.split():
        unit = part[-1]
        if unit not in units or not part[:-1].isdigit():
            raise ValueError(f"bad messageDelayLevel entry {part!r}")
        out.append(int(part[:-1]) * units[unit])
    if not out:
        raise ValueError("messageDelayLevel is empty")
    return out


class FlushDiskType(enum.Enum):
    ASYNC_FLUSH = "ASYNC_FLUSH"
    SYNC_FLUSH = "SYNC_FLUSH"


@dataclass
class StoreConfig:
    root_dir: Path
    commitlog_dir: Path | None = None          # storePathCommitLog; default root/commitlog
    commitlog_file_size: int = 1 << 30         # mapedFileSizeCommitLog
    consumequeue_file_size: int = 300_000 * 20  # mapedFileSizeConsumeQueue (multiple of 20)
    index_hash_slots: int = 5_000_000
    index_max_entries: int = 20_000_000
    flush_disk_type: FlushDiskType = FlushDiskType.ASYNC_FLUSH
    flush_interval_ms: int = 500               # flushIntervalCommitLog
    cache_window_bytes: int = 0                # commitLogCacheWindow (rokka): see CommitLog.release_cold
    warm_ahead_bytes: int = 0                  # commitLogWarmAhead (rokka): see warmer.py
    sync_flush_timeout_ms: int = 5000          # syncFlushTimeout
    file_reserved_time_hours: int = 72         # fileReservedTime
    delete_when: str = "04"                    # deleteWhen (hours, ";" separated)
    disk_max_used_space_ratio: int = 75        # diskMaxUsedSpaceRatio
    clean_file_forcibly_enable: bool = False   # cleanFileForciblyEnable (RocketMQ's default: true)
    max_message_size: int = 4 * 1024 * 1024    # maxMessageSize (body)
    store_host: HostPort = ("127.0.0.1", 10911)
    delay_levels_ms: list[int] = field(default_factory=lambda: parse_delay_levels(DEFAULT_DELAY_LEVELS))

    @property
    def commitlog_path(self) -> Path:
        return self.commitlog_dir or (self.root_dir / "commitlog")


class PutStatus(enum.Enum):
    PUT_OK = "PUT_OK"
    FLUSH_DISK_TIMEOUT = "FLUSH_DISK_TIMEOUT"
    FLUSH_SLAVE_TIMEOUT = "FLUSH_SLAVE_TIMEOUT"     # SYNC_MASTER: stored, no slave acked in syncFlushTimeout
    SLAVE_NOT_AVAILABLE = "SLAVE_NOT_AVAILABLE"     # SYNC_MASTER: stored, no slave connected / too far behind
    MESSAGE_ILLEGAL = "MESSAGE_ILLEGAL"
    PROPERTIES_SIZE_EXCEEDED = "PROPERTIES_SIZE_EXCEEDED"
    SERVICE_NOT_AVAILABLE = "SERVICE_NOT_AVAILABLE"
    UNKNOWN_ERROR = "UNKNOWN_ERROR"


class Appended(NamedTuple):
    """Where one message landed (a NamedTuple: built once per stored message, on the hot path)."""

    commitlog_offset: int
    size: int
    queue_offset: int          # 0 for prepared/rollback records (not dispatched)
    store_timestamp: int


class UnitsAppended(Sequence[Appended]):
    """``Appended`` of each record of a ``put_uniform`` / ``put_batch_body`` run, read from its raw ConsumeQueue units
    (commitlog offset int64, size int32, tags code int64) on demand."""

    __slots__ = ("units", "queue_offset", "store_timestamp")
    _UNIT = struct.Struct(">qiq")

    def __init__(self, units: bytes, queue_offset: int, store_timestamp: int) -> None:
        self.units, self.queue_offset, self.store_timestamp = units, queue_offset, store_timestamp

    def __len__(self) -> int:
        return len(self.units) // self._UNIT.size

    @overload
    def __getitem__(self, i: int) -> Appended: ...

    @overload
    def __getitem__(self, i: slice) -> Sequence[Appended]: ...

    def __getitem__(self, i: int | slice) -> Appended | Sequence[Appended]:
        if isinstance(i, slice):
            return list(self)[i]
        n = len(self)
        if i < 0:
            i += n
        if not 0 <= i < n:
            raise IndexError(i)
        pos, size, _ = self._UNIT.unpack_from(self.units, i * self._UNIT.size)
        return Appended(pos, size, self.queue_offset + i, self.store_timestamp)

    def __iter__(self) -> Iterator[Appended]:
        ts = self.store_timestamp
        for i, (pos, size, _) in enumerate(self._UNIT.iter_unpack(self.units), self.queue_offset):
            yield Appended(pos, size, i, ts)


@dataclass(frozen=True, slots=True)
class PutResult:
    status: PutStatus
    appended: Sequence[Appended] = ()
    remark: str = ""

    @property
    def ok(self) -> bool:
        return self.status is PutStatus.PUT_OK

    @property
    def end_offset(self) -> int:
        """CommitLog offset just past the last appended byte (what a sync flush waits for)."""
        last = self.appended[-1]
        return last.commitlog_offset + last.size


class GetStatus(enum.Enum):
    FOUND = "FOUND"
    NO_MATCHED_MESSAGE = "NO_MATCHED_MESSAGE"
    MESSAGE_WAS_REMOVING = "MESSAGE_WAS_REMOVING"
    OFFSET_FOUND_NULL = "OFFSET_FOUND_NULL"
    OFFSET_OVERFLOW_BADLY = "OFFSET_OVERFLOW_BADLY"
    OFFSET_OVERFLOW_ONE = "OFFSET_OVERFLOW_ONE"
    OFFSET_TOO_SMALL = "OFFSET_TOO_SMALL"
    NO_MATCHED_LOGIC_QUEUE = "NO_MATCHED_LOGIC_QUEUE"
    NO_MESSAGE_IN_QUEUE = "NO_MESSAGE_IN_QUEUE"


class MessageFilter(Protocol):
    """Two-stage filter, as RocketMQ's MessageFilter.

    ``match_tags_code`` runs on the ConsumeQueue unit (cheap);
    ``match_properties`` runs on the decoded properties of the record (SQL92).
    """

    def match_tags_code(self, tags_code: int) -> bool: ...

    def match_properties(self, properties: dict[str, str]) -> bool: ...


@dataclass(frozen=True, slots=True)
class RecordRun:
    """Records of one queue lying back to back in the CommitLog, as stored (``get_runs``)."""

    queue_offset: int               # of the first record
    data: bytes | memoryview        # the records' bytes, one after the other (a view: get_runs(views=True))
    sizes: Sequence[int]            # size of each record (from its ConsumeQueue unit)


def release_runs(runs: Sequence[RecordRun]) -> None:
    """Release the memoryviews that ``get_runs(views=True)`` lent (copies are left alone)."""
    for run in runs:
        if type(run.data) is memoryview:
            run.data.release()


@dataclass(frozen=True, slots=True)
class GetResult:
    status: GetStatus
    records: tuple[bytes, ...]      # raw CommitLog records, exactly as stored
    queue_offsets: tuple[int, ...]  # queue offset of each record
    next_begin_offset: int
    min_offset: int
    max_offset: int

    @property
    def body(self) -> bytes:
        return b"".join(self.records)


@dataclass(frozen=True, slots=True)
class CqUnit:
    """One ConsumeQueue unit."""

    queue_offset: int
    commitlog_offset: int
    size: int
    tags_code: int


# Called after each message is dispatched to a ConsumeQueue:
# (topic, queue_id, queue_offset, tags_code, properties) -> None.  Used to
# wake long-polling pulls and Kafka fetches.  Must not raise.  tags_code and
# properties are None for a run of records up to queue_offset whose tags and
# properties are not given one by one (``put_batch_body``): a waiter treats
# that as a possible match and re-reads.
ArrivalListener = Callable[[str, int, int, "int | None", "dict[str, str] | None"], None]


class MessageStore(Protocol):
    config: StoreConfig

    # -- writing -------------------------------------------------------------
    def put_messages(self, messages: Sequence[Message]) -> PutResult:
        """Append all messages (contiguous in the CommitLog) and dispatch them.

        Messages of one call that go to the same topic/queue get consecutive
        queue offsets.  Prepared (0x4) and rollback (0xC) sysflag records are
        written but not dispatched (queue offset 0).  Does not wait for disk:
        under SYNC_FLUSH the caller awaits ``FlushService.wait_durable``.
        """
        ...

    def put_uniform(self, batch: UniformBatch) -> PutResult:
        """``put_messages(batch.messages())`` with the same outcome and bytes, encoded as one run
        (properties, tags code and index keys once; ``appended`` is an ``UnitsAppended``)."""
        ...

    def put_uniforms(self, batches: Sequence[UniformBatch]) -> list[PutResult]:
        """``put_uniform`` of each batch (the same outcomes and bytes, in order), written together
        where the store can (one CommitLog write for the runs of a Kafka Produce request)."""
        ...

    def put_batch_body(self, batch: BatchBody, properties: dict[str, str] | None = None) -> PutResult | None:
        """Store a RocketMQ batch straight from its wire form (one record per element, the batch's
        properties -- ``properties`` when given, else ``batch.properties`` -- appended to each
        element's), or None when this store cannot (no native encoder, a system topic, a run that
        would cross a segment end): the caller then decodes the batch and uses ``put_messages``.
        Refusals (malformed body, body or properties too large) are PutResults, and nothing is
        written."""
        ...

    # -- reading -------------------------------------------------------------
    def get_messages(self, topic: str, queue_id: int, offset: int, max_msgs: int,
                     max_bytes: int = 256 * 1024,
                     message_filter: MessageFilter | None = None) -> GetResult: ...

    def get_runs(self, topic: str, queue_id: int, offset: int, max_msgs: int,
                 max_bytes: int = 256 * 1024, *, views: bool = False) -> tuple[list[RecordRun], int]:
        """What ``get_messages`` (no filter) finds, grouped in runs of adjacent records copied out
        with one read each: ``(runs, next_begin_offset)``.  Empty when nothing is readable.

        ``views``: a run's data may be a ``memoryview`` into the store's map instead of a copy.  It
        is valid only until the caller next yields (the store may unmap a deleted segment then),
        and the caller must release it before (``release_runs``)."""
        ...

    def read_record(self, commitlog_offset: int, size: int | None = None) -> bytes | None:
        """Raw record at a CommitLog offset (size read from TOTALSIZE if None); None if absent."""
        ...

    def read_message(self, commitlog_offset: int) -> StoredMessage | None: ...

    def cq_units(self, topic: str, queue_id: int, offset: int, count: int) -> list[CqUnit]: ...

    # -- offsets ---------------------------------------------------------------
    def min_offset(self, topic: str, queue_id: int) -> int: ...

    def max_offset(self, topic: str, queue_id: int) -> int: ...

    def offset_by_time(self, topic: str, queue_id: int, timestamp_ms: int) -> int:
        """RocketMQ SEARCH_OFFSET_BY_TIMESTAMP semantics over store timestamps."""
        ...

    def earliest_store_time(self, topic: str, queue_id: int) -> int: ...

    def store_time_at(self, topic: str, queue_id: int, queue_offset: int) -> int | None: ...

    def set_min_offset(self, topic: str, queue_id: int, queue_offset: int) -> None:
        """Logically delete everything before ``queue_offset`` (Kafka DeleteRecords)."""
        ...

    def queues(self) -> dict[str, list[int]]:
        """Every topic with a ConsumeQueue, and its queue ids."""
        ...

    # -- index ---------------------------------------------------------------
    def query_by_key(self, topic: str, key: str, max_num: int, begin_ms: int,
                     end_ms: int) -> list[int]:
        """CommitLog offsets of messages whose KEYS entry or UNIQ_KEY equals ``key``."""
        ...

    # -- lifecycle -------------------------------------------------------------
    def add_arrival_listener(self, listener: ArrivalListener) -> None: ...

    def delete_topic(self, topic: str) -> None: ...

    def run_retention(self, now_ms: int, force: bool = False) -> int:
        """Delete expired whole segments; returns the number of files removed."""
        ...

    @property
    def commitlog_min_offset(self) -> int: ...

    @property
    def commitlog_max_offset(self) -> int: ...

    @property
    def flushed_offset(self) -> int: ...

    def flush(self, upto: int | None = None) -> int:
        """fsync everything written so far (blocking; call from a worker thread).

        Runs the flush hooks first (``add_flush_hook``), then makes the CommitLog durable and
        reports it durable up to ``upto`` (an offset read on the appending thread; None = all,
        only when nothing is appending).  Returns the CommitLog offset now durable."""
        ...

    def add_flush_hook(self, hook: Callable[[], None]) -> None:
        """Run ``hook`` (blocking, any thread) in every ``flush`` before the CommitLog offsets are
        reported durable: state written with the records (the idempotent-producer journal) is then
        durable before any acknowledgement that waits for them."""
        ...

    def checkpoint(self) -> None:
        """Persist the checkpoint file (flushed offsets + timestamps)."""
        ...

    def close(self) -> None:
        """Flush, write the checkpoint, remove the abort marker."""
        ...
