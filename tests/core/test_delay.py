"""ScheduleService: delayed messages reach their real topic when due, never early, once.

Rules: real stores (DiskStore in a tmp dir, MemoryStore) under a real ``Broker``
with small delay levels ("1s 2s"); every test is bounded by ``trio.fail_after``;
no timing assertions beyond "not before the due time" (a correctness rule).
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
import structlog
import trio
from rokka.core.broker import Broker
from rokka.core.config import BrokerConfig
from rokka.core.delay import read_offset_table, timeup_message
from rokka.core.model import (
    PROP_DELAY,
    PROP_REAL_QID,
    PROP_REAL_TOPIC,
    PROP_TAGS,
    PROP_UNIQ_KEY,
    TOPIC_SCHEDULE,
    Message,
    StoredMessage,
    tags_code,
)
from rokka.core.storage.engine import DiskStore
from rokka.core.storage.memory import MemoryStore


def make_broker(root: Path, *, memory: bool = False) -> Broker:
    cfg = BrokerConfig(store_path_root_dir=str(root), message_delay_level="1s 2s")
    store = MemoryStore(cfg.store_config()) if memory else DiskStore(cfg.store_config()).open()
    return Broker(cfg, store=store)


def delayed(topic: str, level: int, body: bytes, uniq: str, **props: str) -> Message:
    return Message(topic, 1, body, {PROP_DELAY: str(level), PROP_TAGS: "TagA", PROP_UNIQ_KEY: uniq, **props},
                   born_timestamp=int(time.time() * 1000), reconsume_times=2)


def read_all(broker: Broker, topic: str, queue_id: int = 1) -> list[StoredMessage]:
    store = broker.store
    out = []
    for u in store.cq_units(topic, queue_id, 0, 1000):
        m = store.read_message(u.commitlog_offset)
        assert m is not None
        out.append(m)
    return out


async def wait_for(broker: Broker, topic: str, count: int, queue_id: int = 1) -> None:
    while broker.store.max_offset(topic, queue_id) < count:  # noqa: ASYNC110 - polling store state
        await trio.sleep(0.02)


@pytest.mark.parametrize("memory", [False, True])
async def test_delivered_when_due_never_early(tmp_path: Path, memory: bool) -> None:
    broker = make_broker(tmp_path, memory=memory)
    try:
        async with trio.open_nursery() as nursery:
            await nursery.start(broker.run)
            with trio.fail_after(10):
                r1 = await broker.put([delayed("T", 1, b"one", "U1", color="red")])
                r2 = await broker.put([delayed("T", 2, b"two", "U2")])
                assert r1.ok and r2.ok
                assert broker.store.max_offset("T", 1) == 0
                parked = broker.store.read_message(r1.appended[0].commitlog_offset)
                assert parked is not None and parked.topic == TOPIC_SCHEDULE and parked.queue_id == 0
                await wait_for(broker, "T", 2)
                offsets_file = tmp_path / "config" / "delayOffset.json"
                # the offset is persisted after the re-put bytes are flushed: wait for it (bounded)
                while not offsets_file.exists() or json.loads(offsets_file.read_text()) != \
                        {"offsetTable": {"1": 1, "2": 1}}:
                    await trio.sleep(0.02)
            nursery.cancel_scope.cancel()
        first, second = read_all(broker, "T")
        assert (first.body, second.body) == (b"one", b"two")
        for m, parked_at, delay in ((first, r1.appended[0].store_timestamp, 1000),
                                    (second, r2.appended[0].store_timestamp, 2000)):
            assert m.store_timestamp >= parked_at + delay  # never early
            assert m.properties[PROP_DELAY] == str(delay // 1000)   # kept, as RocketMQ 4.9 stores it
            assert m.properties[PROP_REAL_TOPIC] == "T" and m.properties[PROP_REAL_QID] == "1"
            assert m.reconsume_times == 2
        assert first.properties["color"] == "red"
        units = broker.store.cq_units("T", 1, 0, 2)
        assert [u.tags_code for u in units] == [tags_code("TagA")] * 2
        stats = broker.schedule.statistics()
        assert stats.delivered == 2 and stats.lateness_max_ms >= 0 and stats.offsets == {1: 1, 2: 1}
        assert json.loads((tmp_path / "config" / "delayOffset.json").read_text()) == \
            {"offsetTable": {"1": 1, "2": 1}}
    finally:
        broker.close()


async def test_survives_restart_exactly_once(tmp_path: Path) -> None:
    broker = make_broker(tmp_path)
    async with trio.open_nursery() as nursery:
        await nursery.start(broker.run)
        with trio.fail_after(10):
            await broker.put([delayed("T", 1, b"a", "A")])
            await wait_for(broker, "T", 1)
            await broker.put([delayed("T", 2, b"b", "B")])  # still parked at shutdown
        nursery.cancel_scope.cancel()
    broker.close()

    broker = make_broker(tmp_path)
    try:
        async with trio.open_nursery() as nursery:
            await nursery.start(broker.run)
            with trio.fail_after(10):
                await wait_for(broker, "T", 2)
                await trio.sleep(0.3)  # a duplicate would show up here
            nursery.cancel_scope.cancel()
        assert [m.body for m in read_all(broker, "T")] == [b"a", b"b"]
    finally:
        broker.close()


async def test_restart_reconciles_unrecorded_delivery(tmp_path: Path) -> None:
    """Crash between the re-put and the offset write: the delivery is found, not repeated."""
    broker = make_broker(tmp_path)
    async with trio.open_nursery() as nursery:
        await nursery.start(broker.run)
        with trio.fail_after(10):
            await broker.put([delayed("T", 1, b"a", "A")])
            await wait_for(broker, "T", 1)
        nursery.cancel_scope.cancel()
    broker.close()
    (tmp_path / "config" / "delayOffset.json").write_text('{"offsetTable": {1:0}}')  # fastjson form, stale
    for bak in (tmp_path / "config").glob("delayOffset.json.bak"):
        bak.unlink()
    assert read_offset_table(tmp_path / "config" / "delayOffset.json") == {1: 0}

    broker = make_broker(tmp_path)
    try:
        async with trio.open_nursery() as nursery:
            await nursery.start(broker.run)
            with trio.fail_after(10):
                while broker.schedule.statistics().offsets.get(1) != 1:  # noqa: ASYNC110
                    await trio.sleep(0.02)
            nursery.cancel_scope.cancel()
        assert [m.body for m in read_all(broker, "T")] == [b"a"]
        assert broker.schedule.statistics().reconciled == 1
    finally:
        broker.close()


async def test_new_parked_message_wakes_idle_level(tmp_path: Path) -> None:
    broker = make_broker(tmp_path, memory=True)
    try:
        async with trio.open_nursery() as nursery:
            await nursery.start(broker.run)
            with trio.fail_after(10):
                await trio.sleep(0.2)  # levels are idle now
                r = await broker.put([delayed("T", 1, b"x", "X")])
                await wait_for(broker, "T", 1)
            nursery.cancel_scope.cancel()
        m = read_all(broker, "T")[0]
        assert m.store_timestamp >= r.appended[0].store_timestamp + 1000
    finally:
        broker.close()


def test_timeup_message_rejects_non_delay_records() -> None:
    base = StoredMessage("SCHEDULE_TOPIC_XXXX", 0, b"", {}, 0, 0, 0, ("127.0.0.1", 1), 0, ("127.0.0.1", 2),
                         0, 0, 0, 0, 0, 0)
    assert timeup_message(base) is None
    props = {PROP_REAL_TOPIC: "T", PROP_REAL_QID: "3", PROP_DELAY: "1"}
    ok = timeup_message(StoredMessage(**{**_fields(base), "properties": props}))
    assert ok is not None and (ok.topic, ok.queue_id) == ("T", 3) and ok.properties == props


def _fields(m: StoredMessage) -> dict[str, object]:
    return {f: getattr(m, f) for f in StoredMessage.__slots__}  # type: ignore[attr-defined]


async def test_delivered_copy_keeps_delay_and_wait_as_java(tmp_path: Path) -> None:
    """RocketMQ 4.9.7 ScheduleMessageService.messageTimeup stores the parked record's properties string:
    the delivered copy still has DELAY=<level> and the client's WAIT=true (rokka used to drop both)."""
    broker = make_broker(tmp_path)
    try:
        with trio.fail_after(20):
            r = await broker.put([delayed("T", 1, b"w", "W1", WAIT="true", color="blue")])
            assert r.ok
            parked = broker.store.read_message(r.appended[0].commitlog_offset)
            assert parked is not None and parked.properties["WAIT"] == "true"
            async with trio.open_nursery() as nursery:
                await nursery.start(broker.schedule.run)
                await wait_for(broker, "T", 1)
                nursery.cancel_scope.cancel()
        [m] = read_all(broker, "T")
        assert m.properties[PROP_DELAY] == "1" and m.properties["WAIT"] == "true"
        assert (m.properties[PROP_REAL_TOPIC], m.properties[PROP_REAL_QID]) == ("T", "1")
        assert m.properties["color"] == "blue" and m.topic == "T"
        # a plain message still loses WAIT (Java's SendMessageProcessor does not store WAIT=true)
        plain = await broker.put([Message("T", 1, b"p", {"WAIT": "true"})])
        got = broker.store.read_message(plain.appended[0].commitlog_offset)
        assert got is not None and "WAIT" not in got.properties
    finally:
        broker.close()


