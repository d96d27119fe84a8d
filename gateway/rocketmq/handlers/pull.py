"""PULL_MESSAGE (11) with long polling.

Theory of operation
-------------------
Checks follow the Java broker: subscription group (auto-created) and its
consume switch, topic exists and is readable, queue id in range, then the
subscription: rebuilt from the request when FLAG_SUBSCRIPTION is set
(expression parse failure -> SUBSCRIPTION_PARSE_FAILED), otherwise taken from
the group's heartbeat (absent -> SUBSCRIPTION_NOT_EXIST, older than the
request's subVersion -> SUBSCRIPTION_NOT_LATEST).

Store results map to codes as in the reference table (FOUND -> SUCCESS with
the raw CommitLog records as body; nothing matched -> PULL_RETRY_IMMEDIATELY;
queue end -> PULL_NOT_FOUND; out of range -> PULL_OFFSET_MOVED).  SUCCESS is
never sent with an empty body.  Kafka control entries (transaction markers and
aborted-record placeholders, ``rokka.core.txn``) are dropped from every answer;
a read that found only them answers PULL_RETRY_IMMEDIATELY with
nextBeginOffset past them, as for filtered-out records.

Long polling: when the answer would be PULL_NOT_FOUND and the request has
FLAG_SUSPEND, the request parks (its own task: it blocks nothing else) until
a message *matching the filter* is dispatched to that queue, or until
``suspendTimeoutMillis`` (capped below the clients' 30 s timeout) expires;
then it is run once more without suspending.

Names (``rokka.core.names``): the group must be a valid consumer group (else
SUBSCRIPTION_GROUP_NOT_EXIST: it is never auto-created, as in RocketMQ 5) and
a topic not in the table must be a valid name (else TOPIC_NOT_EXIST with the
reason); each refusal logs ``rocketmq.bad_name``.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import structlog
import trio
from rokka.compat.kafka_control import without_control
from rokka.core import names
from rokka.core.filter import EXPR_SQL92, ExpressionFilter, Subscription, SubscriptionParseError, build_subscription
from rokka.core.groups import MESSAGE_MODEL_BROADCASTING, SubscriptionGroupConfig
from rokka.core.record import header_reader, header_size
from rokka.core.storage import GetResult, GetStatus
from rokka.gateway.rocketmq.handlers.context import BrokerEnv, in_memory
from rokka.net.remoting.codec.codes import ResponseCode
from rokka.net.remoting.codec.remoting import RemotingCommand
from rokka.net.remoting.codec.request_headers import PullMessageRequestHeader
from rokka.net.remoting.codec.response_headers import PullMessageResponseHeader

log = structlog.get_logger(__name__)

FLAG_COMMIT_OFFSET = 0x1
FLAG_SUSPEND = 0x2
FLAG_SUBSCRIPTION = 0x4
MAX_SUSPEND_S = 25.0
MAX_PULL_BYTES = 256 * 1024


class PullError(Exception):
    def __init__(self, code: int, remark: str) -> None:
        super().__init__(remark)
        self.code = code
        self.remark = remark


def resolve_subscription(env: BrokerEnv, h: PullMessageRequestHeader, group: str, topic: str,
                         sysflag: int) -> Subscription:
    if sysflag & FLAG_SUBSCRIPTION:
        try:
            sub = build_subscription(topic, h.subscription, h.expression_type, h.sub_version or 0)
        except SubscriptionParseError as exc:
            raise PullError(ResponseCode.SUBSCRIPTION_PARSE_FAILED,
                            f"parse the consumer's subscription failed: {exc}") from None
    else:
        info = env.broker.consumers.get(group)
        if info is None:
            raise PullError(ResponseCode.SUBSCRIPTION_NOT_EXIST,
                            f"the consumer's group info not exist, group: {group}")
        sub_cfg = env.broker.sub_groups.get(group)
        if (info.message_model == MESSAGE_MODEL_BROADCASTING and sub_cfg is not None
                and not sub_cfg.consume_broadcast_enable):
            raise PullError(ResponseCode.NO_PERMISSION,
                            f"the consumer group[{group}] can not consume by broadcast way")
        found = info.subscriptions.get(topic)
        if found is None:
            raise PullError(ResponseCode.SUBSCRIPTION_NOT_EXIST,
                            f"the consumer's subscription not exist, group: {group} topic: {topic}")
        if found.sub_version < (h.sub_version or 0):
            raise PullError(ResponseCode.SUBSCRIPTION_NOT_LATEST, "the consumer's subscription not latest")
        sub = found
    if sub.expression_type == EXPR_SQL92 and not env.cfg.enable_property_filter:
        raise PullError(ResponseCode.SYSTEM_ERROR,
                        "The broker does not support consumer to filter message by SQL92")
    return sub


def status_to_code(result: GetResult, offset: int) -> int:
    s = result.status
    if s is GetStatus.FOUND:
        return ResponseCode.SUCCESS
    if s in (GetStatus.NO_MATCHED_MESSAGE, GetStatus.OFFSET_FOUND_NULL, GetStatus.MESSAGE_WAS_REMOVING,
             GetStatus.NO_MATCHED_LOGIC_QUEUE):
        return ResponseCode.PULL_RETRY_IMMEDIATELY
    if s is GetStatus.NO_MESSAGE_IN_QUEUE:
        return ResponseCode.PULL_NOT_FOUND if offset == 0 else ResponseCode.PULL_OFFSET_MOVED
    if s is GetStatus.OFFSET_OVERFLOW_ONE:
        return ResponseCode.PULL_NOT_FOUND
    return ResponseCode.PULL_OFFSET_MOVED  # OFFSET_TOO_SMALL, OFFSET_OVERFLOW_BADLY


class _Found(NamedTuple):
    """What a PULL found: the records (raw CommitLog bytes, back to back) and the offsets."""

    body: bytes | memoryview
    next_begin_offset: int
    min_offset: int
    max_offset: int


def _found(body: bytes | memoryview, next_offset: int, lo: int, hi: int) -> tuple[int, _Found]:
    """SUCCESS with ``body`` less its Kafka control entries (transaction markers are never shown to
    RocketMQ), or PULL_RETRY_IMMEDIATELY past them when nothing else is left."""
    body, _ = without_control(body)
    return (ResponseCode.SUCCESS if body else ResponseCode.PULL_RETRY_IMMEDIATELY,
            _Found(body, next_offset, lo, hi))


def _read(env: BrokerEnv, topic: str, queue_id: int, offset: int, max_msgs: int,
          msg_filter: ExpressionFilter) -> tuple[int, GetResult | _Found]:
    """(response code, result).  Without filtering, records are copied out run by run (one slice
    per run of adjacent records); with a tag or SQL92 filter, the store's read filters natively
    (``reader.get_messages``: candidates only, nothing dropped is copied); every miss is answered
    from ``get_messages``' status."""
    store = env.broker.store
    if msg_filter.matches_all:
        runs, next_offset = store.get_runs(topic, queue_id, offset, max_msgs, MAX_PULL_BYTES)
        if runs:
            body = runs[0].data if len(runs) == 1 else b"".join(r.data for r in runs)
            return _found(body, next_offset, store.min_offset(topic, queue_id), store.max_offset(topic, queue_id))
    result = store.get_messages(topic, queue_id, offset, max_msgs, MAX_PULL_BYTES,
                                None if msg_filter.matches_all else msg_filter)
    if result.records:
        return _found(result.body, result.next_begin_offset, result.min_offset, result.max_offset)
    return status_to_code(result, offset), result


