"""Admin and query requests: topics, subscription groups, stats, message lookup.

Theory of operation
-------------------
These mirror the Java broker's AdminBrokerProcessor and QueryMessageProcessor
for the requests ``mqadmin`` (and ``rokka admin``) use.  Names are checked as
RocketMQ 4.9.8 checks them (``rokka.core.names``): a topic that is created or
deleted must be valid (SYSTEM_ERROR with TopicValidator's remark otherwise,
one ``rocketmq.bad_name`` log line), and system topics can be neither created
nor deleted ("The topic[..] is conflict with system topic.").  A topic already
in the table under a name that is no longer valid (created by an older rokka)
can still be deleted: its config and offsets go, and the store refuses any
directory outside ``consumequeue/``.  Subscription groups created by
UPDATE_AND_CREATE_SUBSCRIPTIONGROUP follow RocketMQ 5's ``validateGroup``.
DELETE_SUBSCRIPTIONGROUP accepts any non-empty group: Kafka group ids (free
strings) reach it from the Kafka cluster layer, and it only edits JSON tables.

Stats bodies contain
MessageQueue objects as map keys in Java (the fastjson object-key quirk);
we emit standard JSON by turning those maps into the key's JSON text, which
our own client and tools parse, and list the queues in a plain array too.
"""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path
from typing import Any

import structlog
from rokka.core import names
from rokka.core.groups import SubscriptionGroupConfig
from rokka.core.record import decode_offset_msg_id
from rokka.core.topics import MAX_QUEUE_NUMS, TopicConfig, is_system_topic
from rokka.gateway.rocketmq.handlers.context import BrokerEnv
from rokka.net.remoting.codec.codes import ResponseCode
from rokka.net.remoting.codec.remoting import RemotingCommand
from rokka.net.remoting.codec.request_headers import (
    CreateTopicRequestHeader,
    DeleteSubscriptionGroupRequestHeader,
    GetConsumerConnectionListRequestHeader,
    GetConsumeStatsRequestHeader,
    GetProducerConnectionListRequestHeader,
    QueryMessageRequestHeader,
    TopicRequestHeader,
    ViewMessageRequestHeader,
)

log = structlog.get_logger(__name__)


def _mq(env: BrokerEnv, topic: str, queue_id: int) -> dict[str, Any]:
    return {"brokerName": env.cfg.broker_name, "queueId": queue_id, "topic": topic}


def _mq_key(env: BrokerEnv, topic: str, queue_id: int) -> str:
    return json.dumps(_mq(env, topic, queue_id), separators=(",", ":"))


def refuse_name(req: RemotingCommand, channel: Any, kind: str, name: str, reason: str,
                code: int = ResponseCode.SYSTEM_ERROR) -> RemotingCommand:
    """The answer to a request carrying a bad topic or group name (and its one log line)."""
    names.refused("rocketmq", kind, name, reason, request_code=req.code, peer=str(getattr(channel, "peer", "")))
    return req.make_response(code, reason)


async def handle_create_topic(env: BrokerEnv, channel: Any, req: RemotingCommand) -> RemotingCommand:
    h = CreateTopicRequestHeader.decode(req)
    topic = h.topic
    if (bad := names.topic_problem(topic)) is not None:
        return refuse_name(req, channel, "topic", topic, bad)
    if topic == h.default_topic or (is_system_topic(topic) and topic not in env.broker.topics):
        return req.make_response(ResponseCode.SYSTEM_ERROR, f"The topic[{topic}] is conflict with system topic.")
    read, write = h.read_queue_nums, h.write_queue_nums
    if not (0 < read <= MAX_QUEUE_NUMS and 0 < write <= MAX_QUEUE_NUMS):
        return req.make_response(ResponseCode.SYSTEM_ERROR, f"queue numbers must be within 1..{MAX_QUEUE_NUMS}")
    tc = TopicConfig(topic, read, write, h.perm, h.topic_filter_type, h.topic_sys_flag or 0, h.order)
    env.broker.topics.put(tc)
    env.topic_changed()
    return req.make_response(ResponseCode.SUCCESS)


