"""Kafka transactions spanning brokers: a coordinator and a participant share, in process.

Two real ``Node``s (a tmp_path DiskStore under a real ``Broker`` each, see ``test_kafka_txn``):
broker "a" coordinates, broker "b" leads topic B and group "gb".  ``Link`` is the coordinator's
``TxnPeers``: it calls the participant's coordinator object directly (what the broker-to-broker
request does, ``rokka.gateway.kafka.txn.participants``) and can be "down" (the call fails).
"""

from __future__ import annotations

from pathlib import Path

import trio
from rokka.gateway.kafka.txn.peers import SHARE_CHECK_GRACE_MS
from rokka.gateway.kafka.txn.states import Partition, TxnOutcome, TxnState

from tests.gateway.kafka.test_txn_coordinator import OK, Clock, Node

S = TxnState


class Link:
    """The participant "b" as the coordinator reaches it (``down``: every call fails)."""

    def __init__(self, node: Node) -> None:
        self.node, self.down, self.calls = node, False, 0

    def owner(self, topic: str, partition: int) -> str | None:
        return "b" if topic == "B" else None

    def group_owner(self, group: str) -> str | None:
        return "b" if group == "gb" else None

    async def open(self, broker: str, tid: str, pid: int, epoch: int, timeout_ms: int,
                   partitions: list[Partition], groups: list[str]) -> bool:
        self.calls += 1
        return not self.down and await self.node.txns.open_share(tid, pid, epoch, timeout_ms, partitions,
                                                                 groups, "a") is OK

    async def end(self, broker: str, tid: str, pid: int, epoch: int, commit: bool) -> bool:
        self.calls += 1
        return not self.down and await self.node.txns.end_share_request(tid, pid, epoch, commit) is OK

    async def is_open(self, broker: str, tid: str, pid: int, epoch: int) -> bool | None:
        raise AssertionError("a coordinator never asks this")


class Back:
    """The coordinator "a" as the participant reaches it (QUERY_SHARE)."""

    def __init__(self, node: Node) -> None:
        self.node, self.asked = node, 0

    def owner(self, topic: str, partition: int) -> str | None:
        return None

    def group_owner(self, group: str) -> str | None:
        return None

    async def open(self, *args: object) -> bool:
        raise AssertionError("a participant never opens shares")

    async def end(self, *args: object) -> bool:
        raise AssertionError("a participant never ends shares")

    async def is_open(self, broker: str, tid: str, pid: int, epoch: int) -> bool | None:
        assert broker == "a"
        self.asked += 1
        return self.node.txns.holds_open(tid, pid, epoch)


def pair(tmp_path: Path, clock: Clock) -> tuple[Node, Node, Link]:
    a, b = Node(tmp_path / "a", clock), Node(tmp_path / "b", clock)
    link = Link(b)
    a.txns.peers = link
    return a, b, link


async def started(a: Node, b: Node, link: Link, tid: str = "t") -> tuple[int, int]:
    """InitProducerId on the coordinator, then a transaction on A/0 (here) and B/0 (on b)."""
    pid, epoch = await a.init(tid)
    assert await a.txns.add_partitions(tid, pid, epoch, [("A", 0), ("B", 0)]) is OK
    assert a.produce(pid, epoch, "A", 0, [b"a1", b"a2"]) is OK
    assert b.produce(pid, epoch, "B", 0, [b"b1"]) is OK
    return pid, epoch


async def test_commit_spans_both_brokers(tmp_path: Path) -> None:
    with trio.fail_after(10):
        a, b, link = pair(tmp_path, Clock())
        pid, epoch = await started(a, b, link)
        assert b.txns.get("t") is None and b.txns.shares()[0].partitions == {("B", 0)}
        # the share accepts only its partitions, its (pid, epoch), while Ongoing
        assert b.txns.check_produce(pid, epoch, "B", 1) is TxnOutcome.INVALID_TXN_STATE
        assert b.txns.check_produce(pid + 1, 0, "B", 0) is TxnOutcome.INVALID_PRODUCER_ID_MAPPING
        assert b.values("B", 0) == [] and a.values("A", 0) == []
        assert await a.txns.end_txn("t", pid, epoch, True) is OK
        assert a.values("A", 0) == [b"a1", b"a2"] and b.values("B", 0) == [b"b1"]
        assert [c for _, c in b.controls("B", 0)] == [f"C:{pid}:{epoch}"]
        assert [c for _, c in a.controls("A", 0)] == [f"C:{pid}:{epoch}"]
        assert b.txns.shares() == [] and a.txns.get("t").state is S.COMPLETE_COMMIT
        # the next transaction opens a new share; an abort leaves placeholders and markers only
        assert await a.txns.add_partitions("t", pid, epoch, [("B", 0)]) is OK
        assert b.produce(pid, epoch, "B", 0, [b"x"]) is OK
        assert await a.txns.end_txn("t", pid, epoch, False) is OK
        assert b.values("B", 0) == [b"b1"] and b.txns.shares() == []
        a.close()
        b.close()


