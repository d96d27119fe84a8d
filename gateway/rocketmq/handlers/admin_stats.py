"""Broker diagnostics and maintenance requests of ``mqadmin`` and the dashboard.

Theory of operation
-------------------
Each handler restates one method of Java's ``AdminBrokerProcessor`` (4.9.7)
with its request header, body (fastjson field names) and remarks:

* GET_ALL_CONSUMER_OFFSET (43): ``{"offsetTable": {"topic@group": {queueId: offset}}}``
  (RocketMQ groups and the Kafka groups sharing the table; Kafka commit
  extras stay out).  GET_ALL_DELAY_OFFSET (45): ``{"offsetTable": {level: offset}}``.
* QUERY_TOPIC_CONSUME_BY_WHO (300): GroupList of the online groups subscribed
  to the topic plus the groups with offsets on it.
* QUERY_CONSUME_TIME_SPAN (303): QueueTimeSpan per write queue (min / max
  store time, consume time, delay), TOPIC_NOT_EXIST "topic[t] not exist".
* CLONE_GROUP_OFFSET (314): copies srcGroup's offsets to destGroup (the topic's
  or, without a topic, every topic of srcGroup; Java's loop passes the header
  topic, so it does nothing without one; rokka clones each topic).  Unless
  ``offline``, a topic the online source group does not subscribe is skipped.
* VIEW_BROKER_STATS_DATA (315): BrokerStatsData (``statsMinute`` / ``statsHour``
  / ``statsDay``, each ``sum``, ``tps``, ``avgpt``) for TOPIC_PUT_NUMS (key =
  topic), GROUP_GET_NUMS (key = ``topic@group``) and BROKER_PUT_NUMS (key =
  cluster name).  rokka keeps no per-minute counters on the hot path:
  TOPIC_PUT_NUMS counts the messages stored in each window from the
  ConsumeQueue (store times, exact); the other two sample their totals
  (committed offsets, messages put since start) each time they are asked and
  report the growth over the samples held within the window (0 until a second
  sample exists).  ``tps`` is the window's sum over the window's length (Java
  uses the last sampled interval); ``avgpt`` is 0.  Other names: Java's "The
  stats <name> <key> not exist".
* GET_BROKER_CONSUME_STATS (317): ConsumeStatsList over every subscription group
  (``isOrder`` keeps only order topics).
* QUERY_CONSUME_QUEUE (321): raw ConsumeQueue units from ``index``, ``count``
  at most (256 here), with the group's subscription.
* CLEAN_EXPIRED_CONSUMEQUEUE (306) / CLEAN_UNUSED_TOPIC (316): see ``clean_*``.
* GET_SYSTEM_TOPIC_LIST_FROM_BROKER (305): TopicList of TopicValidator's system topics.
* GET_ALL_PRODUCER_INFO (328): ProducerTableInfo ``{"data": {group: [ProducerInfo]}}``.
* RESUME_CHECK_HALF_MESSAGE (323): re-puts the half message named by its offset
  message id into RMQ_SYS_TRANS_HALF_TOPIC with TRANSACTION_CHECK_TIMES=0, so the
  check-back asks the producer again.

MessageQueue map keys follow ``admin.py`` (the key's JSON text).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

import structlog
from rokka.core.model import PROP_TRANSACTION_CHECK_TIMES, Message
from rokka.core.record import decode_offset_msg_id
from rokka.core.topics import SYSTEM_TOPICS, TOPIC_SCHEDULE, TOPIC_TRANS_HALF, TOPIC_TRANS_OP_HALF
from rokka.gateway.rocketmq.handlers.admin import _mq, _mq_key
from rokka.gateway.rocketmq.handlers.context import BrokerEnv
from rokka.net.remoting.codec.codes import ResponseCode
from rokka.net.remoting.codec.remoting import RemotingCommand
from rokka.net.remoting.codec.request_headers import (
    CloneGroupOffsetRequestHeader,
    GetConsumeStatsInBrokerHeader,
    QueryConsumeQueueRequestHeader,
    QueryConsumeTimeSpanRequestHeader,
    ResumeCheckHalfMessageRequestHeader,
    TopicRequestHeader,
    ViewBrokerStatsDataRequestHeader,
)

log = structlog.get_logger(__name__)

MAX_CQ_QUERY = 256
TRANS_CHECK_MAX_TIME_TOPIC = "TRANS_CHECK_MAX_TIME_TOPIC"   # where Java parks halfs checked too often
_WINDOWS = (("statsMinute", 60_000), ("statsHour", 3_600_000), ("statsDay", 86_400_000))


def _now() -> int:
    return int(time.time() * 1000)


def _ok(req: RemotingCommand, body: Any) -> RemotingCommand:
    return req.make_response(ResponseCode.SUCCESS, body=json.dumps(body).encode())


def _time(env: BrokerEnv, topic: str, q: int, offset: int) -> int:
    if offset < 0:
        return -1
    t = env.broker.store.store_time_at(topic, q, offset)
    return -1 if t is None else t


async def handle_all_consumer_offset(env: BrokerEnv, channel: Any, req: RemotingCommand) -> RemotingCommand:
    return _ok(req, {"offsetTable": env.broker.offsets.serialize()["offsetTable"]})


async def handle_all_delay_offset(env: BrokerEnv, channel: Any, req: RemotingCommand) -> RemotingCommand:
    offsets = env.broker.schedule.offsets
    return _ok(req, {"offsetTable": {str(lv): off for lv, off in sorted(offsets.items())}})


def groups_of_topic(env: BrokerEnv, topic: str) -> list[str]:
    online = {g for g, info in env.broker.consumers.groups().items() if topic in info.subscriptions}
    return sorted(online | set(env.broker.offsets.groups_of_topic(topic)))


async def handle_topic_consume_by_who(env: BrokerEnv, channel: Any, req: RemotingCommand) -> RemotingCommand:
    return _ok(req, {"groupList": groups_of_topic(env, TopicRequestHeader.decode(req).topic)})


async def handle_consume_time_span(env: BrokerEnv, channel: Any, req: RemotingCommand) -> RemotingCommand:
    h = QueryConsumeTimeSpanRequestHeader.decode(req)
    topic, group = h.topic, h.group
    tc = env.broker.topics.get(topic)
    if tc is None:
        return req.make_response(ResponseCode.TOPIC_NOT_EXIST, f"topic[{topic}] not exist")
    store, spans = env.broker.store, []
    for q in range(tc.write_queue_nums):
        min_time = store.earliest_store_time(topic, q)
        max_off = store.max_offset(topic, q)
        consumer = env.broker.offsets.query(group, topic, q)
        consumer = -1 if consumer is None else consumer
        span = {"messageQueue": _mq(env, topic, q), "minTimeStamp": min_time,
                "maxTimeStamp": _time(env, topic, q, max_off - 1),
                "consumeTimeStamp": _time(env, topic, q, consumer - 1) if consumer > 0 else min_time,
                "delayTime": 0}
        if consumer < max_off:
            span["delayTime"] = _now() - _time(env, topic, q, consumer)
        spans.append(span)
    return _ok(req, {"consumeTimeSpanSet": spans})


async def handle_clone_group_offset(env: BrokerEnv, channel: Any, req: RemotingCommand) -> RemotingCommand:
    h = CloneGroupOffsetRequestHeader.decode(req)
    src, dest, topic, offline = h.src_group, h.dest_group, h.topic, h.offline
    broker = env.broker
    topics = [topic] if topic else sorted(broker.offsets.topics_of_group(src))
    online = broker.consumers.get(src)
    cloned = []
    for t in topics:
        if broker.topics.get(t) is None:
            log.warning("rocketmq.clone_group_offset_skipped", topic=t, reason="topic config not exist")
            continue
        if not offline and online is not None and online.subscriptions and t not in online.subscriptions:
            log.warning("rocketmq.clone_group_offset_skipped", topic=t, group=src, reason="not subscribed")
            continue
        for q, off in sorted(broker.offsets.offsets(src, t).items()):
            broker.offsets.commit(dest, t, q, off)
        cloned.append(t)
    broker.offsets.persist()
    log.info("rocketmq.clone_group_offset", src=src, dest=dest, topics=cloned)
    return req.make_response(ResponseCode.SUCCESS)


def _stored_since(env: BrokerEnv, topic: str, q: int, since_ms: int) -> int:
    """Messages of the queue stored at or after ``since_ms`` (bisect over ConsumeQueue store times)."""
    store = env.broker.store
    lo, hi = store.min_offset(topic, q), store.max_offset(topic, q)
    end = hi
    while lo < hi:
        mid = (lo + hi) // 2
        t = store.store_time_at(topic, q, mid)
        if t is None or t < since_ms:
            lo = mid + 1
        else:
            hi = mid
    return end - lo


def _topic_put_stats(env: BrokerEnv, topic: str, queues: int) -> dict[str, Any]:
    now, body = _now(), {}
    for field_name, window in _WINDOWS:
        total = sum(_stored_since(env, topic, q, now - window) for q in range(queues))
        body[field_name] = {"sum": total, "tps": total / (window / 1000), "avgpt": 0.0}
    return body


def _stat_total(env: BrokerEnv, name: str, key: str) -> int | None:
    broker = env.broker
    if name == "BROKER_PUT_NUMS" and key == env.cfg.broker_cluster_name:
        return env.shared.put_total
    if name == "GROUP_GET_NUMS" and "@" in key:
        topic, group = key.split("@", 1)
        offsets = broker.offsets.offsets(group, topic)
        if offsets:
            return sum(max(0, o - broker.store.min_offset(topic, q)) for q, o in offsets.items())
    return None


async def handle_view_broker_stats(env: BrokerEnv, channel: Any, req: RemotingCommand) -> RemotingCommand:
    h = ViewBrokerStatsDataRequestHeader.decode(req)
    name, key = h.stats_name, h.stats_key
    if name == "TOPIC_PUT_NUMS" and (tc := env.broker.topics.get(key)) is not None:
        return _ok(req, _topic_put_stats(env, key, tc.write_queue_nums))
    total = _stat_total(env, name, key)
    if total is None:
        return req.make_response(ResponseCode.SYSTEM_ERROR, f"The stats <{name}> <{key}> not exist")
    now = _now()
    samples = env.stats_samples.setdefault((name, key), [])
    samples[:] = [s for s in samples if now - s[0] <= _WINDOWS[-1][1]] + [(now, total)]
    body = {}
    for field_name, window in _WINDOWS:
        first = next(s for s in samples if now - s[0] <= window)
        grown, span_s = total - first[1], max((now - first[0]) / 1000, 1.0)
        body[field_name] = {"sum": grown, "tps": grown / span_s if grown else 0.0, "avgpt": 0.0}
    return _ok(req, body)


def _group_stats(env: BrokerEnv, group: str, only_order: bool) -> tuple[list[dict[str, Any]], int]:
    broker, out, diff = env.broker, [], 0
    online = broker.consumers.get(group)
    for topic in sorted(broker.offsets.topics_of_group(group)):
        tc = broker.topics.get(topic)
        if tc is None or (only_order and not tc.order):
            continue
        if online is not None and online.subscriptions and topic not in online.subscriptions:
            continue
        table = {}
        for q in range(tc.write_queue_nums):
            b_off = max(broker.store.max_offset(topic, q), 0)
            c_off = max(broker.offsets.query(group, topic, q) or 0, 0)
            last = _time(env, topic, q, c_off - 1) if c_off else 0
            table[_mq_key(env, topic, q)] = {"brokerOffset": b_off, "consumerOffset": c_off,
                                              "lastTimestamp": max(last, 0)}
            diff += b_off - c_off
        out.append({"consumeTps": 0.0, "offsetTable": table})
    return out, diff


async def handle_broker_consume_stats(env: BrokerEnv, channel: Any, req: RemotingCommand) -> RemotingCommand:
    only_order = GetConsumeStatsInBrokerHeader.decode(req).is_order
    stats_list, total = [], 0
    for group in sorted(env.broker.sub_groups.all()):
        stats, diff = _group_stats(env, group, only_order)
        stats_list.append({group: stats})
        total += diff
    return _ok(req, {"brokerAddr": env.broker_addr, "consumeStatsList": stats_list, "totalDiff": total})


async def handle_query_consume_queue(env: BrokerEnv, channel: Any, req: RemotingCommand) -> RemotingCommand:
    h = QueryConsumeQueueRequestHeader.decode(req)
    topic, queue_id, index, count, group = h.topic, h.queue_id, h.index, h.count, h.consumer_group
    store = env.broker.store
    if queue_id not in store.queues().get(topic, []):
        return req.make_response(ResponseCode.SYSTEM_ERROR, f"{queue_id}@{topic} is not exist!")
    body: dict[str, Any] = {"maxQueueIndex": store.max_offset(topic, queue_id),
                            "minQueueIndex": store.min_offset(topic, queue_id)}
    if group is not None:
        info = env.broker.consumers.get(group)
        sub = info.subscriptions.get(topic) if info is not None else None
        if sub is None:
            body["filterData"] = f"{group}@{topic} is not online!"
        else:
            body["subscriptionData"], body["filterData"] = sub.to_json(), "null"
    units = store.cq_units(topic, queue_id, index, max(0, min(count, MAX_CQ_QUERY))) if index >= 0 else []
    if not units:
        return req.make_response(ResponseCode.SUCCESS, f"Index {index} of {queue_id}@{topic} is not exist!")
    body["queueData"] = [{"physicOffset": u.commitlog_offset, "physicSize": u.size, "tagsCode": u.tags_code,
                          "eval": False} for u in units]
    return _ok(req, body)


def clean_expired_consume_queues(env: BrokerEnv) -> list[str]:
    """Drop the ConsumeQueues of topics whose every entry points below the CommitLog's min offset.

    Java's ``cleanExpiredConsumerQueue`` destroys each such queue, configured topic or not (its
    offsets restart at 0).  rokka drops them only for topics no longer in the topic table, so a
    configured topic never loses its logical offsets; the retention pass already trims the
    expired head of live queues.  Returns the topics removed.
    """
    broker, store = env.broker, env.broker.store
    clog_min = store.commitlog_min_offset
    gone = []
    for topic, queue_ids in store.queues().items():
        if topic == TOPIC_SCHEDULE or topic in broker.topics:
            continue
        expired = True
        for q in queue_ids:
            mx = store.max_offset(topic, q)
            last = store.cq_units(topic, q, mx - 1, 1) if mx > 0 else []
            if last and last[0].commitlog_offset >= clog_min:
                expired = False
                break
        if expired:
            store.delete_topic(topic)
            gone.append(topic)
    return gone


def clean_unused_topics(env: BrokerEnv) -> list[str]:
    """Java's ``cleanUnusedTopic``: ConsumeQueues of topics not in the topic table are destroyed
    (the delay topic and the transaction op topic are kept).  Returns the topics removed."""
    broker = env.broker
    gone = [t for t in broker.store.queues() if t not in broker.topics
            and t not in (TOPIC_SCHEDULE, TOPIC_TRANS_OP_HALF, TOPIC_TRANS_HALF)]
    for topic in gone:
        broker.store.delete_topic(topic)
    return gone


async def _clean(event: str, clean: Callable[[BrokerEnv], list[str]], env: BrokerEnv, channel: Any,
                 req: RemotingCommand) -> RemotingCommand:
    """An operator's clean-up request: logged (``event``, then ``event_done`` with the topics removed)."""
    log.warning(event, peer=str(getattr(channel, "peer", "")))
    gone = clean(env)
    log.warning(f"{event}_done", topics=gone)
    return req.make_response(ResponseCode.SUCCESS)


