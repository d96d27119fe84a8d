"""Kafka transaction coordinator on RocketMQ half messages.

Theory of operation
-------------------
A Kafka transactional producer (InitProducerId with a transactional id,
AddPartitionsToTxn, Produce, AddOffsetsToTxn, TxnOffsetCommit, EndTxn) is
served with the core's half-message transactions (``rokka.core.txn``) instead of
Kafka's control markers:

* a record produced inside a transaction is stored as a **half message**
  (``TRAN_MSG=true`` + ``KAFKA_TXN=<pid>:<epoch>``; ``Broker.prepare`` parks
  it in RMQ_SYS_TRANS_HALF_TOPIC with REAL_TOPIC/REAL_QID), so no consumer
  of either protocol can see it;
* EndTxn(commit) re-puts every half of the transaction into its real queue
  in **one** ``put_messages`` call (no await in between, so a consumer sees
  all of the transaction or none of it), together with the op records that
  close the halves, then applies the pending TxnOffsetCommit offsets;
* EndTxn(abort) (and the timeout, and InitProducerId on an open
  transaction) puts one empty *placeholder* per aborted record into its
  real queue instead (``KAFKA_CTRL=X:...``), with the op records: aborted
  data are never visible anywhere, but they take their offsets as in Kafka;
* either way the same ``put_messages`` call ends with one Kafka control
  marker per partition of the transaction (``KAFKA_CTRL=C|A:<pid>:<epoch>``,
  ``rokka.compat.kafka_control.control_message``), at the offset where Kafka writes its
  COMMIT/ABORT control batch, even for a partition the transaction added but
  wrote nothing to.  Kafka consumers get markers and placeholders as control
  batches (they skip them and their position moves past them, so positions,
  end offsets and lag are Kafka's); RocketMQ readers never see them
  (``rokka.compat.kafka_control.without_control``).
So committed data only ever appears at commit: every partition's LSO = HW,
and read_uncommitted consumers see exactly what read_committed ones see.
Consequence for Produce: a transactional record has no partition offset until EndTxn re-puts
it, so its produce response carries base_offset -1, where Kafka answers the offset the record
already holds (Kafka Streams logs "Received offset=-1 in produce response" and checkpoints no
changelog offset under EOS).  The real offset needs Kafka's layout (records in the real queue at
produce time, hidden until their marker: an LSO per queue, aborted-transaction lists on Fetch,
recovery of open ranges at restart); it is not done.
The RocketMQ check-back loop skips ``KAFKA_TXN`` halves (``rokka.core.txn``).

In a cluster a transaction may span brokers: partitions and groups led elsewhere are *shares*
opened on their brokers before AddPartitionsToTxn/AddOffsetsToTxn answers and ended by the
completion before this broker's own part (``rokka.gateway.kafka.txn.peers``).

State machine: ``rokka.gateway.kafka.txn.states`` (``TRANSITIONS``, ``next_state``;
Empty/Complete* -> Ongoing -> Prepare* -> Complete*), which also holds the
per-id record ``Txn``.

Durability rules (``config/kafkaTxn.msgpack``, atomic msgpack):

1. A transition to Ongoing, a change of its partitions/groups and every
   TxnOffsetCommit are written before the reply.
2. PrepareCommit/PrepareAbort is written (with the half locations and the
   end of every real queue of the transaction = ``marks``, which also names
   the queues that get a marker) *before* anything is stored.  A restart
   completes such a transaction: the re-put skips halves whose commit or
   placeholder is already in the real queue at or after its mark (matched by
   its prepared-transaction offset = the half's CommitLog offset) and queues
   that already hold this transaction's marker, so a crash mid-completion
   neither loses nor doubles.
3. Half locations of an Ongoing transaction are not written per produce:
   after a restart they are found again by scanning the half queue from the
   transaction's ``half_start`` for halves marked with its pid:epoch.  An
   Ongoing transaction is resumed and aborted when its timeout passes
   (start time is wall clock, persisted).
4. Complete* is written lazily (a lost one is recomputed by rule 2).

A completion whose store write fails leaves the transaction in Prepare*;
``run`` retries it and EndTxn answers CONCURRENT_TRANSACTIONS meanwhile.

A transactional id idle (Empty/Complete*) for ``id_expiration_ms`` (Kafka's
transactional.id.expiration.ms, 7 days) since its last transition is
forgotten with its producer id, so the table does not grow without bound; a
later InitProducerId of that id starts afresh at a new producer id, epoch 0.

Concurrency: every public method runs on the trio thread; checks and state changes happen
without an await in between, awaits are only for fsyncs and shares.  Produce calls
``check_produce`` then ``append_halves`` with no await between them.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

import structlog
import trio
from rokka.compat.kafka_control import CTRL_ABORT, CTRL_COMMIT
from rokka.core.model import (
    PROP_TRAN_MSG,
    TOPIC_TRANS_HALF,
    Message,
    UniformBatch,
)
from rokka.core.storage.packfile import load_msgpack, pack, take_ticket, write_packed_atomic
from rokka.core.txn import PROP_OWNED_HALF as PROP_KAFKA_TXN
from rokka.core.txn import SCAN_BATCH
from rokka.gateway.kafka.txn.completion import Completion, completion_writes
from rokka.gateway.kafka.txn.peers import ParticipantMixin, TxnPeers, already_put
from rokka.gateway.kafka.txn.states import (
    ID_EXPIRATION_MS,
    IDLE,
    PREPARED,
    Partition,
    Txn,
    TxnEvent,
    TxnOutcome,
    TxnState,
    next_state,
    txn_from_row,
    txn_row,
)

if TYPE_CHECKING:
    from rokka.core.broker import Broker
    from rokka.gateway.kafka.producers.state import ProducerStateManager

__all__ = ["KafkaTxnCoordinator", "KafkaTxnStatistics", "Txn", "TxnOutcome", "TxnState"]

log = structlog.get_logger(__name__)

FILE_NAME = "kafkaTxn.msgpack"
VERSION = 1
TICK_S = 1.0


S, E, Out = TxnState, TxnEvent, TxnOutcome


@dataclass(frozen=True, slots=True)
class KafkaTxnStatistics:
    transactional_ids: int
    by_state: dict[str, int]
    committed: int
    aborted: int
    timed_out: int
    records_committed: int


def _wall_ms() -> int:
    return int(time.time() * 1000)


class KafkaTxnCoordinator(ParticipantMixin):
    """Transaction coordinator for Kafka transactional ids; see the module docstring.

    Args:
        broker: the core broker (store, send pipeline, consumer offsets).
        producers: producer ids and epochs (``transactional_entry`` / ``bump_epoch``).
        config_dir: where ``kafkaTxn.msgpack`` lives; None = memory only.
        clock_ms: wall clock (transaction start times and timeouts).
        apply_offset: stores one committed offset at commit time
            (group, topic, partition, offset); default: the broker's offset table.
        id_expiration_ms: a transactional id idle (Empty/Complete*) this long is forgotten, with
            its producer id (Kafka's transactional.id.expiration.ms).

    ``queue_of`` (attribute) maps a Kafka partition of a transaction to the local (topic, queue)
    that gets its marker (None: not here); the Kafka gateway sets it (views resolve to their
    source topic), the default is (topic, partition).  ``peers`` (attribute, None = one broker)
    reaches the other brokers of a cluster (``rokka.gateway.kafka.txn.peers``), ``offsets_flush``
    (None = nothing) is awaited after committed offsets were applied (forwarding remote ones).

    Raises:
        MetadataCorrupt: the state file exists but cannot be read.
    """

    def __init__(self, broker: Broker, producers: ProducerStateManager, config_dir: Path | None, *,
                 clock_ms: Callable[[], int] = _wall_ms,
                 apply_offset: Callable[[str, str, int, int], None] | None = None,
                 id_expiration_ms: int = ID_EXPIRATION_MS) -> None:
        self._id_expiration_ms = id_expiration_ms
        self.broker = broker
        self.producers = producers
        self._path = None if config_dir is None else config_dir / FILE_NAME
        self._clock = clock_ms
        self.apply_offset = apply_offset or (lambda g, t, p, o: broker.offsets.commit(g, t, p, o))
        self._txns: dict[str, Txn] = {}
        self._by_pid: dict[int, str] = {}
        self._write_lock = trio.Lock()
        self._dirty = False
        self._wake = trio.Event()
        self._recovering: set[str] = set()      # completions that must check for earlier re-puts
        self._busy: set[str] = set()            # ids whose EndTxn/abort is between Prepare* and Complete*
        self.committed = self.aborted = self.timed_out = self.records_committed = 0
        self.queue_of: Callable[[str, int], tuple[str, int] | None] = self._same_queue
        self.peers: TxnPeers | None = None
        self.offsets_flush: Callable[[], Awaitable[Any]] | None = None
        self._remote: dict[str, Txn] = {}       # shares of other brokers' transactions (participant)
        self._remote_by_pid: dict[int, str] = {}
        if self._path is not None:
            self._load()

    # ------------------------------------------------------------------ lookups

    def get(self, tid: str) -> Txn | None:
        return self._txns.get(tid)

    def transactions(self) -> list[Txn]:
        """Every transactional id this coordinator knows (ListTransactions)."""
        return list(self._txns.values())

    def _txn_for(self, tid: str, pid: int, epoch: int) -> Txn | TxnOutcome:
        """The request's transaction after Kafka's id/epoch checks (wire sheet §5.3)."""
        entry = self.producers.transactional_entry(tid)
        if entry is None:
            return Out.UNKNOWN_TRANSACTIONAL_ID
        if pid != entry.producer_id:
            return Out.INVALID_PRODUCER_ID_MAPPING
        if epoch != entry.epoch:
            return Out.PRODUCER_FENCED
        txn = self._txns.get(tid)
        if txn is None:
            txn = self._txns[tid] = Txn(tid, pid, epoch, entry.timeout_ms)
        elif (txn.producer_id, txn.epoch) != (pid, epoch) and txn.state not in (S.ONGOING, *PREPARED):
            txn.producer_id, txn.epoch, txn.timeout_ms = pid, epoch, entry.timeout_ms
        self._by_pid[pid] = tid
        return txn

    def _same_queue(self, topic: str, partition: int) -> tuple[str, int] | None:
        tc = self.broker.topics.get(topic)
        return (topic, partition) if tc is not None and 0 <= partition < tc.queue_nums else None

    def pending_offset(self, group: str, topic: str, partition: int) -> bool:
        """True while an open transaction holds an uncommitted offset for this partition (require_stable)."""
        return any((group, topic, partition) in t.pending_offsets
                   for t in (*self._txns.values(), *self._remote.values()))

    # ------------------------------------------------------------------ InitProducerId

    async def before_init(self, tid: str) -> TxnOutcome:
        """Called before the epoch bump: abort an Ongoing transaction (synchronously, as a whole).

        Returns CONCURRENT_TRANSACTIONS while a commit/abort of this id is
        being completed; the client retries.
        """
        txn = self._txns.get(tid)
        if txn is None:
            return Out.OK
        txn.updated_ms = self._clock()   # in use again: ``tick`` must not expire it under this init
        nxt = next_state(txn.state, E.INIT)
        if isinstance(nxt, TxnOutcome):
            return nxt
        if nxt is S.PREPARE_ABORT:
            log.info("kafka_txn.aborted_by_init_producer_id", transactional_id=tid)
            if not await self._end(txn, S.PREPARE_ABORT):
                return Out.CONCURRENT_TRANSACTIONS
        return Out.OK

    def after_init(self, tid: str, producer_id: int, epoch: int, timeout_ms: int) -> None:
        """Record the (pid, epoch) InitProducerId just handed out; the id is Empty again."""
        txn = self._txns.get(tid)
        if txn is None:
            txn = self._txns[tid] = Txn(tid, producer_id, epoch, timeout_ms)
        elif txn.state in (S.ONGOING, *PREPARED):
            return  # another request raced in; its own path finishes the transaction
        self._by_pid.pop(txn.producer_id, None)
        txn.producer_id, txn.epoch, txn.timeout_ms = producer_id, epoch, timeout_ms
        txn.state = S.EMPTY
        txn.clear()
        self._by_pid[producer_id] = tid
        self._touch(txn)

    # ------------------------------------------------------------------ AddPartitions / AddOffsets

    async def add_partitions(self, tid: str, pid: int, epoch: int, partitions: Iterable[Partition],
                             groups: Iterable[str] = ()) -> TxnOutcome:
        """AddPartitionsToTxn (partitions) / AddOffsetsToTxn (groups): start or extend the transaction."""
        txn = self._txn_for(tid, pid, epoch)
        if isinstance(txn, TxnOutcome):
            return txn
        nxt = next_state(txn.state, E.ADD)
        if isinstance(nxt, TxnOutcome):
            return nxt
        parts, grps = set(partitions), set(groups)
        if txn.state is S.ONGOING and parts <= txn.partitions and grps <= txn.groups:
            return Out.OK
        fresh = txn.state is not S.ONGOING
        remote = self.split(parts if fresh else parts - txn.partitions, grps if fresh else grps - txn.groups)
        if remote:
            # The shares must be open before the producer writes there; awaits: check everything again.
            if fresh:
                txn.clear()
            if not await self.open_shares(txn, remote):
                return Out.CONCURRENT_TRANSACTIONS
            again = self._txn_for(tid, pid, epoch)
            if again is not txn or isinstance(next_state(txn.state, E.ADD), TxnOutcome):
                return Out.CONCURRENT_TRANSACTIONS
            if txn.state is not S.ONGOING and not fresh:
                return Out.CONCURRENT_TRANSACTIONS   # it ended meanwhile: the client adds again
            fresh = txn.state is not S.ONGOING   # another request may have started it: extend it
        if fresh:
            txn.clear()
            txn.state = S.ONGOING
            txn.start_ms = self._clock()
            txn.half_start = self.broker.store.max_offset(TOPIC_TRANS_HALF, 0)
            log.info("kafka_txn.started", transactional_id=tid, producer_id=pid, epoch=epoch)
        txn.partitions |= parts
        txn.groups |= grps
        txn.peers |= set(remote)
        self._touch(txn)
        await self.persist()
        return Out.OK

    async def txn_offset_commit(self, tid: str, pid: int, epoch: int, group: str,
                                offsets: Iterable[tuple[str, int, int]]) -> TxnOutcome:
        """TxnOffsetCommit: remember (topic, partition, offset)s of ``group``, applied at commit
        (here, or in this broker's share when another broker coordinates ``tid``)."""
        shared = self.share_offset_commit(tid, pid, epoch, group, offsets)
        if shared is not None:
            if shared is Out.OK:
                await self.persist()
            return shared
        txn = self._txn_for(tid, pid, epoch)
        if isinstance(txn, TxnOutcome):
            return txn
        if txn.state in PREPARED:
            return Out.CONCURRENT_TRANSACTIONS
        if txn.state is not S.ONGOING or group not in txn.groups:
            return Out.INVALID_TXN_STATE
        for topic, partition, offset in offsets:
            txn.pending_offsets[(group, topic, partition)] = offset
        await self.persist()
        return Out.OK

    # ------------------------------------------------------------------ Produce

    def check_produce(self, pid: int, epoch: int, topic: str, partition: int) -> TxnOutcome:
        """May this transactional batch be written?  (No await between this and ``append_halves``.)"""
        if (share := self.share_for_pid(pid)) is not None:
            return self.check_share_produce(share, pid, epoch, topic, partition)
        tid = self._by_pid.get(pid)
        txn = self._txns.get(tid) if tid is not None else None
        entry = self.producers.transactional_entry(tid) if tid is not None else None
        if txn is None or entry is None:
            return Out.INVALID_PRODUCER_ID_MAPPING
        if epoch < entry.epoch or (pid == entry.producer_id and epoch != entry.epoch):
            return Out.INVALID_PRODUCER_EPOCH
        if txn.state is not S.ONGOING or (txn.producer_id, txn.epoch) != (pid, epoch) \
                or (topic, partition) not in txn.partitions:
            return Out.INVALID_TXN_STATE
        return Out.OK

    def append_halves(self, pid: int, epoch: int, messages: list[Message] | UniformBatch) -> Any:
        """Store ``messages`` (or a run) as halves of ``pid``'s open transaction; returns the
        ``PutResult``.  A run stays one: the broker moves it to the half topic as a whole, its shared
        properties (the transaction's, then the real destination) after each record's own."""
        txn = self.share_for_pid(pid) or self._txns[self._by_pid[pid]]
        half = {PROP_TRAN_MSG: "true", PROP_KAFKA_TXN: txn.marker}
        if type(messages) is UniformBatch:     # Kafka records: no CLUSTER
            run = dataclasses.replace(messages, properties={**messages.properties, **half})
            result = self.broker.append_uniform(run, stamp_cluster=False)
        else:
            result = self.broker.append([dataclasses.replace(m, properties={**m.properties, **half})
                                         for m in messages], stamp_cluster=False)
        if result.ok:
            for a in result.appended:
                txn.halves[a.commitlog_offset] = a.queue_offset
        return result

    # ------------------------------------------------------------------ EndTxn

    async def end_txn(self, tid: str, pid: int, epoch: int, commit: bool) -> TxnOutcome:
        """EndTxn: commit or abort the whole transaction before answering."""
        txn = self._txn_for(tid, pid, epoch)
        if isinstance(txn, TxnOutcome):
            return txn
        nxt = next_state(txn.state, E.COMMIT if commit else E.ABORT)
        if isinstance(nxt, TxnOutcome):
            return nxt
        if nxt not in PREPARED:
            return Out.OK                        # retry of a completed EndTxn
        return Out.OK if await self._end(txn, nxt) else Out.CONCURRENT_TRANSACTIONS

    async def _end(self, txn: Txn, prepared: TxnState) -> bool:
        """Ongoing -> Prepare* (durable) -> store -> Complete*; False if the store refused (retried later)."""
        txn.state = prepared
        self._mark(txn)
        if prepared is not S.PREPARE_COMMIT:
            txn.pending_offsets = {}
        self._busy.add(txn.tid)
        try:
            await self.persist()
            return await self._complete(txn)
        finally:
            self._busy.discard(txn.tid)

    def _mark(self, txn: Txn) -> None:
        """Record the end of every local queue of the transaction (rule 2) at Prepare*."""
        txn.updated_ms = self._clock()
        store = self.broker.store
        queues = {tq for t, p in txn.partitions if (tq := self.queue_of(t, p)) is not None}
        txn.marks = {(t, q): store.max_offset(t, q) for t, q in queues}

    async def _complete(self, txn: Txn) -> bool:
        """Complete a Prepare* transaction: the participants' shares first, then this broker's part
        (the caller holds it in ``_busy``).  False while a participant or the store has not done it."""
        if not await self.end_shares(txn, txn.state is S.PREPARE_COMMIT):
            self._wake.set()
            return False
        return await self._store_completion(txn)

    async def _store_completion(self, txn: Txn) -> bool:
        """Store this broker's part of a Prepare* transaction (or share) and mark it Complete*."""
        commit = txn.state is S.PREPARE_COMMIT
        runs, msgs, ops, halves, records = self._completion_messages(txn, commit)
        result = None
        for result in self.broker.append_uniforms(runs, stamp_cluster=False) if runs else ():
            if not result.ok:
                break
        if msgs and (result is None or result.ok):
            result = self.broker.append(msgs, prepared=True)
        if ops is not None and (result is None or result.ok):
            result = self.broker.append_uniform(ops, stamp_cluster=False)
        if result is not None:     # the last write's durability covers the ones before it
            result = await self.broker.wait_durable(result)
            if not result.ok:
                log.error("kafka_txn.completion_not_stored_will_retry", transactional_id=txn.tid,
                          status=result.status.value, remark=result.remark)
                self._recovering.add(txn.tid)   # part of it may be in the log: the retry deduplicates
                self._wake.set()
                return False
        if commit:
            for (group, topic, partition), offset in txn.pending_offsets.items():
                self.apply_offset(group, topic, partition, offset)
            if txn.pending_offsets:
                self.broker.offsets.persist()
                if self.offsets_flush is not None:
                    await self.offsets_flush()
            self.committed += 1
            self.records_committed += records
        else:
            self.aborted += 1
        log.info("kafka_txn.completed", transactional_id=txn.tid, committed=commit,
                 records=len(halves), offsets=len(txn.pending_offsets))
        self._recovering.discard(txn.tid)
        done = next_state(txn.state, E.COMPLETE)
        assert isinstance(done, TxnState)
        txn.state = done
        txn.clear()
        self._touch(txn)
        return True

    def _completion_messages(self, txn: Txn, commit: bool) -> Completion:
        """What completing ``txn`` stores (``completion.completion_writes``), after a crash or a failed
        write less what is already stored (``already_put``)."""
        kind = f"{CTRL_COMMIT if commit else CTRL_ABORT}:{txn.producer_id}:{txn.epoch}"
        already, marked = already_put(self.broker.store, txn, kind) if txn.tid in self._recovering else (set(), set())
        return completion_writes(self.broker, txn, commit, kind, already, marked, self._clock())

    # ------------------------------------------------------------------ background

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Complete transactions found prepared, abort timed-out ones, persist; until cancelled."""
        self._recover_halves()
        task_status.started()
        try:
            while True:
                await self.tick()
                with trio.move_on_after(TICK_S):
                    await self._wake.wait()
                self._wake = trio.Event()
        finally:
            if self._dirty:
                self.save()

    async def tick(self) -> None:
        """One upkeep pass: retry prepared completions, abort expired transactions, persist if dirty."""
        now = self._clock()
        await self.check_shares()
        for txn in list(self._txns.values()):
            if txn.tid in self._busy:
                continue                       # an EndTxn / abort of this id is under way
            if txn.state in PREPARED:
                self._busy.add(txn.tid)
                try:
                    await self._complete(txn)
                finally:
                    self._busy.discard(txn.tid)
            elif txn.state is S.ONGOING and txn.start_ms >= 0 and now - txn.start_ms > txn.timeout_ms:
                await self._expire(txn)
            elif txn.state in IDLE and now - txn.updated_ms > self._id_expiration_ms:
                self._forget(txn)
        if self._dirty:
            await self.persist()

    def _forget(self, txn: Txn) -> None:
        """Drop an idle transactional id and its producer id (a later InitProducerId starts afresh)."""
        del self._txns[txn.tid]
        if self._by_pid.get(txn.producer_id) == txn.tid:
            del self._by_pid[txn.producer_id]
        self.producers.forget_transactional_id(txn.tid)
        self._changed()
        log.info("kafka_txn.id_expired", transactional_id=txn.tid, producer_id=txn.producer_id,
                 idle_ms=self._clock() - txn.updated_ms)

    async def _expire(self, txn: Txn) -> None:
        log.warning("kafka_txn.timed_out_aborting", transactional_id=txn.tid,
                    timeout_ms=txn.timeout_ms, records=len(txn.halves))
        self.timed_out += 1
        self._busy.add(txn.tid)
        try:
            entry = await self.producers.bump_epoch(txn.tid)    # fence the old producer first, as Kafka
            if entry is not None:
                self._by_pid[entry.producer_id] = txn.tid
        finally:
            self._busy.discard(txn.tid)
        nxt = next_state(txn.state, E.TIMEOUT)
        if isinstance(nxt, TxnState):
            await self._end(txn, nxt)

    def _recover_halves(self) -> None:
        """Restart: find the halves of Ongoing transactions again (rule 3); prepared ones re-check puts."""
        known = (*self._txns.values(), *self._remote.values())
        ongoing = {t.marker: t for t in known if t.state is S.ONGOING}
        self._recovering = {t.tid for t in known if t.state in PREPARED}
        if not ongoing:
            return
        store = self.broker.store
        off = min(t.half_start for t in ongoing.values())
        end = store.max_offset(TOPIC_TRANS_HALF, 0)
        off = max(off, store.min_offset(TOPIC_TRANS_HALF, 0))
        while off < end:
            units = store.cq_units(TOPIC_TRANS_HALF, 0, off, SCAN_BATCH)
            if not units:
                break
            for u in units:
                m = store.read_message(u.commitlog_offset)
                txn = ongoing.get(m.properties.get(PROP_KAFKA_TXN, "")) if m is not None else None
                if txn is not None and u.queue_offset >= txn.half_start:
                    txn.halves[u.commitlog_offset] = u.queue_offset
            off = units[-1].queue_offset + 1
        for t in ongoing.values():
            log.info("kafka_txn.resumed_after_restart", transactional_id=t.tid, records=len(t.halves))

    def statistics(self) -> KafkaTxnStatistics:
        by_state: dict[str, int] = {}
        for t in self._txns.values():
            by_state[t.state.value] = by_state.get(t.state.value, 0) + 1
        return KafkaTxnStatistics(len(self._txns), by_state, self.committed, self.aborted, self.timed_out,
                                  self.records_committed)

    # ------------------------------------------------------------------ persistence

    def _changed(self) -> None:
        self._dirty = True

    def _touch(self, txn: Txn) -> None:
        txn.updated_ms = self._clock()
        self._changed()

    async def persist(self) -> None:
        """Write the table durably (fsync on a worker thread, one writer at a time)."""
        self._dirty = False
        if self._path is None:
            return
        async with self._write_lock:
            data, ticket = self._encode(), take_ticket()   # a later save() (shutdown) wins even if it lands first
            await trio.to_thread.run_sync(partial(write_packed_atomic, self._path, data, ticket=ticket))

    def save(self) -> None:
        """Write the table now, synchronously (shutdown; safe while a ``persist`` is writing)."""
        self._dirty = False
        if self._path is not None:
            write_packed_atomic(self._path, self._encode(), ticket=take_ticket())

    def _encode(self) -> bytes:
        rows = [txn_row(t) for t in self._txns.values()]
        return pack({"version": VERSION, "txns": rows, "remote": self._encode_shares()})

    def _load(self) -> None:
        assert self._path is not None
        if not load_msgpack(self._path, self._decode, "Kafka transaction state"):
            return
        log.info("kafka_txn.state_loaded", transactional_ids=len(self._txns),
                 open=sum(t.state is not S.EMPTY and not t.state.value.startswith("Complete")
                          for t in self._txns.values()))

    def _decode(self, data: Any) -> None:
        if not isinstance(data, dict) or data.get("version") != VERSION:
            raise ValueError("unsupported layout")
        for row in data["txns"]:
            txn = txn_from_row(row, self._clock())
            self._txns[txn.tid] = txn
            self._by_pid[txn.producer_id] = txn.tid
        for row in data.get("remote", ()):
            share = txn_from_row(row, self._clock())
            self._remote[share.tid] = share
            self._remote_by_pid[share.producer_id] = share.tid
