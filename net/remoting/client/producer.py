"""Producer: SEND_MESSAGE_V2, oneway and SEND_BATCH_MESSAGE over the remoting client.

Theory of operation
-------------------
Routing follows the Java client: look the topic up on the name server; on
TOPIC_NOT_EXIST use the route of ``TBW102`` (the broker then auto-creates
the topic), capped at ``default_topic_queue_nums`` queues per broker.  Routes
are cached for ``route_ttl_s``.  Without an explicit queue, queues are picked
round-robin and a failed attempt moves to the next queue (``retries`` extra
attempts, Java's ``retryTimesWhenSendFailed``).

Each message gets a ``UNIQ_KEY`` (32 hex chars; treated as opaque by the
broker) and ``WAIT=true``.  The request uses the V2 one-letter header
(reference 4.2) with every value a string, as Java does.  Send response
codes 0/10/11/12 map to SEND_OK / FLUSH_DISK_TIMEOUT / SLAVE_NOT_AVAILABLE /
FLUSH_SLAVE_TIMEOUT; anything else raises ``ResponseError``.
"""

from __future__ import annotations

import itertools
import os
import time
from collections.abc import Sequence

import trio
from rokka.core.model import PROP_DELAY, PROP_KEYS, PROP_TAGS, PROP_UNIQ_KEY, PROP_WAIT, TOPIC_DEFAULT
from rokka.core.record import encode_properties
from rokka.net.remoting.channel import ChannelClosedError, RequestTimeoutError
from rokka.net.remoting.client.namesrv import NamesrvClient
from rokka.net.remoting.client.remoting import ClientError, ConnectError, RemotingClient, ResponseError
from rokka.net.remoting.client.types import MessageQueue, OutMessage, SendResult, TopicRoute
from rokka.net.remoting.codec import request_headers as rh
from rokka.net.remoting.codec.batch import encode_batch
from rokka.net.remoting.codec.codes import RequestCode, ResponseCode
from rokka.net.remoting.codec.headers import V1_TO_V2_SEND  # noqa: F401 - re-exported (tests build V2 headers)
from rokka.net.remoting.codec.remoting import RemotingCommand
from rokka.net.remoting.codec.response_headers import SendMessageResponseHeader

_SEND_STATUS: dict[int, str] = {
    ResponseCode.SUCCESS: "SEND_OK",
    ResponseCode.FLUSH_DISK_TIMEOUT: "FLUSH_DISK_TIMEOUT",
    ResponseCode.FLUSH_SLAVE_TIMEOUT: "FLUSH_SLAVE_TIMEOUT",
    ResponseCode.SLAVE_NOT_AVAILABLE: "SLAVE_NOT_AVAILABLE",
}
_RETRYABLE = (ResponseError, ConnectError, RequestTimeoutError, ChannelClosedError)
_uniq_prefix = os.urandom(8).hex().upper() + f"{os.getpid() & 0xFFFF:04X}"
_uniq_counter = itertools.count()


def new_uniq_key() -> str:
    """A fresh 32-hex-char client message id (random prefix + pid + time + counter)."""
    return f"{_uniq_prefix}{int(time.time()) & 0xFFFFFFFF:08X}{next(_uniq_counter) & 0xFFFF:04X}"


def message_properties(msg: OutMessage) -> dict[str, str]:
    props = dict(msg.properties)
    if msg.tags:
        props[PROP_TAGS] = msg.tags
    if msg.keys:
        props[PROP_KEYS] = msg.keys if isinstance(msg.keys, str) else " ".join(msg.keys)
    if msg.delay_level:
        props[PROP_DELAY] = str(msg.delay_level)
    props.setdefault(PROP_UNIQ_KEY, new_uniq_key())
    props.setdefault(PROP_WAIT, "true")
    return props