async def handle_delete_topic(env: BrokerEnv, channel: Any, req: RemotingCommand) -> RemotingCommand:
    topic = TopicRequestHeader.decode(req).topic
    broker = env.broker
    if (bad := names.topic_problem(topic)) is not None and topic not in broker.topics:
        return refuse_name(req, channel, "topic", topic, bad)
    if is_system_topic(topic):
        return refuse_name(req, channel, "topic", topic, f"The topic[{topic}] is conflict with system topic.")
    log.info("rocketmq.topic_delete_requested", topic=topic, peer=str(getattr(channel, "peer", "")))
    broker.topics.delete(topic)
    broker.offsets.delete_topic(topic)
    broker.store.delete_topic(topic)
    env.topic_changed()
    return req.make_response(ResponseCode.SUCCESS)


async def handle_all_topic_config(env: BrokerEnv, channel: Any, req: RemotingCommand) -> RemotingCommand:
    body = json.dumps(env.broker.topics.serialize()).encode()
    return req.make_response(ResponseCode.SUCCESS, body=body)


async def handle_topic_config(env: BrokerEnv, channel: Any, req: RemotingCommand) -> RemotingCommand:
    """GET_TOPIC_CONFIG (351, RocketMQ 5): one topic's TopicConfig (as TopicConfigAndQueueMapping,
    without static queue mapping); mqadmin 5.x topicStatus / topicRoute read it."""
    topic = TopicRequestHeader.decode(req).topic
    tc = env.broker.topics.get(topic)
    if tc is None:
        return req.make_response(ResponseCode.TOPIC_NOT_EXIST, f"No topic in this broker. topic: {topic}")
    body = {**tc.to_json(), "attributes": {}}
    return req.make_response(ResponseCode.SUCCESS, body=json.dumps(body).encode())


async def handle_topic_stats(env: BrokerEnv, channel: Any, req: RemotingCommand) -> RemotingCommand:
    topic = TopicRequestHeader.decode(req).topic
    tc = env.broker.topics.get(topic)
    if tc is None:
        return req.make_response(ResponseCode.TOPIC_NOT_EXIST, f"topic[{topic}] not exist")
    store = env.broker.store
    table = {}
    for q in range(tc.write_queue_nums):
        max_off = store.max_offset(topic, q)
        last = store.store_time_at(topic, q, max_off - 1) if max_off > 0 else None
        table[_mq_key(env, topic, q)] = {"lastUpdateTimestamp": last or 0, "maxOffset": max_off,
                                          "minOffset": store.min_offset(topic, q)}
    return req.make_response(ResponseCode.SUCCESS, body=json.dumps({"offsetTable": table}).encode())


async def handle_consume_stats(env: BrokerEnv, channel: Any, req: RemotingCommand) -> RemotingCommand:
    h = GetConsumeStatsRequestHeader.decode(req)
    group, only_topic = h.consumer_group, h.topic
    broker = env.broker
    topics = [only_topic] if only_topic else sorted(broker.offsets.topics_of_group(group))
    table = {}
    for topic in topics:
        tc = broker.topics.get(topic)
        if tc is None:
            continue
        for q in range(tc.read_queue_nums):
            max_off = broker.store.max_offset(topic, q)
            consumer = broker.offsets.query(group, topic, q)
            last = broker.store.store_time_at(topic, q, consumer - 1) if consumer else None
            table[_mq_key(env, topic, q)] = {"brokerOffset": max_off, "consumerOffset": consumer or 0,
                                              "lastTimestamp": last or 0}
    body = {"consumeTps": 0.0, "offsetTable": table}
    return req.make_response(ResponseCode.SUCCESS, body=json.dumps(body).encode())


def _earliest_ms(env: BrokerEnv) -> int:
    """Store time of the oldest CommitLog record (RocketMQ's getEarliestMessageTime), -1 when none."""
    store = env.broker.store
    clog = getattr(store, "clog", None)
    if clog is None or store.commitlog_min_offset >= store.commitlog_max_offset:
        return -1
    try:
        ts = clog.store_timestamp(store.commitlog_min_offset)
    except (OSError, ValueError):
        return -1
    return -1 if ts is None else int(ts)


