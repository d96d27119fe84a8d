"""Idempotent-producer state: producer ids, epochs and per-partition sequences.

Theory of operation
-------------------
Kafka producers with ``enable.idempotence`` (kafka-python's default) get a
producer id and epoch from InitProducerId and number their batches per
partition.  The broker keeps, per (producer id, topic, partition), the epoch,
the last sequence and the metadata of the **last 5 batches**, and checks each
new batch (wire sheet §5.2; Kafka's ``ProducerAppendInfo``):

1. epoch below the partition's (or below the transactional id's current
   epoch) -> ``INVALID_EPOCH`` (a fenced zombie);
2. same (first, last) sequence as a cached batch of the same epoch ->
   ``DUPLICATE``: nothing is written, the original base offset is returned;
3. higher epoch -> the first sequence must be 0, else ``OUT_OF_ORDER``;
4. same epoch -> first sequence must be last + 1 (wrapping at 2**31 - 1),
   else ``OUT_OF_ORDER``;
5. unknown producer on this partition -> any sequence is accepted (Kafka
   >= 2.5), so losing state never produces spurious errors.

This module has no wire types: outcomes are enums, and the Kafka layer maps
them to codes (APPEND/DUPLICATE -> 0, OUT_OF_ORDER -> 45, INVALID_EPOCH ->
47; InitOutcome.PRODUCER_FENCED -> 90, or 47 for InitProducerId < v4).

Calling contract for a produce: ``check_batch``; on APPEND write the batch to
the store; then ``record_batch`` with the offsets the store assigned, with no
``await`` between the three (the store is synchronous), so two batches of
one producer can never interleave.

Producer ids come from blocks of ``id_block`` ids, offset by ``id_base`` (0 on a single node; in a
cluster each broker has its own range, so no two brokers hand out the same id).  Before the first id of a
block is handed out the block's end is written durably, and a restart always
resumes at the last reserved block end, so an id is never reused, crash or
not.  Transactional ids keep one producer id; every InitProducerId bumps the
epoch (fencing older instances) and rotates to a fresh id when the epoch is
exhausted.  These answers are persisted before they are returned.  The
transaction state machine lives in ``rokka.gateway.kafka.txn.coordinator``, which reads entries
through ``transactional_entry`` and fences a timed-out producer with
``bump_epoch`` (``TxnIdEntry.state`` stays "Empty" here).

Persistence (``config/producerState.msgpack``, atomic, see
``rokka.core.storage.packfile``, plus the journal ``rokka.gateway.kafka.producers.journal``):

* ``record_batch`` appends every batch to the journal before the produce is
  answered; the journal is fdatasynced by the store's flush before the
  CommitLog offsets it covers are reported durable (``sync_journal`` is a
  store flush hook), so it is as durable as the records themselves.
* ``run()`` writes a snapshot every ``flush_interval_s`` while dirty, and
  ``close()`` writes it at clean shutdown with ``clean=True``; a snapshot
  starts the next journal generation and the older journal files go once it
  is durable.  At start the snapshot is loaded and the journals written
  since are replayed (Kafka rebuilds the same state from its log), so after a
  crash (kill -9, or power loss under SYNC_FLUSH) every acknowledged batch is
  known and a retry of it is answered DUPLICATE instead of being written again.
* A snapshot from before the journal existed (no ``journal`` key) that says
  ``clean=False`` may miss the last appends: its entries are then *relaxed*
  (next batch accepted with any sequence, rule 5), the cached batches still
  suppressing duplicates.
* ``recover(log_end)``, called once after store recovery, drops cached
  batches at or beyond a partition's recovered end (the store may have lost
  unflushed data under ASYNC_FLUSH) and relaxes those entries, so a
  duplicate never answers with an offset the log no longer holds.
* Entries idle longer than ``expiration_ms`` (Kafka's
  producer.id.expiration.ms, 1 day) are dropped when a snapshot is taken.
"""

from __future__ import annotations

import enum
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import structlog
import trio
from rokka.core.storage.metafile import MetadataCorrupt
from rokka.core.storage.packfile import load_msgpack, pack, take_ticket, write_packed_atomic
from rokka.gateway.kafka.producers.journal import ProducerJournal, journal_files, read_entries

