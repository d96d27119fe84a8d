"""TransactionService: END_TRANSACTION rules and the check-back scan, on a real DiskStore.

Rules: a tmp_path store under a real ``Broker``; the "checker" is the core's
own callback interface (the gateway's sender is tested over sockets in
tests/gateway/rocketmq/test_txn_handlers.py); every async test is bounded
by ``trio.fail_after``.
"""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path

import structlog
import trio
from rokka.core.broker import Broker
from rokka.core.config import BrokerConfig
from rokka.core.model import (
    PROP_PGROUP,
    PROP_REAL_QID,
    PROP_REAL_TOPIC,
    PROP_TRAN_MSG,
    PROP_TRANSACTION_CHECK_TIMES,
    PROP_UNIQ_KEY,
    TOPIC_TRANS_HALF,
    TOPIC_TRANS_OP_HALF,
    TRANSACTION_COMMIT_TYPE,
    TRANSACTION_MASK,
    TRANSACTION_NOT_TYPE,
    TRANSACTION_ROLLBACK_TYPE,
    Message,
    StoredMessage,
)
from rokka.core.storage.api import Appended
from rokka.core.storage.engine import DiskStore
from rokka.core.txn import EndOutcome, commit_message


def make_broker(root: Path, **cfg_kw: object) -> Broker:
    cfg = BrokerConfig(store_path_root_dir=str(root), **cfg_kw)  # type: ignore[arg-type]
    return Broker(cfg, store=DiskStore(cfg.store_config()).open())


def half(uniq: str, born_ms: int | None = None) -> Message:
    return Message("T", 2, b"body-" + uniq.encode(), {PROP_TRAN_MSG: "true", PROP_PGROUP: "pg",
                                                      PROP_UNIQ_KEY: uniq, "k": "v"},
                   born_timestamp=born_ms if born_ms is not None else int(time.time() * 1000))


async def put_half(broker: Broker, uniq: str, born_ms: int | None = None) -> Appended:
    r = await broker.put([half(uniq, born_ms)])
    assert r.ok
    return r.appended[0]


async def end(broker: Broker, a: Appended, decision: int, group: str = "pg",
              queue_offset: int | None = None) -> EndOutcome:
    res = await broker.transactions.end_transaction(
        producer_group=group,
        tran_state_table_offset=a.queue_offset if queue_offset is None else queue_offset,
        commitlog_offset=a.commitlog_offset, commit_or_rollback=decision)
    return res.outcome


def real_messages(broker: Broker) -> list[StoredMessage]:
    store = broker.store
    return [m for u in store.cq_units("T", 2, 0, 100) if (m := store.read_message(u.commitlog_offset))]


async def test_commit_rollback_unknown_and_validation(tmp_path: Path) -> None:
    broker = make_broker(tmp_path)
    try:
        with trio.fail_after(10):
            a = await put_half(broker, "A")
            b = await put_half(broker, "B")
            c = await put_half(broker, "C")
            assert broker.store.max_offset("T", 2) == 0 and broker.store.max_offset(TOPIC_TRANS_HALF, 0) == 3
            assert await end(broker, a, TRANSACTION_COMMIT_TYPE, group="other") is EndOutcome.BAD_REQUEST
            assert await end(broker, a, TRANSACTION_COMMIT_TYPE, queue_offset=7) is EndOutcome.BAD_REQUEST
            assert await end(broker, a, TRANSACTION_NOT_TYPE) is EndOutcome.IGNORED
            assert await end(broker, a, 4) is EndOutcome.IGNORED
            assert await end(broker, a, TRANSACTION_COMMIT_TYPE) is EndOutcome.COMMITTED
            assert await end(broker, b, TRANSACTION_ROLLBACK_TYPE) is EndOutcome.ROLLED_BACK
            assert await end(broker, a, TRANSACTION_COMMIT_TYPE) is EndOutcome.COMMITTED  # duplicate
            missing = Appended(commitlog_offset=10**9, size=0, queue_offset=0, store_timestamp=0)
            assert await end(broker, missing, TRANSACTION_COMMIT_TYPE) is EndOutcome.NOT_FOUND
        [m] = real_messages(broker)
        assert m.body == b"body-A" and m.queue_id == 2
        assert m.sysflag & TRANSACTION_MASK == TRANSACTION_COMMIT_TYPE
        assert m.prepared_transaction_offset == a.commitlog_offset
        assert m.store_timestamp == a.store_timestamp
        # kept, as RocketMQ 4.9.7's EndTransactionProcessor stores the half's properties string
        assert (m.properties[PROP_REAL_TOPIC], m.properties[PROP_REAL_QID]) == ("T", "2")
        assert m.properties[PROP_TRAN_MSG] == "true"
        assert m.properties["k"] == "v" and m.properties[PROP_UNIQ_KEY] == "A"
        stats = broker.transactions.statistics()
        assert (stats.committed, stats.rolled_back, stats.duplicate_commits) == (1, 1, 1)
        store = broker.store
        ops = [store.read_message(u.commitlog_offset) for u in store.cq_units(TOPIC_TRANS_OP_HALF, 0, 0, 9)]
        assert [(o.body, o.tags) for o in ops if o] == [(b"0", "d"), (b"1", "d"), (b"0", "d")]
        assert c.queue_offset == 2
    finally:
        broker.close()


