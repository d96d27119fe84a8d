"""Consumer diagnostics forwarded to the consumer's own connection.

Theory of operation
-------------------
GET_CONSUMER_RUNNING_INFO (307) and CONSUME_MESSAGE_DIRECTLY (309) are asked of
the broker by ``mqadmin`` / the dashboard, but answered by a consumer client:
the broker looks the client up by ``consumerGroup`` + ``clientId`` among the
connections that sent heartbeats, sends a new request with the same code,
extFields and body over that connection, and relays the client's response as
it came (Java's ``AdminBrokerProcessor.callConsumer`` + ``Broker2Client.callClient``,
10 s).  CONSUME_MESSAGE_DIRECTLY first puts ``brokerName`` into the header and
the stored message (by its offset message id) into the body.

INVOKE_BROKER_TO_GET_CONSUMER_STATUS (223) asks every live member of the group
(or only ``clientAddr``'s client id) GET_CONSUMER_STATUS_FROM_CLIENT (221, 5 s) and
answers ``{"consumerTable": {clientId: messageQueueTable}}`` with the members that
answered (Java's ``Broker2Client.getConsumeStatus``); no member online ->
SYSTEM_ERROR "No Any Consumer online in the consumer group: [g]".

Answers of the broker itself, with Java's remarks: client not found ->
SYSTEM_ERROR "The Consumer <g> <id> not online"; client older than
V3_1_8_SNAPSHOT -> SYSTEM_ERROR "... too low to finish ..."; no answer in time ->
CONSUME_MSG_TIMEOUT "consumer <g> <id> Timeout: ..."; the connection failed ->
SYSTEM_ERROR "invoke consumer <g> <id> Exception: ...".
"""

from __future__ import annotations

import json
from typing import Any

import structlog
from rokka.core.record import decode_offset_msg_id
from rokka.gateway.rocketmq.handlers.context import BrokerEnv
from rokka.net.remoting.channel import ChannelClosedError, RequestTimeoutError
from rokka.net.remoting.codec.bodies import loads_body
from rokka.net.remoting.codec.codes import RequestCode, ResponseCode
from rokka.net.remoting.codec.remoting import RemotingCommand
from rokka.net.remoting.codec.request_headers import (
    ConsumeMessageDirectlyResultRequestHeader,
    GetConsumerRunningInfoRequestHeader,
    GetConsumerStatusRequestHeader,
)

log = structlog.get_logger(__name__)

CALL_CLIENT_TIMEOUT_S = 10.0
V3_1_8_SNAPSHOT = 62    # MQVersion ordinal: the first client that answers these requests
V3_0_7_SNAPSHOT = 28    # ... that answers GET_CONSUMER_STATUS_FROM_CLIENT
CONSUMER_STATUS_TIMEOUT_S = 5.0


async def call_consumer(env: BrokerEnv, req: RemotingCommand, code: int, group: str, client_id: str,
                        body: bytes) -> RemotingCommand:
    info = env.broker.consumers.get(group)
    client = info.clients.get(client_id) if info is not None else None
    if client is None:
        return req.make_response(ResponseCode.SYSTEM_ERROR, f"The Consumer <{group}> <{client_id}> not online")
    if client.version < V3_1_8_SNAPSHOT:
        return req.make_response(ResponseCode.SYSTEM_ERROR, (
            f"The Consumer <{client_id}> Version <{client.version}> too low to finish, "
            "please upgrade it to V3_1_8_SNAPSHOT"))
    forward = RemotingCommand(code, ext_fields=dict(req.ext_fields or {}), body=body)
    try:
        answer = await client.handle.send_request(forward, CALL_CLIENT_TIMEOUT_S)
    except RequestTimeoutError as exc:
        log.warning("rocketmq.call_consumer_timeout", code=code, group=group, client=client_id)
        return req.make_response(ResponseCode.CONSUME_MSG_TIMEOUT,
                                 f"consumer <{group}> <{client_id}> Timeout: {exc}")
    except (ChannelClosedError, OSError) as exc:
        log.warning("rocketmq.call_consumer_failed", code=code, group=group, client=client_id, error=str(exc))
        return req.make_response(ResponseCode.SYSTEM_ERROR,
                                 f"invoke consumer <{group}> <{client_id}> Exception: {exc}")
    return req.make_response(answer.code, answer.remark, answer.ext_fields, answer.body)


async def handle_consumer_running_info(env: BrokerEnv, channel: Any, req: RemotingCommand) -> RemotingCommand:
    h = GetConsumerRunningInfoRequestHeader.decode(req)
    return await call_consumer(env, req, RequestCode.GET_CONSUMER_RUNNING_INFO, h.consumer_group, h.client_id,
                               req.body)


async def handle_consume_message_directly(env: BrokerEnv, channel: Any, req: RemotingCommand) -> RemotingCommand:
    h = ConsumeMessageDirectlyResultRequestHeader.decode(req)
    group, client_id, msg_id = h.consumer_group, h.client_id, h.msg_id
    req.ext_fields["brokerName"] = env.cfg.broker_name
    body = req.body
    try:
        record = env.broker.store.read_record(decode_offset_msg_id(msg_id)[2])
    except (ValueError, IndexError, OSError):
        record = None
    if record is not None:
        body = record
    else:
        log.info("rocketmq.consume_directly_no_message", msg_id=msg_id, group=group)
    return await call_consumer(env, req, RequestCode.CONSUME_MESSAGE_DIRECTLY, group, client_id, body)


async def _client_status(client: Any, topic: str, group: str) -> dict[str, Any] | None:
    ask = RemotingCommand(RequestCode.GET_CONSUMER_STATUS_FROM_CLIENT,
                          ext_fields=GetConsumerStatusRequestHeader(topic=topic, group=group).encode())
    try:
        answer = await client.handle.send_request(ask, CONSUMER_STATUS_TIMEOUT_S)
        if answer.code != ResponseCode.SUCCESS or not answer.body:
            return None
        return dict(loads_body(answer.body).get("messageQueueTable") or {})
    except (RequestTimeoutError, ChannelClosedError, OSError, ValueError) as exc:
        log.warning("rocketmq.get_consumer_status_failed", group=group, client=client.client_id, error=str(exc))
        return None


async def handle_get_consumer_status(env: BrokerEnv, channel: Any, req: RemotingCommand) -> RemotingCommand:
    h = GetConsumerStatusRequestHeader.decode(req)
    topic, group, only = h.topic, h.group, h.client_addr
    info = env.broker.consumers.get(group)
    if info is None or not info.clients:
        return req.make_response(ResponseCode.SYSTEM_ERROR,
                                 f"No Any Consumer online in the consumer group: [{group}]")
    table: dict[str, Any] = {}
    for client_id, client in sorted(info.clients.items()):
        if client.version < V3_0_7_SNAPSHOT:
            return req.make_response(ResponseCode.SYSTEM_ERROR,
                                     f"the client does not support this feature. version={client.version}")
        if only is None or only == client_id:
            status = await _client_status(client, topic, group)
            if status is not None:
                table[client_id] = status
    body = json.dumps({"consumerTable": table}).encode()
    return req.make_response(ResponseCode.SUCCESS, body=body)
