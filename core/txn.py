"""Transactional messages: END_TRANSACTION and the check-back of undecided halves.

Theory of operation
-------------------
Storage view (RocketMQ 4.9): ``Broker.prepare`` parks a half message
(TRAN_MSG=true) in RMQ_SYS_TRANS_HALF_TOPIC queue 0 with its destination in
REAL_TOPIC/REAL_QID.  A decision is recorded by an *op record* in
RMQ_SYS_TRANS_OP_HALF_TOPIC (same queue id as the half, TAGS ``d``, body =
the half's queue offset as ASCII).  The half and op queues are never
rewritten; the op queue is what tells, after a restart, which halves are
done.

``end_transaction`` (END_TRANSACTION): look the half up by CommitLog offset,
check it is a half of this producer group at that queue offset (Java's
error remarks), then
  * COMMIT: store the real message (topic REAL_TOPIC, queue REAL_QID, the
    half's properties kept as they are -- TRAN_MSG=true, REAL_TOPIC,
    REAL_QID, WAIT included, as RocketMQ 4.9.7's ``endMessageTransaction``
    stores the half's properties string -- sysflag transaction bits =
    COMMIT, prepared transaction offset = the half's CommitLog offset, the
    half's store time kept) through the normal send pipeline (so a DELAY on
    it still applies).  A committed copy is told from a half by its sysflag
    (COMMIT), never by TRAN_MSG: ``Broker.prepare`` parks only TRAN_MSG
    messages whose transaction bits are NOT/PREPARED, the dispatcher indexes
    COMMIT like a plain message (an owner's commit drops the properties it
    names, see below); then the op record.  A commit whose UNIQ_KEY is already committed in the
    real topic (a duplicate END_TRANSACTION, or the answer to a check of a
    re-put copy) stores nothing new and only writes the op record;
  * ROLLBACK: the op record only;
  * UNKNOWN (0) or any other value: nothing (Java answers nothing either).

Check-back (``run``, every ``transactionCheckInterval``): one round scans
the half queue from the check consumer's offset (group CID_RMQ_SYS_TRANS,
kept in the broker's consumer offset table like the Java broker, persisted
at the end of every round that moved it):
  * halves with an op record are done;
  * a half already checked ``transactionCheckMax`` times (its
    TRANSACTION_CHECK_TIMES property) is discarded: op record + warning log;
  * a half younger than ``transactionTimeOut`` (or its
    CHECK_IMMUNITY_TIME_IN_SECONDS), measured from its born time as Java
    does, stops the scan (later halves are younger);
  * otherwise the half is *re-put* at the end of the half queue with
    TRANSACTION_CHECK_TIMES + 1 (that is where the count lives, as in Java)
    and the copy is handed to the gateway's ``checker`` (CHECK_TRANSACTION_STATE
    to one live producer of PGROUP).  The producer answers END_TRANSACTION
    for the copy.
The half offset advances over the contiguous prefix of handled halves; the
op offset over op records whose half is behind the half offset.  A crash
before the offsets are persisted re-checks some halves (harmless: commits
are idempotent by UNIQ_KEY, see above).

Halves another coordinator owns: a half that carries ``PROP_OWNED_HALF``
(the Kafka gateway's transactions park their records as halves marked so) is decided by
that coordinator alone: the check-back scan passes over it (it never holds
the half offset back and is never checked or discarded), and END_TRANSACTION
refuses it.  ``commit_message`` (with the properties that owner strips) and
``op_message`` are the shared building blocks of both commit paths.  Control
entries such owners write beside the records are ``rokka.compat.kafka_control``'s.
"""

from __future__ import annotations

import collections
import dataclasses
import enum
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import structlog
import trio
from rokka.core.model import (
    PROP_CHECK_IMMUNITY_TIME,
    PROP_PGROUP,
    PROP_REAL_QID,
    PROP_REAL_TOPIC,
    PROP_TAGS,
    PROP_TRANSACTION_CHECK_TIMES,
    PROP_UNIQ_KEY,
    PROP_WAIT,
    TOPIC_TRANS_HALF,
    TOPIC_TRANS_OP_HALF,
    TRANSACTION_COMMIT_TYPE,
    TRANSACTION_MASK,
    TRANSACTION_NOT_TYPE,
    TRANSACTION_ROLLBACK_TYPE,
    Message,
    StoredMessage,
)

