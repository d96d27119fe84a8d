"""INVOKE_BROKER_TO_RESET_OFFSET (222): reset a live group's offsets by time and tell its clients.

Theory of operation
-------------------
An admin asks the broker to move group G on topic T to the first message
stored at or after ``timestamp`` (-1 = the end of each queue).  Without
``isForce`` an offset only moves backwards (a reset never skips unconsumed
messages).  The broker commits the new offsets itself (so a client that
misses the notification still resumes there after a rebalance) and sends
RESET_CONSUMER_CLIENT_OFFSET (220, oneway) to every live member of G.  The
body format follows the member's language: the C++ client parses only the
array form ``{"offsetTable":[{brokerName, queueId, topic, offset}]}``;
Java-style clients get the map keyed by MessageQueue objects, written as
standard JSON (the key is the queue's JSON text).  The admin gets the table
back in the same form as its language (Java's mqadmin resetOffsetByTime decodes
ResetOffsetBody, the keyed map; the array form made it fail with a JSONException).
The group may be any non-empty name (Kafka group ids
are reset this way too; a group only keys the offset table); the topic must be
in the table.
"""

from __future__ import annotations

import json
from typing import Any

import structlog
from rokka.core import names
from rokka.gateway.rocketmq.handlers.context import BrokerEnv
from rokka.net.remoting.codec.codes import RequestCode, ResponseCode
from rokka.net.remoting.codec.remoting import RemotingCommand
from rokka.net.remoting.codec.request_headers import ResetOffsetRequestHeader

log = structlog.get_logger(__name__)


def compute_offsets(env: BrokerEnv, group: str, topic: str, timestamp: int, force: bool) -> dict[int, int]:
    broker = env.broker
    tc = broker.topics.get(topic)
    table: dict[int, int] = {}
    if tc is None:
        return table
    store = broker.store
    for q in range(tc.read_queue_nums):
        if timestamp < 0:
            target = store.max_offset(topic, q)
        else:
            target = store.offset_by_time(topic, q, timestamp)
            at = store.store_time_at(topic, q, target)
            if at is not None and at < timestamp and target < store.max_offset(topic, q):
                target += 1  # RocketMQ's search may answer the message just before the time
        current = broker.offsets.query(group, topic, q)
        if not force and current is not None and target > current:
            target = current
        table[q] = target
    return table


def _bodies(env: BrokerEnv, topic: str, table: dict[int, int]) -> tuple[bytes, bytes]:
    name = env.cfg.broker_name
    array = [{"brokerName": name, "offset": off, "queueId": q, "topic": topic} for q, off in table.items()]
    c_style = json.dumps({"offsetTable": array}).encode()
    keyed = {json.dumps({"brokerName": name, "queueId": q, "topic": topic}, separators=(",", ":")): off
             for q, off in table.items()}
    return c_style, json.dumps({"offsetTable": keyed}).encode()


async def handle_reset_offset(env: BrokerEnv, channel: Any, req: RemotingCommand) -> RemotingCommand:
    h = ResetOffsetRequestHeader.decode(req)
    topic, group, timestamp = h.topic, h.group, h.timestamp
    force = h.is_force is not False
    if not group:
        names.refused("rocketmq", "group", group, "The specified group is blank.", op="reset_offset")
        return req.make_response(ResponseCode.SYSTEM_ERROR, "The specified group is blank.")
    if env.broker.topics.get(topic) is None:
        return req.make_response(ResponseCode.TOPIC_NOT_EXIST, f"topic[{topic}] not exist")
    table = compute_offsets(env, group, topic, timestamp, force)
    for q, off in table.items():
        env.broker.offsets.commit(group, topic, q, off)
    env.broker.offsets.persist()
    c_style, keyed = _bodies(env, topic, table)
    info = env.broker.consumers.get(group)
    notified = 0
    for client in list(info.clients.values()) if info else []:
        cmd = RemotingCommand(code=RequestCode.RESET_CONSUMER_CLIENT_OFFSET,
                              ext_fields=ResetOffsetRequestHeader(topic=topic, group=group, timestamp=timestamp,
                                                                  is_force=force).encode(),
                              body=c_style if client.language == "CPP" else keyed)
        try:
            await client.handle.send_oneway(cmd)
            notified += 1
        except Exception as exc:  # noqa: BLE001 - a dead client must not fail the reset
            log.info("rocketmq.reset_offset_notification_failed", group=group, client=client.client_id, error=str(exc))
    log.info("rocketmq.offsets_reset", group=group, topic=topic, timestamp=timestamp, queues=len(table),
             notified=notified)
    return req.make_response(ResponseCode.SUCCESS, body=c_style if req.language == "CPP" else keyed)