async def test_participant_down_at_end_commits_when_back(tmp_path: Path) -> None:
    clock = Clock()
    with trio.fail_after(10):
        a, b, link = pair(tmp_path, clock)
        pid, epoch = await started(a, b, link)
        link.down = True
        assert await a.txns.end_txn("t", pid, epoch, True) is TxnOutcome.CONCURRENT_TRANSACTIONS
        assert a.txns.get("t").state is S.PREPARE_COMMIT
        assert a.values("A", 0) == [] and b.values("B", 0) == []     # nothing visible anywhere yet
        assert await a.txns.add_partitions("t", pid, epoch, [("A", 1)]) is TxnOutcome.CONCURRENT_TRANSACTIONS
        await a.txns.tick()
        assert a.txns.get("t").state is S.PREPARE_COMMIT
        link.down = False
        await a.txns.tick()
        assert a.txns.get("t").state is S.COMPLETE_COMMIT
        assert a.values("A", 0) == [b"a1", b"a2"] and b.values("B", 0) == [b"b1"]
        a.close()
        b.close()


async def test_open_failure_adds_nothing(tmp_path: Path) -> None:
    with trio.fail_after(10):
        a, b, link = pair(tmp_path, Clock())
        pid, epoch = await a.init("t")
        link.down = True
        assert await a.txns.add_partitions("t", pid, epoch, [("A", 0), ("B", 0)]) is \
            TxnOutcome.CONCURRENT_TRANSACTIONS
        assert a.txns.get("t").state is S.EMPTY
        assert b.txns.check_produce(pid, epoch, "B", 0) is TxnOutcome.INVALID_PRODUCER_ID_MAPPING
        link.down = False
        assert await a.txns.add_partitions("t", pid, epoch, [("A", 0), ("B", 0)]) is OK
        assert b.txns.check_produce(pid, epoch, "B", 0) is OK
        a.close()
        b.close()


async def test_participant_crash_mid_completion_neither_loses_nor_doubles(tmp_path: Path) -> None:
    clock = Clock()
    with trio.fail_after(10):
        a, b, link = pair(tmp_path, clock)
        pid, epoch = await started(a, b, link)
        share = b.txns.shares()[0]
        # b stores its share's completion, then dies before it forgets the share (state file: Prepare*)
        share.state = S.PREPARE_COMMIT
        b.txns._mark(share)                                # noqa: SLF001
        await b.txns.persist()
        assert await b.txns._store_completion(share)       # noqa: SLF001
        b.crash()
        b2 = Node(tmp_path / "b", clock)
        link.node = b2
        b2.txns._recover_halves()                          # noqa: SLF001 - what ``run`` does first
        assert await a.txns.end_txn("t", pid, epoch, True) is OK
        assert b2.values("B", 0) == [b"b1"]                # once, not twice
        assert [c for _, c in b2.controls("B", 0)] == [f"C:{pid}:{epoch}"]
        assert a.values("A", 0) == [b"a1", b"a2"] and b2.txns.shares() == []
        a.close()
        b2.close()


async def test_participant_restart_keeps_an_ongoing_share(tmp_path: Path) -> None:
    clock = Clock()
    with trio.fail_after(10):
        a, b, link = pair(tmp_path, clock)
        pid, epoch = await started(a, b, link)
        b.crash()
        b2 = Node(tmp_path / "b", clock)
        link.node = b2
        b2.txns._recover_halves()                          # noqa: SLF001
        assert b2.produce(pid, epoch, "B", 0, [b"b2"]) is OK
        assert await a.txns.end_txn("t", pid, epoch, True) is OK
        assert b2.values("B", 0) == [b"b1", b"b2"]
        a.close()
        b2.close()


