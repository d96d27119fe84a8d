"""Names on the RocketMQ codes shared with Kafka and on the name server (issue 19.1).

The offset codes and DELETE_SUBSCRIPTIONGROUP carry Kafka group ids (free strings, routed by the
Kafka cluster layer), so they must keep accepting them while refusing empty groups and topics no
protocol allows.  The name server refuses invalid topic names.  Ports 0 on 127.0.0.1, a tmp_path
store, the project's own client library as the peer, every test bounded by ``trio.fail_after``.
"""

from __future__ import annotations

from pathlib import Path

from rokka.net.remoting.client import Producer
from rokka.net.remoting.codec.codes import RequestCode, ResponseCode
from rokka.net.remoting.codec.headers import to_ext
from rokka.net.remoting.codec.remoting import RemotingCommand

from tests.gateway.rocketmq.test_txn_handlers import routed_stack


async def test_offset_codes_keep_kafka_group_ids_and_refuse_bad_names(tmp_path: Path) -> None:
    async with routed_stack(tmp_path, "kafka.orders") as (ns_addr, broker, role, rc, ns):
        await Producer(rc, ns, "n-pg").send("kafka.orders", b"x", queue=0)

        async def call(code: int, **ext: object) -> RemotingCommand:
            return await rc.invoke(broker, RemotingCommand(code, ext_fields=to_ext(**ext)))

        kafka_group = "orders consumers/v1@eu"          # legal in Kafka: stays usable
        update = await call(RequestCode.UPDATE_CONSUMER_OFFSET, consumerGroup=kafka_group,
                            topic="kafka.orders", queueId=0, commitOffset=1)
        assert update.code == ResponseCode.SUCCESS
        query = await call(RequestCode.QUERY_CONSUMER_OFFSET, consumerGroup=kafka_group,
                           topic="kafka.orders", queueId=0)
        assert query.code == ResponseCode.SUCCESS and query.ext_fields["offset"] == "1"
        for group, topic in (("", "kafka.orders"), ("g", "../commitlog"), ("g", "..")):
            for code in (RequestCode.UPDATE_CONSUMER_OFFSET, RequestCode.QUERY_CONSUMER_OFFSET):
                resp = await call(code, consumerGroup=group, topic=topic, queueId=0, commitOffset=1)
                assert resp.code == ResponseCode.SYSTEM_ERROR, (group, topic, resp.remark)
        assert role.broker.offsets.topics_of_group("g") == set()
        deleted = await call(RequestCode.DELETE_SUBSCRIPTIONGROUP, groupName=kafka_group)
        assert deleted.code == ResponseCode.SUCCESS
        refused = await call(RequestCode.DELETE_SUBSCRIPTIONGROUP, groupName="")
        assert refused.code == ResponseCode.SYSTEM_ERROR
        for topic in ("..", "a/b"):
            route = await rc.invoke(ns_addr, RemotingCommand(RequestCode.GET_ROUTEINFO_BY_TOPIC,
                                                             ext_fields={"topic": topic}))
            assert route.code == ResponseCode.TOPIC_NOT_EXIST
            gone = await rc.invoke(ns_addr, RemotingCommand(RequestCode.DELETE_TOPIC_IN_NAMESRV,
                                                            ext_fields={"topic": topic}))
            assert gone.code == ResponseCode.SYSTEM_ERROR
        system = await call(RequestCode.DELETE_TOPIC_IN_BROKER, topic="TBW102")
        assert system.code == ResponseCode.SYSTEM_ERROR and "system topic" in (system.remark or "")
        assert "TBW102" in role.broker.topics
