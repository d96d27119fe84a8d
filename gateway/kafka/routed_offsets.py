"""Group offsets in a rokka cluster: each Kafka partition's committed offset at the broker owning it.

Theory of operation
-------------------
``RoutedOffsets`` is the group coordinator's offset store in a cluster: an offset for a Kafka
partition lives in the offset table of the broker that owns the queue, under the local queue id,
so RocketMQ consumers of the same group see it.  Local partitions go to the local table;
commits for remote partitions are collected (``take_outbox``) and forwarded with
UPDATE_CONSUMER_OFFSET (``push``); fetches of remote partitions are read beforehand with
QUERY_CONSUMER_OFFSET (``prefetch``) and answered from that per-request snapshot (a fetch of
every offset of a group first asks the other brokers which topics it has offsets for there,
GET_CONSUME_STATS without a topic).  Kafka commit
metadata and leader epochs travel with them as two extra header fields, ``kafkaMetadata`` and
``kafkaLeaderEpoch`` (on the commit request and the query response, declared in
``request_headers`` / ``response_headers``); a RocketMQ broker ignores
fields it does not know, so an owner that is not rokka keeps the offset and drops the extras.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import structlog
from rokka.core.offsets import OffsetStore
from rokka.gateway.kafka.cluster import _ERRORS, REMOTE_TIMEOUT_S, ClusterView
from rokka.net.remoting.client.remoting import RemotingClient
from rokka.net.remoting.client.types import MessageQueue
from rokka.net.remoting.codec.bodies import loads_body
from rokka.net.remoting.codec.codes import RequestCode, ResponseCode
from rokka.net.remoting.codec.remoting import RemotingCommand
from rokka.net.remoting.codec.request_headers import (
    DeleteSubscriptionGroupRequestHeader,
    GetConsumeStatsRequestHeader,
    QueryConsumerOffsetRequestHeader,
    UpdateConsumerOffsetRequestHeader,
)
from rokka.net.remoting.codec.response_headers import QueryConsumerOffsetResponseHeader

log = structlog.get_logger(__name__)


@dataclass(frozen=True)
class RemoteCommit:
    broker: str
    group: str
    topic: str
    partition: int
    queue_id: int
    offset: int
    metadata: str | None = None
    leader_epoch: int = -1


class RoutedOffsets:
    """The coordinator's offset store keyed by Kafka partition; see the module docstring.

    ``commit`` / ``query`` / ``offsets`` / ``topics_of_group`` are synchronous (the coordinator
    calls them without awaiting); the group handlers call ``prefetch`` before an OffsetFetch
    and ``take_outbox`` + ``push`` after an OffsetCommit, with no await in between, so
    concurrent requests never see each other's state.
    """

    def __init__(self, view: ClusterView, local: OffsetStore, client: RemotingClient | None) -> None:
        self.view, self.local, self.client = view, local, client
        self._outbox: list[RemoteCommit] = []
        self._remote: dict[tuple[str, str, int], int] = {}   # (group, topic, partition) -> offset
        self._remote_meta: dict[tuple[str, str, int], tuple[str, int]] = {}

    def _owner(self, topic: str, partition: int) -> tuple[str, int]:
        lay = self.view.layout(topic)
        found = lay.owner_of(partition) if lay is not None else None
        if found is None:
            return self.view.broker_name, partition
        return found[0].broker, found[1]

    def commit(self, group: str, topic: str, queue_id: int, offset: int, *, durable: bool = False,
               metadata: str | None = None, leader_epoch: int = -1) -> None:
        broker, q = self._owner(topic, queue_id)
        if broker == self.view.broker_name:
            self.local.commit(group, topic, q, offset, durable=durable, metadata=metadata,
                              leader_epoch=leader_epoch)
        else:
            self._outbox.append(RemoteCommit(broker, group, topic, queue_id, q, offset, metadata, leader_epoch))

    def commit_metadata(self, group: str, topic: str, queue_id: int) -> tuple[str, int]:
        broker, q = self._owner(topic, queue_id)
        if broker == self.view.broker_name:
            return self.local.commit_metadata(group, topic, q)
        return self._remote_meta.get((group, topic, queue_id), ("", -1))

    def query(self, group: str, topic: str, queue_id: int) -> int | None:
        broker, q = self._owner(topic, queue_id)
        if broker == self.view.broker_name:
            return self.local.query(group, topic, q)
        return self._remote.get((group, topic, queue_id))

    def offsets(self, group: str, topic: str) -> dict[int, int]:
        out = {self.view.partition_of(topic, q): off for q, off in self.local.offsets(group, topic).items()}
        out.update({p: off for (g, t, p), off in self._remote.items() if g == group and t == topic})
        return out

    def topics_of_group(self, group: str) -> set[str]:
        return self.local.topics_of_group(group) | {t for (g, t, _) in self._remote if g == group}

    def delete_group(self, group: str, topic: str | None = None, *, durable: bool = False) -> None:
        """This broker's offsets of ``group``; the other brokers' go with ``delete_group_remote``."""
        self.local.delete_group(group, topic, durable=durable)

    def delete_queues(self, group: str, topic: str, queue_ids: Iterable[int], *, durable: bool = False) -> None:
        """Forget offsets of Kafka partitions: local ones at once; a remote one is queued as a
        commit of -1, which RocketMQ's offset query (and so every reader) treats as no offset."""
        local: list[int] = []
        for partition in queue_ids:
            broker, q = self._owner(topic, partition)
            if broker == self.view.broker_name:
                local.append(q)
            else:
                self._outbox.append(RemoteCommit(broker, group, topic, partition, q, -1))
        self.local.delete_queues(group, topic, local, durable=durable)

    async def delete_group_remote(self, group: str) -> bool:
        """DELETE_SUBSCRIPTIONGROUP with cleanOffset on every other live broker (RocketMQ's
        ``mqadmin deleteSubGroup -r``): the group's config and offsets there.  False if one failed."""
        ok = True
        for broker in self.view.nodes():
            if broker != self.view.broker_name:
                header = DeleteSubscriptionGroupRequestHeader(group_name=group, clean_offset=True)
                resp = await self._call(broker, RequestCode.DELETE_SUBSCRIPTIONGROUP, header.encode())
                ok = ok and resp is not None
        return ok

    # -- remote side ------------------------------------------------------------------------

    def take_outbox(self) -> list[RemoteCommit]:
        out, self._outbox = self._outbox, []
        return out

    async def push(self, commits: list[RemoteCommit]) -> set[tuple[str, int]]:
        """UPDATE_CONSUMER_OFFSET on each owner; returns the (topic, partition)s that failed."""
        failed: set[tuple[str, int]] = set()
        for c in commits:
            extras = c.metadata is not None
            ext = UpdateConsumerOffsetRequestHeader(
                consumer_group=c.group, topic=c.topic, queue_id=c.queue_id, commit_offset=c.offset,
                kafka_metadata=c.metadata, kafka_leader_epoch=c.leader_epoch if extras else None).encode()
            if await self._call(c.broker, RequestCode.UPDATE_CONSUMER_OFFSET, ext) is None:
                failed.add((c.topic, c.partition))
        return failed

    async def prefetch(self, group: str, wanted: list[tuple[str, int]] | None) -> None:
        """Read the remote partitions' committed offsets for the next synchronous OffsetFetch.

        ``wanted`` None = every partition of every topic the group has committed here.  The
        snapshot is installed at the end (no await after it), ``forget`` drops it.
        """
        fetched: dict[tuple[str, str, int], int] = {}
        meta: dict[tuple[str, str, int], tuple[str, int]] = {}
        self._remote, self._remote_meta = {}, {}
        if not self.view.clustered:
            return
        if wanted is None:
            topics = sorted(self.local.topics_of_group(group) | await self._remote_topics_of(group))
            await self.view.ensure(topics)
            wanted = [(t, p) for t in topics if (lay := self.view.layout(t)) is not None
                      for p in range(lay.total)]
        else:
            await self.view.ensure({t for t, _ in wanted})
        for topic, partition in wanted:
            broker, q = self._owner(topic, partition)
            if broker == self.view.broker_name:
                continue
            # setZeroIfNotFound=false: a queue the group never committed must read as "none"
            # (-1), not as RocketMQ's "0 while the queue's first message is in memory".
            resp = await self._call(broker, RequestCode.QUERY_CONSUMER_OFFSET, QueryConsumerOffsetRequestHeader(
                consumer_group=group, topic=topic, queue_id=q, set_zero_if_not_found=False).encode())
            if resp is not None and resp.code == ResponseCode.SUCCESS:
                got = QueryConsumerOffsetResponseHeader.peek(resp)     # lenient: a bad field reads as none
                fetched[(group, topic, partition)] = -1 if got.offset is None else got.offset
                meta[(group, topic, partition)] = (got.kafka_metadata or "",
                                                   -1 if got.kafka_leader_epoch is None else got.kafka_leader_epoch)
        self._remote, self._remote_meta = fetched, meta

    async def _remote_topics_of(self, group: str) -> set[str]:
        """The topics ``group`` has offsets for on the other live brokers (GET_CONSUME_STATS without
        a topic, as ``mqadmin consumerProgress``): a group's partitions may all live elsewhere."""
        out: set[str] = set()
        for broker in self.view.nodes():
            if broker == self.view.broker_name:
                continue
            resp = await self._call(broker, RequestCode.GET_CONSUME_STATS,
                                    GetConsumeStatsRequestHeader(consumer_group=group).encode())
            try:
                table = loads_body(resp.body).get("offsetTable") or {} if resp is not None and resp.body else {}
                out.update(MessageQueue.from_json(k).topic for k in table)
            except (ValueError, KeyError, TypeError, AttributeError, AssertionError) as exc:
                log.warning("kafka.cluster.offset_owner_answer_unreadable", broker=broker, error=str(exc))
        return out

    def forget(self) -> None:
        self._remote, self._remote_meta = {}, {}

    async def _call(self, broker: str, code: int, ext: dict[str, str]) -> RemotingCommand | None:
        addr = self.view.master_addr(broker)
        if addr is None or self.client is None:
            log.warning("kafka.cluster.offset_owner_unreachable", broker=broker, reason="no master address")
            return None
        try:
            resp = await self.client.invoke(addr, RemotingCommand(code, ext_fields=dict(ext)),
                                            REMOTE_TIMEOUT_S)
        except _ERRORS as exc:
            log.warning("kafka.cluster.offset_forward_failed", broker=broker, addr=addr, error=str(exc))
            return None
        if resp.code not in (ResponseCode.SUCCESS, ResponseCode.QUERY_NOT_FOUND):
            log.warning("kafka.cluster.offset_forward_refused", broker=broker, code=resp.code, remark=resp.remark)
            return None
        return resp