_COMMITLOG_OFFSET = header_reader("commitlog_offset")
HEADER_BYTES = header_size()


def suggested_broker(env: BrokerEnv, sub_cfg: SubscriptionGroupConfig, result: GetResult | _Found) -> int:
    """``suggestWhichBrokerId`` under slaveReadEnable, as Java's PullMessageProcessor: the group's
    ``whichBrokerWhenConsumeSlowly`` when what was read is no longer in memory (``in_memory``: farther
    from the CommitLog's end than accessMessageInMemoryMaxRatio % of RAM), else its ``brokerId``.  Java
    measures from the last record read, rokka from the first (one pull's bytes apart)."""
    first = (result.records[0] if result.records else b"") if isinstance(result, GetResult) else result.body
    if len(first) < HEADER_BYTES:
        return sub_cfg.broker_id
    (offset,) = _COMMITLOG_OFFSET(first, 0)
    return sub_cfg.broker_id if in_memory(env, int(offset)) else sub_cfg.which_broker_when_consume_slowly


def _response(req: RemotingCommand, code: int, result: GetResult | _Found | None, remark: str | None = None,
              next_begin: int = 0, suggest: int = 0) -> RemotingCommand:
    ext = PullMessageResponseHeader(
        suggest_which_broker_id=suggest, next_begin_offset=result.next_begin_offset if result else next_begin,
        min_offset=result.min_offset if result else 0, max_offset=result.max_offset if result else 0).encode()
    body = result.body if (result is not None and code == ResponseCode.SUCCESS) else b""
    if isinstance(result, GetResult) and remark is None and code != ResponseCode.SUCCESS:
        remark = result.status.value
    return req.make_response(code, remark, ext, body)


