"""Committed offsets over RocketMQ remoting: QUERY_CONSUMER_OFFSET's "none" answers (RocketMQ 5's
setZeroIfNotFound, a committed -1) and DELETE_SUBSCRIPTIONGROUP with and without cleanOffset.

Rules: ports 0 on 127.0.0.1, a tmp_path store, the project's own client library as the peer, every
test bounded by ``trio.fail_after``.
"""

from __future__ import annotations

from pathlib import Path

import trio
from rokka.net.remoting.client import MessageQueue, Producer, PullConsumer
from rokka.net.remoting.codec.codes import RequestCode, ResponseCode
from rokka.net.remoting.codec.headers import to_ext
from rokka.net.remoting.codec.remoting import RemotingCommand

from tests.gateway.rocketmq.test_txn_handlers import routed_stack


async def test_query_none_answers_and_group_deletion(tmp_path: Path) -> None:
    async with routed_stack(tmp_path, "GO") as (ns_addr, broker, role, rc, ns):
        await Producer(rc, ns, "go-pg").send("GO", b"x", queue=0)
        mq = MessageQueue("GO", role.cfg.broker_name, 0)
        consumer = PullConsumer(rc, ns, "go-g")

        async def plain_query() -> int:
            """QUERY_CONSUMER_OFFSET with setZeroIfNotFound=false: the response code."""
            ext = to_ext(consumerGroup="go-g", topic="GO", queueId=0, setZeroIfNotFound=False)
            return (await rc.invoke(broker, RemotingCommand(RequestCode.QUERY_CONSUMER_OFFSET,
                                                            ext_fields=ext))).code

        async def delete_group(**ext: object) -> None:
            cmd = RemotingCommand(RequestCode.DELETE_SUBSCRIPTIONGROUP,
                                  ext_fields=to_ext(groupName="go-g", **ext))
            assert (await rc.invoke(broker, cmd)).code == ResponseCode.SUCCESS

        # Never committed: 4.x semantics answer 0 (the queue starts at 0, in memory) ...
        assert await consumer.query_offset(mq) == 0
        # ... RocketMQ 5's setZeroIfNotFound=false gets the plain "not found".
        assert await plain_query() == ResponseCode.QUERY_NOT_FOUND
        await consumer.update_offset(mq, -1)             # a committed -1 reads as none
        assert await plain_query() == ResponseCode.QUERY_NOT_FOUND
        await consumer.update_offset(mq, 1)
        assert await consumer.query_offset(mq) == 1
        await delete_group()                             # config only: the offset stays
        assert await consumer.query_offset(mq) == 1
        await delete_group(cleanOffset=True)             # mqadmin deleteSubGroup -r
        assert await plain_query() == ResponseCode.QUERY_NOT_FOUND
        assert role.broker.offsets.topics_of_group("go-g") == set()


async def test_go_clients_fire_and_forget_offset_updates_get_no_answer(tmp_path: Path) -> None:
    """rocketmq-client-go sends UPDATE_CONSUMER_OFFSET through its "oneway" call without the oneway flag and
    never reads the answer; a push consumer's shutdown then closes with answers unread, a reset that drops its
    own offset writes still queued.  So a GO update is stored but not answered; a JAVA one is answered."""
    from tests.gateway.rocketmq.test_server import RawPeer

    async with routed_stack(tmp_path, "GU") as (_ns_addr, broker, role, _rc, _ns):
        host, port = broker.rsplit(":", 1)
        peer = await RawPeer.connect((host, int(port)))

        def update(offset: int, language: str) -> RemotingCommand:
            return RemotingCommand(RequestCode.UPDATE_CONSUMER_OFFSET, language=language, ext_fields=to_ext(
                consumerGroup="gu-g", topic="GU", queueId=0, commitOffset=offset))

        query = RemotingCommand(RequestCode.QUERY_CONSUMER_OFFSET, language="GO",
                                ext_fields=to_ext(consumerGroup="gu-g", topic="GU", queueId=0))
        await peer.stream.send_all(peer.conn.start_request(update(7, "GO")))
        while role.broker.offsets.query("gu-g", "GU", 0) != 7:  # noqa: ASYNC110 - stored (bounded)
            await trio.sleep(0.01)
        answer = await peer.request(query)          # the next frame answers the query, not the update
        assert answer.opaque == query.opaque and answer.ext_fields["offset"] == "7"
        java = update(8, "JAVA")
        assert (await peer.request(java)).opaque == java.opaque
        assert role.broker.offsets.query("gu-g", "GU", 0) == 8
        await peer.stream.aclose()
