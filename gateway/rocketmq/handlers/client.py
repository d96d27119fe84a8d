"""Client-facing bookkeeping requests: heartbeats, group membership, offsets, queue locks.

Theory of operation
-------------------
HEART_BEAT bodies differ per client (reference §4.7): enum names or
ordinals, missing arrays, string subVersions, wrong C++ ``codeSet``.  The
parser here accepts all of them and recomputes tag codes.  A consumer
heartbeat auto-creates the subscription group and its ``%RETRY%`` topic and,
when the member set or subscriptions changed, notifies every member
(NOTIFY_CONSUMER_IDS_CHANGED).  Connections that close drop their clients
(``on_channel_closed``).

QUERY_CONSUMER_OFFSET for a group with no stored offset answers as the Java
broker does on a small store: 0 when the queue's min offset is 0 and its
first message is still "in memory" (within 40 % of RAM of the CommitLog
head), else QUERY_NOT_FOUND.

Names (``rokka.core.names``): a consumer group in a heartbeat must be a valid
consumer group (its ``%RETRY%`` topic is created from it), else the heartbeat
is answered SYSTEM_ERROR with RocketMQ 5's validateGroup remark and nothing
is created; a subscription to an invalid, unknown topic is dropped.  The
offset codes are shared with Kafka (routed OffsetCommit / OffsetFetch carry
Kafka group ids, which are free strings), so they refuse only an empty group
and a topic that is neither in the table nor valid for either protocol.  Each
refusal logs one ``rocketmq.bad_name`` line.

Queue locks (LOCK_BATCH_MQ / UNLOCK_BATCH_MQ) keep an orderly consumer group
from consuming one queue on two clients; a lock expires 60 s after its last
renewal.
"""

from __future__ import annotations

import json
import time
from typing import Any

import structlog
from rokka.core import names
from rokka.core.filter import SubscriptionParseError, build_subscription
from rokka.core.groups import MESSAGE_MODEL_CLUSTERING, ClientInfo
from rokka.gateway.rocketmq.handlers.context import BrokerEnv, in_memory
from rokka.net.remoting.codec.codes import ResponseCode
from rokka.net.remoting.codec.remoting import RemotingCommand
from rokka.net.remoting.codec.request_headers import (
    GetConsumerListByGroupRequestHeader,
    GetEarliestMsgStoretimeRequestHeader,
    GetMaxOffsetRequestHeader,
    GetMinOffsetRequestHeader,
    QueryConsumerOffsetRequestHeader,
    SearchOffsetRequestHeader,
    UnregisterClientRequestHeader,
    UpdateConsumerOffsetRequestHeader,
)
from rokka.net.remoting.codec.response_headers import (
    GetEarliestMsgStoretimeResponseHeader,
    GetMaxOffsetResponseHeader,
    GetMinOffsetResponseHeader,
    QueryConsumerOffsetResponseHeader,
    SearchOffsetResponseHeader,
)

log = structlog.get_logger(__name__)

CONSUME_TYPES = ["CONSUME_ACTIVELY", "CONSUME_PASSIVELY"]
MESSAGE_MODELS = ["BROADCASTING", "CLUSTERING"]
CONSUME_FROM = ["CONSUME_FROM_LAST_OFFSET", "CONSUME_FROM_LAST_OFFSET_AND_FROM_MIN_WHEN_BOOT_FIRST",
                "CONSUME_FROM_MIN_OFFSET", "CONSUME_FROM_MAX_OFFSET", "CONSUME_FROM_FIRST_OFFSET",
                "CONSUME_FROM_TIMESTAMP"]
LOCK_MAX_LIVE_MS = 60_000


def _enum(value: Any, names: list[str], default: str) -> str:
    if isinstance(value, int) and 0 <= value < len(names):
        return names[value]
    if isinstance(value, str):
        if value.isdigit() and int(value) < len(names):
            return names[int(value)]
        if value in names:
            return value
    return default


def now_ms() -> int:
    return int(time.time() * 1000)


def _client_info(channel: Any, client_id: str, req: RemotingCommand) -> ClientInfo:
    peer = getattr(channel, "peer", ("", 0))
    return ClientInfo(client_id=client_id, handle=channel, language=req.language, version=req.version,
                      addr=f"{peer[0]}:{peer[1]}" if peer else "")