def _disk(env: BrokerEnv) -> tuple[float, str]:
    """(used ratio, Java's ``commitLogDirCapacity`` text) of the store's file system."""
    try:
        usage = shutil.disk_usage(env.cfg.store_path_root_dir)
    except OSError:
        return 0.0, "Total : 0.0 GiB, Free : 0.0 GiB."
    gib = 1024 ** 3
    return (usage.used / usage.total if usage.total else 0.0,
            f"Total : {usage.total / gib:.1f} GiB, Free : {usage.free / gib:.1f} GiB.")


def _commitlog_dir(env: BrokerEnv) -> str:
    return env.cfg.store_path_commit_log or str(Path(env.cfg.store_path_root_dir) / "commitlog")


def _java_runtime(ms: int) -> str:
    """Java's ``runtime`` value: "[ 0 days, 1 hours, 2 minutes, 3 seconds ]"."""
    s = max(ms, 0) // 1000
    return f"[ {s // 86400} days, {s // 3600 % 24} hours, {s // 60 % 60} minutes, {s % 60} seconds ]"


async def handle_runtime_info(env: BrokerEnv, channel: Any, req: RemotingCommand) -> RemotingCommand:
    store = env.broker.store
    ratio, capacity = _disk(env)
    table = {"brokerVersionDesc": "V4_9_7", "brokerVersion": "407", "rokka": "true",
             "commitLogMinOffset": str(store.commitlog_min_offset),
             "commitLogMaxOffset": str(store.commitlog_max_offset),
             "bootTimestamp": str(env.shared.boot_ms),
             "msgPutTotalTodayNow": str(env.shared.put_total),
             "putMessageTimesTotal": str(env.shared.put_total),
             "runtime": _java_runtime(int(time.time() * 1000) - env.shared.boot_ms),
             # keys mqadmin clusterList splits or prints (4.9's NPEs on a missing putTps) and consoles
             # split (getTotalTps); rokka keeps no per-second rates: zeros; its send queue is the sends in flight
             "putTps": "0.0 0.0 0.0", "getTransferedTps": "0.0 0.0 0.0", "getTransferredTps": "0.0 0.0 0.0",
             "getTotalTps": "0.0 0.0 0.0", "getFoundTps": "0.0 0.0 0.0", "getMissTps": "0.0 0.0 0.0",
             "sendThreadPoolQueueSize": str(env.send_gate.inflight),      # handlers/flow.py
             "sendThreadPoolQueueCapacity": str(env.cfg.send_thread_pool_queue_capacity),
             "sendThreadPoolQueueHeadWaitTimeMills": "0", "pullThreadPoolQueueHeadWaitTimeMills": "0",
             "pageCacheLockTimeMills": "0", "earliestMessageTimeStamp": str(_earliest_ms(env)),
             "commitLogDiskRatio": f"{ratio:.4f}", "consumeQueueDiskRatio": f"{ratio:.4f}",   # one store dir
             "commitLogDirCapacity": capacity, "dispatchBehindBytes": "0",
             # 4.9's per commit-log directory ratio (storePathCommitLog may list several; rokka has one)
             f"commitLogDiskRatio_{_commitlog_dir(env)}": f"{ratio:.4f}"}
    return req.make_response(ResponseCode.SUCCESS, body=json.dumps({"table": table}).encode())


async def handle_create_group(env: BrokerEnv, channel: Any, req: RemotingCommand) -> RemotingCommand:
    try:
        cfg = SubscriptionGroupConfig.from_json(json.loads(req.body))
    except (ValueError, KeyError, TypeError) as exc:
        return req.make_response(ResponseCode.SYSTEM_ERROR, f"bad subscription group body: {exc}")
    if (bad := names.group_problem(cfg.group_name)) is not None:
        return refuse_name(req, channel, "group", cfg.group_name, bad)
    env.broker.sub_groups.put(cfg)
    return req.make_response(ResponseCode.SUCCESS)


