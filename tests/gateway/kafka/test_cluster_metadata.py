"""The Kafka cluster view: partition numbering, Metadata over two brokers, partition -> queue.

A real name server runs in-process; "broker-a" is registered with it over the real protocol
(REGISTER_BROKER + PUT_KV_CONFIG, as a broker does) and the broker under test is "broker-b", a
core ``Broker`` on the in-memory store, so its partitions start at broker-a's queue count.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import trio
from rokka.core.broker import Broker
from rokka.core.config import BrokerConfig
from rokka.core.storage.memory import MemoryStore
from rokka.core.topics import TopicConfig
from rokka.gateway.kafka import KafkaServer
from rokka.gateway.kafka.cluster import ClusterView, KafkaNode, TopicLayout, derive_node_id
from rokka.gateway.kafka.codec import APIS, Struct
from rokka.gateway.kafka.codec import records as R
from rokka.gateway.kafka.errors import ErrorCode as E
from rokka.gateway.kafka.handlers import KafkaEnv
from rokka.gateway.kafka.handlers import fetch as F
from rokka.gateway.kafka.handlers import metadata as M
from rokka.gateway.kafka.handlers import produce as P
from rokka.gateway.kafka.handlers.common import local_queue
from rokka.gateway.kafka.routed_offsets import RoutedOffsets
from rokka.gateway.kafka.server import KafkaRequestContext
from rokka.gateway.namesrv.server import NamesrvServer
from rokka.net.remoting.client import NamesrvClient, RemotingClient, register_broker
from rokka.net.remoting.client.namesrv import dumps_wrapper

A_NODE = KafkaNode(11, "127.0.0.1", 19092)
B_NODE = KafkaNode(22, "127.0.0.1", 29092)


def ctx(key: int, version: int) -> KafkaRequestContext:
    server = KafkaServer({}, max_frame_bytes=1024)
    return KafkaRequestContext(("127.0.0.1", 1), "t", key, version, 1, {}, server)


def req(key: int, **kw: Any) -> Struct:
    return APIS[key].request.make(**kw)


def test_layout_concatenates_queues_by_broker_name() -> None:
    lay = TopicLayout.of({"broker-b": 2, "broker-a": 4, "broker-c": 1}, offline=["broker-c"])
    assert [(o.broker, o.base, o.live) for o in lay.owners] == [
        ("broker-a", 0, True), ("broker-b", 4, True), ("broker-c", 6, False)]
    assert lay.total == 7
    assert lay.owner_of(3)[0].broker == "broker-a" and lay.owner_of(3)[1] == 3  # type: ignore[index]
    assert lay.owner_of(5)[0].broker == "broker-b" and lay.owner_of(5)[1] == 1  # type: ignore[index]
    assert lay.owner_of(7) is None and lay.owner_of(-1) is None


def test_node_ids_are_stable_and_distinct() -> None:
    assert derive_node_id("broker-a") == derive_node_id("broker-a") > 0
    assert derive_node_id("broker-a") != derive_node_id("broker-b")
    assert KafkaNode.from_json(A_NODE.to_json()) == A_NODE and KafkaNode.from_json("{bad") is None


def test_single_node_view_is_partition_equals_queue(tmp_path: Path) -> None:
    broker = make_broker(tmp_path, "broker-a")
    broker.topics.ensure("T", 3)
    view = ClusterView("broker-a", A_NODE, "127.0.0.1:1", lambda t: local_count(broker, t))
    assert not view.clustered and list(view.nodes()) == ["broker-a"]
    assert [view.local_queue("T", p) for p in range(4)] == [0, 1, 2, None]
    assert view.coordinator_for("any-group") == A_NODE


def test_layout_is_kept_until_what_it_was_built_from_changes(tmp_path: Path) -> None:
    """``layout`` runs per produced or fetched partition, so it is kept; a route refresh, a change of
    this broker's queue count or of the live brokers must still show at once."""
    broker = make_broker(tmp_path, "broker-b")
    broker.topics.ensure("T", 2)
    view = ClusterView("broker-b", B_NODE, "127.0.0.1:2", lambda t: local_count(broker, t))
    # what refresh_brokers assigns (new dicts each round): broker-a published its endpoint and is live
    view._endpoints, view._live = {"broker-a": A_NODE, "broker-b": B_NODE}, {"broker-a": "127.0.0.1:1"}
    view.remember_route("T", {"broker-a": 4})
    first = view.layout("T")
    assert first is not None and first.total == 6 and view.layout("T") is first
    assert [view.local_queue("T", p) for p in (3, 4, 5, 6)] == [None, 0, 1, None]
    broker.topics.put(TopicConfig("T", 3, 3))          # the topic grew here (updateTopic)
    assert view.layout("T").total == 7 and view.local_queue("T", 6) == 2  # type: ignore[union-attr]
    view.remember_route("T", {"broker-a": 5})
    assert view.layout("T").total == 8 and view.local_queue("T", 5) == 0  # type: ignore[union-attr]
    view._live = {}
    assert view.layout("T").owner("broker-a").live is False  # type: ignore[union-attr]


