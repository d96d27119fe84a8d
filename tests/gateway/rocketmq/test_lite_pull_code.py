"""LITE_PULL_MESSAGE (361): RocketMQ 5's DefaultLitePullConsumer pulls with this code and
PULL_MESSAGE's header.  Before rokka knew it, every 5.x lite pull consumer got
REQUEST_CODE_NOT_SUPPORTED; under aclEnable it needs the same SUB rights as a pull.
"""

from __future__ import annotations

from pathlib import Path

import trio
from rokka.net.remoting.client import Producer
from rokka.net.remoting.client.consumer import decode_messages
from rokka.net.remoting.codec.codes import RequestCode, ResponseCode
from rokka.net.remoting.codec.headers import to_ext
from rokka.net.remoting.codec.remoting import RemotingCommand

from tests.gateway.rocketmq.broker_stack import check_needs_sub, stack_with_topic


def lite_pull(topic: str, group: str = "G") -> RemotingCommand:
    ext = to_ext(consumerGroup=group, topic=topic, queueId=0, queueOffset=0, maxMsgNums=32, sysFlag=4,
                 commitOffset=0, suspendTimeoutMillis=0, subscription="*", subVersion=0, expressionType="TAG")
    return RemotingCommand(RequestCode.LITE_PULL_MESSAGE, ext_fields=ext)


async def test_lite_pull_reads_like_pull(tmp_path: Path) -> None:
    with trio.fail_after(30):
        async with stack_with_topic(tmp_path, "LP") as (broker, rc, nsc):
            while await nsc.get_route("LP") is None:  # noqa: ASYNC110 - polls the name server
                await trio.sleep(0.05)
            await Producer(rc, nsc, "pg").send("LP", b"lite-1", queue=0)
            resp = await rc.invoke(broker, lite_pull("LP"))
            assert resp.code == ResponseCode.SUCCESS, resp.remark
            assert [m.body for m in decode_messages(resp.body)] == [b"lite-1"]


def test_lite_pull_needs_sub_rights(tmp_path: Path) -> None:
    check_needs_sub(tmp_path, lite_pull, extra_yaml="    defaultGroupPerm: SUB\n")
