"""KafkaTxnCoordinator: state table, commit/abort on half messages, fencing, timeout, restart.

Rules: a tmp_path DiskStore under a real ``Broker`` and a real
``ProducerStateManager``; the clock is injected (timeouts without sleeping);
every async test is bounded by ``trio.fail_after``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import trio
from rokka.compat.kafka_control import PROP_KAFKA_CTRL
from rokka.core.broker import Broker
from rokka.core.config import BrokerConfig
from rokka.core.model import TOPIC_TRANS_HALF, TOPIC_TRANS_OP_HALF, TRANSACTION_COMMIT_TYPE, Message, StoredMessage
from rokka.core.storage.engine import DiskStore
from rokka.core.txn import PROP_OWNED_HALF as PROP_KAFKA_TXN
from rokka.core.txn import EndOutcome
from rokka.gateway.kafka.producers.state import ProducerStateManager
from rokka.gateway.kafka.txn.coordinator import KafkaTxnCoordinator
from rokka.gateway.kafka.txn.states import TRANSITIONS, Txn, TxnEvent, TxnOutcome, TxnState, next_state

OK = TxnOutcome.OK


class Clock:
    def __init__(self) -> None:
        self.now = 1_700_000_000_000

    def __call__(self) -> int:
        return self.now


class Node:
    """Broker + producer state + coordinator on one data dir (re-openable = a restart)."""

    def __init__(self, root: Path, clock: Clock) -> None:
        cfg = BrokerConfig(store_path_root_dir=str(root))
        self.broker = Broker(cfg, store=DiskStore(cfg.store_config()).open())
        for t in ("A", "B"):
            self.broker.topics.ensure(t, 2)
        config_dir = root / "config"
        self.producers = ProducerStateManager(config_dir)
        self.txns = KafkaTxnCoordinator(self.broker, self.producers, config_dir, clock_ms=clock)

    async def init(self, tid: str, timeout_ms: int = 60_000) -> tuple[int, int]:
        assert await self.txns.before_init(tid) is OK
        r = await self.producers.init_producer_id(tid, timeout_ms)
        self.txns.after_init(tid, r.producer_id, r.epoch, timeout_ms)
        return r.producer_id, r.epoch

    def produce(self, pid: int, epoch: int, topic: str, partition: int, values: list[bytes]) -> TxnOutcome:
        verdict = self.txns.check_produce(pid, epoch, topic, partition)
        if verdict is OK:
            msgs = [Message(topic, partition, v, {"KAFKA_HEADERS": "[]"}) for v in values]
            assert self.txns.append_halves(pid, epoch, msgs).ok
        return verdict

    def queue(self, topic: str, partition: int) -> list[StoredMessage]:
        """Everything in the queue, Kafka control entries (markers, placeholders) included."""
        store = self.broker.store
        return [m for u in store.cq_units(topic, partition, 0, 1000)
                if (m := store.read_message(u.commitlog_offset)) is not None]

    def visible(self, topic: str, partition: int) -> list[StoredMessage]:
        """What a RocketMQ reader sees: the queue less its Kafka control entries."""
        return [m for m in self.queue(topic, partition) if PROP_KAFKA_CTRL not in m.properties]

    def controls(self, topic: str, partition: int) -> list[tuple[int, str]]:
        """(queue offset, KAFKA_CTRL value) of the queue's control entries."""
        return [(m.queue_offset, m.properties[PROP_KAFKA_CTRL]) for m in self.queue(topic, partition)
                if PROP_KAFKA_CTRL in m.properties]

    def values(self, topic: str, partition: int) -> list[bytes]:
        return [m.body for m in self.visible(topic, partition)]

    def close(self) -> None:
        self.txns.save()
        self.producers.close()
        self.broker.close()

    async def prepared(self, tid: str, state: TxnState, marks: dict[tuple[str, int], int]) -> Txn:
        """The transaction ``tid`` as a coordinator leaves it mid-end: ``state`` (PrepareCommit /
        PrepareAbort) and ``marks`` persisted, no marker written yet."""
        txn = self.txns.get(tid)
        assert txn is not None
        txn.state = state
        txn.marks = marks
        await self.txns.persist()
        return txn

    def crash(self) -> None:
        """SIGKILL: nothing more reaches the state file, the store and producer state are dropped."""
        self.txns._path = None      # noqa: SLF001
        self.producers.close()
        self.broker.close()


