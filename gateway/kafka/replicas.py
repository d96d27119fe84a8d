"""The Kafka view of replication: each partition's replicas and in-sync replicas (ISR).

Theory of operation
-------------------
A RocketMQ broker set (one brokerName: a master and its slaves, ``rokka.gateway.ha``) is what a Kafka
partition's replica set is: the master leads every partition of the set, the slaves follow it byte for
byte.  Kafka clients see it that way:

* **Node ids.**  Every broker process has its own Kafka node id: ``kafkaNodeId`` when set, else
  ``replica_node_id(brokerName, brokerId)``: the crc32 of the brokerName for brokerId 0 (the id a
  master always had, so a set without slaves keeps its id), of ``brokerName#brokerId`` for a slave.
  In controller mode the id follows the configured brokerId, not the role, so a promoted slave keeps
  its node id and Kafka clients see a leader change, as after a Kafka leader election.
* **What is published** (``EndpointPublisher``, to every name server's KV table, after each
  registration round and within a second of a change):
  ``ROKKA_KAFKA/<brokerName>`` = the set's *leader* endpoint ``{"nodeId", "host", "port"}``, written
  only by the set's current master (a slave or a fenced controller-mode broker never writes it), with
  ``"isr": [node ids]`` when the set replicates; and, from every broker that replicates (``brokerRole``
  or controller mode), ``ROKKA_KAFKA_REPLICA/<brokerName>#<nodeId>`` = ``{"nodeId", "host", "port",
  "broker", "addr", "ha"}``: its Kafka endpoint, its RocketMQ address (how the name server lists it)
  and the local address of its HA connection to the master ("" when none).
* **Replicas** of a set's partitions: the leader first, then every published replica of the set whose
  RocketMQ address the name server lists as live (GET_BROKER_CLUSTER_INFO), by node id.  A replica
  that stopped simply leaves the list (no ``offline_replicas``: rokka keeps no static assignment).
* **ISR**: the master computes it (``ReplicaView.local_isr``): itself plus each slave whose HA
  connection has acked within ``haSlaveFallbehindMax`` bytes of the master's CommitLog end (the slave
  is matched to its replica entry by the HA connection's address, which both ends see; the entries are
  read with the cluster view's refresh, every 3 s); others read the ``isr`` the master published.
  With the master gone, the slave that names itself leader (its ``ClusterView.set_leader``) is the
  only ISR member until a controller makes it master.
* **acks=all and min.insync.replicas** (``gateway.kafka.handlers.produce``): the ISR size is
  1 + the master's in-sync slaves, counted at the master without any name server round trip;
  ``min.insync.replicas`` above it answers NOT_ENOUGH_REPLICAS before anything is stored, and
  acks=all waits for an in-sync slave's ack (``ReplicaHooks.isr_wait``) on any master flavour.

The leader epoch stays 0 (``handlers.common.LEADER_EPOCH``): Kafka clients accept a new leader at
an equal epoch, and rokka has no per-epoch end offsets to answer OffsetForLeaderEpoch with.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import structlog
import trio
from rokka.core.storage import PutStatus

log = structlog.get_logger(__name__)

KV_REPLICAS = "ROKKA_KAFKA_REPLICA"
PUBLISH_CHECK_S = 1.0       # how often a broker looks for a change in what it publishes


def replica_key(broker_name: str, node_id: int) -> str:
    return f"{broker_name}#{node_id}"


@dataclass(frozen=True)
class ReplicaEntry:
    """One broker process of a replicated set, as it publishes itself (module docstring)."""

    node_id: int
    host: str
    port: int
    broker: str         # its broker set (brokerName)
    addr: str           # its RocketMQ address, as the name server lists it
    ha: str = ""        # local "host:port" of its HA connection to the master ("" when none)

    def to_json(self) -> str:
        return json.dumps({"nodeId": self.node_id, "host": self.host, "port": self.port, "broker": self.broker,
                           "addr": self.addr, "ha": self.ha}, separators=(",", ":"))

    @classmethod
    def from_json(cls, raw: str) -> ReplicaEntry | None:
        try:
            obj = json.loads(raw)
            return cls(int(obj["nodeId"]), str(obj["host"]), int(obj["port"]), str(obj["broker"]),
                       str(obj["addr"]), str(obj.get("ha") or ""))
        except (ValueError, KeyError, TypeError, AttributeError):
            return None


def published_isr(raw: str) -> tuple[int, ...] | None:
    """The ``isr`` a set's leader endpoint carries (None: not published, the set does not replicate)."""
    try:
        isr = json.loads(raw).get("isr")
        return tuple(int(i) for i in isr) if isinstance(isr, list) else None
    except (ValueError, TypeError, AttributeError):
        return None


