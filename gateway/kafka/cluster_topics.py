"""Topics and producer ids over a rokka cluster: spreading a new Kafka topic, deleting it everywhere.

Theory of operation
-------------------
Kafka CreateTopics and Metadata auto-creation spread a topic over the live
brokers (``spread_counts``): Kafka's round-robin leader assignment, partition p led by broker
``(start + p) mod B`` of the brokers sorted by name, ``start = crc32(topic) mod B`` (Kafka picks a
random start; a hash makes two brokers auto-creating the same topic at once agree).  rokka numbers
a broker's queues contiguously (``rokka.gateway.kafka.cluster``), so each broker gets the same *number* of leaders as in
Kafka, as one block of partitions.  ``create_spread`` creates the other brokers' queues with
UPDATE_AND_CREATE_TOPIC (a broker that fails keeps no share: its partitions go to this broker),
and ``await_route`` waits (bounded) until the name servers route the topic to every owner, so
the other brokers read the whole layout on their next refresh; ``delete_everywhere`` removes a
topic from every other broker and the name servers (DeleteTopics).

**RocketMQ auto-creation** stays RocketMQ 4.9's: a producer sending to an unknown topic uses the
TBW102 route, which every broker carries; each broker that receives one of its first messages
creates the topic with min(the producer's defaultTopicQueueNums, 4 by default, TBW102's write
queues) queues and registers it at once.  The topic so lives on the brokers those first sends
reached (until the producer's next route refresh, 30 s in the Java and C++ clients, it keeps
spreading its sends over TBW102's brokers).  To spread one deliberately: Kafka CreateTopics, or
``rokka admin updateTopic -c <cluster>``.

**Producer ids.**  Each broker hands out Kafka producer ids from a range of its own
(``producer_id_base``), so an idempotent producer's id is unique on every partition it writes to,
whichever broker answered its InitProducerId.  ``rokka serve`` (one process) keeps ids from 0;
``rokka broker`` sets ``kafkaProducerIdBase``.
"""

from __future__ import annotations

import re
import zlib
from collections.abc import Iterable

import structlog
import trio
from rokka.gateway.kafka.cluster import REMOTE_TIMEOUT_S, ClusterView
from rokka.net.remoting.channel import ChannelClosedError, RequestTimeoutError
from rokka.net.remoting.client.remoting import ClientError
from rokka.net.remoting.codec.codes import RequestCode, ResponseCode
from rokka.net.remoting.codec.request_headers import CreateTopicRequestHeader, TopicRequestHeader

log = structlog.get_logger(__name__)

ROUTE_WAIT_S = 5.0
_ERRORS = (ClientError, RequestTimeoutError, ChannelClosedError, OSError, ValueError)
PRODUCER_ID_BASE_KEY = "kafkaProducerIdBase"     # BrokerConfig.extra, set by `rokka broker`
_SLOT_BITS, _RANGE_BITS = 21, 31


def producer_id_base(broker_name: str) -> int:
    """The first Kafka producer id of a cluster member's own range (``2**31`` ids each, all below
    ``2**53`` so JavaScript clients keep them exact): ``broker-<i>`` (``serve --brokers``) gets slot
    i + 1, any other name a slot in the upper half from its crc32."""
    m = re.fullmatch(r"broker-(\d{1,6})", broker_name)
    if m is not None and int(m.group(1)) + 1 < 1 << (_SLOT_BITS - 1):
        slot = int(m.group(1)) + 1
    else:
        half = 1 << (_SLOT_BITS - 1)
        slot = half + zlib.crc32(broker_name.encode("utf-8")) % half
    return slot << _RANGE_BITS