@asynccontextmanager
async def opened(root: Path, clock: Clock | None = None) -> AsyncIterator[Node]:
    """A node on ``root`` (a fresh clock unless given) for at most 10 s, closed (state saved) afterwards."""
    n = Node(root, clock or Clock())
    try:
        with trio.fail_after(10):
            yield n
    finally:
        n.close()


@asynccontextmanager
async def restarted(root: Path, clock: Clock) -> AsyncIterator[Node]:
    """The node re-opened on ``root`` with its coordinator running (``run`` started: its first tick done)."""
    n = Node(root, clock)
    try:
        with trio.fail_after(10):
            async with trio.open_nursery() as nursery:
                await nursery.start(n.txns.run)
                yield n
                nursery.cancel_scope.cancel()
    finally:
        n.close()


def test_state_table_is_total_for_the_documented_events() -> None:
    assert next_state(TxnState.EMPTY, TxnEvent.ADD) is TxnState.ONGOING
    assert next_state(TxnState.ONGOING, TxnEvent.COMMIT) is TxnState.PREPARE_COMMIT
    assert next_state(TxnState.ONGOING, TxnEvent.TIMEOUT) is TxnState.PREPARE_ABORT
    assert next_state(TxnState.ONGOING, TxnEvent.INIT) is TxnState.PREPARE_ABORT
    assert next_state(TxnState.PREPARE_COMMIT, TxnEvent.COMPLETE) is TxnState.COMPLETE_COMMIT
    assert next_state(TxnState.EMPTY, TxnEvent.COMMIT) is TxnOutcome.INVALID_TXN_STATE
    assert next_state(TxnState.PREPARE_COMMIT, TxnEvent.ADD) is TxnOutcome.CONCURRENT_TRANSACTIONS
    assert next_state(TxnState.PREPARE_COMMIT, TxnEvent.ABORT) is TxnOutcome.INVALID_TXN_STATE
    assert next_state(TxnState.COMPLETE_COMMIT, TxnEvent.COMMIT) is TxnState.COMPLETE_COMMIT
    assert next_state(TxnState.COMPLETE_COMMIT, TxnEvent.ABORT) is TxnOutcome.INVALID_TXN_STATE
    assert next_state(TxnState.EMPTY, TxnEvent.COMPLETE) is TxnOutcome.INVALID_TXN_STATE  # not listed
    for s in TxnState:
        for e in (TxnEvent.ADD, TxnEvent.COMMIT, TxnEvent.ABORT, TxnEvent.INIT):
            assert (s, e) in TRANSITIONS, (s, e)