async def test_an_undeliverable_parked_message_does_not_stop_its_level(tmp_path: Path) -> None:
    """A parked message whose real message can never be stored (its REAL_TOPIC is longer than the record
    format's 127 bytes: a fuzz run parked such ones) is skipped with an error line; the messages behind it
    in the same level are delivered (before: it was retried every second, forever, holding the level)."""
    broker = make_broker(tmp_path)
    try:
        async with trio.open_nursery() as nursery:
            await nursery.start(broker.run)
            with trio.fail_after(10):
                now = int(time.time() * 1000)
                bad = Message(TOPIC_SCHEDULE, 0, b"never", {PROP_DELAY: "1", PROP_REAL_TOPIC: "x" * 130,
                                                          PROP_REAL_QID: "0"}, born_timestamp=now)
                assert (await broker.put([bad], prepared=True)).ok
                assert (await broker.put([delayed("T", 1, b"after", "U9")])).ok
                await wait_for(broker, "T", 1)
            nursery.cancel_scope.cancel()
        assert [m.body for m in read_all(broker, "T")] == [b"after"]
        assert broker.schedule.statistics().offsets[1] == 2
    finally:
        broker.close()


async def test_a_slave_store_delivers_nothing_until_it_is_promoted(tmp_path: Path) -> None:
    """On a slave (``store.replica_only``) the master delivers: the slave's schedule service neither
    tries (before: a refused put and a warning every second per due level; Java runs ScheduleMessageService
    on a master only) nor moves its offsets; once the store takes writes again (a promotion) it delivers."""
    broker = make_broker(tmp_path)
    try:
        async with trio.open_nursery() as nursery:
            await nursery.start(broker.run)
            with trio.fail_after(20):
                assert (await broker.put([delayed("T", 1, b"parked", "S1")])).ok
                broker.store.replica_only = True
                with structlog.testing.capture_logs() as logs:
                    await trio.sleep(2.5)       # past due (level 1 = 1 s), and a few idle ticks
                assert broker.store.max_offset("T", 1) == 0
                assert broker.schedule.statistics().offsets.get(1, 0) == 0
                assert [e["event"] for e in logs if e["event"].startswith("delay.")] == []
                broker.store.replica_only = False
                await wait_for(broker, "T", 1)
            nursery.cancel_scope.cancel()
        assert [m.body for m in read_all(broker, "T")] == [b"parked"]
    finally:
        broker.close()