async def handle_heartbeat(env: BrokerEnv, channel: Any, req: RemotingCommand) -> RemotingCommand:
    try:
        data = json.loads(req.body.decode("utf-8") or "{}")
    except (UnicodeDecodeError, ValueError) as exc:
        return req.make_response(ResponseCode.SYSTEM_ERROR, f"bad heartbeat body: {exc}")
    client_id = str(data.get("clientID") or "")
    broker = env.broker
    for pd in data.get("producerDataSet") or []:
        group = str(pd.get("groupName") or "")
        if group:
            broker.producers.register(group, _client_info(channel, client_id, req), now_ms())
    for cd in data.get("consumerDataSet") or []:
        group = str(cd.get("groupName") or "")
        if not group:
            continue
        if (bad := names.consumer_group_problem(group)) is not None:
            names.refused("rocketmq", "group", group, bad, op="heartbeat", peer=str(getattr(channel, "peer", "")))
            return req.make_response(ResponseCode.SYSTEM_ERROR, bad)
        refusal = env.shared.refuse_rocketmq_group
        if refusal is not None and (reason := refusal(group)):
            return req.make_response(ResponseCode.SYSTEM_ERROR, reason)
        sub_cfg = broker.sub_groups.get(group)
        if sub_cfg is None:
            log.warning("rocketmq.heartbeat_unknown_group_refused", group=group)
            continue
        if f"%RETRY%{group}" not in broker.topics:
            broker.topics.ensure_retry(group, sub_cfg.retry_queue_nums)
            env.topic_changed()
        subs = []
        for sd in cd.get("subscriptionDataSet") or []:
            topic = str(sd.get("topic"))
            if topic not in broker.topics and (bad := names.topic_problem(topic)) is not None:
                names.refused("rocketmq", "topic", topic, bad, op="heartbeat", group=group)
                continue
            try:
                subs.append(build_subscription(topic, sd.get("subString"),
                                               sd.get("expressionType"), int(sd.get("subVersion") or 0)))
            except (SubscriptionParseError, ValueError) as exc:
                log.warning("rocketmq.heartbeat_bad_subscription", group=group, error=str(exc))
        changed = broker.consumers.register(
            group, _client_info(channel, client_id, req),
            consume_type=_enum(cd.get("consumeType"), CONSUME_TYPES, "CONSUME_PASSIVELY"),
            message_model=_enum(cd.get("messageModel"), MESSAGE_MODELS, MESSAGE_MODEL_CLUSTERING),
            consume_from_where=_enum(cd.get("consumeFromWhere"), CONSUME_FROM, CONSUME_FROM[0]),
            subscriptions=subs, now_ms=now_ms())
        if changed:
            env.notify_consumer_ids_changed(group)
    return req.make_response(ResponseCode.SUCCESS)


async def handle_check_client_config(env: BrokerEnv, channel: Any, req: RemotingCommand) -> RemotingCommand:
    """CHECK_CLIENT_CONFIG (46): the Java push consumer asks before it starts whether the broker can
    serve its subscription (SQL92 needs enablePropertyFilter and an expression that compiles)."""
    try:
        data = json.loads(req.body.decode("utf-8") or "{}") if req.body else {}
        sd = data.get("subscriptionData") or None
    except (UnicodeDecodeError, ValueError, AttributeError) as exc:
        return req.make_response(ResponseCode.SYSTEM_ERROR, f"bad check client config body: {exc}")
    etype = str((sd or {}).get("expressionType") or "TAG").upper()
    if sd is None or etype == "TAG":
        return req.make_response(ResponseCode.SUCCESS)
    if not env.cfg.enable_property_filter:
        log.info("rocketmq.check_client_config_refused", group=data.get("group"), expression_type=etype)
        return req.make_response(ResponseCode.SYSTEM_ERROR,
                                 f"The broker does not support consumer to filter message by {etype}")
    try:
        build_subscription(str(sd.get("topic") or ""), sd.get("subString"), etype)
    except SubscriptionParseError as exc:
        log.info("rocketmq.check_client_config_refused", group=data.get("group"), error=str(exc))
        return req.make_response(ResponseCode.SUBSCRIPTION_PARSE_FAILED, f"Parameter check error: {exc}")
    return req.make_response(ResponseCode.SUCCESS)