async def test_commit_makes_everything_visible_at_once_and_applies_offsets(tmp_path: Path) -> None:
    async with opened(tmp_path) as n:
        pid, ep = await n.init("t1")
        assert await n.txns.add_partitions("t1", pid, ep, [("B", 0), ("B", 1)]) is OK
        assert await n.txns.add_partitions("t1", pid, ep, [], groups=["g"]) is OK
        assert n.produce(pid, ep, "B", 0, [b"a", b"b"]) is OK
        assert n.produce(pid, ep, "B", 1, [b"c"]) is OK
        assert n.produce(pid, ep, "A", 0, [b"x"]) is TxnOutcome.INVALID_TXN_STATE   # not added
        assert await n.txns.txn_offset_commit("t1", pid, ep, "g", [("A", 0, 7)]) is OK
        assert n.txns.pending_offset("g", "A", 0)
        assert n.values("B", 0) == [] and n.values("B", 1) == []
        assert n.broker.store.max_offset(TOPIC_TRANS_HALF, 0) == 3
        assert n.broker.offsets.query("g", "A", 0) is None
        assert await n.txns.end_txn("t1", pid, ep, True) is OK
        assert n.values("B", 0) == [b"a", b"b"] and n.values("B", 1) == [b"c"]
        m = n.visible("B", 0)[0]
        assert PROP_KAFKA_TXN not in m.properties and "TRAN_MSG" not in m.properties
        assert m.sysflag & TRANSACTION_COMMIT_TYPE
        assert n.broker.store.max_offset(TOPIC_TRANS_OP_HALF, 0) == 3
        assert n.broker.offsets.query("g", "A", 0) == 7 and not n.txns.pending_offset("g", "A", 0)
        # a retried EndTxn(commit) succeeds again and stores nothing; the opposite outcome is refused
        assert await n.txns.end_txn("t1", pid, ep, True) is OK
        assert await n.txns.end_txn("t1", pid, ep, False) is TxnOutcome.INVALID_TXN_STATE
        assert n.values("B", 0) == [b"a", b"b"]
        assert n.txns.statistics().records_committed == 3


async def test_abort_writes_op_records_only_and_drops_offsets(tmp_path: Path) -> None:
    async with opened(tmp_path) as n:
        pid, ep = await n.init("t1")
        assert await n.txns.add_partitions("t1", pid, ep, [("B", 0)], groups=["g"]) is OK
        assert n.produce(pid, ep, "B", 0, [b"gone"]) is OK
        assert await n.txns.txn_offset_commit("t1", pid, ep, "g", [("A", 0, 3)]) is OK
        assert await n.txns.end_txn("t1", pid, ep, False) is OK
        assert n.values("B", 0) == []
        assert n.broker.store.max_offset(TOPIC_TRANS_OP_HALF, 0) == 1
        assert n.broker.offsets.query("g", "A", 0) is None
        # the next transaction of the same producer works
        assert await n.txns.add_partitions("t1", pid, ep, [("B", 0)]) is OK
        assert n.produce(pid, ep, "B", 0, [b"kept"]) is OK
        assert await n.txns.end_txn("t1", pid, ep, True) is OK
        assert n.values("B", 0) == [b"kept"]


async def test_refusals_fencing_and_init_aborting_an_open_transaction(tmp_path: Path) -> None:
    async with opened(tmp_path) as n:
        unknown = await n.txns.add_partitions("nope", 1, 0, [("B", 0)])
        assert unknown is TxnOutcome.UNKNOWN_TRANSACTIONAL_ID
        pid, ep = await n.init("t1")
        assert await n.txns.end_txn("t1", pid, ep, True) is TxnOutcome.INVALID_TXN_STATE       # Empty
        assert await n.txns.add_partitions("t1", pid + 1, ep, [("B", 0)]) is \
            TxnOutcome.INVALID_PRODUCER_ID_MAPPING
        assert await n.txns.add_partitions("t1", pid, ep, [("B", 0)]) is OK
        assert await n.txns.txn_offset_commit("t1", pid, ep, "g", [("A", 0, 1)]) is \
            TxnOutcome.INVALID_TXN_STATE  # no AddOffsets
        assert n.produce(pid, ep, "B", 0, [b"zombie"]) is OK
        pid2, ep2 = await n.init("t1")         # a new instance: the open transaction is aborted
        assert (pid2, ep2) == (pid, ep + 1)
        assert n.values("B", 0) == []
        assert n.txns.get("t1").state is TxnState.EMPTY  # type: ignore[union-attr]
        assert n.produce(pid, ep, "B", 0, [b"late"]) is TxnOutcome.INVALID_PRODUCER_EPOCH
        assert await n.txns.end_txn("t1", pid, ep, True) is TxnOutcome.PRODUCER_FENCED
        assert await n.txns.add_partitions("t1", pid, ep, [("B", 0)]) is TxnOutcome.PRODUCER_FENCED
        assert n.txns.statistics().aborted == 1