def spread_counts(topic: str, partitions: int, brokers: Iterable[str]) -> dict[str, int]:
    """Queues per broker of a new topic: Kafka's round robin from ``crc32(topic) mod B`` (see the
    module docstring); brokers with no partition are left out."""
    names = sorted(brokers)
    if not names or partitions < 1:
        return {}
    start = zlib.crc32(topic.encode("utf-8")) % len(names)
    out: dict[str, int] = {}
    for p in range(partitions):
        name = names[(start + p) % len(names)]
        out[name] = out.get(name, 0) + 1
    return out


async def create_spread(view: ClusterView, topic: str, counts: dict[str, int]) -> dict[str, int]:
    """UPDATE_AND_CREATE_TOPIC on each other broker of ``counts``; the brokers (and queue counts)
    that created it.  Failures are logged (``kafka.create_topic_spread_failed``) and left out."""
    made: dict[str, int] = {}
    client = view.namesrv.client if view.namesrv is not None else None
    for broker, n in sorted(counts.items()):
        if broker == view.broker_name:
            continue
        addr = view.master_addr(broker)
        if addr is None or client is None:
            log.warning("kafka.create_topic_spread_failed", topic=topic, broker=broker, reason="no master address")
            continue
        cmd = CreateTopicRequestHeader(
            topic=topic, default_topic="TBW102", read_queue_nums=n, write_queue_nums=n, perm=6,
            topic_filter_type="SINGLE_TAG", topic_sys_flag=0, order=False).command(RequestCode.UPDATE_AND_CREATE_TOPIC)
        try:
            resp = await client.invoke(addr, cmd, REMOTE_TIMEOUT_S)
        except _ERRORS as exc:
            log.warning("kafka.create_topic_spread_failed", topic=topic, broker=broker, error=str(exc))
            continue
        if resp.code != ResponseCode.SUCCESS:
            log.warning("kafka.create_topic_spread_failed", topic=topic, broker=broker, code=resp.code,
                        remark=resp.remark)
            continue
        made[broker] = n
    return made


async def await_route(view: ClusterView, topic: str, owners: dict[str, int], timeout_s: float = ROUTE_WAIT_S) -> bool:
    """Wait until the name servers route ``topic`` to every broker of ``owners`` with its queue count
    (False on timeout), then remember that layout (fresher than any route read before)."""
    ok = False
    if view.namesrv is not None:
        with trio.move_on_after(timeout_s):
            while True:
                try:
                    route = await view.namesrv.get_route(topic)
                except _ERRORS:
                    route = None
                have = {qd.broker_name: qd.read_queue_nums for qd in route.queue_datas} if route else {}
                if all(have.get(b) == n for b, n in owners.items()):
                    ok = True
                    break
                await trio.sleep(0.05)
    if not ok:
        log.warning("kafka.create_topic_route_slow", topic=topic, owners=sorted(owners), waited_s=timeout_s)
    view.remember_route(topic, owners)
    return ok


async def delete_everywhere(view: ClusterView, topic: str) -> None:
    """DELETE_TOPIC_IN_BROKER on every other broker owning ``topic``, then DELETE_TOPIC_IN_NAMESRV
    (``mqadmin deleteTopic``); failures logged.  The local store is the caller's."""
    await view.ensure([topic], force=True)
    lay = view.layout(topic)
    client = view.namesrv.client if view.namesrv is not None else None
    for o in lay.owners if lay is not None and client is not None else ():
        addr = view.master_addr(o.broker)
        if o.broker == view.broker_name or addr is None or client is None:
            continue
        try:
            await client.invoke(addr, TopicRequestHeader(topic=topic).command(RequestCode.DELETE_TOPIC_IN_BROKER),
                                REMOTE_TIMEOUT_S)
        except _ERRORS as exc:
            log.warning("kafka.delete_topic_remote_failed", topic=topic, broker=o.broker, error=str(exc))
    if view.namesrv is not None:
        try:
            await view.namesrv.delete_topic(topic)
        except _ERRORS as exc:
            log.warning("kafka.delete_topic_remote_failed", topic=topic, broker="namesrv", error=str(exc))
    view.forget_route(topic)