async def handle_unregister(env: BrokerEnv, channel: Any, req: RemotingCommand) -> RemotingCommand:
    h = UnregisterClientRequestHeader.decode(req)
    client_id, pgroup, cgroup = h.client_id, h.producer_group, h.consumer_group
    if pgroup:
        env.broker.producers.unregister(pgroup, client_id)
    if cgroup and env.broker.consumers.unregister(cgroup, client_id):
        env.notify_consumer_ids_changed(cgroup)
    return req.make_response(ResponseCode.SUCCESS)


def on_channel_closed(env: BrokerEnv, channel: Any) -> None:
    env.broker.producers.drop_handle(channel)
    for group in set(env.broker.consumers.drop_handle(channel)):
        env.notify_consumer_ids_changed(group)


def scan_expired_clients(env: BrokerEnv) -> None:
    now = now_ms()
    env.broker.producers.scan_expired(now)
    for group in set(env.broker.consumers.scan_expired(now)):
        env.notify_consumer_ids_changed(group)


async def handle_consumer_list(env: BrokerEnv, channel: Any, req: RemotingCommand) -> RemotingCommand:
    group = GetConsumerListByGroupRequestHeader.decode(req).consumer_group
    info = env.broker.consumers.get(group)
    if info is None or not info.clients:
        return req.make_response(ResponseCode.SYSTEM_ERROR, f"no consumer for this group, {group}")
    body = json.dumps({"consumerIdList": info.client_ids()}).encode()
    return req.make_response(ResponseCode.SUCCESS, body=body)


def _first_message_in_memory(env: BrokerEnv, topic: str, queue_id: int) -> bool:
    units = env.broker.store.cq_units(topic, queue_id, 0, 1)
    if not units:
        return True
    return in_memory(env, units[0].commitlog_offset)


def _offset_names_refusal(env: BrokerEnv, req: RemotingCommand, group: str, topic: str) -> RemotingCommand | None:
    """SYSTEM_ERROR for an offset request with an empty group or an unknown topic no protocol allows."""
    why = "The specified group is blank." if not group else None
    kind, name = "group", group
    if why is None and topic not in env.broker.topics:
        why, kind, name = names.store_topic_problem(topic), "topic", topic
    if why is None:
        return None
    names.refused("rocketmq", kind, name, why, request_code=req.code)
    return req.make_response(ResponseCode.SYSTEM_ERROR, why)


async def handle_query_offset(env: BrokerEnv, channel: Any, req: RemotingCommand) -> RemotingCommand:
    h = QueryConsumerOffsetRequestHeader.decode(req)
    group, topic, queue_id = h.consumer_group, h.topic, h.queue_id
    if (refused := _offset_names_refusal(env, req, group, topic)) is not None:
        return refused
    offset = env.broker.offsets.query(group, topic, queue_id)
    if offset is None or offset < 0:   # a committed -1 reads as none, as in RocketMQ
        # RocketMQ 5's setZeroIfNotFound=false (4.x clients never send it) asks for the plain answer.
        zero_if_not_found = h.set_zero_if_not_found is not False
        if (zero_if_not_found and env.broker.store.min_offset(topic, queue_id) <= 0
                and _first_message_in_memory(env, topic, queue_id)):
            offset = 0
        else:
            return req.make_response(ResponseCode.QUERY_NOT_FOUND,
                                     "Not found, V3_0_6_SNAPSHOT maybe this group consumer boot first")
    metadata, epoch = env.broker.offsets.commit_metadata(group, topic, queue_id)
    extras = metadata or epoch >= 0     # Kafka commit extras for a routed OffsetFetch (kafka/cluster.py)
    header = QueryConsumerOffsetResponseHeader(offset=offset, kafka_metadata=metadata if extras else None,
                                               kafka_leader_epoch=epoch if extras else None)
    return req.make_response(ResponseCode.SUCCESS, ext_fields=header.encode())


async def handle_update_offset(env: BrokerEnv, channel: Any, req: RemotingCommand) -> RemotingCommand:
    h = UpdateConsumerOffsetRequestHeader.decode(req)
    group, topic = h.consumer_group, h.topic
    if (refused := _offset_names_refusal(env, req, group, topic)) is not None:
        return refused
    epoch = -1 if h.kafka_leader_epoch is None else h.kafka_leader_epoch
    env.broker.offsets.commit(group, topic, h.queue_id, h.commit_offset, metadata=h.kafka_metadata, leader_epoch=epoch)
    return req.make_response(ResponseCode.SUCCESS)


