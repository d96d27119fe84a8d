"""The Kafka view of a rokka cluster: brokers, partition numbering, offset routing.

Theory of operation
-------------------
A rokka cluster is one or more name servers plus brokers (``rokka broker -n NS``), each broker
owning its own queues.  Kafka clients must see it as one Kafka cluster, so every broker answers
Metadata for all of them.  What each broker needs to know comes from the name servers:

* **Endpoints.**  Right after every REGISTER_BROKER round, a broker publishes its Kafka endpoint
  with PUT_KV_CONFIG to every name server: namespace ``ROKKA_KAFKA``, key = broker name, value =
  JSON ``{"nodeId": N, "host": H, "port": P}`` (``published``; only the set's master writes it,
  with its ISR, see ``rokka.gateway.kafka.replicas``).  The node id is ``kafkaNodeId`` when
  configured to a non-zero value, else ``replica_node_id(brokerName, brokerId)``: a crc32 of the
  name (of ``name#id`` for a slave), stable across restarts and the same on every broker.  The
  entry is not deleted on shutdown: a stopped broker's partitions stay listed (offline) rather than
  being renumbered.  Slaves, replicas and the ISR: ``rokka.gateway.kafka.replicas``.
* **Live brokers.**  GET_BROKER_CLUSTER_INFO: brokers with a master address.  A broker is listed
  in Metadata when it is live *and* has published an endpoint (itself always).
* **Partition numbering.**  For a topic, the name server route (GET_ROUTEINFO_BY_TOPIC) gives
  each broker's readQueueNums; brokers with READ permission and a master are sorted by name and
  their queues concatenated: broker-a's queues 0..n-1 are partitions 0..n-1, broker-b's queues
  are partitions n.., and so on (``TopicLayout``).  Kafka partition p owned by broker B is queue
  ``p - base(B)`` on B; Kafka offsets are that queue's ConsumeQueue offsets, unchanged.  This
  broker's own entry always comes from its local topic table (fresher than the name server's).
  A broker that drops out of the route because it died (not live any more) keeps its partitions
  in the numbering, leaderless, as long as this process remembers them, so the other brokers'
  partition numbers never shift under running clients; a live broker that no longer serves the
  topic is dropped.
* **Refresh.**  ``run()`` refreshes the broker list every ``ttl_s`` (3 s); topic routes are
  fetched on demand by ``ensure(topics)`` when older than ``ttl_s`` or when the route's entry for
  this broker disagrees with its own topic table - but only when the cluster
  has another broker: a single node never asks the name server for routes, and a topic this view
  has never seen is laid out as local-only.  So a lone broker behaves exactly as before (base 0).
  Name server failures keep the last known state.

New Kafka topics are spread over the brokers, and producer ids kept apart, by
``rokka.gateway.kafka.cluster_topics``.

Group offsets in a cluster: ``rokka.gateway.kafka.routed_offsets``.
"""

from __future__ import annotations

import json
import time
import zlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import structlog
import trio
from rokka.core.namesrv.routes import RegisterResult
from rokka.gateway.kafka.replicas import (
    KV_REPLICAS,
    EndpointPublisher,
    ReplicaEntry,
    ReplicaView,
    replica_key,
)
from rokka.net.remoting.channel import ChannelClosedError, RequestTimeoutError
from rokka.net.remoting.client.namesrv import BrokerRegistrar, NamesrvClient
from rokka.net.remoting.client.remoting import ClientError
from rokka.net.remoting.client.types import PERM_READ, TopicRoute

log = structlog.get_logger(__name__)

KV_NAMESPACE = "ROKKA_KAFKA"
TTL_S = 3.0
LAYOUT_MEMO_MAX = 10_000     # topics whose layout is kept (ClusterView.layout); past it, all are rebuilt
REMOTE_TIMEOUT_S = 5.0
_ERRORS = (ClientError, RequestTimeoutError, ChannelClosedError, OSError, ValueError)


def derive_node_id(broker_name: str) -> int:
    """A stable Kafka node id for a broker name (crc32, 1..2^31-1) when kafkaNodeId is not set."""
    return zlib.crc32(broker_name.encode("utf-8")) % 0x7FFFFFFF or 1


def replica_node_id(broker_name: str, broker_id: int) -> int:
    """The node id of one broker of a set (``gateway.kafka.replicas``): the set's own for brokerId 0,
    that of ``brokerName#brokerId`` for a slave."""
    return derive_node_id(broker_name if broker_id == 0 else f"{broker_name}#{broker_id}")


