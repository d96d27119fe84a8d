"""Extra admin-tool calls that the ``rokka admin`` CLI needs beyond ``Admin``.

Theory of operation
-------------------
Small functions over the existing client objects (no new state):

* ``subscription_groups`` - GET_ALL_SUBSCRIPTIONGROUP_CONFIG of one broker.
* ``invoke_reset_offset`` - INVOKE_BROKER_TO_RESET_OFFSET (222): asks the broker to tell the
  group's live clients to reset; the raw response is returned because "not supported" and
  "group not online" are outcomes the caller reports, not errors.
* ``first_offset_at_or_after`` - SEARCH_OFFSET_BY_TIMESTAMP returns RocketMQ's "nearer
  neighbour" offset, which may be the last message *before* the timestamp.  Admin tools want
  the first offset whose store time is >= the timestamp (everything older is skipped), so the
  answer is checked with a one-message pull and moved forward by one when it is too old.
* ``pull_range`` - every message of one queue in ``[start, end)``, pulling in batches.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from rokka.core.model import StoredMessage
from rokka.net.remoting.client.consumer import PullConsumer
from rokka.net.remoting.client.remoting import RemotingClient, ResponseError
from rokka.net.remoting.client.types import MessageQueue
from rokka.net.remoting.codec import request_headers as rh
from rokka.net.remoting.codec.bodies import loads_body
from rokka.net.remoting.codec.codes import RequestCode, ResponseCode
from rokka.net.remoting.codec.remoting import RemotingCommand

PULL_FOUND, PULL_NO_NEW, PULL_NO_MATCH, PULL_OFFSET_ILLEGAL = 0, 19, 20, 21

__all__ = ["first_offset_at_or_after", "invoke_reset_offset", "producer_connections", "pull_range",
           "subscription_groups"]


async def subscription_groups(client: RemotingClient, broker_addr: str,
                              timeout_s: float = 5.0) -> dict[str, dict[str, Any]]:
    """Group name -> SubscriptionGroupConfig JSON, as one broker knows them."""
    resp = await client.invoke_ok(broker_addr, RemotingCommand(RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG),
                                  timeout_s)
    table = loads_body(resp.body).get("subscriptionGroupTable") or {}
    return {str(k): dict(v) for k, v in table.items()}


async def producer_connections(client: RemotingClient, broker_addr: str, group: str,
                               timeout_s: float = 5.0) -> dict[str, Any]:
    """GET_PRODUCER_CONNECTION_LIST: ``{"connectionSet": [...]}``; ResponseError if the group is unknown."""
    resp = await client.invoke_ok(broker_addr, RemotingCommand(
        RequestCode.GET_PRODUCER_CONNECTION_LIST,
        ext_fields=rh.GetProducerConnectionListRequestHeader(producer_group=group).encode()), timeout_s)
    return dict(loads_body(resp.body))


async def invoke_reset_offset(client: RemotingClient, broker_addr: str, *, topic: str, group: str,
                              timestamp_ms: int, force: bool = True,
                              timeout_s: float = 5.0) -> RemotingCommand:
    """INVOKE_BROKER_TO_RESET_OFFSET; returns the response whatever its code.

    Callers check ``code``: SUCCESS, REQUEST_CODE_NOT_SUPPORTED (broker cannot notify clients),
    CONSUMER_NOT_ONLINE (nobody to notify) or another error.
    """
    cmd = RemotingCommand(RequestCode.INVOKE_BROKER_TO_RESET_OFFSET, ext_fields=rh.ResetOffsetRequestHeader(
        topic=topic, group=group, timestamp=timestamp_ms, is_force=force).encode())
    return await client.invoke(broker_addr, cmd, timeout_s)


async def first_offset_at_or_after(consumer: PullConsumer, mq: MessageQueue, timestamp_ms: int) -> int:
    """The first queue offset whose store time is >= ``timestamp_ms`` (max offset when none).

    Raises:
        ResponseError and the client's network errors.
    """
    lo, hi = await consumer.min_offset(mq), await consumer.max_offset(mq)
    if hi <= lo:
        return hi
    offset = min(max(await consumer.search_offset(mq, timestamp_ms), lo), hi)
    while offset < hi:
        res = await consumer.pull(mq, offset, max_nums=1)
        if res.code != PULL_FOUND or not res.messages:
            return offset if res.code != PULL_OFFSET_ILLEGAL else hi
        if res.messages[0].store_timestamp >= timestamp_ms:
            return offset
        offset = res.messages[0].queue_offset + 1
    return hi


async def pull_range(consumer: PullConsumer, mq: MessageQueue, start: int, end: int, *,
                     expression: str = "*", batch: int = 32) -> AsyncIterator[StoredMessage]:
    """Yield the messages of ``mq`` with ``start <= queue_offset < end`` matching ``expression``."""
    offset = start
    while offset < end:
        res = await consumer.pull(mq, offset, max_nums=min(batch, end - offset), expression=expression)
        if res.code == PULL_FOUND:
            for msg in res.messages:
                if msg.queue_offset >= end:
                    return
                yield msg
        elif res.code not in (PULL_NO_MATCH,):
            return
        if res.next_begin_offset <= offset:
            return
        offset = res.next_begin_offset


def is_not_supported(exc_or_resp: ResponseError | RemotingCommand) -> bool:
    return int(exc_or_resp.code) == int(ResponseCode.REQUEST_CODE_NOT_SUPPORTED)
