"""The name server's route registry (RocketMQ ``RouteInfoManager``) as pure data.

Theory of operation
-------------------
Tables (all keyed by strings, plain dicts, no I/O, no locks: the trio thread
is the only caller):

* ``brokers``: brokerName -> ``BrokerData`` (cluster, {brokerId: addr});
* ``clusters``: cluster -> set of brokerNames;
* ``topic_queues``: topic -> {brokerName: ``QueueData``}; only the master's
  (brokerId 0) registration writes queue data, as in Java;
* ``live``: brokerAddr -> ``BrokerLive`` (last registration time from the
  injected clock, data version, channel id, HA address);
* ``kv``: namespace -> {key: value}, bounded (``KV_MAX_ENTRIES``, ``KV_MAX_BYTES``); every change calls
  ``on_kv_change`` (the name server persists ``kvConfig.json`` then, ``rokka.core.namesrv.config``).

Invariants:

* a broker address is in ``live`` iff it appears in some ``BrokerData``;
* a ``BrokerData`` with no addresses is removed together with the
  brokerName's cluster membership and all its queue data (Java
  ``onChannelDestroy``);
* a topic with no queue data is removed.

A route exists only if the topic has queue data and at least one of those
brokers still has an address.  Route JSON is standard JSON (quoted numeric
keys) and never carries ``orderTopicConf`` (C++ would build queues from it).

Registration with a new data version replaces the master's topic set: topics
the broker no longer reports lose this broker's queue data (the broker is the
source of truth; Java 4.9 keeps them until the broker disappears, 5.x has
this behaviour behind a switch).

Editing rule: no wire types here; the gateway turns these dicts into bodies.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, NamedTuple

from rokka.core.routing import PERM_READ, PERM_WRITE, QueueData

BROKER_EXPIRED_MS = 120_000
MASTER_ID = 0
#: Bounds of the KV table (``put_kv``): entries, and bytes of namespace + key + value over all entries.
KV_MAX_ENTRIES = 10_000
KV_MAX_BYTES = 1 << 20


class KVTableFull(ValueError):
    """A PUT_KV_CONFIG that would take the KV table past its bounds (answered SYSTEM_ERROR)."""


def _now_ms() -> int:
    return int(time.time() * 1000)


@dataclass
class BrokerData:
    cluster: str
    broker_name: str
    addrs: dict[int, str] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"brokerAddrs": {str(k): v for k, v in sorted(self.addrs.items())},
                "brokerName": self.broker_name, "cluster": self.cluster}


@dataclass
class BrokerLive:
    last_update_ms: int
    data_version: dict[str, Any]
    channel_id: Any
    ha_addr: str


class RegisterResult(NamedTuple):
    """What the name server tells a registering broker (None for a master)."""

    master_addr: str | None
    ha_addr: str | None


@dataclass(frozen=True, slots=True)
class TopicConfigEntry:
    """The parts of a broker's TopicConfig the name server keeps."""

    read_queue_nums: int
    write_queue_nums: int
    perm: int
    topic_sys_flag: int = 0

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> TopicConfigEntry:
        """From TopicConfig JSON (``readQueueNums``, ``writeQueueNums``, ``perm``, ``topicSysFlag``)."""
        return cls(int(obj.get("readQueueNums", 16)), int(obj.get("writeQueueNums", 16)),
                   int(obj.get("perm", 6)), int(obj.get("topicSysFlag", obj.get("topicSynFlag", 0)) or 0))