class Producer:
    """Sends messages to RocketMQ brokers found through the name server.

    Args:
        client: shared ``RemotingClient``.
        namesrv: name server client used for routes.
        group: producer group (header ``producerGroup``).
        send_timeout_s: per-attempt timeout.
        retries: extra attempts on other queues when no queue was given.
    """

    def __init__(self, client: RemotingClient, namesrv: NamesrvClient, group: str = "DEFAULT_PRODUCER", *,
                 send_timeout_s: float = 3.0, retries: int = 2, default_topic_queue_nums: int = 4,
                 route_ttl_s: float = 30.0) -> None:
        self.client = client
        self.namesrv = namesrv
        self.group = group
        self.send_timeout_s = send_timeout_s
        self.retries = retries
        self.default_topic_queue_nums = default_topic_queue_nums
        self.route_ttl_s = route_ttl_s
        self._routes: dict[str, tuple[float, TopicRoute, list[MessageQueue]]] = {}
        self._rr = itertools.count()

    # -- routing -----------------------------------------------------------------------------
    async def route(self, topic: str, *, refresh: bool = False) -> tuple[TopicRoute, list[MessageQueue]]:
        """The topic's route and publish queues (TBW102 fallback for unknown topics).

        Raises:
            ClientError: neither the topic nor TBW102 has a route.
        """
        cached = self._routes.get(topic)
        if cached and not refresh and trio.current_time() - cached[0] < self.route_ttl_s:
            return cached[1], cached[2]
        route = await self.namesrv.get_route(topic)
        queues = route.publish_queues(topic) if route else []
        if not queues:
            default = await self.namesrv.get_route(TOPIC_DEFAULT)
            if default is None:
                raise ClientError(f"no route for topic {topic} and no {TOPIC_DEFAULT} route")
            route = default
            queues = default.publish_queues(topic, cap=self.default_topic_queue_nums)
        if not queues:
            raise ClientError(f"no writable queue for topic {topic}")
        assert route is not None
        self._routes[topic] = (trio.current_time(), route, queues)
        return route, queues

    async def _targets(self, topic: str, queue: MessageQueue | int | None) -> list[tuple[str, MessageQueue]]:
        route, queues = await self.route(topic)
        if isinstance(queue, MessageQueue):
            chosen = [queue]
        elif isinstance(queue, int):
            chosen = [q for q in queues if q.queue_id == queue][:1] or [MessageQueue(topic, queues[0].broker_name,
                                                                                      queue)]
        else:
            chosen = _spread(queues, next(self._rr), 1 + self.retries)
        out = []
        for mq in chosen:
            addr = route.master_addr(mq.broker_name)
            if addr is None:
                raise ClientError(f"broker {mq.broker_name} of topic {topic} has no master")
            out.append((addr, mq))
        return out

    # -- sending ---------------------------------------------------------------------------
    def _header(self, topic: str, mq: MessageQueue, *, props: dict[str, str], flag: int, sys_flag: int = 0,
                batch: bool = False) -> dict[str, str]:
        return rh.SendMessageRequestHeader(
            producer_group=self.group, topic=topic, default_topic=TOPIC_DEFAULT,
            default_topic_queue_nums=self.default_topic_queue_nums, queue_id=mq.queue_id, sys_flag=sys_flag,
            born_timestamp=int(time.time() * 1000), flag=flag,
            properties=encode_properties(props).decode("utf-8") if props else None,
            reconsume_times=0, unit_mode=False, batch=batch or None).encode_v2()

    async def send(self, topic: str, body: bytes | OutMessage, *, tags: str | None = None,
                   keys: str | list[str] | None = None, properties: dict[str, str] | None = None,
                   queue: MessageQueue | int | None = None, flag: int = 0, delay_level: int = 0,
                   sys_flag: int = 0) -> SendResult:
        """Send one message synchronously.

        Args:
            queue: a ``MessageQueue``, a queue id (first broker of the route), or ``None`` (round-robin
                with retries).
        Returns:
            ``SendResult`` with the broker's offsetMsgId, queue and queue offset.
        Raises:
            ResponseError / ConnectError / RequestTimeoutError when every attempt failed.
        """
        msg = body if isinstance(body, OutMessage) else OutMessage(
            body, tags, keys, dict(properties or {}), flag, delay_level)
        props = message_properties(msg)
        last: Exception | None = None
        for addr, mq in await self._targets(topic, queue):
            cmd = RemotingCommand(RequestCode.SEND_MESSAGE_V2, body=msg.body,
                                  ext_fields=self._header(topic, mq, props=props, flag=msg.flag, sys_flag=sys_flag))
            try:
                resp = await self.client.invoke(addr, cmd, self.send_timeout_s)
                return _send_result(resp, mq, props[PROP_UNIQ_KEY], f"send to {topic}@{addr}")
            except _RETRYABLE as exc:
                last = exc
                self._routes.pop(topic, None)  # a failed broker may have left the route: refresh next time
        assert last is not None
        raise last

    async def send_oneway(self, topic: str, body: bytes | OutMessage, *, tags: str | None = None,
                          keys: str | list[str] | None = None, properties: dict[str, str] | None = None,
                          queue: MessageQueue | int | None = None, flag: int = 0) -> None:
        """Send one message with the oneway flag (no result, no retry)."""
        msg = body if isinstance(body, OutMessage) else OutMessage(body, tags, keys, dict(properties or {}), flag)
        props = message_properties(msg)
        addr, mq = (await self._targets(topic, queue))[0]
        await self.client.invoke_oneway(addr, RemotingCommand(
            RequestCode.SEND_MESSAGE_V2, body=msg.body,
            ext_fields=self._header(topic, mq, props=props, flag=msg.flag)))

    async def send_batch(self, topic: str, messages: Sequence[bytes | OutMessage], *,
                         queue: MessageQueue | int | None = None) -> SendResult:
        """SEND_BATCH_MESSAGE: all messages to one queue; ``msg_id`` is the comma-joined UNIQ_KEYs."""
        outs = [m if isinstance(m, OutMessage) else OutMessage(m) for m in messages]
        if not outs:
            raise ValueError("empty batch")
        if any(m.delay_level for m in outs):
            raise ValueError("batch messages cannot have a delay level")
        props_list = [message_properties(m) for m in outs]
        body = encode_batch([(m.flag, m.body, encode_properties(p)) for m, p in zip(outs, props_list, strict=True)])
        uniq = ",".join(p[PROP_UNIQ_KEY] for p in props_list)
        last: Exception | None = None
        for addr, mq in await self._targets(topic, queue):
            cmd = RemotingCommand(RequestCode.SEND_BATCH_MESSAGE, body=body,
                                  ext_fields=self._header(topic, mq, props={}, flag=0, batch=True))
            try:
                resp = await self.client.invoke(addr, cmd, self.send_timeout_s)
                return _send_result(resp, mq, uniq, f"batch to {topic}@{addr}")
            except _RETRYABLE as exc:
                last = exc
        assert last is not None
        raise last

    # -- lifecycle -----------------------------------------------------------------------------
    async def heartbeat(self, client_id: str) -> None:
        """HEART_BEAT with this producer group to every master address in the cached routes."""
        from rokka.net.remoting.codec.bodies import dumps  # noqa: PLC0415

        body = dumps({"clientID": client_id, "consumerDataSet": [], "producerDataSet": [{"groupName": self.group}]})
        for addr in self._master_addrs():
            await self.client.invoke_ok(addr, RemotingCommand(RequestCode.HEART_BEAT, body=body))

    async def shutdown(self, client_id: str) -> None:
        """UNREGISTER_CLIENT (producerGroup) to every known master; errors ignored."""
        for addr in self._master_addrs():
            try:
                await self.client.invoke(addr, RemotingCommand(
                    RequestCode.UNREGISTER_CLIENT,
                    ext_fields=rh.UnregisterClientRequestHeader(client_id=client_id,
                                                                producer_group=self.group).encode()))
            except _RETRYABLE:
                pass

    def _master_addrs(self) -> list[str]:
        return sorted({b.master_addr for _, route, _ in self._routes.values() for b in route.broker_datas
                       if b.master_addr})