async def test_check_round_rechecks_then_discards(tmp_path: Path) -> None:
    broker = make_broker(tmp_path, transaction_timeout=0, transaction_check_max=2)
    asked: list[tuple[str, StoredMessage]] = []

    async def checker(group: str, copy: StoredMessage) -> bool:
        asked.append((group, copy))
        return True

    try:
        with trio.fail_after(10):
            old = int(time.time() * 1000) - 1000
            a = await put_half(broker, "A", old)
            b = await put_half(broker, "B", old)
            assert await end(broker, b, TRANSACTION_ROLLBACK_TYPE) is EndOutcome.ROLLED_BACK
            assert await broker.transactions.check_round(checker) == 1
            group, copy = asked[0]
            assert group == "pg" and copy.properties[PROP_UNIQ_KEY] == "A"
            assert copy.properties[PROP_TRANSACTION_CHECK_TIMES] == "1" and copy.queue_offset == 2
            assert broker.transactions.half_offset == 2
            assert await broker.transactions.check_round(checker) == 1   # copy 2 -> copy 3, count 2
            assert asked[1][1].properties[PROP_TRANSACTION_CHECK_TIMES] == "2"
            assert await broker.transactions.check_round(checker) == 0   # count reached the max: discarded
            assert broker.transactions.statistics().discarded == 1
            assert await broker.transactions.check_round(checker) == 0
        assert real_messages(broker) == [] and a.queue_offset == 0
    finally:
        broker.close()


async def test_check_answer_commits_copy_and_progress_survives_restart(tmp_path: Path) -> None:
    broker = make_broker(tmp_path, transaction_timeout=0)
    asked: list[StoredMessage] = []

    async def checker(group: str, copy: StoredMessage) -> bool:
        asked.append(copy)
        return True

    with trio.fail_after(10):
        await put_half(broker, "A", 1)
        young = await put_half(broker, "Y", int(time.time() * 1000) + 3_600_000)  # not due for an hour
        assert await broker.transactions.check_round(checker) == 1
        copy = asked[0]
        res = await broker.transactions.end_transaction(
            producer_group="pg", tran_state_table_offset=copy.queue_offset,
            commitlog_offset=copy.commitlog_offset, commit_or_rollback=TRANSACTION_COMMIT_TYPE,
            from_check=True)
        assert res.outcome is EndOutcome.COMMITTED
        assert broker.transactions.half_offset == 1  # stopped at the young half
    broker.close()

    broker = make_broker(tmp_path, transaction_timeout=0)
    try:
        with trio.fail_after(10):
            assert broker.transactions.half_offset == 1
            asked.clear()
            assert await broker.transactions.check_round(checker) == 0  # Y young, A's copy done
            assert [m.body for m in real_messages(broker)] == [b"body-A"]
            assert young.queue_offset == 1
    finally:
        broker.close()


