"""SEND_REPLY_MESSAGE(_V2) (324/325): the broker pushes a reply to the requester named by its
REPLY_TO_CLIENT property as PUSH_REPLY_MESSAGE_TO_CLIENT (326) and stores it, as RocketMQ's
ReplyMessageProcessor does (the Java client's ``producer.request`` timed out before: "request type
325 not supported").  A reply for a requester the broker does not know is refused with the reason.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import trio
from rokka.net.remoting.client import RemotingClient
from rokka.net.remoting.codec.codes import RequestCode, ResponseCode
from rokka.net.remoting.codec.remoting import RemotingCommand

from tests.gateway.rocketmq.broker_stack import running_stack

REQUESTER = "127.0.0.1@requester"


def reply(to: str, body: bytes) -> RemotingCommand:
    props = f"CORRELATION_ID\x01corr-1\x02REPLY_TO_CLIENT\x01{to}\x02MSG_TYPE\x01reply\x02"
    ext = {"a": "PG_replier", "b": "DefaultCluster_REPLY_TOPIC", "c": "TBW102", "d": "4", "e": "-1", "f": "0",
           "g": "1700000000000", "h": "0", "i": props, "j": "0", "k": "false"}
    return RemotingCommand(RequestCode.SEND_REPLY_MESSAGE_V2, ext_fields=ext, body=body)


async def test_reply_is_pushed_to_the_requester_and_stored(tmp_path: Path) -> None:
    pushed: list[RemotingCommand] = []

    async def on_push(channel: Any, cmd: RemotingCommand) -> RemotingCommand:
        pushed.append(cmd)
        return RemotingCommand(ResponseCode.SUCCESS, flag=1, opaque=cmd.opaque)

    with trio.fail_after(30):
        async with running_stack(tmp_path) as stack:
            broker = stack.broker
            async with RemotingClient(handlers={RequestCode.PUSH_REPLY_MESSAGE_TO_CLIENT: on_push}) as requester, \
                    RemotingClient() as replier:
                beat = {"clientID": REQUESTER, "producerDataSet": [{"groupName": "PG_requester"}],
                        "consumerDataSet": []}
                ok = await requester.invoke(broker, RemotingCommand(RequestCode.HEART_BEAT,
                                                                    body=json.dumps(beat).encode()))
                assert ok.code == ResponseCode.SUCCESS
                resp = await replier.invoke(broker, reply(REQUESTER, b"pong"))
                assert resp.code == ResponseCode.SUCCESS, resp.remark
                assert resp.ext_fields["msgId"]                      # stored as well
                (push,) = pushed
                assert push.body == b"pong"
                assert push.ext_fields["topic"] == "DefaultCluster_REPLY_TOPIC"
                assert "CORRELATION_ID\x01corr-1" in push.ext_fields["properties"]
                host_, _, port_ = push.ext_fields["bornHost"].rpartition(":")
                assert host_ and int(port_) > 0 and ":" in push.ext_fields["storeHost"]

                gone = await replier.invoke(broker, reply("127.0.0.1@nobody", b"late"))
                assert gone.code == ResponseCode.SYSTEM_ERROR
                assert gone.remark == "push reply message fail, channel of <127.0.0.1@nobody> not found."