def _spread(queues: list[MessageQueue], start: int, n: int) -> list[MessageQueue]:
    """``n`` queues round-robin from ``start``, retries preferring brokers not tried yet (as Java does)."""
    ordered = [queues[(start + i) % len(queues)] for i in range(len(queues))]
    chosen = ordered[:1]
    for q in ordered[1:]:
        if len(chosen) >= n:
            break
        if q.broker_name not in {c.broker_name for c in chosen}:
            chosen.append(q)
    for q in ordered[1:]:
        if len(chosen) >= n:
            break
        if q not in chosen:
            chosen.append(q)
    return chosen


def _send_result(resp: RemotingCommand, mq: MessageQueue, uniq: str, what: str) -> SendResult:
    status = _SEND_STATUS.get(resp.code)  # IntEnum keys match plain ints
    if status is None:
        raise ResponseError(resp, what)
    h = SendMessageResponseHeader.decode(resp)
    queue_id = mq.queue_id if h.queue_id is None else h.queue_id
    return SendResult(status=status, msg_id=uniq, offset_msg_id=h.msg_id or "",
                      queue=MessageQueue(mq.topic, mq.broker_name, queue_id),
                      queue_offset=-1 if h.queue_offset is None else h.queue_offset, region_id=h.msg_region,
                      transaction_id=h.transaction_id)