async def test_timeout_aborts_and_fences(tmp_path: Path) -> None:
    clock = Clock()
    async with opened(tmp_path, clock) as n:
        pid, ep = await n.init("t1", timeout_ms=5000)
        assert await n.txns.add_partitions("t1", pid, ep, [("B", 0)]) is OK
        assert n.produce(pid, ep, "B", 0, [b"slow"]) is OK
        clock.now += 5000
        await n.txns.tick()
        assert n.txns.get("t1").state is TxnState.ONGOING  # type: ignore[union-attr]
        clock.now += 1
        await n.txns.tick()
        assert n.txns.get("t1").state is TxnState.COMPLETE_ABORT  # type: ignore[union-attr]
        assert n.values("B", 0) == []
        assert await n.txns.end_txn("t1", pid, ep, True) is TxnOutcome.PRODUCER_FENCED
        assert n.producers.transactional_entry("t1").epoch == ep + 1  # type: ignore[union-attr]
        assert n.txns.statistics().timed_out == 1


async def test_rocketmq_side_ignores_kafka_halves(tmp_path: Path) -> None:
    async with opened(tmp_path) as n:
        pid, ep = await n.init("t1")
        assert await n.txns.add_partitions("t1", pid, ep, [("B", 0)]) is OK
        assert n.produce(pid, ep, "B", 0, [b"k"]) is OK
        half = n.broker.store.read_message(next(iter(n.txns.get("t1").halves)))  # type: ignore[union-attr]
        assert half is not None and half.properties[PROP_KAFKA_TXN] == f"{pid}:{ep}"
        checked: list[StoredMessage] = []

        async def checker(group: str, copy: StoredMessage) -> bool:
            checked.append(copy)
            return True

        n.broker.transactions.timeout_ms = 0
        assert await n.broker.transactions.check_round(checker) == 0 and checked == []
        assert n.broker.transactions.half_offset == 1          # passed over, not re-put
        res = await n.broker.transactions.end_transaction(
            producer_group="", tran_state_table_offset=half.queue_offset,
            commitlog_offset=half.commitlog_offset, commit_or_rollback=TRANSACTION_COMMIT_TYPE)
        assert res.outcome is EndOutcome.BAD_REQUEST
        assert n.values("B", 0) == []
        assert await n.txns.end_txn("t1", pid, ep, True) is OK
        assert n.values("B", 0) == [b"k"]


async def test_restart_resumes_ongoing_and_completes_prepared(tmp_path: Path) -> None:
    clock = Clock()
    n = Node(tmp_path, clock)
    with trio.fail_after(10):
        pid, ep = await n.init("open")
        assert await n.txns.add_partitions("open", pid, ep, [("B", 0)], groups=["g"]) is OK
        assert n.produce(pid, ep, "B", 0, [b"o1"]) is OK
        assert await n.txns.txn_offset_commit("open", pid, ep, "g", [("A", 1, 5)]) is OK
        assert n.produce(pid, ep, "B", 0, [b"o2"]) is OK       # never persisted by the coordinator
        qid, qep = await n.init("prep")
        assert await n.txns.add_partitions("prep", qid, qep, [("B", 1)]) is OK
        assert n.produce(qid, qep, "B", 1, [b"p1", b"p2", b"p3"]) is OK
        # Crash in the middle of a commit: PrepareCommit is durable, one record already re-put.
        txn = await n.prepared("prep", TxnState.PREPARE_COMMIT, {("B", 1): 0})
        from rokka.core.txn import commit_message
        from rokka.gateway.kafka.txn.completion import KAFKA_HALF_ONLY

        first = n.broker.store.read_message(min(txn.halves))
        assert first is not None and n.broker.append([commit_message(first, KAFKA_HALF_ONLY)]).ok
    n.crash()

    async with restarted(tmp_path, clock) as n:
        assert n.values("B", 1) == [b"p1", b"p2", b"p3"]            # completed once, no duplicate
        assert n.txns.get("prep").state is TxnState.COMPLETE_COMMIT  # type: ignore[union-attr]
        assert n.txns.get("open").state is TxnState.ONGOING        # type: ignore[union-attr]
        assert n.values("B", 0) == []
        assert await n.txns.end_txn("open", pid, ep, True) is OK
        assert n.values("B", 0) == [b"o1", b"o2"]                   # the unpersisted half too
        assert n.broker.offsets.query("g", "A", 1) == 5