@dataclass
class ReplicaHooks:
    """What the HA role tells the Kafka side (set by the runtime once HA has started; defaults: none).

    in_sync_peers: the HA peer addresses of the slaves acked within haSlaveFallbehindMax, or None when
        this broker is not a master that serves slaves.
    ha_client: this slave's local HA connection address ("" when not connected).
    isr_wait: acks=all on a master that answers sends at once (ASYNC_MASTER): wait for an in-sync
        slave's ack of an offset; returns the put status to answer with (None: acked).
    """

    replicated: bool = False
    in_sync_peers: Callable[[], set[str] | None] = lambda: None
    ha_client: Callable[[], str] = lambda: ""
    isr_wait: Callable[[int], Awaitable[PutStatus | None]] | None = None

    def isr_size(self) -> int:
        """1 (the leader) + its in-sync slaves."""
        return 1 + len(self.in_sync_peers() or ())


@dataclass
class ReplicaView:
    """Replica entries and published ISRs, refreshed with the cluster view (module docstring)."""

    broker_name: str
    node_id: int
    hooks: ReplicaHooks = field(default_factory=ReplicaHooks)
    entries: dict[str, tuple[ReplicaEntry, ...]] = field(default_factory=dict)    # set -> its replicas
    live_addrs: dict[str, frozenset[str]] = field(default_factory=dict)           # set -> live addresses
    isr: dict[str, tuple[int, ...]] = field(default_factory=dict)                 # set -> published ISR

    def wanted(self, cluster_info: Mapping[str, Any]) -> bool:
        """Whether replica entries are worth reading: a set with more than one live broker, or this one
        replicates."""
        table = cluster_info.get("brokerAddrTable") or {}
        return self.hooks.replicated or any(len((d or {}).get("brokerAddrs") or {}) > 1 for d in table.values())

    def update(self, cluster_info: Mapping[str, Any], replica_kv: Mapping[str, str] | None,
               set_kv: Mapping[str, str]) -> None:
        live: dict[str, frozenset[str]] = {}
        for name, data in (cluster_info.get("brokerAddrTable") or {}).items():
            live[str(name)] = frozenset(str(a) for a in ((data or {}).get("brokerAddrs") or {}).values())
        self.live_addrs = live
        if replica_kv is not None:
            by_set: dict[str, list[ReplicaEntry]] = {}
            for raw in replica_kv.values():
                if (e := ReplicaEntry.from_json(raw)) is not None:
                    by_set.setdefault(e.broker, []).append(e)
            self.entries = {k: tuple(sorted(v, key=lambda e: e.node_id)) for k, v in by_set.items()}
        self.isr = {name: isr for name, raw in set_kv.items() if (isr := published_isr(raw)) is not None}

    def local_isr(self) -> list[int] | None:
        """This master's ISR (its node id first, then its in-sync slaves'), or None when it serves no
        slaves (not a replicating master)."""
        peers = self.hooks.in_sync_peers()
        if peers is None:
            return None
        slaves = sorted(e.node_id for e in self.entries.get(self.broker_name, ())
                        if e.ha and e.ha in peers and e.node_id != self.node_id)
        return [self.node_id, *slaves]

    def live_entries(self, broker: str) -> list[ReplicaEntry]:
        addrs = self.live_addrs.get(broker, frozenset())
        return [e for e in self.entries.get(broker, ()) if e.addr in addrs or
                (broker == self.broker_name and e.node_id == self.node_id)]

    def replica_set(self, broker: str, leader: int) -> tuple[list[int], list[int]]:
        """(replicas, ISR) of every partition of ``broker``'s set whose leader is node ``leader``."""
        others = sorted({e.node_id for e in self.live_entries(broker)} - {leader})
        if broker == self.broker_name and leader == self.node_id and (mine := self.local_isr()) is not None:
            in_sync = set(mine)
        else:
            in_sync = set(self.isr.get(broker, ()))
        return [leader, *others], [leader, *(i for i in others if i in in_sync)]


class EndpointPublisher:
    """Publishes this broker's Kafka entries to the name servers (module docstring).

    Args:
        entries: the (namespace, key) -> JSON this broker publishes now (``ClusterView.published``).
        put: PUT_KV_CONFIG on every name server.
    """

    def __init__(self, entries: Callable[[], dict[tuple[str, str], str]],
                 put: Callable[[str, str, str], Awaitable[None]]) -> None:
        self._entries, self._put = entries, put
        self._last: dict[tuple[str, str], str] = {}

    async def publish(self) -> None:
        """Write every entry (after a registration round: a restarted name server gets them back)."""
        await self._write(self._entries().items())

    async def _write(self, items: Iterable[tuple[tuple[str, str], str]]) -> None:
        for (namespace, key), value in items:
            try:
                await self._put(namespace, key, value)
            except Exception as exc:  # noqa: BLE001 - a name server down: the next round writes it again
                log.warning("kafka.cluster.endpoint_publish_failed", namespace=namespace, key=key, error=str(exc))
                continue
            self._last[(namespace, key)] = value

    async def run(self) -> None:
        """Write what changed, within ``PUBLISH_CHECK_S`` of the change, until cancelled."""
        while True:
            await trio.sleep(PUBLISH_CHECK_S)
            now = self._entries()
            changed = [(k, v) for k, v in now.items() if self._last.get(k) != v]
            if changed:
                await self._write(changed)
