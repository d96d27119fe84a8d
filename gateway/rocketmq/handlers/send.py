"""SEND_MESSAGE (10), SEND_MESSAGE_V2 (310), SEND_BATCH_MESSAGE (320) and CONSUMER_SEND_MSG_BACK (36).

Theory of operation
-------------------
The checks follow the Java 4.9 broker in order: broker writable, topic name
valid, not a system topic closed to producers, topic exists or can be
auto-created through the request's default topic (TBW102), queue id in
range (a negative id picks a random writable queue).  Then the request
becomes core ``Message`` values (one per batch element; batch-level
properties are appended to each element) and goes through ``Broker.put``,
which applies the shared send pipeline (delay, transactions, CLUSTER) and
the flush policy.  Store outcomes map to wire codes with ``PUT_STATUS_CODE``.

The response always carries ``msgId`` (offsetMsgId; comma-joined for
batches), ``queueId``, ``queueOffset``, ``MSG_REGION`` and ``TRACE_ON``;
the C++ client dereferences them unconditionally.

Back-pressure (``handlers/flow.py``): before anything else a send may be refused with SYSTEM_BUSY
and Java's remarks (queue full, waited too long in the queue, store busy); nothing is written then.

Send-back: a consumer returns a message it failed to consume; it is rewritten
to ``%RETRY%<group>`` with an escalating delay level (3 + reconsumeTimes),
or to ``%DLQ%<group>`` once it has been retried ``retryMaxTimes`` times.

Names (``rokka.core.names``): the topic of a send is checked before anything
is created (SYSTEM_ERROR with TopicValidator's remark; "." and ".." refused);
the group of a send-back must be a valid consumer group whose ``%RETRY%``
topic is valid, else SUBSCRIPTION_GROUP_NOT_EXIST (RocketMQ 5 does not
auto-create such a group either).  Each refusal logs ``rocketmq.bad_name``.
"""

from __future__ import annotations

import functools
import ipaddress
import random
import zlib
from typing import Any

import structlog
from rokka.core import names
from rokka.core.inflate import compressed_body_error
from rokka.core.model import (
    COMPRESSED_FLAG,
    DLQ_PREFIX,
    PROP_DELAY,
    PROP_MAX_RECONSUME_TIMES,
    PROP_ORIGIN_MESSAGE_ID,
    PROP_RETRY_TOPIC,
    PROP_TRAN_MSG,
    RETRY_PREFIX,
    TRANSACTION_MASK,
    BatchBody,
    Message,
)
from rokka.core.record import decode_properties, encode_offset_msg_id, msg_id_prefix
from rokka.core.storage import PutResult, PutStatus
from rokka.core.topics import NOT_ALLOWED_SEND, PERM_WRITE
from rokka.gateway.rocketmq.handlers.context import BrokerEnv
from rokka.net.remoting.codec.batch import BatchFormatError, decode_batch, encode_batch
from rokka.net.remoting.codec.codes import ResponseCode
from rokka.net.remoting.codec.remoting import RemotingCommand
from rokka.net.remoting.codec.request_headers import ConsumerSendMsgBackRequestHeader, SendMessageRequestHeader
from rokka.net.remoting.codec.response_headers import SendMessageResponseHeader

log = structlog.get_logger(__name__)

PUT_STATUS_CODE = {
    PutStatus.PUT_OK: ResponseCode.SUCCESS,
    PutStatus.FLUSH_DISK_TIMEOUT: ResponseCode.FLUSH_DISK_TIMEOUT,
    PutStatus.FLUSH_SLAVE_TIMEOUT: ResponseCode.FLUSH_SLAVE_TIMEOUT,
    PutStatus.SLAVE_NOT_AVAILABLE: ResponseCode.SLAVE_NOT_AVAILABLE,
    PutStatus.MESSAGE_ILLEGAL: ResponseCode.MESSAGE_ILLEGAL,
    PutStatus.PROPERTIES_SIZE_EXCEEDED: ResponseCode.MESSAGE_ILLEGAL,
    PutStatus.SERVICE_NOT_AVAILABLE: ResponseCode.SERVICE_NOT_AVAILABLE,
}


@functools.lru_cache(maxsize=16)
def _msg_id_prefix(store_host: tuple[str, int]) -> str:
    return msg_id_prefix(store_host)