log = structlog.get_logger(__name__)

FILE_NAME = "producerState.msgpack"
VERSION = 1
BATCHES_KEPT = 5
MAX_SEQUENCE = 2**31 - 1
#: The offsets of a journal entry that takes back the intent before it (``retract_intent``).
RETRACTED = -2
EPOCH_EXHAUSTED = 32766          # Short.MaxValue - 1: rotate to a new producer id
MAX_TXN_TIMEOUT_MS = 900_000     # transaction.max.timeout.ms
NO_PRODUCER_ID = -1


class InitOutcome(enum.Enum):
    OK = "OK"
    INVALID_REQUEST = "INVALID_REQUEST"                      # empty transactional id
    INVALID_TRANSACTION_TIMEOUT = "INVALID_TRANSACTION_TIMEOUT"
    PRODUCER_FENCED = "PRODUCER_FENCED"                      # given (pid, epoch) is not the current one
    CONCURRENT_TRANSACTIONS = "CONCURRENT_TRANSACTIONS"      # reserved for the transaction extension


class SequenceOutcome(enum.Enum):
    APPEND = "APPEND"
    DUPLICATE = "DUPLICATE"
    OUT_OF_ORDER = "OUT_OF_ORDER"
    INVALID_EPOCH = "INVALID_EPOCH"


@dataclass(frozen=True, slots=True)
class InitResult:
    outcome: InitOutcome
    producer_id: int = NO_PRODUCER_ID
    epoch: int = -1


@dataclass(frozen=True, slots=True)
class SequenceCheck:
    """The verdict on one batch; ``base_offset``/``last_offset`` are set for DUPLICATE."""

    outcome: SequenceOutcome
    base_offset: int | None = None
    last_offset: int | None = None


@dataclass(frozen=True, slots=True)
class BatchMeta:
    first_seq: int
    last_seq: int
    first_offset: int
    last_offset: int
    timestamp_ms: int


@dataclass
class PartitionProducer:
    epoch: int
    batches: deque[BatchMeta] = field(default_factory=lambda: deque(maxlen=BATCHES_KEPT))
    last_seq: int = -1
    relaxed: bool = False            # accept any next sequence once (state may be stale)
    last_update_ms: int = 0


@dataclass
class TxnIdEntry:
    producer_id: int
    epoch: int
    timeout_ms: int
    last_producer_id: int = NO_PRODUCER_ID
    last_epoch: int = -1
    state: str = "Empty"             # extension point for the transaction coordinator


@dataclass(frozen=True, slots=True)
class ProducerStateStatistics:
    partition_entries: int
    transactional_ids: int
    next_producer_id: int
    reserved_until: int


def next_sequence(seq: int) -> int:
    return 0 if seq == MAX_SEQUENCE else seq + 1


def last_sequence(base_sequence: int, last_offset_delta: int) -> int:
    """A batch's last sequence (Kafka wraps past 2**31 - 1 to 0)."""
    return (base_sequence + last_offset_delta) % (MAX_SEQUENCE + 1)


def _wall_ms() -> int:
    return int(time.time() * 1000)