@dataclass(frozen=True)
class KafkaNode:
    node_id: int
    host: str
    port: int

    def to_json(self) -> str:
        return json.dumps({"nodeId": self.node_id, "host": self.host, "port": self.port},
                          separators=(",", ":"))

    @classmethod
    def from_json(cls, raw: str) -> KafkaNode | None:
        try:
            obj = json.loads(raw)
            return cls(int(obj["nodeId"]), str(obj["host"]), int(obj["port"]))
        except (ValueError, KeyError, TypeError):
            return None


@dataclass(frozen=True)
class Owner:
    broker: str
    queues: int
    base: int
    live: bool = True


@dataclass(frozen=True)
class TopicLayout:
    """A topic's partitions: each owner's queues, concatenated in broker-name order."""

    owners: tuple[Owner, ...]

    @classmethod
    def of(cls, queues: dict[str, int], offline: Iterable[str] = ()) -> TopicLayout:
        dead, base, out = set(offline), 0, []
        for name in sorted(queues):
            out.append(Owner(name, queues[name], base, name not in dead))
            base += queues[name]
        return cls(tuple(out))

    @property
    def total(self) -> int:
        return sum(o.queues for o in self.owners)

    def owner_of(self, partition: int) -> tuple[Owner, int] | None:
        """(owner, its local queue id) of a Kafka partition, or None when out of range."""
        for o in self.owners:
            if o.base <= partition < o.base + o.queues:
                return o, partition - o.base
        return None

    def owner(self, broker: str) -> Owner | None:
        return next((o for o in self.owners if o.broker == broker), None)