class RouteInfoManager:
    """Route tables of one name server.

    Args:
        clock: returns "now" in milliseconds (injected for tests).
        broker_expired_ms: a broker silent for longer is dropped by ``scan_expired``.
    """

    def __init__(self, clock: Callable[[], int] = _now_ms, broker_expired_ms: int = BROKER_EXPIRED_MS) -> None:
        self.clock = clock
        self.broker_expired_ms = broker_expired_ms
        self.brokers: dict[str, BrokerData] = {}
        self.clusters: dict[str, set[str]] = {}
        self.topic_queues: dict[str, dict[str, QueueData]] = {}
        self.live: dict[str, BrokerLive] = {}
        self.filter_servers: dict[str, list[str]] = {}
        self.kv: dict[str, dict[str, str]] = {}
        self._kv_entries = self._kv_bytes = 0          # what put_kv bounds (KV_MAX_ENTRIES, KV_MAX_BYTES)
        self.on_kv_change: Callable[[dict[str, dict[str, str]]], None] = lambda table: None

    # -- registration --------------------------------------------------------------
    def register_broker(self, cluster: str, broker_name: str, broker_addr: str, broker_id: int,
                        ha_addr: str, topic_config_table: Mapping[str, TopicConfigEntry | Mapping[str, Any]],
                        data_version: Mapping[str, Any], channel_id: Any,
                        filter_server_list: list[str] | None = None) -> RegisterResult:
        """Record (or refresh) a broker and, for a master, its topics' queue data.

        Returns the master's address and HA address when the registrant is a
        slave (``broker_id != 0``) and the master is known; else both ``None``.
        """
        self.clusters.setdefault(cluster, set()).add(broker_name)
        data = self.brokers.get(broker_name)
        first = data is None
        if data is None:
            data = self.brokers[broker_name] = BrokerData(cluster, broker_name)
        data.cluster = cluster
        # The same address under another id (slave promoted to master): drop the old id.
        for old_id, addr in list(data.addrs.items()):
            if addr == broker_addr and old_id != broker_id:
                del data.addrs[old_id]
        first = data.addrs.get(broker_id) != broker_addr or first
        data.addrs[broker_id] = broker_addr

        prev = self.live.get(broker_addr)
        version = dict(data_version)
        if broker_id == MASTER_ID and (first or prev is None or prev.data_version != version):
            self._replace_topics(broker_name, topic_config_table)
        self.live[broker_addr] = BrokerLive(self.clock(), version, channel_id, ha_addr)
        if filter_server_list:
            self.filter_servers[broker_addr] = list(filter_server_list)
        else:
            self.filter_servers.pop(broker_addr, None)
        if broker_id != MASTER_ID:
            master = data.addrs.get(MASTER_ID)
            if master is not None and master in self.live:
                return RegisterResult(master, self.live[master].ha_addr)
        return RegisterResult(None, None)

    def _replace_topics(self, broker_name: str, table: Mapping[str, TopicConfigEntry | Mapping[str, Any]]) -> None:
        for topic, raw in table.items():
            entry = raw if isinstance(raw, TopicConfigEntry) else TopicConfigEntry.from_json(raw)
            self.topic_queues.setdefault(topic, {})[broker_name] = QueueData(
                broker_name, entry.read_queue_nums, entry.write_queue_nums, entry.perm, entry.topic_sys_flag)
        for topic in [t for t, q in self.topic_queues.items() if broker_name in q and t not in table]:
            self._drop_queue(topic, broker_name)

    def _drop_queue(self, topic: str, broker_name: str) -> None:
        queues = self.topic_queues.get(topic)
        if queues is not None:
            queues.pop(broker_name, None)
            if not queues:
                del self.topic_queues[topic]

    def unregister_broker(self, cluster: str, broker_name: str, broker_addr: str, broker_id: int) -> None:
        """Forget one broker address (UNREGISTER_BROKER)."""
        self.live.pop(broker_addr, None)
        self.filter_servers.pop(broker_addr, None)
        data = self.brokers.get(broker_name)
        if data is not None and data.addrs.get(broker_id) == broker_addr:
            del data.addrs[broker_id]
        self._drop_empty_broker(broker_name)

    def _drop_empty_broker(self, broker_name: str) -> None:
        data = self.brokers.get(broker_name)
        if data is None or data.addrs:
            return
        del self.brokers[broker_name]
        for cluster, names in list(self.clusters.items()):
            names.discard(broker_name)
            if not names:
                del self.clusters[cluster]
        for topic in [t for t, q in self.topic_queues.items() if broker_name in q]:
            self._drop_queue(topic, broker_name)

    def _remove_addr(self, broker_addr: str) -> None:
        self.live.pop(broker_addr, None)
        self.filter_servers.pop(broker_addr, None)
        for name, data in list(self.brokers.items()):
            for bid, addr in list(data.addrs.items()):
                if addr == broker_addr:
                    del data.addrs[bid]
            self._drop_empty_broker(name)

    def set_master(self, broker_name: str, broker_addr: str) -> str | None:
        """The failover controller elected ``broker_addr`` (registered as a slave of ``broker_name``):
        it becomes brokerId 0 at once and the old master's address is dropped (it re-registers as a
        slave when it returns).  Returns the dropped address, if any."""
        data = self.brokers.get(broker_name)
        if data is None or broker_addr not in self.live:
            return None         # not registered yet: its registration is answered as the master's
        for bid, addr in list(data.addrs.items()):
            if addr == broker_addr:
                del data.addrs[bid]
        old = data.addrs.get(MASTER_ID)
        data.addrs[MASTER_ID] = broker_addr
        if old is not None and old != broker_addr:
            self.live.pop(old, None)
            self.filter_servers.pop(old, None)
            for bid, addr in list(data.addrs.items()):
                if addr == old:
                    del data.addrs[bid]
        if broker_addr in self.live:        # queue data is the master's: take it again at its next registration
            self.live[broker_addr].data_version = {"promoted": True}
        return old if old != broker_addr else None

    def scan_expired(self, now_ms: int | None = None) -> list[str]:
        """Drop brokers whose last registration is older than ``broker_expired_ms``.

        Returns the removed broker addresses.
        """
        now = self.clock() if now_ms is None else now_ms
        expired = [a for a, live in self.live.items() if live.last_update_ms + self.broker_expired_ms < now]
        for addr in expired:
            self._remove_addr(addr)
        return expired

    def on_channel_closed(self, channel_id: Any) -> list[str]:
        """Drop every broker address registered over the closed channel."""
        gone = [a for a, live in self.live.items() if live.channel_id == channel_id]
        for addr in gone:
            self._remove_addr(addr)
        return gone

    # -- queries -------------------------------------------------------------------------
    def get_route(self, topic: str) -> dict[str, Any] | None:
        """TopicRouteData as a JSON-ready dict, or None if there is no live route."""
        queues = self.topic_queues.get(topic)
        if not queues:
            return None
        broker_datas = [self.brokers[n] for n in sorted(queues) if n in self.brokers and self.brokers[n].addrs]
        if not broker_datas:
            return None
        filter_table = {addr: list(self.filter_servers[addr]) for data in broker_datas
                        for addr in data.addrs.values() if addr in self.filter_servers}
        return {
            "brokerDatas": [d.to_json() for d in broker_datas],
            "filterServerTable": filter_table,
            "queueDatas": [queues[n].to_json() for n in sorted(queues)],
        }

    def cluster_info(self) -> dict[str, Any]:
        """ClusterInfo: ``brokerAddrTable`` and ``clusterAddrTable``."""
        return {
            "brokerAddrTable": {n: d.to_json() for n, d in sorted(self.brokers.items())},
            "clusterAddrTable": {c: sorted(names) for c, names in sorted(self.clusters.items())},
        }

    def all_topics(self) -> list[str]:
        return sorted(self.topic_queues)

    def topics_by_cluster(self, cluster: str) -> list[str]:
        names = self.clusters.get(cluster, set())
        return sorted(t for t, q in self.topic_queues.items() if names.intersection(q))

    def delete_topic(self, topic: str, cluster: str | None = None) -> None:
        """Remove a topic everywhere, or only its queues on brokers of ``cluster``."""
        if cluster is None:
            self.topic_queues.pop(topic, None)
            return
        for name in list(self.clusters.get(cluster, ())):
            self._drop_queue(topic, name)

    def wipe_write_perm(self, broker_name: str) -> int:
        """Clear PERM_WRITE on every queue data of ``broker_name``; returns how many topics changed."""
        count = 0
        for queues in self.topic_queues.values():
            qd = queues.get(broker_name)
            if qd is not None:
                queues[broker_name] = replace(qd, perm=qd.perm & ~PERM_WRITE)
                count += 1
        return count

    def add_write_perm(self, broker_name: str) -> int:
        """Java's ADD_WRITE_PERM_OF_BROKER: every queue data of ``broker_name`` becomes READ|WRITE."""
        count = 0
        for queues in self.topic_queues.values():
            qd = queues.get(broker_name)
            if qd is not None:
                queues[broker_name] = replace(qd, perm=PERM_READ | PERM_WRITE)
                count += 1
        return count

    def system_topic_list(self) -> tuple[list[str], str | None]:
        """Java 4.9's ``getSystemTopicList``: cluster names and broker names (the implicit topics
        brokers create for them), and the address of one broker."""
        topics: set[str] = set()
        for cluster, names in self.clusters.items():
            topics.add(cluster)
            topics.update(names)
        addr = None
        for data in self.brokers.values():
            if data.addrs:
                addr = data.addrs[min(data.addrs)]
                break
        return sorted(topics), addr

    def topics_by_sys_flag(self, want: Callable[[int], bool]) -> list[str]:
        """Topics whose first queue data's ``topicSysFlag`` passes ``want`` (unit topic lists)."""
        return sorted(t for t, queues in self.topic_queues.items()
                      if queues and want(next(iter(queues.values())).topic_sys_flag))

    def broker_names(self) -> list[str]:
        return sorted(self.brokers)

    # -- KV config -----------------------------------------------------------------------
    def put_kv(self, namespace: str, key: str, value: str) -> None:
        """Store one entry.  Raises ``KVTableFull`` past ``KV_MAX_ENTRIES`` entries or ``KV_MAX_BYTES``
        bytes of names and values in the whole table (the name server takes anyone's PUT_KV_CONFIG, and
        every change rewrites ``kvConfig.json``: an unbounded table grew to megabytes under a fuzzer)."""
        table = self.kv.get(namespace)
        old = table.get(key) if table is not None else None
        added = len(value) - (len(old) if old is not None else -len(namespace) - len(key))
        entries = self._kv_entries + (old is None)
        if added > 0 and (entries > KV_MAX_ENTRIES or self._kv_bytes + added > KV_MAX_BYTES):
            raise KVTableFull(f"the KV config is full ({self._kv_entries} entries, {self._kv_bytes} bytes; "
                              f"limits {KV_MAX_ENTRIES} entries, {KV_MAX_BYTES} bytes)")
        self.kv.setdefault(namespace, {})[key] = value
        self._kv_entries, self._kv_bytes = entries, self._kv_bytes + added
        self.on_kv_change(self.kv)

    def load_kv(self, table: dict[str, dict[str, str]]) -> None:
        """The table read at start (``kvConfig.json``), counted against the bounds as it is."""
        self.kv = table
        self._kv_entries = sum(len(kv) for kv in table.values())
        self._kv_bytes = sum(len(ns) + len(k) + len(v) for ns, kv in table.items() for k, v in kv.items())

    def get_kv(self, namespace: str, key: str) -> str | None:
        return self.kv.get(namespace, {}).get(key)

    def delete_kv(self, namespace: str, key: str) -> None:
        table = self.kv.get(namespace)
        if table is not None:
            old = table.pop(key, None)
            if old is not None:
                self._kv_entries -= 1
                self._kv_bytes -= len(namespace) + len(key) + len(old)
            if not table:
                del self.kv[namespace]
            self.on_kv_change(self.kv)

    def kv_list(self, namespace: str) -> dict[str, str] | None:
        table = self.kv.get(namespace)
        return dict(table) if table else None