async def test_committed_copy_keeps_java_properties_and_is_not_a_half(tmp_path: Path) -> None:
    """The committed copy carries TRAN_MSG=true, REAL_TOPIC, REAL_QID and WAIT=true as in Apache 4.9.7; it
    is still told from a half by its sysflag: it is dispatched to its queue, not parked again, and a Kafka
    owner's commit drops the properties it names."""
    broker = make_broker(tmp_path)
    try:
        with trio.fail_after(10):
            msg = half("W")
            msg.properties["WAIT"] = "true"
            r = await broker.put([msg])
            a = r.appended[0]
            parked = broker.store.read_message(a.commitlog_offset)
            assert parked is not None and parked.topic == "RMQ_SYS_TRANS_HALF_TOPIC"
            assert parked.properties["WAIT"] == "true"
            assert await end(broker, a, TRANSACTION_COMMIT_TYPE) is EndOutcome.COMMITTED
        [m] = real_messages(broker)
        assert m.sysflag & TRANSACTION_MASK == TRANSACTION_COMMIT_TYPE
        assert {k: m.properties.get(k) for k in (PROP_TRAN_MSG, PROP_REAL_TOPIC, PROP_REAL_QID, "WAIT")} == \
            {PROP_TRAN_MSG: "true", PROP_REAL_TOPIC: "T", PROP_REAL_QID: "2", "WAIT": "true"}
        # one half only: the committed copy was not parked as a new half
        halves = broker.store.cq_units("RMQ_SYS_TRANS_HALF_TOPIC", 0, 0, 100)
        assert len(halves) == 1
        owned = dataclasses.replace(parked, properties={**parked.properties, "KAFKA_TXN": "7:0"})
        committed = commit_message(owned, ("KAFKA_TXN", "WAIT")).properties   # an owner names what drops
        assert not {"KAFKA_TXN", "WAIT"} & set(committed) and committed[PROP_TRAN_MSG] == "true"
    finally:
        broker.close()


async def test_check_round_hands_each_half_over_before_putting_back_the_next(tmp_path: Path) -> None:
    """A round over many due halves never holds them all: each check leaves as soon as its half is put
    back (a fuzz run with thousands of large halves drove the old collect-then-check round past 1.5 GiB)."""
    broker = make_broker(tmp_path, transaction_timeout=0)
    seen_half_ends: list[int] = []

    async def checker(group: str, copy: StoredMessage) -> bool:
        seen_half_ends.append(broker.store.max_offset(TOPIC_TRANS_HALF, 0))
        return True

    try:
        with trio.fail_after(10):
            old = int(time.time() * 1000) - 1000
            for uniq in ("A", "B", "C", "D"):
                await put_half(broker, uniq, old)
            assert await broker.transactions.check_round(checker) == 4
        # Check i is asked right after put-back i: the half queue has grown by exactly i+1 copies.
        assert seen_half_ends == [5, 6, 7, 8]
    finally:
        broker.close()


async def test_a_round_logs_one_line_per_group_not_one_per_half(tmp_path: Path) -> None:
    from structlog.testing import capture_logs

    broker = make_broker(tmp_path, transaction_timeout=0)

    async def nobody(group: str, copy: StoredMessage) -> bool:
        return False        # no live producer of the group

    try:
        with trio.fail_after(10):
            old = int(time.time() * 1000) - 1000
            for uniq in ("A", "B", "C", "D", "E"):
                await put_half(broker, uniq, old)
            with capture_logs() as logs:
                assert await broker.transactions.check_round(nobody) == 0
        lines = [e for e in logs if e["event"] == "txn.no_producer_to_check"]
        assert lines == [{"event": "txn.no_producer_to_check", "group": "pg", "halves": 5, "log_level": "warning"}]
    finally:
        broker.close()


async def test_a_slave_store_checks_nothing_until_it_is_promoted(tmp_path: Path) -> None:
    """On a slave (``store.replica_only``) only the master checks undecided halves: the check service
    skips its rounds (before: each round tried to put the half back, was refused and logged it; Java runs
    the check service on a master only); once the store takes writes again it checks."""
    broker = make_broker(tmp_path, transaction_timeout=0, transaction_check_interval=100)
    asked: list[str] = []

    async def checker(group: str, copy: StoredMessage) -> bool:
        asked.append(copy.properties[PROP_UNIQ_KEY])
        return True

    try:
        with trio.fail_after(20):
            await put_half(broker, "H", int(time.time() * 1000) - 1000)
            broker.store.replica_only = True
            async with trio.open_nursery() as nursery:
                await nursery.start(broker.transactions.run, checker)
                with structlog.testing.capture_logs() as logs:
                    await trio.sleep(0.6)           # several 100 ms rounds
                assert asked == []
                assert [e["event"] for e in logs if e["event"].startswith("txn.")] == []
                broker.store.replica_only = False
                while not asked:  # noqa: ASYNC110 - the promoted store's next round checks the half
                    await trio.sleep(0.05)
                nursery.cancel_scope.cancel()
        assert asked[0] == "H"
    finally:
        broker.close()