def _name_refusal(req: RemotingCommand, channel: Any, broker: Any, group: str, topic: str) -> RemotingCommand | None:
    """The answer to a pull whose group or (unknown) topic name is not valid, or None."""
    peer = str(getattr(channel, "peer", ""))
    if (why := names.consumer_group_problem(group)) is not None:
        names.refused("rocketmq", "group", group, why, op="pull", peer=peer)
        return _response(req, ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST, None,
                         f"subscription group [{group}] does not exist: {why}")
    if topic not in broker.topics and (why := names.topic_problem(topic)) is not None:
        names.refused("rocketmq", "topic", topic, why, op="pull", peer=peer)
        return _response(req, ResponseCode.TOPIC_NOT_EXIST, None, f"topic[{topic}] not exist: {why}")
    return None


async def handle_pull(env: BrokerEnv, channel: Any, req: RemotingCommand) -> RemotingCommand:
    h = PullMessageRequestHeader.decode(req)
    group, topic, queue_id, offset, sysflag = h.consumer_group, h.topic, h.queue_id, h.queue_offset, h.sys_flag
    max_msgs = max(1, min(h.max_msg_nums, 1024))
    commit_offset = h.commit_offset or 0
    suspend_ms = h.suspend_timeout_millis or 0
    broker = env.broker
    if (bad := _name_refusal(req, channel, broker, group, topic)) is not None:
        return bad
    sub_cfg = broker.sub_groups.get(group)
    if sub_cfg is None:
        return _response(req, ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST, None,
                         f"subscription group [{group}] does not exist")
    if not sub_cfg.consume_enable:
        return _response(req, ResponseCode.NO_PERMISSION, None, f"subscription group no permission, {group}")
    tc = broker.topics.get(topic)
    if tc is None:
        return _response(req, ResponseCode.TOPIC_NOT_EXIST, None,
                         f"topic[{topic}] not exist, apply first please!")
    if not tc.readable:
        return _response(req, ResponseCode.NO_PERMISSION, None, f"the topic[{topic}] pulling message is forbidden")
    if not 0 <= queue_id < tc.queue_nums:
        return _response(req, ResponseCode.SYSTEM_ERROR, None,
                         f"queueId[{queue_id}] is illegal, topic:[{topic}] topicConfig.readQueueNums:"
                         f"[{tc.read_queue_nums}]")
    try:
        sub = resolve_subscription(env, h, group, topic, sysflag)
        msg_filter = ExpressionFilter(sub)
    except PullError as exc:
        return _response(req, exc.code, None, exc.remark)
    except SubscriptionParseError as exc:
        return _response(req, ResponseCode.SUBSCRIPTION_PARSE_FAILED, None, str(exc))
    if sysflag & FLAG_COMMIT_OFFSET and not env.cfg.is_slave:   # RocketMQ: a slave keeps no offset a PULL carries
        broker.offsets.commit(group, topic, queue_id, commit_offset)
    code, result = _read(env, topic, queue_id, offset, max_msgs, msg_filter)
    if (code == ResponseCode.PULL_NOT_FOUND and sysflag & FLAG_SUSPEND and suspend_ms > 0
            and env.cfg.long_polling_enable):
        await wait_for_arrival(env, topic, queue_id, offset, msg_filter, min(suspend_ms / 1000, MAX_SUSPEND_S))
        code, result = _read(env, topic, queue_id, offset, max_msgs, msg_filter)
    # slaveReadEnable: a consumer far behind is pointed at a slave (Java); without it, always the master
    suggest = suggested_broker(env, sub_cfg, result) if env.cfg.slave_read_enable else 0
    return _response(req, code, result, suggest=suggest)


async def wait_for_arrival(env: BrokerEnv, topic: str, queue_id: int, offset: int,
                           msg_filter: ExpressionFilter, timeout_s: float) -> bool:
    """Park until a matching message at or after ``offset`` is dispatched; False on timeout."""
    event = trio.Event()

    def on_arrival(queue_offset: int, code: int | None, props: dict[str, str] | None) -> None:
        # code/props None: a run of records that may match (core.arrivals); the pull re-reads.
        if queue_offset >= offset and (code is None or msg_filter.match_tags_code(code)) and (
                props is None or msg_filter.match_properties(props)):
            event.set()

    token = env.broker.arrivals.subscribe(topic, queue_id, on_arrival)
    try:
        if env.broker.store.max_offset(topic, queue_id) > offset:
            return True  # arrived between the read and the subscription
        with trio.move_on_after(timeout_s):
            await event.wait()
        return event.is_set()
    finally:
        env.broker.arrivals.unsubscribe(token)
