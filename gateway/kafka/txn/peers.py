"""Kafka transactions across brokers: the participant side and the link to the other brokers.

Theory of operation
-------------------
In a cluster (``rokka serve --brokers N``) a transactional id has one
*coordinator* broker (``rokka.gateway.kafka.txn.coordinator.KafkaTxnCoordinator`` there owns
its state: producer id, epoch, Ongoing/Prepare*/Complete*).  A partition of the
transaction led by another broker, and a consumer group coordinated by another
broker (AddOffsetsToTxn), make that broker a *participant*:

* **open** (AddPartitionsToTxn / AddOffsetsToTxn on the coordinator): before it
  answers, the coordinator asks every new participant to open a *share* of the
  transaction: ``(tid, pid, epoch)``, the partitions and groups led there.  The
  participant writes the share durably (``kafkaTxn.msgpack``, key ``remote``)
  and acknowledges; from then on its ``check_produce`` accepts the producer's
  batches for those partitions (stored as halves, as on the coordinator) and its
  ``txn_offset_commit`` accepts TxnOffsetCommit for those groups.  A failed
  open answers CONCURRENT_TRANSACTIONS (retriable); nothing is added.
* **end** (EndTxn, timeout, InitProducerId fencing): the coordinator writes
  PrepareCommit/PrepareAbort durably first (rule 2 of ``coordinator``), then asks
  each participant that has not acknowledged yet to end its share with that
  outcome; the participant writes its share's Prepare* (with its marks), stores
  the whole share's completion (real records or placeholders, its markers, op
  records, and for commit its pending group offsets) in one ``put_messages``
  call, then forgets the share and acknowledges.  Only when every participant
  has acknowledged does the coordinator complete its own partitions and move to
  Complete*.  A participant that is down is retried every tick (``run``) until
  it answers; a coordinator that restarts finds the transaction in Prepare* and
  resumes; a participant that restarts keeps its share (Ongoing or Prepare*)
  and completes it when the coordinator's retry arrives, after refreshing the
  routes of its topics (deduplicated against what was already stored, as on
  the coordinator's own restart).  An end for a share the participant does not hold (already
  completed) is acknowledged: the end is idempotent.
* A share never commits on its own: only its coordinator decides, so no
  broker can commit what another aborts.  A share left Ongoing longer than its
  transaction timeout plus ``SHARE_CHECK_GRACE_MS`` asks its coordinator
  (``is_open``) whether that producer's transaction is still open there; if the
  coordinator answers no (it completed without this share, e.g. after an open
  it took for failed, or it lost its state), the share is aborted here: the
  coordinator cannot commit a transaction before every share it recorded has
  acknowledged, so a share it does not know is one it never committed.

Each broker's store applies its share atomically, so a read_committed consumer
of any one partition sees a transaction wholly or not at all; across brokers,
as in Kafka (markers are written per partition), a commit becomes visible
broker by broker within one completion round.

``TxnPeers`` is what the coordinator needs from the cluster
(``rokka.gateway.kafka.txn.participants`` implements it with the cluster view
and broker-to-broker requests); None = a single broker, everything local.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, Protocol

import structlog
from rokka.compat.kafka_control import PROP_KAFKA_CTRL
from rokka.core.model import TOPIC_TRANS_HALF, TRANSACTION_COMMIT_TYPE, TRANSACTION_MASK
from rokka.core.txn import SCAN_BATCH
from rokka.gateway.kafka.txn.states import PREPARED, Partition, Txn, TxnOutcome, TxnState, txn_row

if TYPE_CHECKING:
    from rokka.core.storage import MessageStore as Store
    from rokka.gateway.kafka.txn.coordinator import KafkaTxnCoordinator

__all__ = ["ParticipantMixin", "TxnPeers", "already_put"]

log = structlog.get_logger(__name__)

S, Out = TxnState, TxnOutcome
#: A share Ongoing this long past its transaction timeout asks its coordinator whether it is still open.
SHARE_CHECK_GRACE_MS = 60_000


class TxnPeers(Protocol):
    """The other brokers of the cluster, as the transaction coordinator needs them."""

    def owner(self, topic: str, partition: int) -> str | None:
        """The broker leading a Kafka partition; None = this broker (or unknown: treated as local)."""

    def group_owner(self, group: str) -> str | None:
        """The broker coordinating a consumer group; None = this broker."""

    async def open(self, broker: str, tid: str, pid: int, epoch: int, timeout_ms: int,
                   partitions: list[Partition], groups: list[str]) -> bool:
        """Open (or extend) the share of ``tid`` on ``broker``; True once it is durable there."""

    async def end(self, broker: str, tid: str, pid: int, epoch: int, commit: bool) -> bool:
        """End the share of ``tid`` on ``broker``; True once it is completed there (or unknown there)."""

    async def is_open(self, broker: str, tid: str, pid: int, epoch: int) -> bool | None:
        """Whether ``broker`` (a coordinator) holds (pid, epoch)'s transaction open; None = no answer."""


