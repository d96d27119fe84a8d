"""Transaction wire handlers: codes per version, transactional Produce, require_stable.

Handlers are called directly with requests built from the codec's declarations
(``StructType.make``) and a real KafkaRequestContext, over a Broker on the
in-memory store; every test is bounded by ``trio.fail_after``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import trio
from rokka.core.broker import Broker
from rokka.core.config import BrokerConfig
from rokka.core.storage.memory import MemoryStore
from rokka.gateway.kafka import KafkaServer
from rokka.gateway.kafka.apis import KafkaServices, routes
from rokka.gateway.kafka.codec import APIS, Struct
from rokka.gateway.kafka.codec import records as R
from rokka.gateway.kafka.groups.coordinator import GroupCoordinator
from rokka.gateway.kafka.groups.types import GroupConfig
from rokka.gateway.kafka.handlers import KafkaEnv
from rokka.gateway.kafka.handlers import fetch as F
from rokka.gateway.kafka.handlers import produce as P
from rokka.gateway.kafka.handlers import txn as X
from rokka.gateway.kafka.producers.state import ProducerStateManager
from rokka.gateway.kafka.server import KafkaRequestContext
from rokka.gateway.kafka.txn.coordinator import KafkaTxnCoordinator, TxnState


class Env:
    def __init__(self, root: Path) -> None:
        cfg = BrokerConfig(store_path_root_dir=str(root))
        broker = Broker(cfg, store=MemoryStore(cfg.store_config()))
        broker.topics.ensure("t", 2)
        self.producers = ProducerStateManager(None)
        self.txns = KafkaTxnCoordinator(broker, self.producers, None)
        self.kafka = KafkaEnv(broker, node_id=0, host="127.0.0.1", port=9092, producers=self.producers,
                              transactions=self.txns)
        self.coord = GroupCoordinator(GroupConfig(), broker.offsets)
        self.coord.pending_txn_offset = self.txns.pending_offset
        X.attach(self.kafka, self.txns)
        self.routes = routes(KafkaServices(self.kafka, groups=self.coord))

    async def call(self, key: int, version: int, **kw: Any) -> Any:
        body = APIS[key].request.make(**kw)
        return await self.routes[key].handler(ctx(key, version), body)


@pytest.fixture
def env(tmp_path: Path) -> Env:
    return Env(tmp_path)


def ctx(key: int, version: int) -> KafkaRequestContext:
    server = KafkaServer({}, max_frame_bytes=1024)
    return KafkaRequestContext(("127.0.0.1", 1), "t", key, version, 1, {}, server)


async def init(env: Env, tid: str, version: int = 4, pid: int = -1, epoch: int = -1) -> dict[str, Any]:
    out: dict[str, Any] = await env.call(22, version, transactional_id=tid, transaction_timeout_ms=60_000,
                                         producer_id=pid, producer_epoch=epoch)
    return out


async def add(env: Env, tid: str, pid: int, epoch: int, parts: list[tuple[str, int]],
              version: int = 3) -> dict[tuple[str, int], int]:
    topics: dict[str, list[int]] = {}
    for t, p in parts:
        topics.setdefault(t, []).append(p)
    out = await env.call(24, version, v3_and_below_transactional_id=tid, v3_and_below_producer_id=pid,
                         v3_and_below_producer_epoch=epoch,
                         v3_and_below_topics=[Struct(name=t, partitions=ps) for t, ps in topics.items()])
    return {(t.name, r.partition_index): r.partition_error_code
            for t in [Struct(**x) if isinstance(x, dict) else x for x in out["results_by_topic_v3_and_below"]]
            for r in [Struct(**y) for y in t.results_by_partition]}


async def produce(env: Env, pid: int, epoch: int, seq: int, values: list[bytes],
                  partition: int = 0) -> Struct:
    batch = R.encode_batch([R.Record(i, 0, None, v) for i, v in enumerate(values)], base_timestamp=1000,
                           producer_id=pid, producer_epoch=epoch, base_sequence=seq,
                           attributes=R.TRANSACTIONAL_BIT)
    body = APIS[0].request.make(acks=-1, timeout_ms=100, transactional_id="x", topic_data=[
        Struct(name="t", partition_data=[Struct(index=partition, records=batch)])])
    out = await P.handle_produce(env.kafka, ctx(0, 9), body)
    assert out is not None
    return out.responses[0].partition_responses[0]  # type: ignore[no-any-return]


def hw(env: Env, partition: int = 0) -> int:
    return env.kafka.broker.store.max_offset("t", partition)


async def test_full_transaction_over_the_handlers(env: Env) -> None:
    with trio.fail_after(10):
        r = await init(env, "tx")
        pid, ep = r["producer_id"], r["producer_epoch"]
        assert r["error_code"] == 0
        assert await add(env, "tx", pid, ep, [("t", 0), ("t", 9), ("nope", 0)]) == {
            ("t", 0): 55, ("t", 9): 3, ("nope", 0): 3}
        assert env.txns.get("tx").state is TxnState.EMPTY  # type: ignore[union-attr]
        assert (await produce(env, pid, ep, 0, [b"a"])).error_code == 48            # not added yet
        assert await add(env, "tx", pid, ep, [("t", 0)]) == {("t", 0): 0}
        part = await produce(env, pid, ep, 0, [b"a", b"b"])
        assert (part.error_code, part.base_offset) == (0, -1)
        assert (await produce(env, pid, ep, 0, [b"a", b"b"])).error_code == 0        # duplicate: not stored
        assert (await produce(env, pid, ep, 5, [b"c"])).error_code == 45             # sequence gap
        assert hw(env) == 0
        assert (await env.call(25, 3, transactional_id="tx", producer_id=pid, producer_epoch=ep,
                               group_id="g"))["error_code"] == 0
        tc = await env.call(28, 3, transactional_id="tx", group_id="g", producer_id=pid, producer_epoch=ep,
                            generation_id=-1, member_id="", topics=[Struct(name="t", partitions=[
                                Struct(partition_index=1, committed_offset=4, committed_metadata=None)])])
        assert tc["topics"][0]["partitions"][0]["error_code"] == 0
        fetched = env.coord.offset_fetch("g", [("t", 1)], True)
        assert fetched.partitions[0].error_code == 88 and fetched.partitions[0].offset == -1
        assert (await env.call(26, 3, transactional_id="tx", producer_id=pid, producer_epoch=ep,
                               committed=True))["error_code"] == 0
        assert hw(env) == 3             # a, b and the COMMIT marker at offset 2, as in Kafka
        fetched = env.coord.offset_fetch("g", [("t", 1)], True)
        assert (fetched.partitions[0].error_code, fetched.partitions[0].offset) == (0, 4)
        out = await F.handle_fetch(env.kafka, ctx(1, 12), APIS[1].request.make(
            max_wait_ms=0, min_bytes=1, isolation_level=0, topics=[Struct(topic="t", partitions=[
                Struct(partition=0, fetch_offset=0, partition_max_bytes=1 << 20, current_leader_epoch=-1)])]))
        p0 = out.responses[0].partitions[0]
        assert p0.last_stable_offset == p0.high_watermark == 3
        batches, _ = R.split_batches(bytes(p0.records))
        assert [r.value for b in batches if not b.header.is_control for r in b.records()] == [b"a", b"b"]
        marker = batches[-1]
        assert marker.header.is_control and marker.header.base_offset == 2
        assert (marker.header.producer_id, marker.header.producer_epoch) == (pid, ep)
        assert R.parse_control_record(marker.records()[0])[0] == R.CONTROL_COMMIT


async def test_error_codes_by_version(env: Env) -> None:
    with trio.fail_after(10):
        r = await init(env, "tx")
        pid, ep = r["producer_id"], r["producer_epoch"]
        end = {"transactional_id": "tx", "producer_id": pid, "committed": True}
        assert (await env.call(26, 3, producer_epoch=ep, **end))["error_code"] == 48       # Empty
        assert (await env.call(26, 3, producer_epoch=ep + 1, **end))["error_code"] == 90
        assert (await env.call(26, 1, producer_epoch=ep + 1, **end))["error_code"] == 47   # before v2
        assert (await env.call(26, 3, transactional_id="tx", producer_id=pid + 7, producer_epoch=ep,
                               committed=True))["error_code"] == 49
        assert (await env.call(26, 3, transactional_id="unknown", producer_id=pid, producer_epoch=ep,
                               committed=True))["error_code"] == 49
        assert (await env.call(25, 3, transactional_id="tx", producer_id=pid, producer_epoch=ep,
                               group_id=""))["error_code"] == 24
        # A stale v3+ InitProducerId is fenced without touching the live transaction.
        assert await add(env, "tx", pid, ep, [("t", 0)]) == {("t", 0): 0}
        stale = await init(env, "tx", pid=pid, epoch=ep + 5)
        assert stale["error_code"] == 90
        assert env.txns.get("tx").state is TxnState.ONGOING  # type: ignore[union-attr]
        assert (await init(env, "tx", version=3, pid=pid, epoch=ep + 5))["error_code"] == 47
        # The owner re-initialising aborts its own open transaction and gets the next epoch.
        again = await init(env, "tx", pid=pid, epoch=ep)
        assert (again["error_code"], again["producer_epoch"]) == (0, ep + 1)
        assert env.txns.get("tx").state is TxnState.EMPTY  # type: ignore[union-attr]
        assert (await produce(env, pid, ep, 0, [b"zombie"])).error_code == 47


async def test_init_answers_concurrent_transactions_while_completing(env: Env) -> None:
    with trio.fail_after(10):
        r = await init(env, "tx")
        pid, ep = r["producer_id"], r["producer_epoch"]
        assert await add(env, "tx", pid, ep, [("t", 0)]) == {("t", 0): 0}
        env.txns.get("tx").state = TxnState.PREPARE_COMMIT  # type: ignore[union-attr]  # mid-completion
        assert (await init(env, "tx"))["error_code"] == 51
        assert (await env.call(26, 3, transactional_id="tx", producer_id=pid, producer_epoch=ep,
                               committed=True))["error_code"] == 51
        assert await add(env, "tx", pid, ep, [("t", 1)]) == {("t", 1): 51}
        await env.txns.tick()                                                 # the background completes it
        assert env.txns.get("tx").state is TxnState.COMPLETE_COMMIT  # type: ignore[union-attr]
        assert (await init(env, "tx"))["error_code"] == 0