async def test_restart_then_timeout_aborts_open_transaction(tmp_path: Path) -> None:
    clock = Clock()
    n = Node(tmp_path, clock)
    with trio.fail_after(10):
        pid, ep = await n.init("t1", timeout_ms=10_000)
        assert await n.txns.add_partitions("t1", pid, ep, [("B", 0)]) is OK
        assert n.produce(pid, ep, "B", 0, [b"x"]) is OK
    n.close()
    clock.now += 20_000
    async with restarted(tmp_path, clock) as n:      # its first tick finds the expired transaction
        while n.txns.get("t1").state is not TxnState.COMPLETE_ABORT:  # type: ignore[union-attr]  # noqa: ASYNC110
            await trio.sleep(0.01)
        assert n.txns.statistics().timed_out == 1
        assert n.values("B", 0) == []
        assert await n.txns.end_txn("t1", pid, ep, True) is TxnOutcome.PRODUCER_FENCED


async def test_idle_transactional_ids_expire_and_survive_restart_until_then(tmp_path: Path) -> None:
    clock = Clock()
    async with opened(tmp_path, clock) as n:
        pid, ep = await n.init("idle")
        assert await n.txns.add_partitions("idle", pid, ep, [("A", 0)]) is OK
        assert await n.txns.end_txn("idle", pid, ep, True) is OK          # CompleteCommit
        busy_pid, busy_ep = await n.init("busy")
        assert await n.txns.add_partitions("busy", busy_pid, busy_ep, [("A", 1)]) is OK
        clock.now += 7 * 24 * 3600 * 1000
        await n.txns.tick()
        assert n.txns.get("idle") is not None                            # exactly 7 days: kept
    async with opened(tmp_path, clock) as n:            # a restart: the timestamps persist
        clock.now += 1
        await n.txns.tick()
        assert n.txns.get("idle") is None
        assert n.producers.transactional_entry("idle") is None
        assert n.txns.get("busy") is not None                           # Ongoing: timed out, not forgotten
        again, epoch = await n.init("idle")
        assert (again, epoch) != (pid, ep) and epoch == 0                 # a fresh producer id
        assert await n.txns.end_txn("idle", pid, ep, True) is TxnOutcome.INVALID_PRODUCER_ID_MAPPING


async def test_an_id_being_initialised_again_is_not_expired_under_it(tmp_path: Path) -> None:
    clock = Clock()
    async with opened(tmp_path, clock) as n:
        await n.init("again")
        clock.now += 7 * 24 * 3600 * 1000 + 1
        assert await n.txns.before_init("again") is OK     # InitProducerId started, then a tick
        await n.txns.tick()
        assert n.txns.get("again") is not None and n.producers.transactional_entry("again") is not None


