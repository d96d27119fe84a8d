"""SEND_REPLY_MESSAGE (324) / SEND_REPLY_MESSAGE_V2 (325): the reply half of request-reply (RocketMQ 4.6+).

Theory of operation
-------------------
A requester (``DefaultMQProducer.request``) sends an ordinary message carrying ``CORRELATION_ID``,
``REPLY_TO_CLIENT`` (its client id) and ``TTL``; the broker stamps ``CLUSTER`` on it.  The replier
builds the reply with ``MessageUtil.createReplyMessage`` (topic ``<cluster>_REPLY_TOPIC``, the same
correlation id and client id) and sends it with these codes, whose header is SEND_MESSAGE's.

As RocketMQ's ReplyMessageProcessor: the broker finds the requester's connection among the
producers it knows (heartbeats) by ``REPLY_TO_CLIENT`` and pushes the reply to it as
PUSH_REPLY_MESSAGE_TO_CLIENT (326, a request the client answers); then it stores the reply like a
send (storeReplyMessageEnable's default).  The answer is SUCCESS when the push was answered
SUCCESS, else SYSTEM_ERROR with the reason (requester gone, no REPLY_TO_CLIENT, push failed), and
one ``rocketmq.reply_not_pushed`` log line.
"""

from __future__ import annotations

import time
from typing import Any

import structlog
import trio
from rokka.gateway.rocketmq.handlers import send
from rokka.gateway.rocketmq.handlers.context import BrokerEnv
from rokka.net.remoting.codec.codes import RequestCode, ResponseCode
from rokka.net.remoting.codec.remoting import RemotingCommand
from rokka.net.remoting.codec.request_headers import ReplyMessageRequestHeader, SendMessageRequestHeader

log = structlog.get_logger(__name__)

PUSH_TIMEOUT_S = 3.0
PROP_REPLY_TO_CLIENT = "REPLY_TO_CLIENT"


def _push_request(env: BrokerEnv, channel: Any, req: RemotingCommand,
                  h: SendMessageRequestHeader) -> RemotingCommand:
    born = send.ipv4_host(getattr(channel, "peer", None))
    store = env.broker.store_config.store_host
    push = ReplyMessageRequestHeader(
        producer_group=h.producer_group or "", topic=h.topic, default_topic=h.default_topic or "TBW102",
        default_topic_queue_nums=h.default_topic_queue_nums or 4, queue_id=h.queue_id or 0,
        sys_flag=h.sys_flag or 0, born_timestamp=h.born_timestamp or 0, flag=h.flag or 0,
        properties=h.properties or "", reconsume_times=h.reconsume_times or 0, unit_mode=False,
        born_host=f"{born[0]}:{born[1]}", store_host=f"{store[0]}:{store[1]}",
        store_timestamp=int(time.time() * 1000))
    return RemotingCommand(RequestCode.PUSH_REPLY_MESSAGE_TO_CLIENT, ext_fields=push.encode(), body=req.body)


async def _push(env: BrokerEnv, channel: Any, req: RemotingCommand, h: SendMessageRequestHeader) -> str | None:
    """Push the reply to its requester; None when it answered SUCCESS, else why not."""
    client_id = send.parse_properties(h.properties).get(PROP_REPLY_TO_CLIENT)
    if not client_id:
        return "the reply message has no REPLY_TO_CLIENT property"
    target = None
    for members in env.broker.producers.groups().values():
        for client in members:
            if client.client_id == client_id and not getattr(client.handle, "closed", True):
                target = client
    if target is None:
        return f"push reply message fail, channel of <{client_id}> not found."
    try:
        with trio.fail_after(PUSH_TIMEOUT_S + 1):
            answer = await target.handle.send_request(_push_request(env, channel, req, h), PUSH_TIMEOUT_S)
    except Exception as exc:  # noqa: BLE001 - the requester's connection failed or timed out
        return f"push reply message to <{client_id}> failed: {exc!r}"
    if answer.code != ResponseCode.SUCCESS:
        return f"push reply message to <{client_id}> failed: code {answer.code} {answer.remark or ''}"
    return None


async def handle_send_reply(env: BrokerEnv, channel: Any, req: RemotingCommand) -> RemotingCommand:
    h = SendMessageRequestHeader.decode_send(req)       # the header send.handle_send decodes too
    why_not = await _push(env, channel, req, h)
    stored = await send.handle_send(env, channel, req)      # storeReplyMessageEnable (default true)
    if why_not is not None:
        log.warning("rocketmq.reply_not_pushed", topic=h.topic, reason=why_not)
        stored.code = ResponseCode.SYSTEM_ERROR
        stored.remark = why_not
    return stored