async def handle_all_groups(env: BrokerEnv, channel: Any, req: RemotingCommand) -> RemotingCommand:
    groups = {n: c.to_json() for n, c in env.broker.sub_groups.all().items()}
    body = {"subscriptionGroupTable": groups, "dataVersion": {"counter": len(groups), "timestamp": 0}}
    return req.make_response(ResponseCode.SUCCESS, body=json.dumps(body).encode())


async def handle_delete_group(env: BrokerEnv, channel: Any, req: RemotingCommand) -> RemotingCommand:
    h = DeleteSubscriptionGroupRequestHeader.decode(req)
    group = h.group_name
    if not group:       # any other Kafka group id is allowed here (see the module docstring)
        return refuse_name(req, channel, "group", group, "The specified group is blank.")
    env.broker.sub_groups.delete(group)
    if h.clean_offset:   # RocketMQ 4.9 header field (mqadmin deleteSubGroup -r)
        env.broker.offsets.delete_group(group, durable=True)
    log.info("rocketmq.subscription_group_deleted", group=group, clean_offset=h.clean_offset)
    return req.make_response(ResponseCode.SUCCESS)


async def handle_consumer_connections(env: BrokerEnv, channel: Any, req: RemotingCommand) -> RemotingCommand:
    group = GetConsumerConnectionListRequestHeader.decode(req).consumer_group
    info = env.broker.consumers.get(group)
    if info is None:
        return req.make_response(ResponseCode.CONSUMER_NOT_ONLINE, f"the consumer group[{group}] not online")
    body = {"connectionSet": [{"clientAddr": c.addr, "clientId": c.client_id, "language": c.language,
                               "version": c.version} for c in info.clients.values()],
            "consumeFromWhere": info.consume_from_where, "consumeType": info.consume_type,
            "messageModel": info.message_model,
            "subscriptionTable": {t: s.to_json() for t, s in info.subscriptions.items()}}
    return req.make_response(ResponseCode.SUCCESS, body=json.dumps(body).encode())


async def handle_producer_connections(env: BrokerEnv, channel: Any, req: RemotingCommand) -> RemotingCommand:
    group = GetProducerConnectionListRequestHeader.decode(req).producer_group
    members = env.broker.producers.members(group)
    if not members:
        return req.make_response(ResponseCode.SYSTEM_ERROR, f"the producer group[{group}] not exist")
    body = {"connectionSet": [{"clientAddr": c.addr, "clientId": c.client_id, "language": c.language,
                               "version": c.version} for c in members]}
    return req.make_response(ResponseCode.SUCCESS, body=json.dumps(body).encode())


async def handle_view_message(env: BrokerEnv, channel: Any, req: RemotingCommand) -> RemotingCommand:
    offset = ViewMessageRequestHeader.decode(req).offset
    record = env.broker.store.read_record(offset)
    if record is None:
        return req.make_response(ResponseCode.SYSTEM_ERROR, f"can not find message by the offset, {offset}")
    return req.make_response(ResponseCode.SUCCESS, body=record)


async def handle_query_message(env: BrokerEnv, channel: Any, req: RemotingCommand) -> RemotingCommand:
    h = QueryMessageRequestHeader.decode(req)
    topic, key, max_num = h.topic, h.key, h.max_num
    if (h.unique_key_query or "").lower() == "true":
        max_num = 32
    begin, end = h.begin_timestamp, h.end_timestamp
    store = env.broker.store
    offsets = store.query_by_key(topic, key, max(1, min(max_num, 64)), begin, end)
    records = [r for r in (store.read_record(o) for o in offsets) if r is not None]
    ext = {"indexLastUpdateTimestamp": str(int(time.time() * 1000)),
           "indexLastUpdatePhyoffset": str(store.commitlog_max_offset)}
    if not records:
        return req.make_response(ResponseCode.QUERY_NOT_FOUND,
                                 "can not find message, maybe time range not correct", ext)
    return req.make_response(ResponseCode.SUCCESS, None, ext, b"".join(records))


def offset_of_msg_id(msg_id: str) -> int:
    return decode_offset_msg_id(msg_id)[2]
