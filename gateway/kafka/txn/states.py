"""Kafka transaction states: the state machine table and one transactional id's record.

Theory of operation
-------------------
``TRANSITIONS`` is keyed by (state, event); a value is the next state or the
refusal to answer with (``next_state`` looks it up; an event the table does
not list is INVALID_TXN_STATE)::

    Empty/Complete* --ADD--> Ongoing --COMMIT--> PrepareCommit --COMPLETE--> CompleteCommit
                             Ongoing --ABORT/TIMEOUT/INIT--> PrepareAbort --COMPLETE--> CompleteAbort

``Txn`` is what the coordinator (``rokka.gateway.kafka.txn.coordinator``) keeps and persists per
transactional id.  Nothing here does I/O.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any

__all__ = ["ID_EXPIRATION_MS", "IDLE", "PREPARED", "TRANSITIONS", "OffsetKey", "Partition", "Txn", "TxnEvent",
           "TxnOutcome", "TxnState", "next_state", "txn_from_row", "txn_row"]


class TxnState(enum.Enum):
    EMPTY = "Empty"
    ONGOING = "Ongoing"
    PREPARE_COMMIT = "PrepareCommit"
    PREPARE_ABORT = "PrepareAbort"
    COMPLETE_COMMIT = "CompleteCommit"
    COMPLETE_ABORT = "CompleteAbort"


class TxnEvent(enum.Enum):
    INIT = "INIT"            # InitProducerId (an Ongoing transaction is aborted first)
    ADD = "ADD"              # AddPartitionsToTxn / AddOffsetsToTxn
    COMMIT = "COMMIT"        # EndTxn(committed=true)
    ABORT = "ABORT"          # EndTxn(committed=false)
    TIMEOUT = "TIMEOUT"      # transaction.timeout.ms passed
    COMPLETE = "COMPLETE"    # records/op records stored


class TxnOutcome(enum.Enum):
    OK = "OK"
    INVALID_TXN_STATE = "INVALID_TXN_STATE"                      # 48
    CONCURRENT_TRANSACTIONS = "CONCURRENT_TRANSACTIONS"          # 51
    PRODUCER_FENCED = "PRODUCER_FENCED"                          # 90 (47 for old versions)
    INVALID_PRODUCER_EPOCH = "INVALID_PRODUCER_EPOCH"            # 47 (Produce)
    INVALID_PRODUCER_ID_MAPPING = "INVALID_PRODUCER_ID_MAPPING"  # 49
    UNKNOWN_TRANSACTIONAL_ID = "UNKNOWN_TRANSACTIONAL_ID"        # 49 on the wire, as Kafka answers


S, E, Out = TxnState, TxnEvent, TxnOutcome
_ABORTABLE_AGAIN: dict[TxnState, TxnState | TxnOutcome] = {
                    S.EMPTY: Out.INVALID_TXN_STATE, S.PREPARE_COMMIT: Out.INVALID_TXN_STATE,
                    S.PREPARE_ABORT: Out.CONCURRENT_TRANSACTIONS, S.COMPLETE_ABORT: S.COMPLETE_ABORT,
                    S.COMPLETE_COMMIT: Out.INVALID_TXN_STATE}
TRANSITIONS: dict[tuple[TxnState, TxnEvent], TxnState | TxnOutcome] = {
    **{(s, E.INIT): S.EMPTY for s in (S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT)},
    (S.ONGOING, E.INIT): S.PREPARE_ABORT,
    (S.PREPARE_COMMIT, E.INIT): Out.CONCURRENT_TRANSACTIONS,
    (S.PREPARE_ABORT, E.INIT): Out.CONCURRENT_TRANSACTIONS,
    **{(s, E.ADD): S.ONGOING for s in (S.EMPTY, S.ONGOING, S.COMPLETE_COMMIT, S.COMPLETE_ABORT)},
    (S.PREPARE_COMMIT, E.ADD): Out.CONCURRENT_TRANSACTIONS,
    (S.PREPARE_ABORT, E.ADD): Out.CONCURRENT_TRANSACTIONS,
    (S.ONGOING, E.COMMIT): S.PREPARE_COMMIT,
    (S.EMPTY, E.COMMIT): Out.INVALID_TXN_STATE,
    (S.PREPARE_COMMIT, E.COMMIT): Out.CONCURRENT_TRANSACTIONS,
    (S.PREPARE_ABORT, E.COMMIT): Out.INVALID_TXN_STATE,
    (S.COMPLETE_COMMIT, E.COMMIT): S.COMPLETE_COMMIT,          # a retried EndTxn: success again
    (S.COMPLETE_ABORT, E.COMMIT): Out.INVALID_TXN_STATE,
    (S.ONGOING, E.ABORT): S.PREPARE_ABORT,
    **{(s, E.ABORT): v for s, v in _ABORTABLE_AGAIN.items()},
    (S.ONGOING, E.TIMEOUT): S.PREPARE_ABORT,
    (S.PREPARE_COMMIT, E.COMPLETE): S.COMPLETE_COMMIT,
    (S.PREPARE_ABORT, E.COMPLETE): S.COMPLETE_ABORT,
}
PREPARED = (S.PREPARE_COMMIT, S.PREPARE_ABORT)
IDLE = (S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT)
#: Kafka's transactional.id.expiration.ms default: an idle transactional id is forgotten after 7 days.
ID_EXPIRATION_MS = 7 * 24 * 3600 * 1000


def next_state(state: TxnState, event: TxnEvent) -> TxnState | TxnOutcome:
    """The table lookup; an event the table does not list is INVALID_TXN_STATE."""
    return TRANSITIONS.get((state, event), Out.INVALID_TXN_STATE)


Partition = tuple[str, int]
OffsetKey = tuple[str, str, int]   # (group, topic, partition)


@dataclass
class Txn:
    """One transactional id's coordinator record."""

    tid: str
    producer_id: int
    epoch: int
    timeout_ms: int
    state: TxnState = TxnState.EMPTY
    partitions: set[Partition] = field(default_factory=set)
    groups: set[str] = field(default_factory=set)
    halves: dict[int, int] = field(default_factory=dict)          # half CommitLog offset -> half queue offset
    pending_offsets: dict[OffsetKey, int] = field(default_factory=dict)
    start_ms: int = -1
    half_start: int = 0                                           # half-queue end when it became Ongoing
    marks: dict[Partition, int] = field(default_factory=dict)     # real queue ends at PrepareCommit
    updated_ms: int = -1                                          # wall clock of the last transition
    peers: set[str] = field(default_factory=set)                  # other brokers holding a share of it
    acked: set[str] = field(default_factory=set)                  # peers that completed their share

    def clear(self) -> None:
        self.partitions, self.groups, self.halves = set(), set(), {}
        self.peers, self.acked = set(), set()
        self.pending_offsets, self.marks, self.start_ms = {}, {}, -1

    @property
    def marker(self) -> str:
        return f"{self.producer_id}:{self.epoch}"