async def test_coordinator_crash_after_prepare_resumes_every_share(tmp_path: Path) -> None:
    clock = Clock()
    with trio.fail_after(10):
        a, b, link = pair(tmp_path, clock)
        pid, epoch = await started(a, b, link)
        await a.prepared("t", S.PREPARE_ABORT, {("A", 0): 0})
        a.crash()
        a2 = Node(tmp_path / "a", clock)
        a2.txns.peers = link
        a2.txns._recover_halves()                          # noqa: SLF001 - what ``run`` does first
        await a2.txns.tick()                               # ends the share, then its own part
        assert a2.txns.get("t").state is S.COMPLETE_ABORT
        assert a2.values("A", 0) == [] and b.values("B", 0) == []
        assert [c for _, c in b.controls("B", 0)][-1] == f"A:{pid}:{epoch}" and b.txns.shares() == []
        a2.close()
        b.close()


async def test_offsets_of_a_group_coordinated_elsewhere(tmp_path: Path) -> None:
    with trio.fail_after(10):
        a, b, link = pair(tmp_path, Clock())
        pid, epoch = await started(a, b, link)
        assert await a.txns.add_partitions("t", pid, epoch, [], groups=["gb"]) is OK
        # TxnOffsetCommit reaches the group's coordinator b, which holds the share
        assert await b.txns.txn_offset_commit("t", pid, epoch, "gb", [("A", 1, 7)]) is OK
        assert await b.txns.txn_offset_commit("t", pid, epoch + 1, "gb", [("A", 1, 8)]) is \
            TxnOutcome.INVALID_TXN_STATE
        assert b.txns.pending_offset("gb", "A", 1)
        assert b.broker.offsets.query("gb", "A", 1) is None
        assert await a.txns.end_txn("t", pid, epoch, True) is OK
        assert b.broker.offsets.query("gb", "A", 1) == 7 and not b.txns.pending_offset("gb", "A", 1)
        a.close()
        b.close()


async def test_a_newer_epoch_aborts_a_stale_share(tmp_path: Path) -> None:
    with trio.fail_after(10):
        a, b, link = pair(tmp_path, Clock())
        pid, epoch = await started(a, b, link)
        # the coordinator lost track of the share (not ended): a newer epoch's open aborts it there
        assert await b.txns.open_share("t", pid, epoch + 1, 60_000, [("B", 1)], []) is OK
        assert b.values("B", 0) == [] and b.controls("B", 0)[-1][1] == f"A:{pid}:{epoch}"
        assert b.txns.check_produce(pid, epoch, "B", 0) is TxnOutcome.INVALID_PRODUCER_EPOCH
        assert b.txns.check_produce(pid, epoch + 1, "B", 1) is OK
        # an end for a share no longer held is acknowledged (idempotent)
        assert await b.txns.end_share_request("t", pid, epoch, True) is OK
        a.close()
        b.close()


async def test_an_orphan_share_is_aborted_after_asking_its_coordinator(tmp_path: Path) -> None:
    clock = Clock()
    with trio.fail_after(10):
        a, b, link = pair(tmp_path, clock)
        back = b.txns.peers = Back(a)
        pid, epoch = await started(a, b, link)
        # the share of an open transaction is kept however long the coordinator says it is open
        clock.now += 60_000 + SHARE_CHECK_GRACE_MS + 1
        await b.txns.tick()
        assert back.asked == 1 and b.txns.shares()[0].state is S.ONGOING
        await b.txns.tick()
        assert back.asked == 1                           # asked again only after another period
        assert await a.txns.end_txn("t", pid, epoch, True) is OK
        assert b.values("B", 0) == [b"b1"]
        # a share the coordinator never recorded (an open it took for failed): aborted once asked
        assert await b.txns.open_share("t", pid, epoch, 60_000, [("B", 1)], [], "a") is OK
        assert b.produce(pid, epoch, "B", 1, [b"orphan"]) is OK
        await b.txns.tick()
        assert b.txns.shares() != []                     # not idle long enough yet
        clock.now += 60_000 + SHARE_CHECK_GRACE_MS + 1
        await b.txns.tick()
        assert b.txns.shares() == [] and b.values("B", 1) == []
        assert b.controls("B", 1)[-1][1] == f"A:{pid}:{epoch}"
        a.close()
        b.close()