class PublishingRegistrar(BrokerRegistrar):
    """``BrokerRegistrar`` that publishes this broker's Kafka entries after every registration round."""

    def __init__(self, *args: Any, publisher: EndpointPublisher, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.publisher = publisher

    async def register_once(self) -> dict[str, RegisterResult | Exception]:
        results = await super().register_once()
        if self.namesrv_addrs:
            await self.publisher.publish()
        return results


class ClusterView:
    """This broker's cached picture of the cluster; see the module docstring.

    Args:
        broker_name / node / broker_addr: this broker (RocketMQ address "host:port").
        local_queues: topic -> this broker's readQueueNums (None when the topic is not here).
        namesrv: None = no name server: always a single node.
    """

    def __init__(self, broker_name: str, node: KafkaNode, broker_addr: str,
                 local_queues: Callable[[str], int | None], namesrv: NamesrvClient | None = None,
                 ttl_s: float = TTL_S, clock: Callable[[], float] = time.monotonic,
                 follower: Callable[[], bool] = lambda: False) -> None:
        self.broker_name, self.node, self.broker_addr = broker_name, node, broker_addr
        self._local_queues = local_queues
        self._follower = follower       # True while this broker is a slave of its set (store replica_only)
        self.namesrv = namesrv
        self.ttl_s = ttl_s
        self._clock = clock
        self._endpoints: dict[str, KafkaNode] = {}     # published by name (KV), live or not
        self._live: dict[str, str] = {}                # live broker name -> master RocketMQ address
        self._routes: dict[str, tuple[float, dict[str, int]]] = {}  # topic -> (fetched at, broker -> queues)
        self._locks: dict[str, trio.Lock] = {}
        # topic -> (what it was built from, the layout): ``layout`` runs for every produced or fetched
        # partition, and building one (sorting the brokers, an Owner each) cost more than the rest of a
        # small batch's path on a 16-broker cluster.  The inputs are replaced, never changed in place
        # (a refresh assigns new dicts and route tuples), so identity tells a stale entry.
        self._layouts: dict[str, tuple[int | None, object, object, TopicLayout | None]] = {}
        self.replicas = ReplicaView(broker_name, node.node_id)     # replicas and ISR (gateway.kafka.replicas)

    # ------------------------------------------------------------------ queries (synchronous)

    @property
    def clustered(self) -> bool:
        """True once another broker has published a Kafka endpoint (live or not: a dead broker's
        partitions stay in the numbering)."""
        return any(n != self.broker_name for n in self._endpoints)

    def nodes(self) -> dict[str, KafkaNode]:
        """Live brokers with a Kafka endpoint, by broker name (this broker always included)."""
        out = {n: ep for n, ep in self._endpoints.items() if n in self._live and n != self.broker_name}
        out[self.broker_name] = self.set_leader()
        return dict(sorted(out.items()))

    def set_leader(self) -> KafkaNode:
        """The Kafka node of this broker's set as clients should see it: this broker, or, on a slave whose
        master is live and has published its endpoint (``ROKKA_KAFKA/<brokerName>``, the same node id),
        the master's, so clients produce (and read) there as Kafka clients follow a partition's leader.
        With the master gone the slave names itself again and serves reads (a produce there answers
        NOT_LEADER_OR_FOLLOWER)."""
        if self._follower():
            master = self._endpoints.get(self.broker_name)
            if master is not None and self.broker_name in self._live and master != self.node:
                return master
        return self.node

    def replica_set(self, broker: str) -> tuple[int, list[int], list[int]]:
        """(leader node id, replicas, ISR) of the partitions of ``broker``'s set; (-1, [], []) when it
        has no live leader.  Another set whose master is down but whose slave is live is led by that
        slave (``stand_in``), as the slave names itself: its partitions stay readable."""
        leader = self.set_leader() if broker == self.broker_name else (
            self._endpoints.get(broker) if broker in self._live else self.stand_in(broker))
        if leader is None:
            return -1, [], []
        replicas, isr = self.replicas.replica_set(broker, leader.node_id)
        return leader.node_id, replicas, isr

    def stand_in(self, broker: str) -> KafkaNode | None:
        """For another broker set with no live master: its live slave with the lowest node id (it serves
        reads; a produce there answers NOT_LEADER_OR_FOLLOWER), else None."""
        if broker == self.broker_name or broker in self._live:
            return None
        live = self.replicas.live_entries(broker)
        if not live:
            return None
        e = min(live, key=lambda r: r.node_id)
        return KafkaNode(e.node_id, e.host, e.port)

    def broker_nodes(self) -> list[KafkaNode]:
        """The Kafka brokers a client is told of: each live set's leader (``nodes``), then the slave that
        stands in for each set whose master is down (``stand_in``)."""
        out = list(self.nodes().values())
        for name in sorted(self._endpoints):
            if (node := self.stand_in(name)) is not None and node not in out:
                out.append(node)
        return out

    def published(self) -> dict[tuple[str, str], str]:
        """What this broker writes to the name servers' KV now (``gateway.kafka.replicas``): the set's
        leader endpoint (with its ISR) while it is the master or unreplicated, and its replica entry when
        it replicates."""
        out: dict[tuple[str, str], str] = {}
        if not self._follower():
            raw = self.node.to_json()
            if (isr := self.replicas.local_isr()) is not None:
                raw = raw[:-1] + f',"isr":{json.dumps(isr, separators=(",", ":"))}}}'
            out[(KV_NAMESPACE, self.broker_name)] = raw
        hooks = self.replicas.hooks
        if hooks.replicated:
            entry = ReplicaEntry(self.node.node_id, self.node.host, self.node.port, self.broker_name,
                                 self.broker_addr, hooks.ha_client())
            out[(KV_REPLICAS, replica_key(self.broker_name, self.node.node_id))] = entry.to_json()
        return out

    def node_of(self, broker: str) -> KafkaNode | None:
        return self.node if broker == self.broker_name else self._endpoints.get(broker)

    def master_addr(self, broker: str) -> str | None:
        return self.broker_addr if broker == self.broker_name else self._live.get(broker)

    def layout(self, topic: str) -> TopicLayout | None:
        """The topic's partitions as this broker knows them now (None: unknown everywhere)."""
        local = self._local_queues(topic)
        cached = self._routes.get(topic)
        memo = self._layouts.get(topic)
        if memo is not None and memo[0] == local and memo[1] is cached and memo[2] is self._live:
            return memo[3]
        lay = self._build_layout(local, cached)
        if len(self._layouts) >= LAYOUT_MEMO_MAX:
            self._layouts.clear()
        self._layouts[topic] = (local, cached, self._live, lay)
        return lay

    def _build_layout(self, local: int | None, cached: tuple[float, dict[str, int]] | None) -> TopicLayout | None:
        queues = dict(cached[1]) if cached is not None and self.clustered else {}
        queues.pop(self.broker_name, None)
        if local is not None:
            queues[self.broker_name] = local
        if not queues:
            return None
        offline = [b for b in queues if b != self.broker_name and b not in self._live]
        return TopicLayout.of(queues, offline=offline)

    def local_queue(self, topic: str, partition: int) -> int | None:
        """This broker's queue for Kafka partition ``partition`` (None: not here)."""
        if not self.clustered:      # one node: partition p is queue p (no layout built per produced batch)
            local = self._local_queues(topic)
            return partition if local is not None and 0 <= partition < local else None
        lay = self.layout(topic)
        found = lay.owner_of(partition) if lay is not None else None
        if found is None or found[0].broker != self.broker_name:
            return None
        return found[1]

    def partition_of(self, topic: str, queue_id: int) -> int:
        """Kafka partition of this broker's queue ``queue_id``."""
        lay = self.layout(topic)
        own = lay.owner(self.broker_name) if lay is not None else None
        return queue_id + (own.base if own is not None else 0)

    def coordinator_for(self, key: str) -> KafkaNode:
        """The broker that coordinates a group: crc32(key) over the live brokers, sorted by name."""
        nodes = list(self.nodes().values())
        return nodes[zlib.crc32(key.encode("utf-8")) % len(nodes)]

    def coordinator_broker(self, key: str) -> str:
        """The broker name behind ``coordinator_for(key)``."""
        node = self.coordinator_for(key)
        return next((n for n, ep in self.nodes().items() if ep == node), self.broker_name)

    def txn_coordinator_for(self, key: str) -> KafkaNode | None:
        """The broker that coordinates a transactional id: crc32(key) over every broker that ever
        published an endpoint (live or not, sorted by name), so it never moves while a broker
        restarts; None while that broker is not live (COORDINATOR_NOT_AVAILABLE, as Kafka answers
        while the transaction log partition has no leader)."""
        names = sorted({*self._endpoints, self.broker_name})
        name = names[zlib.crc32(key.encode("utf-8")) % len(names)]
        if name != self.broker_name and name not in self._live:
            return None
        return self.node_of(name)

    # ------------------------------------------------------------------ refresh (async)

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Refresh the broker list now and every ``ttl_s`` until cancelled."""
        await self.refresh_brokers()
        task_status.started()
        while True:
            await trio.sleep(self.ttl_s)
            await self.refresh_brokers()

    async def refresh_brokers(self) -> None:
        if self.namesrv is None:
            return
        try:
            kv = await self.namesrv.kv_list(KV_NAMESPACE)
            info = await self.namesrv.cluster_info()
        except _ERRORS as exc:
            log.debug("kafka.cluster.refresh_failed", error=str(exc))
            return
        replica_kv = None
        if self.replicas.wanted(info):
            try:
                replica_kv = await self.namesrv.kv_list(KV_REPLICAS)
            except _ERRORS as exc:
                log.debug("kafka.cluster.replica_refresh_failed", error=str(exc))
        self.replicas.update(info, replica_kv, kv)
        endpoints = {name: ep for name, raw in kv.items() if (ep := KafkaNode.from_json(raw)) is not None}
        live = {}
        for name, data in (info.get("brokerAddrTable") or {}).items():
            master = (data.get("brokerAddrs") or {}).get("0") or (data.get("brokerAddrs") or {}).get(0)
            if master:
                live[str(name)] = str(master)
        self._endpoints, self._live = endpoints, live
        self._layouts.clear()       # clustered (from the endpoints) may have changed

    async def ensure(self, topics: Iterable[str], force: bool = False) -> None:
        """Fetch the routes of ``topics`` older than ``ttl_s``, or whose entry for this broker
        disagrees with its own topic table (the topic was deleted and created again, or changed
        here), or all of them with ``force`` (only when clustered)."""
        if self.namesrv is None or not self.clustered:
            return
        now = self._clock()
        for topic in set(topics):
            cached = self._routes.get(topic)
            if (force or cached is None or now - cached[0] >= self.ttl_s
                    or cached[1].get(self.broker_name) != self._local_queues(topic)):
                await self._refresh_topic(topic)

    async def _refresh_topic(self, topic: str) -> None:
        lock = self._locks.setdefault(topic, trio.Lock())
        async with lock:
            cached = self._routes.get(topic)
            if cached is not None and self._clock() - cached[0] < self.ttl_s / 10:
                return  # another task just refreshed it
            assert self.namesrv is not None
            try:
                route = await self.namesrv.get_route(topic)
            except _ERRORS as exc:
                log.debug("kafka.cluster.route_refresh_failed", topic=topic, error=str(exc))
                return
            self._routes[topic] = (self._clock(), self._merge(route, cached[1] if cached else {}))

    def _merge(self, route: TopicRoute | None, before: dict[str, int]) -> dict[str, int]:
        queues: dict[str, int] = {}
        if route is not None:
            for qd in route.queue_datas:
                if qd.perm & PERM_READ and route.master_addr(qd.broker_name) and qd.read_queue_nums > 0:
                    queues[qd.broker_name] = qd.read_queue_nums
        for broker, n in before.items():  # a dead broker keeps its partitions (offline)
            if broker not in queues and broker not in self._live and broker in self._endpoints:
                queues[broker] = n
        return queues

    def remember_route(self, topic: str, owners: dict[str, int]) -> None:
        """Install a topic's layout this broker just made (``await_route``)."""
        self._routes[topic] = (self._clock(), dict(owners))

    def forget_route(self, topic: str) -> None:
        self._routes.pop(topic, None)

    async def all_topics(self) -> list[str]:
        """Every topic the name servers know (empty when not clustered or unreachable)."""
        if self.namesrv is None or not self.clustered:
            return []
        try:
            return await self.namesrv.all_topics()
        except _ERRORS as exc:
            log.debug("kafka.cluster.topic_list_failed", error=str(exc))
            return []
