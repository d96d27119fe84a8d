"""RocketMQ broker request handlers, keyed by request code.

``build_handlers(env)`` returns the dispatch table the remoting server uses;
each entry is ``async (channel, request) -> response | None`` bound to the
broker context.  Codes not in the table get REQUEST_CODE_NOT_SUPPORTED from
the server.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from typing import Any

from rokka.gateway.rocketmq.handlers import (
    admin,
    admin_acl,
    admin_config,
    admin_consumer,
    admin_stats,
    client,
    pull,
    reply,
    reset,
    send,
    txn,
)
from rokka.gateway.rocketmq.handlers.context import BrokerEnv
from rokka.net.remoting.codec.codes import RequestCode as RC
from rokka.net.remoting.codec.remoting import RemotingCommand

Handler = Callable[[Any, RemotingCommand], Awaitable[RemotingCommand | None]]

_TABLE: dict[int, Callable[..., Awaitable[RemotingCommand | None]]] = {
    RC.SEND_MESSAGE: send.handle_send,
    RC.SEND_MESSAGE_V2: send.handle_send,
    RC.SEND_BATCH_MESSAGE: send.handle_send,
    RC.SEND_REPLY_MESSAGE: reply.handle_send_reply,
    RC.SEND_REPLY_MESSAGE_V2: reply.handle_send_reply,
    RC.CONSUMER_SEND_MSG_BACK: send.handle_send_back,
    RC.PULL_MESSAGE: pull.handle_pull,
    RC.LITE_PULL_MESSAGE: pull.handle_pull,
    RC.END_TRANSACTION: txn.handle_end_transaction,
    RC.HEART_BEAT: client.handle_heartbeat,
    RC.UNREGISTER_CLIENT: client.handle_unregister,
    RC.CHECK_CLIENT_CONFIG: client.handle_check_client_config,
    RC.GET_CONSUMER_LIST_BY_GROUP: client.handle_consumer_list,
    RC.QUERY_CONSUMER_OFFSET: client.handle_query_offset,
    RC.UPDATE_CONSUMER_OFFSET: client.handle_update_offset,
    RC.GET_MAX_OFFSET: client.handle_max_offset,
    RC.GET_MIN_OFFSET: client.handle_min_offset,
    RC.SEARCH_OFFSET_BY_TIMESTAMP: client.handle_search_offset,
    RC.GET_EARLIEST_MSG_STORETIME: client.handle_earliest_time,
    RC.LOCK_BATCH_MQ: client.handle_lock,
    RC.UNLOCK_BATCH_MQ: client.handle_unlock,
    RC.UPDATE_AND_CREATE_TOPIC: admin.handle_create_topic,
    RC.DELETE_TOPIC_IN_BROKER: admin.handle_delete_topic,
    RC.GET_ALL_TOPIC_CONFIG: admin.handle_all_topic_config,
    RC.GET_TOPIC_CONFIG: admin.handle_topic_config,
    RC.GET_TOPIC_STATS_INFO: admin.handle_topic_stats,
    RC.GET_CONSUME_STATS: admin.handle_consume_stats,
    RC.GET_BROKER_RUNTIME_INFO: admin.handle_runtime_info,
    RC.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP: admin.handle_create_group,
    RC.GET_ALL_SUBSCRIPTIONGROUP_CONFIG: admin.handle_all_groups,
    RC.DELETE_SUBSCRIPTIONGROUP: admin.handle_delete_group,
    RC.GET_CONSUMER_CONNECTION_LIST: admin.handle_consumer_connections,
    RC.GET_PRODUCER_CONNECTION_LIST: admin.handle_producer_connections,
    RC.VIEW_MESSAGE_BY_ID: admin.handle_view_message,
    RC.QUERY_MESSAGE: admin.handle_query_message,
    RC.INVOKE_BROKER_TO_RESET_OFFSET: reset.handle_reset_offset,
    RC.GET_BROKER_CONFIG: admin_config.handle_get_broker_config,
    RC.UPDATE_BROKER_CONFIG: admin_config.handle_update_broker_config,
    RC.GET_ALL_CONSUMER_OFFSET: admin_stats.handle_all_consumer_offset,
    RC.GET_ALL_DELAY_OFFSET: admin_stats.handle_all_delay_offset,
    RC.QUERY_TOPIC_CONSUME_BY_WHO: admin_stats.handle_topic_consume_by_who,
    RC.QUERY_CONSUME_TIME_SPAN: admin_stats.handle_consume_time_span,
    RC.CLEAN_EXPIRED_CONSUMEQUEUE: admin_stats.handle_clean_expired_cq,
    RC.CLONE_GROUP_OFFSET: admin_stats.handle_clone_group_offset,
    RC.VIEW_BROKER_STATS_DATA: admin_stats.handle_view_broker_stats,
    RC.CLEAN_UNUSED_TOPIC: admin_stats.handle_clean_unused_topic,
    RC.GET_BROKER_CONSUME_STATS: admin_stats.handle_broker_consume_stats,
    RC.QUERY_CONSUME_QUEUE: admin_stats.handle_query_consume_queue,
    RC.RESUME_CHECK_HALF_MESSAGE: admin_stats.handle_resume_check_half,
    RC.GET_CONSUMER_RUNNING_INFO: admin_consumer.handle_consumer_running_info,
    RC.CONSUME_MESSAGE_DIRECTLY: admin_consumer.handle_consume_message_directly,
    RC.INVOKE_BROKER_TO_GET_CONSUMER_STATUS: admin_consumer.handle_get_consumer_status,
    RC.GET_SYSTEM_TOPIC_LIST_FROM_BROKER: admin_stats.handle_system_topics,
    RC.GET_ALL_PRODUCER_INFO: admin_stats.handle_all_producer_info,
    RC.UPDATE_AND_CREATE_ACL_CONFIG: admin_acl.handle_update_acl,
    RC.DELETE_ACL_CONFIG: admin_acl.handle_delete_acl,
    RC.GET_BROKER_CLUSTER_ACL_INFO: admin_acl.handle_acl_info,
    RC.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG: admin_acl.handle_update_global_white,
    RC.GET_BROKER_CLUSTER_ACL_CONFIG: admin_acl.handle_acl_config,
    RC.DELETE_EXPIRED_COMMITLOG: admin_acl.handle_delete_expired_commitlog,
    RC.QUERY_CORRECTION_OFFSET: admin_acl.handle_query_correction_offset,
}


def register(code: int, fn: Callable[..., Awaitable[RemotingCommand | None]]) -> None:
    """Add a handler (used by feature modules such as transactions)."""
    _TABLE[int(code)] = fn


#: Handlers that complete without waiting when ``inline(env, request)`` says so: the channel runs them in its
#: reader (no task per request) and writes the responses of one read together.  A send waits only for a
#: SYNC_FLUSH group commit or a SYNC_MASTER slave ack (``Broker.replica_wait``, gateway/ha).
_INLINE: dict[Callable[..., Awaitable[RemotingCommand | None]], Callable[[BrokerEnv, RemotingCommand], bool]] = {
    send.handle_send: lambda env, req: env.broker.answers_at_once,
}


#: Requests a client sends through its "oneway" call without setting the oneway flag, and whose answer it never
#: reads, by the language its header names: rocketmq-client-go (GO) sends UPDATE_CONSUMER_OFFSET and
#: END_TRANSACTION that way.  It closes its connection with such answers unread, and a close with unread bytes is a
#: reset that drops the client's own writes still in its kernel (the offsets a push consumer persists on
#: shutdown: Go writes a frame in four small writes); so they get no answer, as if they were flagged oneway.
_ANSWER_NEVER_READ: dict[int, frozenset[str]] = {
    RC.UPDATE_CONSUMER_OFFSET: frozenset({"GO"}),
    RC.END_TRANSACTION: frozenset({"GO"}),
}


def _unanswered_for(languages: frozenset[str], handler: Handler) -> Handler:
    async def serve(channel: Any, req: RemotingCommand) -> RemotingCommand | None:
        response = await handler(channel, req)
        return None if req.language in languages else response
    return serve


def build_handlers(env: BrokerEnv) -> dict[int, Handler]:
    out: dict[int, Handler] = {}
    for code, fn in _TABLE.items():
        handler: Handler = functools.partial(fn, env)
        if (inline := _INLINE.get(fn)) is not None:
            handler.inline = functools.partial(inline, env)  # type: ignore[attr-defined]
        if (languages := _ANSWER_NEVER_READ.get(int(code))) is not None:
            handler = _unanswered_for(languages, handler)
        out[int(code)] = handler
    return out