async def handle_max_offset(env: BrokerEnv, channel: Any, req: RemotingCommand) -> RemotingCommand:
    h = GetMaxOffsetRequestHeader.decode(req)
    offset = env.broker.store.max_offset(h.topic, h.queue_id)
    return req.make_response(ResponseCode.SUCCESS, ext_fields=GetMaxOffsetResponseHeader(offset=offset).encode())


async def handle_min_offset(env: BrokerEnv, channel: Any, req: RemotingCommand) -> RemotingCommand:
    h = GetMinOffsetRequestHeader.decode(req)
    offset = env.broker.store.min_offset(h.topic, h.queue_id)
    return req.make_response(ResponseCode.SUCCESS, ext_fields=GetMinOffsetResponseHeader(offset=offset).encode())


async def handle_search_offset(env: BrokerEnv, channel: Any, req: RemotingCommand) -> RemotingCommand:
    h = SearchOffsetRequestHeader.decode(req)
    offset = env.broker.store.offset_by_time(h.topic, h.queue_id, h.timestamp)
    return req.make_response(ResponseCode.SUCCESS, ext_fields=SearchOffsetResponseHeader(offset=offset).encode())


async def handle_earliest_time(env: BrokerEnv, channel: Any, req: RemotingCommand) -> RemotingCommand:
    h = GetEarliestMsgStoretimeRequestHeader.decode(req)
    topic, queue_id = h.topic, h.queue_id
    ts = env.broker.store.earliest_store_time(topic, queue_id) if topic in env.broker.topics else -1
    return req.make_response(ResponseCode.SUCCESS,
                             ext_fields=GetEarliestMsgStoretimeResponseHeader(timestamp=ts).encode())


# -- queue locks ----------------------------------------------------------------

def _mq_key(mq: dict[str, Any]) -> tuple[str, str, int]:
    return (str(mq.get("topic")), str(mq.get("brokerName")), int(mq.get("queueId", 0)))


def _locks(env: BrokerEnv) -> dict[str, dict[tuple[str, str, int], tuple[str, int]]]:
    return env.mq_locks


def try_lock(env: BrokerEnv, group: str, client_id: str, mqs: list[dict[str, Any]],
             now: int) -> list[dict[str, Any]]:
    table = _locks(env).setdefault(group, {})
    granted = []
    for mq in mqs:
        key = _mq_key(mq)
        holder = table.get(key)
        if holder is None or holder[0] == client_id or now - holder[1] > LOCK_MAX_LIVE_MS:
            table[key] = (client_id, now)
            granted.append({"brokerName": key[1], "queueId": key[2], "topic": key[0]})
    return granted


async def handle_lock(env: BrokerEnv, channel: Any, req: RemotingCommand) -> RemotingCommand:
    try:
        data = json.loads(req.body or b"{}")
        group, client_id = str(data["consumerGroup"]), str(data["clientId"])
        mqs = list(data.get("mqSet") or [])
    except (ValueError, KeyError, TypeError) as exc:
        return req.make_response(ResponseCode.SYSTEM_ERROR, f"bad lock body: {exc}")
    granted = try_lock(env, group, client_id, mqs, now_ms())
    log.debug("rocketmq.lock_batch_mq", group=group, client=client_id, asked=len(mqs), granted=len(granted))
    return req.make_response(ResponseCode.SUCCESS, body=json.dumps({"lockOKMQSet": granted}).encode())


async def handle_unlock(env: BrokerEnv, channel: Any, req: RemotingCommand) -> RemotingCommand:
    try:
        data = json.loads(req.body or b"{}")
        group, client_id = str(data["consumerGroup"]), str(data["clientId"])
        mqs = list(data.get("mqSet") or [])
    except (ValueError, KeyError, TypeError) as exc:
        return req.make_response(ResponseCode.SYSTEM_ERROR, f"bad unlock body: {exc}")
    table = _locks(env).get(group, {})
    log.debug("rocketmq.unlock_batch_mq", group=group, client=client_id, queues=len(mqs))
    for mq in mqs:
        key = _mq_key(mq)
        if table.get(key, ("",))[0] == client_id:
            del table[key]
    return req.make_response(ResponseCode.SUCCESS)