async def handle_clean_expired_cq(env: BrokerEnv, channel: Any, req: RemotingCommand) -> RemotingCommand:
    return await _clean("rocketmq.clean_expired_consumequeue", clean_expired_consume_queues, env, channel, req)


async def handle_clean_unused_topic(env: BrokerEnv, channel: Any, req: RemotingCommand) -> RemotingCommand:
    return await _clean("rocketmq.clean_unused_topic", clean_unused_topics, env, channel, req)


async def handle_resume_check_half(env: BrokerEnv, channel: Any, req: RemotingCommand) -> RemotingCommand:
    failed = "Exception was thrown when putting message back to RMQ_SYS_TRANS_HALF_TOPIC."
    msg_id = ResumeCheckHalfMessageRequestHeader.decode(req).msg_id
    try:
        half = env.broker.store.read_message(decode_offset_msg_id(msg_id)[2])
    except (ValueError, IndexError, OSError):
        half = None
    if half is None or half.topic not in (TOPIC_TRANS_HALF, TRANS_CHECK_MAX_TIME_TOPIC):
        log.warning("rocketmq.resume_check_half_refused", msg_id=msg_id,
                    reason="no half message at this id" if half is None else f"topic {half.topic}")
        return req.make_response(ResponseCode.SYSTEM_ERROR, failed)
    props = dict(half.properties)
    props[PROP_TRANSACTION_CHECK_TIMES] = "0"
    copy = Message(TOPIC_TRANS_HALF, 0, half.body, props, half.flag, half.sysflag, half.born_timestamp,
                   half.born_host, half.reconsume_times)
    result = await env.broker.put([copy], prepared=True)
    if not result.ok:
        log.error("rocketmq.resume_check_half_failed", msg_id=msg_id, status=result.status.value)
        return req.make_response(ResponseCode.SYSTEM_ERROR, "Put message back to RMQ_SYS_TRANS_HALF_TOPIC failed.")
    log.info("rocketmq.resume_check_half", msg_id=msg_id, real_topic=props.get("REAL_TOPIC"))
    return req.make_response(ResponseCode.SUCCESS)


async def handle_system_topics(env: BrokerEnv, channel: Any, req: RemotingCommand) -> RemotingCommand:
    return _ok(req, {"topicList": sorted(SYSTEM_TOPICS)})


async def handle_all_producer_info(env: BrokerEnv, channel: Any, req: RemotingCommand) -> RemotingCommand:
    # remoteIP as Java's ``channel.remoteAddress().toString()``: "/127.0.0.1:52034"
    data = {group: [{"clientId": c.client_id, "remoteIP": f"/{c.addr}", "language": c.language,
                     "version": c.version, "lastUpdateTimestamp": c.last_update_ms} for c in members]
            for group, members in sorted(env.broker.producers.groups().items()) if members}
    return _ok(req, {"data": data})