def txn_row(t: Txn) -> list[Any]:
    """One ``Txn`` as the coordinator's state file stores it (a msgpack list)."""
    return [t.tid, t.producer_id, t.epoch, t.timeout_ms, t.state.value,
            [list(p) for p in sorted(t.partitions)], sorted(t.groups),
            [[c, q] for c, q in sorted(t.halves.items())],
            [[g, tp, p, o] for (g, tp, p), o in t.pending_offsets.items()],
            t.start_ms, t.half_start, [[tp, p, m] for (tp, p), m in t.marks.items()], t.updated_ms,
            sorted(t.peers), sorted(t.acked)]


def txn_from_row(row: list[Any], now_ms: int) -> Txn:
    """``txn_row`` read back.  Rows written before ``updated_ms`` existed have 12 fields (such ids
    count as updated ``now_ms``), before cross-broker transactions 13 (no peers)."""
    tid, pid, epoch, timeout, state, parts, groups, halves, pending, start, half_start, marks = row[:12]
    updated = int(row[12]) if len(row) > 12 else now_ms
    txn = Txn(tid, int(pid), int(epoch), int(timeout), TxnState(state),
              {(str(t), int(p)) for t, p in parts}, set(groups), {int(c): int(q) for c, q in halves},
              {(g, t, int(p)): int(o) for g, t, p, o in pending}, int(start), int(half_start),
              {(t, int(p)): int(m) for t, p, m in marks}, updated)
    if len(row) > 14:
        txn.peers, txn.acked = set(row[13]), set(row[14])
    return txn
