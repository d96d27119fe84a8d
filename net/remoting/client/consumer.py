"""PullConsumer: PULL_MESSAGE, offsets, heartbeat, group membership.

Theory of operation
-------------------
A thin, explicit API: the caller picks the queue and the offset (like the
Java ``DefaultMQPullConsumer``).  ``pull`` decodes the body with
``rokka.core.record.iter_records`` (the CommitLog record format, defined
once there) and inflates zlib bodies flagged COMPRESSED.  Pull codes 19/20/21
are results, not errors (``PullResult.code``); anything else raises
``ResponseError``.

Offsets: ``query_offset`` returns ``None`` on QUERY_NOT_FOUND;
``update_offset`` is sync by default, oneway on request (what clients do
every 5 s).
"""

from __future__ import annotations

import dataclasses
import os
import socket
import zlib

from rokka.core.model import COMPRESSED_FLAG, StoredMessage
from rokka.core.record import iter_records
from rokka.net.remoting.client.namesrv import NamesrvClient
from rokka.net.remoting.client.remoting import ClientError, NoRouteError, RemotingClient, ResponseError
from rokka.net.remoting.client.types import MessageQueue, PullResult, TopicRoute
from rokka.net.remoting.codec import request_headers as rh
from rokka.net.remoting.codec.bodies import dumps, loads_body
from rokka.net.remoting.codec.codes import RequestCode, ResponseCode
from rokka.net.remoting.codec.remoting import RemotingCommand
from rokka.net.remoting.codec.response_headers import (
    GetEarliestMsgStoretimeResponseHeader,
    GetMaxOffsetResponseHeader,
    GetMinOffsetResponseHeader,
    PullMessageResponseHeader,
    QueryConsumerOffsetResponseHeader,
    SearchOffsetResponseHeader,
)

FLAG_COMMIT_OFFSET = 0x1
FLAG_SUSPEND = 0x2
FLAG_SUBSCRIPTION = 0x4
_PULL_OK = (ResponseCode.SUCCESS, ResponseCode.PULL_NOT_FOUND, ResponseCode.PULL_RETRY_IMMEDIATELY,
            ResponseCode.PULL_OFFSET_MOVED)


def default_client_id() -> str:
    """``<ip>@<pid>`` like the Java client."""
    try:
        ip = socket.gethostbyname(socket.gethostname())
    except OSError:
        ip = "127.0.0.1"
    return f"{ip}@{os.getpid()}"


def inflate(msg: StoredMessage) -> StoredMessage:
    """Decompress a COMPRESSED (zlib) body; other messages are returned unchanged."""
    if not msg.sysflag & COMPRESSED_FLAG:
        return msg
    return dataclasses.replace(msg, body=zlib.decompress(msg.body))


def decode_messages(body: bytes) -> tuple[StoredMessage, ...]:
    return tuple(inflate(m) for m in iter_records(body))