class ProducerStateManager:
    """Producer ids and sequence state; see the module docstring.

    Args:
        config_dir: where ``producerState.msgpack`` lives; None = memory only.
        clock_ms: wall clock for batch timestamps and expiry.
        expiration_ms: idle time after which a partition entry is forgotten.
        id_block: producer ids reserved per durable write.
        id_base: added to every producer id handed out (a broker's own range in a cluster).

    Raises:
        MetadataCorrupt: the state file exists but cannot be read.
    """

    def __init__(self, config_dir: Path | None, *, clock_ms: Callable[[], int] = _wall_ms,
                 expiration_ms: int = 86_400_000, id_block: int = 1000, id_base: int = 0) -> None:
        self._path = None if config_dir is None else config_dir / FILE_NAME
        self._clock_ms = clock_ms
        self._expiration_ms = expiration_ms
        self._id_block = id_block
        self._id_base = id_base
        self._next_id = 0
        self._reserved_until = 0
        self._entries: dict[tuple[int, str, int], PartitionProducer] = {}
        self._txn: dict[str, TxnIdEntry] = {}
        self._txn_by_pid: dict[int, str] = {}
        self._dirty = False
        self._write_lock = trio.Lock()
        self.loaded_clean: bool | None = None
        self._journal: ProducerJournal | None = None
        self._journal_from = 0          # the journal generation that follows the loaded snapshot
        if self._path is not None:
            self._load()
            self._open_journal(self._path.parent)

    def _open_journal(self, directory: Path) -> None:
        """Replay the journals written since the snapshot, then start a new generation."""
        found = journal_files(directory)
        replayed = 0
        for gen, path in found:
            if gen >= self._journal_from:
                for entry in read_entries(path):
                    self._apply(*entry)
                    replayed += 1
        if replayed:
            log.info("producer_state.journal_replayed", batches=replayed, files=len(found))
        gen = max([self._journal_from] + [g for g, _ in found]) + 1
        self._journal = ProducerJournal(directory, gen)
        assert self._path is not None
        write_packed_atomic(self._path, self._encode(clean=False, journal=gen), ticket=take_ticket())
        self._journal.drop_before(gen)

    def sync_journal(self) -> None:
        """fdatasync the journal (register with ``MessageStore.add_flush_hook``; any thread)."""
        if self._journal is not None:
            self._journal.sync()

    # ------------------------------------------------------------------ InitProducerId

    async def init_producer_id(self, transactional_id: str | None, transaction_timeout_ms: int,
                               producer_id: int = NO_PRODUCER_ID, producer_epoch: int = -1) -> InitResult:
        """InitProducerId: a new id for idempotent producers, an epoch bump for transactional ids.

        The answer is durable before it is returned (when it changed persisted state).
        """
        result, durable = self._init(transactional_id, transaction_timeout_ms, producer_id, producer_epoch)
        if durable:
            await self.persist()
        return result

    def _init(self, tid: str | None, timeout_ms: int, pid: int, epoch: int) -> tuple[InitResult, bool]:
        if tid is None:
            new_pid, durable = self._allocate_id()
            return InitResult(InitOutcome.OK, new_pid, 0), durable
        if tid == "":
            return InitResult(InitOutcome.INVALID_REQUEST), False
        if timeout_ms <= 0 or timeout_ms > MAX_TXN_TIMEOUT_MS:
            return InitResult(InitOutcome.INVALID_TRANSACTION_TIMEOUT), False
        entry = self._txn.get(tid)
        if entry is None:
            new_pid, _ = self._allocate_id()
            entry = self._txn[tid] = TxnIdEntry(new_pid, 0, timeout_ms)
            self._txn_by_pid[new_pid] = tid
            self._dirty = True
            return InitResult(InitOutcome.OK, new_pid, 0), True
        if pid != NO_PRODUCER_ID:
            if (pid, epoch) == (entry.last_producer_id, entry.last_epoch):
                return InitResult(InitOutcome.OK, entry.producer_id, entry.epoch), False  # a retry
            if (pid, epoch) != (entry.producer_id, entry.epoch):
                log.info("producer_state.fenced_at_init", transactional_id=tid, producer_id=pid, epoch=epoch)
                return InitResult(InitOutcome.PRODUCER_FENCED), False
        self._bump(tid, entry, timeout_ms, remember_last=pid != NO_PRODUCER_ID)
        return InitResult(InitOutcome.OK, entry.producer_id, entry.epoch), True

    def _bump(self, tid: str, entry: TxnIdEntry, timeout_ms: int, *, remember_last: bool) -> None:
        """Epoch + 1, or a new id at epoch 0 when exhausted.

        The previous (id, epoch) is remembered only when the client proved it
        owned it (v3+), so that a retry of this very request is answered again
        instead of being fenced (Kafka's ``lastProducerEpoch``).
        """
        if remember_last:
            entry.last_producer_id, entry.last_epoch = entry.producer_id, entry.epoch
        else:
            entry.last_producer_id, entry.last_epoch = NO_PRODUCER_ID, -1
        entry.timeout_ms = timeout_ms
        if entry.epoch >= EPOCH_EXHAUSTED:
            new_pid, _ = self._allocate_id()
            self._txn_by_pid.pop(entry.producer_id, None)
            self._txn_by_pid[new_pid] = tid
            entry.producer_id, entry.epoch = new_pid, 0
        else:
            entry.epoch += 1
        self._dirty = True

    @property
    def reserved_until(self) -> int:
        """The end of the producer id block reserved (durably) so far, before ``id_base``."""
        return self._reserved_until

    def skip_ids_below(self, floor: int) -> bool:
        """Never hand out an id below ``floor`` (before ``id_base``): a slave takes its master's reserved
        block end (plus a margin) so that, promoted, it issues no id the master issued.  True when it
        moved (persisted with the next save)."""
        if floor <= self._next_id:
            return False
        self._next_id = floor
        self._reserved_until = max(self._reserved_until, floor)
        self._dirty = True
        return True

    def _allocate_id(self) -> tuple[int, bool]:
        """Next producer id; True when a new block was reserved (the caller must persist)."""
        new_block = self._next_id >= self._reserved_until
        if new_block:
            self._reserved_until = self._next_id + self._id_block
            self._dirty = True
        pid = self._id_base + self._next_id
        self._next_id += 1
        return pid, new_block

    def transactional_entry(self, transactional_id: str) -> TxnIdEntry | None:
        """Extension point for the transaction coordinator (read/modify, then ``persist``)."""
        return self._txn.get(transactional_id)

    def forget_transactional_id(self, transactional_id: str) -> None:
        """Drop an expired transactional id (the transaction coordinator decides when)."""
        entry = self._txn.pop(transactional_id, None)
        if entry is not None:
            if self._txn_by_pid.get(entry.producer_id) == transactional_id:
                del self._txn_by_pid[entry.producer_id]
            self._dirty = True

    def producers_of(self, topic: str, partition: int) -> list[tuple[int, int, int, int]]:
        """(producer id, epoch, last sequence, last batch timestamp) of the idempotent producers
        that wrote ``topic``/``partition`` (DescribeProducers), by producer id."""
        return sorted((pid, e.epoch, e.last_seq, e.batches[-1].timestamp_ms if e.batches else -1)
                      for (pid, t, p), e in self._entries.items() if t == topic and p == partition)

    async def bump_epoch(self, transactional_id: str) -> TxnIdEntry | None:
        """Fence the current producer of ``transactional_id``: epoch + 1, durable before returning.

        The transaction coordinator calls it when it aborts a transaction on
        its own (timeout), as Kafka does, so the old producer's next request
        is refused.  Returns the updated entry, or None for an unknown id.
        """
        entry = self._txn.get(transactional_id)
        if entry is None:
            return None
        self._bump(transactional_id, entry, entry.timeout_ms, remember_last=False)
        await self.persist()
        return entry

    # ------------------------------------------------------------------ sequences

    def check_batch(self, producer_id: int, epoch: int, topic: str, partition: int,
                    first_seq: int, last_seq: int) -> SequenceCheck:
        """Apply rules 1-5 of the module docstring to an incoming idempotent batch."""
        tid = self._txn_by_pid.get(producer_id)
        if tid is not None and epoch < self._txn[tid].epoch and producer_id == self._txn[tid].producer_id:
            return SequenceCheck(SequenceOutcome.INVALID_EPOCH)
        entry = self._entries.get((producer_id, topic, partition))
        if entry is None:
            return SequenceCheck(SequenceOutcome.APPEND)
        if epoch < entry.epoch:
            return SequenceCheck(SequenceOutcome.INVALID_EPOCH)
        if epoch == entry.epoch:
            for b in entry.batches:
                if b.first_seq == first_seq and b.last_seq == last_seq:
                    return SequenceCheck(SequenceOutcome.DUPLICATE, b.first_offset, b.last_offset)
        if entry.relaxed:
            return SequenceCheck(SequenceOutcome.APPEND)
        if epoch > entry.epoch:
            ok = first_seq == 0
        else:
            ok = first_seq == next_sequence(entry.last_seq)
        return SequenceCheck(SequenceOutcome.APPEND if ok else SequenceOutcome.OUT_OF_ORDER)

    def record_batch(self, producer_id: int, epoch: int, topic: str, partition: int, first_seq: int,
                     last_seq: int, first_offset: int, last_offset: int, timestamp_ms: int | None = None,
                     *, journaled: bool = False) -> None:
        """Remember a batch the store just appended (after an APPEND verdict); journaled at once
        unless ``journal_intent`` already wrote exactly this entry (``journaled``)."""
        now = self._clock_ms()
        ts = now if timestamp_ms is None else timestamp_ms
        self._apply(producer_id, epoch, topic, partition, first_seq, last_seq, first_offset, last_offset, ts, now)
        if self._journal is not None and not journaled:
            self._journal.append((producer_id, epoch, topic, partition, first_seq, last_seq, first_offset,
                                  last_offset, ts))

    def journal_intent(self, producer_id: int, epoch: int, topic: str, partition: int, first_seq: int,
                       last_seq: int, first_offset: int, last_offset: int) -> int:
        """Journal a batch *before* the store appends it, with the offsets it is about to get.

        A kill -9 between the append and the acknowledgement then still finds the batch at start
        (the producer's retry is answered as a duplicate); an intent the recovered log does not hold
        is dropped by ``recover``, and one whose append failed is taken back by ``retract_intent``.
        Returns the timestamp to give ``record_batch(..., journaled=True)``."""
        ts = self._clock_ms()
        if self._journal is not None:
            self._journal.append((producer_id, epoch, topic, partition, first_seq, last_seq, first_offset,
                                  last_offset, ts))
        return ts

    def retract_intent(self, producer_id: int, epoch: int, topic: str, partition: int, first_seq: int,
                       last_seq: int) -> None:
        """The append of a journaled intent failed: take it back (in the journal; memory never had it)."""
        if self._journal is not None:
            self._journal.append((producer_id, epoch, topic, partition, first_seq, last_seq, RETRACTED, RETRACTED,
                                  self._clock_ms()))

    def _apply(self, producer_id: int, epoch: int, topic: str, partition: int, first_seq: int, last_seq: int,
               first_offset: int, last_offset: int, timestamp_ms: int, now: int | None = None) -> None:
        key = (producer_id, topic, partition)
        entry = self._entries.get(key)
        if first_offset == RETRACTED:           # a journaled intent whose append failed (replay only)
            if entry is not None and entry.epoch == epoch:
                kept = [b for b in entry.batches if (b.first_seq, b.last_seq) != (first_seq, last_seq)]
                if len(kept) != len(entry.batches):
                    entry.batches = deque(kept, maxlen=BATCHES_KEPT)
                    entry.relaxed = True        # the sequence after the retracted batch is unknown: accept once
                    self._dirty = True
            return
        if entry is None or epoch > entry.epoch:
            entry = self._entries[key] = PartitionProducer(epoch=epoch)
        entry.batches.append(BatchMeta(first_seq, last_seq, first_offset, last_offset, timestamp_ms))
        entry.last_seq = last_seq
        entry.relaxed = False
        entry.last_update_ms = timestamp_ms if now is None else now
        self._dirty = True

    def recover(self, log_end: Callable[[str, int], int]) -> None:
        """Forget cached batches the recovered store no longer holds (see the module docstring).

        Args:
            log_end: the next offset to be written in (topic, partition) after recovery.
        """
        for (_, topic, partition), entry in self._entries.items():
            end = log_end(topic, partition)
            kept = [b for b in entry.batches if b.last_offset < end]
            if len(kept) != len(entry.batches):
                entry.batches = deque(kept, maxlen=BATCHES_KEPT)
                entry.relaxed = True
                self._dirty = True

    def expire(self, now_ms: int | None = None) -> int:
        """Drop partition entries idle longer than ``expiration_ms``; returns how many."""
        now = self._clock_ms() if now_ms is None else now_ms
        old = [k for k, e in self._entries.items() if now - e.last_update_ms > self._expiration_ms]
        for k in old:
            del self._entries[k]
        if old:
            self._dirty = True
        return len(old)

    def statistics(self) -> ProducerStateStatistics:
        return ProducerStateStatistics(len(self._entries), len(self._txn), self._next_id,
                                       self._reserved_until)

    # ------------------------------------------------------------------ persistence

    async def persist(self) -> None:
        """Write the table durably (fsync on a worker thread; one writer at a time)."""
        if self._path is None:
            self._dirty = False
            return
        async with self._write_lock:
            if self._journal is None:       # closed
                return
            self.expire()
            journal = self._journal
            gen = journal.rotate()          # batches recorded from now on go to the next journal
            data, ticket = self._encode(clean=False, journal=gen), take_ticket()   # close() wins even if it lands first
            self._dirty = False
            await trio.to_thread.run_sync(partial(self._write_snapshot, data, ticket, gen))

    def _write_snapshot(self, data: bytes, ticket: int, generation: int) -> None:
        assert self._path is not None
        if write_packed_atomic(self._path, data, ticket=ticket) and self._journal is not None:
            self._journal.drop_before(generation)

    async def run(self, flush_interval_s: float = 1.0, *,
                  task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Persist every ``flush_interval_s`` while dirty, until cancelled."""
        task_status.started()
        while True:
            await trio.sleep(flush_interval_s)
            if self._dirty:
                try:
                    await self.persist()
                except OSError as exc:      # a full disk: the journal still has every batch; retry later
                    self._dirty = True
                    log.error("producer_state.snapshot_failed", error=str(exc), path=str(self._path))

    def close(self) -> None:
        """Clean shutdown: write the table marked clean (after the store is flushed)."""
        if self._path is not None and self._journal is not None:
            self.expire()
            journal, self._journal = self._journal, None
            write_packed_atomic(self._path, self._encode(clean=True, journal=journal.generation + 1),
                                ticket=take_ticket())
            journal.close(delete=True)
            self._dirty = False

    def _encode(self, *, clean: bool, journal: int) -> bytes:
        producers = [[pid, topic, part, e.epoch, e.last_seq, e.relaxed, e.last_update_ms,
                      [[b.first_seq, b.last_seq, b.first_offset, b.last_offset, b.timestamp_ms]
                       for b in e.batches]]
                     for (pid, topic, part), e in self._entries.items()]
        txn = [[tid, e.producer_id, e.epoch, e.timeout_ms, e.last_producer_id, e.last_epoch, e.state]
               for tid, e in self._txn.items()]
        return pack({"version": VERSION, "clean": clean, "reserved_until": self._reserved_until,
                     "txn": txn, "producers": producers, "journal": journal})

    def _load(self) -> None:
        assert self._path is not None
        if not load_msgpack(self._path, self._decode, "producer state"):
            return
        log.info("producer_state.loaded", clean=self.loaded_clean, entries=len(self._entries),
                 transactional_ids=len(self._txn), next_producer_id=self._next_id)

    def _decode(self, data: Any) -> None:
        if not isinstance(data, dict) or data.get("version") != VERSION:
            raise MetadataCorrupt(f"{self._path}: unsupported producer state layout")
        self.loaded_clean = bool(data["clean"])
        journaled = "journal" in data           # the journal holds what the snapshot does not
        self._journal_from = int(data.get("journal", 0))
        self._next_id = self._reserved_until = int(data["reserved_until"])
        for tid, pid, epoch, timeout, last_pid, last_epoch, state in data["txn"]:
            self._txn[tid] = TxnIdEntry(pid, epoch, timeout, last_pid, last_epoch, state)
            self._txn_by_pid[pid] = tid
        for pid, topic, part, epoch, last_seq, relaxed, updated, batches in data["producers"]:
            entry = PartitionProducer(epoch=epoch, last_seq=last_seq, last_update_ms=updated,
                                      relaxed=bool(relaxed) or not (self.loaded_clean or journaled))
            entry.batches.extend(BatchMeta(*b) for b in batches)
            self._entries[(pid, topic, part)] = entry