def make_broker(tmp_path: Path, name: str) -> Broker:
    cfg = BrokerConfig(store_path_root_dir=str(tmp_path / name), broker_name=name)
    return Broker(cfg, store=MemoryStore(cfg.store_config()))


def local_count(broker: Broker, topic: str) -> int | None:
    tc = broker.topics.get(topic)
    return tc.read_queue_nums if tc else None


@pytest.fixture
async def namesrv() -> AsyncIterator[str]:
    server = NamesrvServer()
    async with trio.open_nursery() as nursery:
        host, port = await nursery.start(server.serve, "127.0.0.1", 0)
        yield f"{host}:{port}"
        server.stop(0)
        nursery.cancel_scope.cancel()


async def test_two_brokers_metadata_and_partition_translation(tmp_path: Path, namesrv: str) -> None:
    broker_b = make_broker(tmp_path, "broker-b")
    broker_b.topics.ensure("T", 2)
    with trio.fail_after(20):
        async with RemotingClient(timeout_s=5.0) as rc:
            ns = NamesrvClient(rc, namesrv)
            # broker-a registers T with 4 queues and publishes its Kafka endpoint, as a broker does.
            table = {"T": {"topicName": "T", "readQueueNums": 4, "writeQueueNums": 4, "perm": 6}}
            version = {"counter": 1, "timestamp": 0}
            await register_broker(rc, [namesrv], cluster="C", broker_name="broker-a",
                                  broker_addr="127.0.0.1:1",
                                  topic_config_wrapper=dumps_wrapper(version, table))
            await ns.put_kv("ROKKA_KAFKA", "broker-a", A_NODE.to_json())
            await register_broker(rc, [namesrv], cluster="C", broker_name="broker-b",
                                  broker_addr="127.0.0.1:2", topic_config_wrapper=dumps_wrapper(version, {}))
            view = ClusterView("broker-b", B_NODE, "127.0.0.1:2", lambda t: local_count(broker_b, t), ns)
            await view.refresh_brokers()
            assert view.clustered and list(view.nodes()) == ["broker-a", "broker-b"]
            env = KafkaEnv(broker_b, node_id=B_NODE.node_id, host=B_NODE.host, port=B_NODE.port, cluster=view)

            md = await M.handle_metadata(env, ctx(3, 12), req(3, topics=[Struct(name="T")],
                                                               allow_auto_topic_creation=False))
            assert sorted((b.node_id, b.port) for b in md.brokers) == [(11, 19092), (22, 29092)]
            parts = md.topics[0].partitions
            assert [p.leader_id for p in parts] == [11] * 4 + [22] * 2
            assert md.controller_id == 11

            assert [local_queue(env, "T", p) for p in range(7)] == [None] * 4 + [0, 1, None]
            batch = R.encode_batch([R.Record(0, 0, None, b"v")], base_timestamp=1)
            out = await P.handle_produce(env, ctx(0, 9), req(0, acks=1, timeout_ms=100, topic_data=[
                Struct(name="T", partition_data=[Struct(index=i, records=batch) for i in (5, 1, 9)])]))
            assert out is not None
            codes = [(r.index, r.error_code, r.base_offset) for r in out.responses[0].partition_responses]
            assert codes == [(5, 0, 0), (1, E.NOT_LEADER_OR_FOLLOWER, -1),
                             (9, E.UNKNOWN_TOPIC_OR_PARTITION, -1)]
            assert broker_b.store.max_offset("T", 1) == 1 and broker_b.store.max_offset("T", 0) == 0

            fetched = await F.handle_fetch(env, ctx(1, 12), req(1, max_wait_ms=0, min_bytes=1, topics=[
                Struct(topic="T", partitions=[Struct(partition=p, fetch_offset=0, partition_max_bytes=1 << 20,
                                                     current_leader_epoch=-1) for p in (5, 0)])]))
            p5, p0 = fetched.responses[0].partitions
            assert (p5.error_code, p5.high_watermark) == (0, 1) and p5.records
            assert p0.error_code == E.NOT_LEADER_OR_FOLLOWER

            # Offsets of this broker's partitions go to its own table under the local queue id.
            routed = RoutedOffsets(view, broker_b.offsets, rc)
            routed.commit("g", "T", 5, 7)
            assert broker_b.offsets.query("g", "T", 1) == 7
            assert routed.query("g", "T", 5) == 7 and routed.offsets("g", "T") == {5: 7}
            routed.commit("g", "T", 2, 3)  # broker-a's partition: queued for forwarding, not stored here
            assert [(c.broker, c.queue_id, c.offset) for c in routed.take_outbox()] == [("broker-a", 2, 3)]
            assert broker_b.offsets.query("g", "T", 2) is None