class ParticipantMixin:
    """The participant half of ``KafkaTxnCoordinator`` (see the module docstring)."""

    # ------------------------------------------------------------------ coordinator side

    def split(self: KafkaTxnCoordinator, partitions: Iterable[Partition], groups: Iterable[str],
              ) -> dict[str, tuple[list[Partition], list[str]]]:
        """The partitions and groups led by other brokers, by broker."""
        out: dict[str, tuple[list[Partition], list[str]]] = {}
        if self.peers is None:
            return out
        for tp in partitions:
            if (b := self.peers.owner(*tp)) is not None:
                out.setdefault(b, ([], []))[0].append(tp)
        for g in groups:
            if (b := self.peers.group_owner(g)) is not None:
                out.setdefault(b, ([], []))[1].append(g)
        return out

    async def open_shares(self: KafkaTxnCoordinator, txn: Txn,
                          remote: dict[str, tuple[list[Partition], list[str]]]) -> bool:
        """Open the remote shares of ``txn`` (partitions/groups not yet there); False if one failed."""
        assert self.peers is not None or not remote
        for broker, (parts, groups) in sorted(remote.items()):
            assert self.peers is not None
            if not await self.peers.open(broker, txn.tid, txn.producer_id, txn.epoch, txn.timeout_ms,
                                         sorted(parts), sorted(groups)):
                log.warning("kafka_txn.participant_open_failed", transactional_id=txn.tid, broker=broker)
                return False
        return True

    async def end_shares(self: KafkaTxnCoordinator, txn: Txn, commit: bool) -> bool:
        """Tell every participant not yet acknowledged to end its share; False while one has not."""
        for broker in sorted(txn.peers - txn.acked):
            ok = self.peers is not None and await self.peers.end(broker, txn.tid, txn.producer_id,
                                                                 txn.epoch, commit)
            if not ok:
                log.warning("kafka_txn.participant_end_pending", transactional_id=txn.tid, broker=broker,
                            committed=commit)
                return False
            txn.acked.add(broker)
            self._changed()
        return True

    # ------------------------------------------------------------------ participant side

    def share_for_pid(self: KafkaTxnCoordinator, pid: int) -> Txn | None:
        tid = self._remote_by_pid.get(pid)
        return self._remote.get(tid) if tid is not None else None

    async def open_share(self: KafkaTxnCoordinator, tid: str, pid: int, epoch: int, timeout_ms: int,
                         partitions: Iterable[Partition], groups: Iterable[str],
                         coordinator: str | None = None) -> TxnOutcome:
        """A coordinator opens or extends this broker's share of ``tid`` (durable before OK); a share
        remembers its coordinator's broker name in ``peers``."""
        share = self._remote.get(tid)
        if share is not None and (share.producer_id, share.epoch) != (pid, epoch):
            if share.state in PREPARED or tid in self._busy:
                return Out.CONCURRENT_TRANSACTIONS
            # The coordinator moved on (a newer epoch) without ending this share: it was never
            # committed there, so it is aborted here.
            log.warning("kafka_txn.stale_share_aborted", transactional_id=tid, producer_id=share.producer_id,
                        epoch=share.epoch)
            if not await self._end_share(share, commit=False):
                return Out.CONCURRENT_TRANSACTIONS
            share = None
        if share is None:
            share = Txn(tid, pid, epoch, timeout_ms, S.ONGOING)
            share.start_ms = self._clock()
            share.half_start = self.broker.store.max_offset(TOPIC_TRANS_HALF, 0)
            self._remote[tid] = share
            self._remote_by_pid[pid] = tid
            log.info("kafka_txn.share_opened", transactional_id=tid, producer_id=pid, epoch=epoch)
        elif share.state is not S.ONGOING:
            return Out.CONCURRENT_TRANSACTIONS
        share.partitions |= set(partitions)
        share.groups |= set(groups)
        if coordinator:
            share.peers = {coordinator}
        self._touch(share)
        await self.persist()
        return Out.OK

    async def end_share_request(self: KafkaTxnCoordinator, tid: str, pid: int, epoch: int,
                                commit: bool) -> TxnOutcome:
        """The coordinator ends this broker's share (OK also when the share is already gone)."""
        share = self._remote.get(tid)
        if share is None or (share.producer_id, share.epoch) != (pid, epoch):
            log.info("kafka_txn.share_end_nothing_held", transactional_id=tid, producer_id=pid, epoch=epoch)
            return Out.OK
        if tid in self._busy:
            return Out.CONCURRENT_TRANSACTIONS
        wanted = S.PREPARE_COMMIT if commit else S.PREPARE_ABORT
        if share.state in PREPARED and share.state is not wanted:
            log.error("kafka_txn.share_outcome_conflict", transactional_id=tid, held=share.state.value,
                      asked=wanted.value)
            return Out.INVALID_TXN_STATE
        return Out.OK if await self._end_share(share, commit) else Out.CONCURRENT_TRANSACTIONS

    async def _end_share(self: KafkaTxnCoordinator, share: Txn, commit: bool) -> bool:
        """Prepare* (durable, with marks) -> store the share's completion -> forget it."""
        self._busy.add(share.tid)
        try:
            if share.state is S.ONGOING:
                share.state = S.PREPARE_COMMIT if commit else S.PREPARE_ABORT
                self._mark(share)
                await self.persist()
            if not await self._store_completion(share):
                return False
            self._drop_share(share)
            await self.persist()
            return True
        finally:
            self._busy.discard(share.tid)

    def _drop_share(self: KafkaTxnCoordinator, share: Txn) -> None:
        if self._remote.get(share.tid) is share:
            del self._remote[share.tid]
        if self._remote_by_pid.get(share.producer_id) == share.tid:
            del self._remote_by_pid[share.producer_id]
        self._changed()

    def holds_open(self: KafkaTxnCoordinator, tid: str, pid: int, epoch: int) -> bool:
        """Coordinator side of ``is_open``: (pid, epoch)'s transaction of ``tid`` is Ongoing/Prepare* here."""
        txn = self._txns.get(tid)
        return txn is not None and (txn.producer_id, txn.epoch) == (pid, epoch) \
            and (txn.state is S.ONGOING or txn.state in PREPARED)

    async def check_shares(self: KafkaTxnCoordinator) -> None:
        """Ask the coordinators of long-idle Ongoing shares about them; abort the ones they do not hold."""
        if self.peers is None:
            return
        now = self._clock()
        for share in list(self._remote.values()):
            if share.state is not S.ONGOING or share.tid in self._busy or not share.peers \
                    or now - share.updated_ms <= share.timeout_ms + SHARE_CHECK_GRACE_MS:
                continue
            seen = share.updated_ms
            verdict = await self.peers.is_open(min(share.peers), share.tid, share.producer_id, share.epoch)
            if self._remote.get(share.tid) is not share or share.updated_ms != seen or share.state is not S.ONGOING:
                continue                        # opened again, or ended, while the question was out
            if verdict is False:
                log.warning("kafka_txn.orphan_share_aborted", transactional_id=share.tid,
                            producer_id=share.producer_id, epoch=share.epoch, records=len(share.halves))
                await self._end_share(share, commit=False)
            else:
                self._touch(share)              # open there, or no answer: ask again after another period

    def share_offset_commit(self: KafkaTxnCoordinator, tid: str, pid: int, epoch: int, group: str,
                            offsets: Iterable[tuple[str, int, int]]) -> TxnOutcome | None:
        """TxnOffsetCommit for a share held here (None: no share of ``tid`` here)."""
        share = self._remote.get(tid)
        if share is None:
            return None
        if pid != share.producer_id:
            return Out.INVALID_PRODUCER_ID_MAPPING
        if epoch != share.epoch:
            return Out.PRODUCER_FENCED if epoch < share.epoch else Out.INVALID_TXN_STATE
        if share.state in PREPARED:
            return Out.CONCURRENT_TRANSACTIONS
        if share.state is not S.ONGOING or group not in share.groups:
            return Out.INVALID_TXN_STATE
        for topic, partition, offset in offsets:
            share.pending_offsets[(group, topic, partition)] = offset
        self._changed()
        return Out.OK

    def check_share_produce(self: KafkaTxnCoordinator, share: Txn, pid: int, epoch: int, topic: str,
                            partition: int) -> TxnOutcome:
        if epoch < share.epoch:
            return Out.INVALID_PRODUCER_EPOCH
        if share.state is not S.ONGOING or (share.producer_id, share.epoch) != (pid, epoch) \
                or (topic, partition) not in share.partitions:
            return Out.INVALID_TXN_STATE
        return Out.OK

    def share_topics(self: KafkaTxnCoordinator, tid: str) -> set[str]:
        """The topics of this broker's share of ``tid`` (empty: none held)."""
        share = self._remote.get(tid)
        return {t for t, _ in share.partitions} if share is not None else set()

    def shares(self: KafkaTxnCoordinator) -> list[Txn]:
        """The shares of other brokers' transactions held here."""
        return list(self._remote.values())

    def _encode_shares(self: KafkaTxnCoordinator) -> list[list[Any]]:
        return [txn_row(t) for t in self._remote.values()]


def already_put(store: Store, txn: Txn, kind: str) -> tuple[set[int], set[tuple[str, int]]]:
    """Half CommitLog offsets whose commit (or placeholder) is already in a real queue at or after
    its mark, and the queues that already hold the marker ``kind`` (a ``KAFKA_CTRL`` value): what a
    completion retried after a crash or a failed write must not store again."""
    out: set[int] = set()
    marked: set[tuple[str, int]] = set()
    for (topic, partition), mark in txn.marks.items():
        off, end = mark, store.max_offset(topic, partition)
        while off < end:
            units = store.cq_units(topic, partition, off, SCAN_BATCH)
            if not units:
                break
            for u in units:
                m = store.read_message(u.commitlog_offset)
                if m is None:
                    continue
                if (m.sysflag & TRANSACTION_MASK) == TRANSACTION_COMMIT_TYPE:
                    out.add(m.prepared_transaction_offset)
                elif m.properties.get(PROP_KAFKA_CTRL) == kind:
                    marked.add((topic, partition))
            off = units[-1].queue_offset + 1
    return out, marked