class PullConsumer:
    """Pull-style consumer of one group.

    Args:
        client / namesrv: shared remoting and name server clients.
        group: consumer group.
        client_id: the heartbeat clientID (default ``ip@pid``).
    """

    def __init__(self, client: RemotingClient, namesrv: NamesrvClient, group: str, *,
                 client_id: str | None = None, timeout_s: float = 10.0) -> None:
        self.client = client
        self.namesrv = namesrv
        self.group = group
        self.client_id = client_id or default_client_id()
        self.timeout_s = timeout_s
        self._routes: dict[str, TopicRoute] = {}

    async def _route(self, topic: str, refresh: bool = False) -> TopicRoute:
        route = None if refresh else self._routes.get(topic)
        if route is None:
            route = await self.namesrv.get_route(topic)
            if route is None:
                raise NoRouteError(f"no route for topic {topic}")
            self._routes[topic] = route
        return route

    async def broker_addr(self, mq: MessageQueue) -> str:
        """Master address of the queue's broker (route refreshed once if unknown)."""
        addr = (await self._route(mq.topic)).master_addr(mq.broker_name)
        if addr is None:
            addr = (await self._route(mq.topic, refresh=True)).master_addr(mq.broker_name)
        if addr is None:
            raise ClientError(f"no master for broker {mq.broker_name}")
        return addr

    async def fetch_subscribe_queues(self, topic: str) -> list[MessageQueue]:
        """All readable queues of the topic (route refreshed)."""
        return (await self._route(topic, refresh=True)).subscribe_queues(topic)

    async def _call(self, mq: MessageQueue, code: int, ext: dict[str, str], timeout_s: float | None = None,
                    ok: tuple[int, ...] = (ResponseCode.SUCCESS,)) -> RemotingCommand:
        return await self.client.invoke_ok(await self.broker_addr(mq), RemotingCommand(code, ext_fields=ext),
                                           timeout_s or self.timeout_s, ok)

    async def pull(self, mq: MessageQueue, offset: int, *, max_nums: int = 32, expression: str = "*",
                   suspend_ms: int = 0, commit_offset: int = 0, sys_flag: int | None = None,
                   sub_version: int = 0, timeout_s: float | None = None) -> PullResult:
        """PULL_MESSAGE from ``offset``.

        ``suspend_ms > 0`` asks the broker to long-poll (FLAG_SUSPEND); the request timeout is then
        ``suspend_ms`` + 5 s unless given.  ``sys_flag`` overrides the computed PullSysFlag.
        """
        flag = FLAG_SUBSCRIPTION | (FLAG_SUSPEND if suspend_ms else 0) | (FLAG_COMMIT_OFFSET if commit_offset else 0)
        ext = rh.PullMessageRequestHeader(
            consumer_group=self.group, topic=mq.topic, queue_id=mq.queue_id, queue_offset=offset,
            max_msg_nums=max_nums, sys_flag=flag if sys_flag is None else sys_flag, commit_offset=commit_offset,
            suspend_timeout_millis=suspend_ms, subscription=expression, sub_version=sub_version,
            expression_type="TAG").encode()
        timeout = timeout_s or (suspend_ms / 1000 + 5 if suspend_ms else self.timeout_s)
        resp = await self._call(mq, RequestCode.PULL_MESSAGE, ext, timeout, _PULL_OK)
        e = PullMessageResponseHeader.decode(resp)
        return PullResult(
            code=resp.code, next_begin_offset=offset if e.next_begin_offset is None else e.next_begin_offset,
            min_offset=e.min_offset or 0, max_offset=e.max_offset or 0,
            suggest_which_broker_id=e.suggest_which_broker_id or 0,
            messages=decode_messages(resp.body) if resp.code == ResponseCode.SUCCESS else (), remark=resp.remark)

    # -- offsets -------------------------------------------------------------------------------
    async def query_offset(self, mq: MessageQueue) -> int | None:
        """Committed offset of this group on ``mq``; ``None`` when the broker has none."""
        resp = await self._call(mq, RequestCode.QUERY_CONSUMER_OFFSET,
                                rh.QueryConsumerOffsetRequestHeader(consumer_group=self.group, topic=mq.topic,
                                                                    queue_id=mq.queue_id).encode(),
                                ok=(ResponseCode.SUCCESS, ResponseCode.QUERY_NOT_FOUND))
        return QueryConsumerOffsetResponseHeader.decode(resp).offset if resp.code == ResponseCode.SUCCESS else None

    async def update_offset(self, mq: MessageQueue, offset: int, *, oneway: bool = False) -> None:
        ext = rh.UpdateConsumerOffsetRequestHeader(consumer_group=self.group, topic=mq.topic, queue_id=mq.queue_id,
                                                   commit_offset=offset).encode()
        if oneway:
            await self.client.invoke_oneway(await self.broker_addr(mq),
                                            RemotingCommand(RequestCode.UPDATE_CONSUMER_OFFSET, ext_fields=ext))
        else:
            await self._call(mq, RequestCode.UPDATE_CONSUMER_OFFSET, ext)

    async def max_offset(self, mq: MessageQueue) -> int:
        resp = await self._call(mq, RequestCode.GET_MAX_OFFSET,
                                rh.GetMaxOffsetRequestHeader(topic=mq.topic, queue_id=mq.queue_id).encode())
        return GetMaxOffsetResponseHeader.decode(resp).offset

    async def min_offset(self, mq: MessageQueue) -> int:
        resp = await self._call(mq, RequestCode.GET_MIN_OFFSET,
                                rh.GetMinOffsetRequestHeader(topic=mq.topic, queue_id=mq.queue_id).encode())
        return GetMinOffsetResponseHeader.decode(resp).offset

    async def search_offset(self, mq: MessageQueue, timestamp_ms: int) -> int:
        resp = await self._call(mq, RequestCode.SEARCH_OFFSET_BY_TIMESTAMP,
                                rh.SearchOffsetRequestHeader(topic=mq.topic, queue_id=mq.queue_id,
                                                             timestamp=timestamp_ms).encode())
        return SearchOffsetResponseHeader.decode(resp).offset

    async def earliest_msg_store_time(self, mq: MessageQueue) -> int:
        resp = await self._call(mq, RequestCode.GET_EARLIEST_MSG_STORETIME,
                                rh.GetEarliestMsgStoretimeRequestHeader(topic=mq.topic, queue_id=mq.queue_id).encode())
        return GetEarliestMsgStoretimeResponseHeader.decode(resp).timestamp

    # -- membership -------------------------------------------------------------------------------
    def heartbeat_body(self, subscriptions: dict[str, str], *, consume_type: str = "CONSUME_ACTIVELY",
                       message_model: str = "CLUSTERING",
                       consume_from_where: str = "CONSUME_FROM_LAST_OFFSET") -> bytes:
        subs = []
        for topic, expr in subscriptions.items():
            tags = [] if expr.strip() in ("", "*") else [t.strip() for t in expr.split("||") if t.strip()]
            subs.append({"classFilterMode": False, "codeSet": [], "expressionType": "TAG",
                         "subString": expr or "*", "subVersion": 0, "tagsSet": tags, "topic": topic})
        return dumps({"clientID": self.client_id, "consumerDataSet": [{
            "consumeFromWhere": consume_from_where, "consumeType": consume_type, "groupName": self.group,
            "messageModel": message_model, "subscriptionDataSet": subs, "unitMode": False}],
            "producerDataSet": []})

    async def heartbeat(self, subscriptions: dict[str, str], **kw: str) -> None:
        """HEART_BEAT to every broker (all ids) of the subscribed topics."""
        body = self.heartbeat_body(subscriptions, **kw)
        addrs: set[str] = set()
        for topic in subscriptions:
            addrs.update(a for b in (await self._route(topic, refresh=True)).broker_datas for a in b.addrs.values())
        for addr in sorted(addrs):
            await self.client.invoke_ok(addr, RemotingCommand(RequestCode.HEART_BEAT, body=body))

    async def consumer_ids(self, topic: str) -> list[str]:
        """GET_CONSUMER_LIST_BY_GROUP via a broker of ``topic``; [] when the group has no member."""
        route = await self._route(topic)
        for b in route.broker_datas:
            if b.master_addr:
                resp = await self.client.invoke(b.master_addr, RemotingCommand(
                    RequestCode.GET_CONSUMER_LIST_BY_GROUP,
                    ext_fields=rh.GetConsumerListByGroupRequestHeader(consumer_group=self.group).encode()),
                    self.timeout_s)
                if resp.code == ResponseCode.SUCCESS:
                    return [str(c) for c in loads_body(resp.body).get("consumerIdList") or []]
                if resp.code != ResponseCode.SYSTEM_ERROR:
                    raise ResponseError(resp, "GET_CONSUMER_LIST_BY_GROUP")
        return []

    async def unregister(self) -> None:
        """UNREGISTER_CLIENT (consumerGroup) to every broker address seen in routes."""
        addrs = {a for r in self._routes.values() for b in r.broker_datas for a in b.addrs.values()}
        for addr in sorted(addrs):
            await self.client.invoke_ok(addr, RemotingCommand(
                RequestCode.UNREGISTER_CLIENT,
                ext_fields=rh.UnregisterClientRequestHeader(client_id=self.client_id,
                                                            consumer_group=self.group).encode()))