def ipv4_host(peer: tuple[str, int] | Any) -> tuple[str, int]:
    """Born host as the C++ client can decode it: IPv4 (IPv6 loopback/mapped folded to IPv4)."""
    try:
        return _ipv4_host_cached(peer)
    except TypeError:       # unhashable peer
        return _ipv4_host(peer)


@functools.lru_cache(maxsize=1024)
def _ipv4_host_cached(peer: tuple[str, int] | Any) -> tuple[str, int]:
    return _ipv4_host(peer)


def _ipv4_host(peer: tuple[str, int] | Any) -> tuple[str, int]:
    try:
        host, port = peer[0], int(peer[1])
    except (TypeError, IndexError, ValueError):
        return ("127.0.0.1", 0)
    try:
        ip = ipaddress.ip_address(host.split("%", 1)[0])
    except ValueError:
        return ("127.0.0.1", port)
    if ip.version == 6:
        if ip.ipv4_mapped is not None:
            return (str(ip.ipv4_mapped), port)
        if ip.is_loopback:
            return ("127.0.0.1", port)
    return (str(ip), port)


def parse_properties(text: str | None) -> dict[str, str]:
    return decode_properties(text.encode("utf-8")) if text else {}


def _base_response(req: RemotingCommand, env: BrokerEnv, code: int, remark: str | None, *,
                   msg_id: str | None = None, queue_id: int | None = None,
                   queue_offset: int | None = None) -> RemotingCommand:
    cfg = env.cfg
    ext = SendMessageResponseHeader.encode_values(msg_id=msg_id, queue_id=queue_id, queue_offset=queue_offset,
                                                  msg_region=cfg.region_id, trace_on=cfg.trace_on)
    return req.make_response(code, remark, ext, own=True)


def check_topic_for_send(env: BrokerEnv, topic: str, default_topic: str | None, default_queue_nums: int,
                         queue_id: int) -> tuple[int, str | None, int]:
    """Return (code, remark, queue_id) — code SUCCESS with the queue to use when sendable."""
    broker = env.broker
    if not (broker.topics.broker_perm & PERM_WRITE):
        return ResponseCode.NO_PERMISSION, f"the broker[{env.broker_addr}] sending message is forbidden", 0
    if (bad := names.topic_problem(topic)) is not None:
        names.refused("rocketmq", "topic", topic, bad, op="send")
        return ResponseCode.SYSTEM_ERROR, bad, 0
    if topic in NOT_ALLOWED_SEND:
        return ResponseCode.NO_PERMISSION, f"Sending message to topic[{topic}] is forbidden.", 0
    tc = broker.topics.get(topic)
    if tc is None and default_topic:
        tc = broker.topics.create_from_default(topic, default_topic, default_queue_nums)
        if tc is not None:
            env.topic_changed()
    if tc is None and topic.startswith(RETRY_PREFIX):
        tc = broker.topics.ensure(topic, 1)
        env.topic_changed()
    if tc is None:
        return ResponseCode.TOPIC_NOT_EXIST, f"topic[{topic}] not exist, apply first please!", 0
    if not tc.writable:
        return ResponseCode.NO_PERMISSION, f"the topic[{topic}] sending message is forbidden", 0
    if queue_id < 0:
        queue_id = random.randrange(max(1, tc.write_queue_nums))
    if queue_id >= tc.queue_nums:
        return (ResponseCode.SYSTEM_ERROR,
                f"request queueId[{queue_id}] is illegal, topic:{topic} topicConfig.writeQueueNums: "
                f"{tc.write_queue_nums} producer:", 0)
    return ResponseCode.SUCCESS, None, queue_id


def _dlq_redirect(env: BrokerEnv, topic: str, reconsume_times: int, max_times: int | None,
                  props: dict[str, str]) -> str:
    """A %RETRY% send that exhausted its retries goes to %DLQ%<group>."""
    if not topic.startswith(RETRY_PREFIX):
        return topic
    group = topic[len(RETRY_PREFIX):]
    sub_cfg = env.broker.sub_groups.get(group)
    limit = max_times if max_times is not None else (sub_cfg.retry_max_times if sub_cfg else 16)
    if reconsume_times >= limit:
        env.broker.topics.ensure_dlq(group)
        env.topic_changed()
        props.pop(PROP_DELAY, None)
        return DLQ_PREFIX + group
    return topic