if TYPE_CHECKING:
    from rokka.core.config import BrokerConfig
    from rokka.core.ports import ServicePorts

log = structlog.get_logger(__name__)

CHECK_GROUP = "CID_RMQ_SYS_TRANS"
OP_TAG = "d"
SCAN_BATCH = 64
#: Marks a half whose fate another coordinator decides (module doc); the value is that owner's (Kafka's:
#: "<producer id>:<epoch>").  The name is what the store holds since the first owner, Kafka, used it.
PROP_OWNED_HALF = "KAFKA_TXN"

# (producer group, the half copy to ask about) -> True if a producer was asked.
Checker = Callable[[str, StoredMessage], Awaitable[bool]]


class EndOutcome(enum.Enum):
    COMMITTED = "COMMITTED"
    ROLLED_BACK = "ROLLED_BACK"
    IGNORED = "IGNORED"                # UNKNOWN / invalid commitOrRollback: no reply
    NOT_FOUND = "NOT_FOUND"
    BAD_REQUEST = "BAD_REQUEST"        # group / offsets do not match the half
    STORE_FAILED = "STORE_FAILED"


@dataclass(frozen=True, slots=True)
class EndResult:
    outcome: EndOutcome
    remark: str = ""

    @property
    def ok(self) -> bool:
        return self.outcome in (EndOutcome.COMMITTED, EndOutcome.ROLLED_BACK)


@dataclass(frozen=True, slots=True)
class TransactionStatistics:
    committed: int
    rolled_back: int
    duplicate_commits: int
    checks_sent: int
    checks_unanswerable: int   # no live producer of the group
    discarded: int
    half_offset: int
    op_offset: int
    pending_halves: int        # half queue entries at or after half_offset


def commit_message(half: StoredMessage, strip: Iterable[str] = ()) -> Message:
    """The real message a COMMIT stores for ``half``: a RocketMQ half keeps all its properties, as in
    Java; an owner (module doc) names the properties its records drop in ``strip``."""
    props = dict(half.properties)
    topic, queue_id, sysflag = commit_destination(props, half.sysflag, strip)
    return Message(topic, queue_id, half.body, props, half.flag, sysflag, half.born_timestamp,
                   half.born_host, half.reconsume_times, half.commitlog_offset, half.store_timestamp)


def commit_destination(props: dict[str, str], sysflag: int, strip: Iterable[str] = ()) -> tuple[str, int, int]:
    """COMMIT's rule for a half's copy: (its topic, queue id, sysflag); ``props`` (a copy of the half's)
    loses the names in ``strip``.  Raises KeyError / ValueError for a half without a real destination."""
    topic = props[PROP_REAL_TOPIC]
    queue_id = int(props[PROP_REAL_QID])
    for name in strip:
        props.pop(name, None)
    return topic, queue_id, (sysflag & ~TRANSACTION_MASK) | TRANSACTION_COMMIT_TYPE


def owned_elsewhere(half: StoredMessage) -> bool:
    """True for a half another coordinator owns (never checked back, refused by END_TRANSACTION)."""
    return PROP_OWNED_HALF in half.properties


def op_message(half: StoredMessage, born_ms: int, born_host: tuple[str, int]) -> Message:
    """The op record that marks ``half`` as decided (commit or rollback alike)."""
    return Message(TOPIC_TRANS_OP_HALF, half.queue_id, str(half.queue_offset).encode("ascii"),
                   {PROP_TAGS: OP_TAG}, born_timestamp=born_ms, born_host=born_host)


def _int(value: str | None, default: int = 0) -> int:
    try:
        return int(value) if value else default
    except ValueError:
        return default


