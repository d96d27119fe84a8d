"""CreateTopics with a manual replica assignment in a two-broker cluster: the receiving broker
("broker-b") must lead every partition; replicas after the first are ignored (one replica per
partition); a partition led by the other live broker, or an unknown broker, is refused."""

from __future__ import annotations

from pathlib import Path

import trio
from rokka.gateway.kafka.cluster import ClusterView
from rokka.gateway.kafka.codec import Struct
from rokka.gateway.kafka.errors import ErrorCode as E
from rokka.gateway.kafka.handlers import KafkaEnv
from rokka.gateway.kafka.handlers import metadata as M
from rokka.net.remoting.client import NamesrvClient, RemotingClient, register_broker
from rokka.net.remoting.client.namesrv import dumps_wrapper

from tests.gateway.kafka.test_cluster_metadata import (  # noqa: F401 (namesrv: the fixture)
    A_NODE,
    B_NODE,
    ctx,
    local_count,
    make_broker,
    namesrv,
    req,
)


async def test_assignment_in_a_cluster(tmp_path: Path, namesrv: str) -> None:  # noqa: F811
    broker_b = make_broker(tmp_path, "broker-b")
    with trio.fail_after(20):
        async with RemotingClient(timeout_s=5.0) as rc:
            ns = NamesrvClient(rc, namesrv)
            version = {"counter": 1, "timestamp": 0}
            for name, addr in (("broker-a", "127.0.0.1:1"), ("broker-b", "127.0.0.1:2")):
                await register_broker(rc, [namesrv], cluster="C", broker_name=name, broker_addr=addr,
                                      topic_config_wrapper=dumps_wrapper(version, {}))
            await ns.put_kv("ROKKA_KAFKA", "broker-a", A_NODE.to_json())
            view = ClusterView("broker-b", B_NODE, "127.0.0.1:2", lambda t: local_count(broker_b, t), ns)
            await view.refresh_brokers()
            env = KafkaEnv(broker_b, node_id=B_NODE.node_id, host=B_NODE.host, port=B_NODE.port, cluster=view)
            a, b = A_NODE.node_id, B_NODE.node_id

            async def create(name: str, assignment: list[list[int]]) -> Struct:
                body = req(19, timeout_ms=1000, validate_only=False, topics=[Struct(
                    name=name, num_partitions=-1, replication_factor=-1, configs=[],
                    assignments=[Struct(partition_index=i, broker_ids=r) for i, r in enumerate(assignment)])])
                return (await M.handle_create_topics(env, ctx(19, 5), body)).topics[0]

            ok = await create("here", [[b, a], [b, a]])
            assert (ok.error_code, ok.num_partitions, ok.replication_factor) == (0, 2, 1)
            assert local_count(broker_b, "here") == 2
            there = await create("there", [[b], [a]])
            assert there.error_code == E.INVALID_REPLICA_ASSIGNMENT and f"broker {a} cannot lead" in there.error_message
            unknown = await create("nowhere", [[b, 999]])
            assert unknown.error_code == E.INVALID_REPLICA_ASSIGNMENT and "999" in unknown.error_message
            assert local_count(broker_b, "there") is None and local_count(broker_b, "nowhere") is None