async def _gated(handler: Any, env: BrokerEnv, channel: Any, req: RemotingCommand) -> RemotingCommand:
    """``handler`` behind the send queue (``handlers/flow.py``), as Java's send pool runs both sends and
    send-backs."""
    gate = env.send_gate
    if (busy := gate.refusal(req, getattr(channel, "peer", None))) is not None:
        return _base_response(req, env, ResponseCode.SYSTEM_BUSY, busy)
    gate.inflight += 1
    try:
        return await handler(env, channel, req)
    finally:
        gate.inflight -= 1


async def _handle_send(env: BrokerEnv, channel: Any, req: RemotingCommand) -> RemotingCommand:
    """A send (module doc); ``handle_send`` runs it behind the send queue."""
    h = SendMessageRequestHeader.decode_send(req)
    topic, queue_id, sysflag, born_ts, flag = h.topic, h.queue_id, h.sys_flag, h.born_timestamp, h.flag
    reconsume = h.reconsume_times or 0
    batch = bool(h.batch) or req.code == 320                   # SEND_BATCH_MESSAGE is a batch whatever the header
    max_reconsume = h.max_reconsume_times if req.version >= 121 else None     # honoured from 4.9 clients on
    code, remark, queue_id = check_topic_for_send(
        env, topic, h.default_topic, h.default_topic_queue_nums or 4, queue_id)
    if code != ResponseCode.SUCCESS:
        return _base_response(req, env, code, remark)
    if env.cfg.reject_transaction_message and (sysflag & TRANSACTION_MASK):
        return _base_response(req, env, ResponseCode.NO_PERMISSION, "the broker rejects transaction messages")
    if remark := compressed_body_error(req.body, sysflag, env.cfg.max_message_size):   # decompression bombs
        return _base_response(req, env, ResponseCode.MESSAGE_ILLEGAL, remark)
    batch_props = parse_properties(h.properties)
    # An empty body is accepted, as the Java broker does (only clients refuse it): records with an
    # empty or null Kafka value are stored that way, and a RocketMQ relay must be able to re-send them.
    if batch and not req.body:
        return _base_response(req, env, ResponseCode.MESSAGE_ILLEGAL, "the batch body is empty")
    born_host = ipv4_host(getattr(channel, "peer", None))
    if batch:
        if batch_props.get(PROP_DELAY) or (sysflag & TRANSACTION_MASK) or batch_props.get(PROP_TRAN_MSG):
            return _base_response(req, env, ResponseCode.MESSAGE_ILLEGAL,
                                  "batch messages cannot be delayed or transactional")
        body = req.body
        if sysflag & COMPRESSED_FLAG:
            # The C++ client compresses a whole batch body over 4 KiB; elements are stored uncompressed.
            try:
                body = zlib.decompress(body)
            except zlib.error as exc:
                return _base_response(req, env, ResponseCode.MESSAGE_ILLEGAL, f"bad compressed batch body: {exc}")
            sysflag &= ~COMPRESSED_FLAG
        raw = env.broker.append_batch_body(BatchBody(topic, queue_id, body, batch_props, sysflag, born_ts, born_host,
                                                     reconsume))
        if raw is not None:     # stored straight from the wire form (native encoder)
            result = raw if env.broker.answers_at_once else await env.broker.wait_durable(raw)
            if result.ok:
                env.shared.put_total += len(result.appended)
            return send_response(env, req, result, queue_id)
        try:
            elements = decode_batch(body)
        except (BatchFormatError, ValueError) as exc:
            return _base_response(req, env, ResponseCode.MESSAGE_ILLEGAL, f"bad batch body: {exc}")
        msgs = []
        for el in elements:
            props = decode_properties(el.properties_raw)
            if batch_props:
                props.update(batch_props)
            msgs.append(Message(topic, queue_id, el.body, props, el.flag, sysflag, born_ts, born_host, reconsume))
    else:
        topic = _dlq_redirect(env, topic, reconsume, max_reconsume, batch_props)
        if topic.startswith(DLQ_PREFIX):
            queue_id = 0
        body = req.body
        if len(body) <= env.cfg.max_message_size and env.broker.stays_in_place(batch_props, sysflag):
            # a lone send stays where it was sent: the native batch pass as a one-element batch
            raw = env.broker.append_batch_body(BatchBody(topic, queue_id, encode_batch([(flag, body, b"")]),
                                                         batch_props, sysflag, born_ts, born_host, reconsume))
            if raw is not None:
                result = raw if env.broker.answers_at_once else await env.broker.wait_durable(raw)
                if result.ok:
                    env.shared.put_total += 1
                return send_response(env, req, result, queue_id)
        msgs = [Message(topic, queue_id, body, batch_props, flag, sysflag, born_ts, born_host, reconsume)]
    result = await env.broker.put(msgs)
    if result.ok:
        env.shared.put_total += len(result.appended)
    return send_response(env, req, result, queue_id)