class TransactionService:
    def __init__(self, ports: ServicePorts, cfg: BrokerConfig, *, clock: Callable[[], int] | None = None) -> None:
        self.ports = ports
        self.timeout_ms = cfg.transaction_timeout
        self.check_interval_ms = cfg.transaction_check_interval
        self.check_max = cfg.transaction_check_max
        self.clock = clock or (lambda: int(time.time() * 1000))
        self._done: set[int] = set()   # half queue offsets with an op record (at or after half_offset)
        self._op_half: dict[int, int] = {}  # op queue offset -> half queue offset, not yet passed
        self._op_scanned = -1
        self._round_lock = trio.Lock()
        self._wake = trio.Event()
        self.committed = self.rolled_back = self.duplicates = 0
        self.checks_sent = self.unanswerable = self.discarded = 0

    # -- END_TRANSACTION -----------------------------------------------------------
    async def end_transaction(self, *, producer_group: str, tran_state_table_offset: int,
                              commitlog_offset: int, commit_or_rollback: int,
                              from_check: bool = False) -> EndResult:
        """Apply a producer's decision.  See the module docstring for the rules."""
        if commit_or_rollback not in (TRANSACTION_COMMIT_TYPE, TRANSACTION_ROLLBACK_TYPE):
            if commit_or_rollback == TRANSACTION_NOT_TYPE:
                log.info("txn.state_unknown_awaiting_check", group=producer_group,
                         commitlog_offset=commitlog_offset, from_check=from_check)
            else:
                log.warning("txn.invalid_commit_or_rollback_ignored",
                            value=commit_or_rollback, group=producer_group)
            return EndResult(EndOutcome.IGNORED)
        half = self.ports.store.read_message(commitlog_offset)
        if half is None or half.topic != TOPIC_TRANS_HALF:
            return EndResult(EndOutcome.NOT_FOUND, "Find prepared transaction message failed")
        bad = self._validate(half, producer_group, tran_state_table_offset, commitlog_offset)
        if bad:
            return EndResult(EndOutcome.BAD_REQUEST, bad)
        if commit_or_rollback == TRANSACTION_COMMIT_TYPE:
            failure = await self._commit(half)
            if failure is not None:
                return failure
        else:
            self.rolled_back += 1
        if not await self._write_op(half):
            return EndResult(EndOutcome.STORE_FAILED, "write the transaction op record failed")
        committed = commit_or_rollback == TRANSACTION_COMMIT_TYPE
        outcome = EndOutcome.COMMITTED if committed else EndOutcome.ROLLED_BACK
        log.info("txn.ended", outcome=outcome.value, group=producer_group, from_check=from_check,
                 uniq_key=half.properties.get(PROP_UNIQ_KEY), half_offset=half.queue_offset)
        return EndResult(outcome)

    @staticmethod
    def _validate(half: StoredMessage, group: str, queue_offset: int, commitlog_offset: int) -> str:
        if owned_elsewhere(half):
            return "The prepared message is decided by another transaction coordinator"
        if half.properties.get(PROP_PGROUP) != group:
            return "The producer group wrong"
        if half.queue_offset != queue_offset:
            return "The transaction state table offset wrong"
        if half.commitlog_offset != commitlog_offset:
            return "The commit log offset wrong"
        if PROP_REAL_TOPIC not in half.properties or _int(half.properties.get(PROP_REAL_QID), -1) < 0:
            return "The prepared message has no real topic or queue"
        return ""

    async def _commit(self, half: StoredMessage) -> EndResult | None:
        msg = commit_message(half)
        if self._already_committed(half, msg.topic):
            self.duplicates += 1
            log.info("txn.duplicate_commit_ignored",
                     uniq_key=half.properties.get(PROP_UNIQ_KEY))
            return None
        # the send pipeline (a DELAY still parks it), but WAIT stays: Java stores the half's properties
        wait = msg.properties.get(PROP_WAIT)
        msg = self.ports.prepare(msg)
        if wait is not None:
            msg.properties[PROP_WAIT] = wait
        result = await self.ports.put_prepared([msg])
        if not result.ok:
            log.warning("txn.commit_refused_by_store", status=result.status.value,
                        remark=result.remark)
            return EndResult(EndOutcome.STORE_FAILED, result.remark or result.status.value)
        self.committed += 1
        return None

    def _already_committed(self, half: StoredMessage, topic: str) -> bool:
        uniq = half.properties.get(PROP_UNIQ_KEY)
        if not uniq:
            return False
        store = self.ports.store
        for off in store.query_by_key(topic, uniq, 16, 0, self.clock() + 86_400_000):
            m = store.read_message(off)
            if m is not None and (m.sysflag & TRANSACTION_MASK) == TRANSACTION_COMMIT_TYPE \
                    and m.born_timestamp == half.born_timestamp:
                return True
        return False

    async def _write_op(self, half: StoredMessage) -> bool:
        op = op_message(half, self.clock(), self.ports.store_host)
        result = await self.ports.put_prepared([op])
        if result.ok:
            self._done.add(half.queue_offset)
        else:
            log.error("txn.op_record_not_written", status=result.status.value)
        return result.ok

    # -- check-back ----------------------------------------------------------------
    @property
    def half_offset(self) -> int:
        store = self.ports.store
        off = self.ports.offsets.query(CHECK_GROUP, TOPIC_TRANS_HALF, 0)
        return max(off if off is not None else 0, store.min_offset(TOPIC_TRANS_HALF, 0))

    @property
    def op_offset(self) -> int:
        store = self.ports.store
        off = self.ports.offsets.query(CHECK_GROUP, TOPIC_TRANS_OP_HALF, 0)
        return max(off if off is not None else 0, store.min_offset(TOPIC_TRANS_OP_HALF, 0))

    def wake(self) -> None:
        """Run a check round now (tests, admin)."""
        self._wake.set()

    async def run(self, checker: Checker, *,
                  task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Check rounds every ``check_interval_ms`` until cancelled."""
        task_status.started()
        while True:
            with trio.move_on_after(self.check_interval_ms / 1000):
                await self._wake.wait()
            self._wake = trio.Event()
            if self.ports.store.replica_only:   # a slave: only its master checks (Java runs the check service
                continue                        # on a master only); a promoted slave checks from then on
            try:
                await self.check_round(checker)
            except Exception:  # noqa: BLE001 - one bad round must not stop the service
                log.exception("txn.check_round_failed")

    async def check_round(self, checker: Checker) -> int:
        """One scan of the half queue; returns the number of checks handed to ``checker``."""
        async with self._round_lock:
            self._load_ops()
            start = self.half_offset
            end = self.ports.store.max_offset(TOPIC_TRANS_HALF, 0)
            sent = 0
            unanswered: collections.Counter[str] = collections.Counter()

            async def hand_over(group: str, copy: StoredMessage) -> None:
                # Each check leaves as soon as its half is put back (Java's resolveHalfMsg), so a round
                # over many halves never holds their bodies: memory stays one message, not the queue.
                nonlocal sent
                if await checker(group, copy):
                    sent += 1
                else:
                    self.unanswerable += 1
                    unanswered[group] += 1

            discarded = self.discarded
            new_half = await self._scan(start, end, hand_over)
            if new_half != start:
                self._advance(new_half)
            self.checks_sent += sent
            # One line per group and round, not one per half: a client that leaves thousands of halves
            # behind must not turn every round into thousands of log lines (a fuzz run wrote 400 MiB).
            for group, n in unanswered.items():
                log.warning("txn.no_producer_to_check", group=group, halves=n)
            if self.discarded != discarded:
                log.warning("txn.halves_discarded_after_checks", halves=self.discarded - discarded,
                            checks=self.check_max)
            return sent

    def _load_ops(self) -> None:
        store = self.ports.store
        off = max(self.op_offset, self._op_scanned + 1)
        end = store.max_offset(TOPIC_TRANS_OP_HALF, 0)
        while off < end:
            units = store.cq_units(TOPIC_TRANS_OP_HALF, 0, off, SCAN_BATCH)
            if not units:
                break
            for u in units:
                m = store.read_message(u.commitlog_offset)
                half_q = -1  # malformed or foreign records never hold the op offset back
                if m is not None and m.properties.get(PROP_TAGS) == OP_TAG:
                    try:
                        half_q = int(m.body.decode("ascii"))
                    except (UnicodeDecodeError, ValueError):
                        log.warning("txn.malformed_op_record_ignored", op_offset=u.queue_offset)
                    else:
                        self._done.add(half_q)
                self._op_half[u.queue_offset] = half_q
                self._op_scanned = u.queue_offset
            off = units[-1].queue_offset + 1

    async def _scan(self, start: int, end: int,
                    hand_over: Callable[[str, StoredMessage], Awaitable[None]]) -> int:
        """Walk the half queue from ``start`` to ``end``: discard halves checked too often, put back and
        hand over the ones due for a check; returns where the next round starts."""
        store = self.ports.store
        pos = start
        now = self.clock()
        while pos < end:
            units = store.cq_units(TOPIC_TRANS_HALF, 0, pos, min(SCAN_BATCH, end - pos))
            if not units:
                break
            await trio.lowlevel.checkpoint()    # a long round leaves the event loop to the clients
            for u in units:
                if u.queue_offset not in self._done:
                    half = store.read_message(u.commitlog_offset)
                    if half is not None and not owned_elsewhere(half):
                        action = self._classify(half, now)
                        if action == "young":
                            return pos
                        if action == "discard":
                            await self._discard(half)
                        elif action == "check":
                            copy = await self._put_back(half)
                            if copy is None:
                                return pos
                            await hand_over(half.properties.get(PROP_PGROUP, ""), copy)
                pos = u.queue_offset + 1
        return pos

    def _classify(self, half: StoredMessage, now: int) -> str:
        if _int(half.properties.get(PROP_TRANSACTION_CHECK_TIMES)) >= self.check_max:
            return "discard"
        immunity_s = _int(half.properties.get(PROP_CHECK_IMMUNITY_TIME), -1)
        timeout = immunity_s * 1000 if immunity_s >= 0 else self.timeout_ms
        if now - half.born_timestamp < timeout:
            return "young"
        return "check"

    async def _discard(self, half: StoredMessage) -> None:
        self.discarded += 1     # logged once per round (check_round)
        log.debug("txn.half_discarded_after_checks",
                  group=half.properties.get(PROP_PGROUP), uniq_key=half.properties.get(PROP_UNIQ_KEY),
                  checks=self.check_max, real_topic=half.properties.get(PROP_REAL_TOPIC))
        await self._write_op(half)

    async def _put_back(self, half: StoredMessage) -> StoredMessage | None:
        """Re-append the half with TRANSACTION_CHECK_TIMES + 1; return the stored copy."""
        props = dict(half.properties)
        props[PROP_TRANSACTION_CHECK_TIMES] = str(_int(props.get(PROP_TRANSACTION_CHECK_TIMES)) + 1)
        copy = Message(TOPIC_TRANS_HALF, half.queue_id, half.body, props, half.flag, half.sysflag,
                       half.born_timestamp, half.born_host, half.reconsume_times)
        result = await self.ports.put_prepared([copy])
        if not result.ok:
            log.warning("txn.half_reput_failed", status=result.status.value)
            return None
        a = result.appended[0]
        return dataclasses.replace(half, properties=props, queue_offset=a.queue_offset,
                                   commitlog_offset=a.commitlog_offset, store_timestamp=a.store_timestamp,
                                   size=a.size, store_host=self.ports.store_host)

    def _advance(self, new_half: int) -> None:
        offsets = self.ports.offsets
        offsets.commit(CHECK_GROUP, TOPIC_TRANS_HALF, 0, new_half)
        self._done = {q for q in self._done if q >= new_half}
        op_off = self.op_offset
        while op_off in self._op_half and self._op_half[op_off] < new_half:
            del self._op_half[op_off]
            op_off += 1
        offsets.commit(CHECK_GROUP, TOPIC_TRANS_OP_HALF, 0, op_off)
        offsets.persist()

    def statistics(self) -> TransactionStatistics:
        half = self.half_offset
        pending = max(0, self.ports.store.max_offset(TOPIC_TRANS_HALF, 0) - half)
        return TransactionStatistics(self.committed, self.rolled_back, self.duplicates, self.checks_sent,
                                     self.unanswerable, self.discarded, half, self.op_offset, pending)