async def test_markers_and_placeholders_take_kafkas_offsets(tmp_path: Path) -> None:
    """Commit: records then one COMMIT marker per partition of the transaction (an added partition
    without records too); abort: one placeholder per aborted record then the ABORT marker.  The
    queue offsets are Kafka's; RocketMQ readers (``visible``) see the committed records only."""
    async with opened(tmp_path) as n:
        pid, ep = await n.init("t1")
        assert await n.txns.add_partitions("t1", pid, ep, [("A", 0), ("A", 1)]) is OK
        assert n.produce(pid, ep, "A", 0, [b"a", b"b", b"c"]) is OK
        assert await n.txns.end_txn("t1", pid, ep, True) is OK
        assert n.controls("A", 0) == [(3, f"C:{pid}:{ep}")]
        assert n.controls("A", 1) == [(0, f"C:{pid}:{ep}")]
        assert await n.txns.add_partitions("t1", pid, ep, [("A", 0)]) is OK
        assert n.produce(pid, ep, "A", 0, [b"x", b"y"]) is OK
        assert await n.txns.end_txn("t1", pid, ep, False) is OK
        assert n.controls("A", 0) == [(3, f"C:{pid}:{ep}"), (4, f"X:{pid}:{ep}"), (5, f"X:{pid}:{ep}"),
                                      (6, f"A:{pid}:{ep}")]
        assert n.broker.store.max_offset("A", 0) == 7          # Kafka: 3 + marker + 2 + marker
        assert n.values("A", 0) == [b"a", b"b", b"c"]
        placeholders = [m for m in n.queue("A", 0) if m.properties.get(PROP_KAFKA_CTRL, "").startswith("X")]
        assert all(m.body == b"" for m in placeholders)
        assert n.txns.statistics().records_committed == 3


async def test_restart_mid_abort_neither_loses_nor_doubles_markers(tmp_path: Path) -> None:
    clock = Clock()
    n = Node(tmp_path, clock)
    with trio.fail_after(10):
        pid, ep = await n.init("t1")
        assert await n.txns.add_partitions("t1", pid, ep, [("B", 0), ("B", 1)]) is OK
        assert n.produce(pid, ep, "B", 0, [b"p1", b"p2"]) is OK
        # crash mid-abort: one placeholder and B/1's marker stored
        txn = await n.prepared("t1", TxnState.PREPARE_ABORT, {("B", 0): 0, ("B", 1): 0})
        from rokka.compat.kafka_control import CTRL_ABORT, CTRL_ABORTED, control_message

        first = n.broker.store.read_message(min(txn.halves))
        assert first is not None
        assert n.broker.append([control_message("B", 0, CTRL_ABORTED, pid, ep, 0, ("127.0.0.1", 0), half=first),
                                control_message("B", 1, CTRL_ABORT, pid, ep, 0, ("127.0.0.1", 0))],
                               prepared=True).ok
    n.crash()

    async with restarted(tmp_path, clock) as n:
        assert n.txns.get("t1").state is TxnState.COMPLETE_ABORT  # type: ignore[union-attr]
        assert n.controls("B", 0) == [(0, f"X:{pid}:{ep}"), (1, f"X:{pid}:{ep}"), (2, f"A:{pid}:{ep}")]
        assert n.controls("B", 1) == [(0, f"A:{pid}:{ep}")]
        assert n.values("B", 0) == [] and n.values("B", 1) == []