def send_response(env: BrokerEnv, req: RemotingCommand, result: PutResult, queue_id: int) -> RemotingCommand:
    code = PUT_STATUS_CODE.get(result.status, ResponseCode.SYSTEM_ERROR)
    remark = None if code == ResponseCode.SUCCESS else (result.remark or result.status.value)
    if appended := result.appended:
        prefix = _msg_id_prefix(env.broker.store_config.store_host)   # offsetMsgId = prefix + 16 hex digits
        first = appended[0]
        if len(appended) == 1:
            msg_id = f"{prefix}{first[0] & 0xFFFFFFFFFFFFFFFF:016X}"
        else:
            msg_id = ",".join([f"{prefix}{a[0] & 0xFFFFFFFFFFFFFFFF:016X}" for a in appended])
        resp = _base_response(req, env, code, remark, msg_id=msg_id, queue_id=queue_id,
                              queue_offset=first.queue_offset)
    else:
        resp = _base_response(req, env, code, remark, msg_id="", queue_id=queue_id, queue_offset=0)
    if code != ResponseCode.SUCCESS:
        log.info("rocketmq.send_rejected", code=int(code), remark=remark)
    return resp


async def _handle_send_back(env: BrokerEnv, channel: Any, req: RemotingCommand) -> RemotingCommand:
    h = ConsumerSendMsgBackRequestHeader.decode(req)
    offset, group, delay_level = h.offset, h.group, h.delay_level
    broker = env.broker
    if (bad := names.consumer_group_problem(group)) is not None:
        names.refused("rocketmq", "group", group, bad, op="send_back", peer=str(getattr(channel, "peer", "")))
        return req.make_response(ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST,
                                 f"subscription group not exist, {group}: {bad}")
    sub_cfg = broker.sub_groups.get(group)
    if sub_cfg is None:
        return req.make_response(ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST,
                                 f"subscription group not exist, {group}")
    if sub_cfg.retry_queue_nums <= 0:
        return req.make_response(ResponseCode.SUCCESS)
    msg = broker.store.read_message(offset)
    if msg is None:
        return req.make_response(ResponseCode.SYSTEM_ERROR, f"look message by offset failed, {offset}")
    props = dict(msg.properties)
    props.setdefault(PROP_RETRY_TOPIC, msg.topic)
    max_times = sub_cfg.retry_max_times
    if req.version >= 121 and h.max_reconsume_times is not None:
        max_times = h.max_reconsume_times
    props.setdefault(PROP_ORIGIN_MESSAGE_ID,
                     h.origin_msg_id or encode_offset_msg_id(msg.store_host, msg.commitlog_offset))
    props.pop(PROP_DELAY, None)
    if msg.reconsume_times >= max_times or delay_level < 0:
        topic, queue_id = DLQ_PREFIX + group, 0
        broker.topics.ensure_dlq(group)
    else:
        topic = RETRY_PREFIX + group
        queue_id = random.randrange(max(1, sub_cfg.retry_queue_nums))
        broker.topics.ensure_retry(group, sub_cfg.retry_queue_nums)
        props[PROP_DELAY] = str(3 + msg.reconsume_times if delay_level == 0 else delay_level)
    if max_times != 16:
        props[PROP_MAX_RECONSUME_TIMES] = str(max_times)
    env.topic_changed()
    new = Message(topic, queue_id, msg.body, props, msg.flag, msg.sysflag, msg.born_timestamp,
                  msg.born_host, msg.reconsume_times + 1)
    result = await broker.put([new])
    if not result.ok:
        return req.make_response(ResponseCode.SYSTEM_ERROR, result.status.value)
    return req.make_response(ResponseCode.SUCCESS)


#: The registered handlers: each behind the send queue (``_gated``); partials rather than wrapper coroutines, one
#: coroutine less per send.
handle_send = functools.partial(_gated, _handle_send)
handle_send_back = functools.partial(_gated, _handle_send_back)