async def test_rocketmq_reads_drop_control_entries(tmp_path: Path) -> None:
    """``without_control`` (a PULL body of runs) and ``visible_result`` (a filtered read) keep the
    committed records only; a read of control entries alone is NO_MATCHED_MESSAGE past them."""
    from rokka.compat.kafka_control import visible_result, without_control
    from rokka.core.filter import ExpressionFilter, build_subscription
    from rokka.core.storage.api import GetStatus
    from rokka.core.storage.layout import iter_records

    async with opened(tmp_path) as n:
        pid, ep = await n.init("t1")
        assert await n.txns.add_partitions("t1", pid, ep, [("A", 0)]) is OK
        assert n.produce(pid, ep, "A", 0, [b"x"]) is OK
        assert await n.txns.end_txn("t1", pid, ep, False) is OK          # offsets 0 (X), 1 (ABORT)
        assert await n.txns.add_partitions("t1", pid, ep, [("A", 0)]) is OK
        assert n.produce(pid, ep, "A", 0, [b"a", b"b"]) is OK
        assert await n.txns.end_txn("t1", pid, ep, True) is OK           # 2, 3, 4 (COMMIT)
        store = n.broker.store
        runs, nxt = store.get_runs("A", 0, 0, 32, 1 << 20)
        body, dropped = without_control(b"".join(r.data for r in runs))
        assert (nxt, dropped) == (5, 3)
        assert [(m.queue_offset, m.body) for m in iter_records(body)] == [(2, b"a"), (3, b"b")]
        only = visible_result(store.get_messages("A", 0, 0, 2, 1 << 20, None))
        assert (only.status, only.records, only.next_begin_offset) == (GetStatus.NO_MATCHED_MESSAGE, (), 2)
        sql = ExpressionFilter(build_subscription("A", "TRUE", "SQL92"))
        res = visible_result(store.get_messages("A", 0, 0, 32, 1 << 20, sql))
        assert res.status is GetStatus.FOUND and res.queue_offsets == (2, 3)
        assert without_control(b"plain bytes") == (b"plain bytes", 0)


async def test_halves_taken_as_a_run_commit_as_runs_once_across_a_crash(tmp_path: Path) -> None:
    # a batch's halves stored as one run (append_halves of a UniformBatch), the commit's copies written as
    # runs, then a crash before the markers and op records: the restart completes the commit with every
    # copy once, one marker per partition and one op record per half
    from rokka.core.model import UniformBatch
    from rokka.core.record import record_view
    from rokka.core.txn_runs import commit_runs
    from rokka.gateway.kafka.txn.completion import KAFKA_HALF_ONLY

    clock = Clock()
    n = Node(tmp_path, clock)
    with trio.fail_after(10):
        pid, ep = await n.init("t1")
        assert await n.txns.add_partitions("t1", pid, ep, [("B", 0), ("B", 1)]) is OK
        for partition, values in ((0, [b"a", b"b", b"c"]), (1, [b"d"])):
            assert n.txns.check_produce(pid, ep, "B", partition) is OK
            run = UniformBatch("B", partition, values, 1_700_000_000_000, {}, keys=[f"k{v.decode()}" for v in values])
            assert n.txns.append_halves(pid, ep, run).ok
        assert n.broker.store.max_offset(TOPIC_TRANS_HALF, 0) == 4 and n.values("B", 0) == []
        txn = await n.prepared("t1", TxnState.PREPARE_COMMIT, {("B", 0): 0, ("B", 1): 0})
        runs = commit_runs([record_view(n.broker.store.read_record(c)) for c in sorted(txn.halves)],  # type: ignore[arg-type]
                           KAFKA_HALF_ONLY)
        assert runs is not None and [len(r) for r in runs] == [3, 1]
        assert all(r.ok for r in n.broker.append_uniforms(runs, stamp_cluster=False))
    n.crash()

    async with restarted(tmp_path, clock) as n:
        assert n.txns.get("t1").state is TxnState.COMPLETE_COMMIT  # type: ignore[union-attr]
        assert n.values("B", 0) == [b"a", b"b", b"c"] and n.values("B", 1) == [b"d"]
        assert n.controls("B", 0) == [(3, f"C:{pid}:{ep}")] and n.controls("B", 1) == [(1, f"C:{pid}:{ep}")]
        assert n.broker.store.max_offset(TOPIC_TRANS_OP_HALF, 0) == 4
        copies = n.visible("B", 0)
        assert [m.properties.get("KEYS") for m in copies] == ["ka", "kb", "kc"]
        assert all(m.sysflag & TRANSACTION_COMMIT_TYPE and m.prepared_transaction_offset in txn.halves
                   for m in copies)
        assert len(n.broker.store.query_by_key("B", "kb", 10, 0, 1 << 62)) == 1
