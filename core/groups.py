"""Consumer and producer groups: configs (``config/subscriptionGroup.json``) and live members.

Theory of operation
-------------------
``SubscriptionGroupManager`` holds RocketMQ's SubscriptionGroupConfig per
group (retry queue count, max retries, consume enable ...), auto-created on
first use when ``autoCreateSubscriptionGroup`` is on.

``ConsumerRegistry`` tracks live RocketMQ consumers: for each group, the
clients (by heartbeat ``clientID``) with an opaque ``handle`` the gateway
gives it (its connection), the group's message model / consume type /
consume-from-where, and the subscription table.  It is pure bookkeeping:
``register`` and ``unregister`` return whether the membership changed so
the gateway can send NOTIFY_CONSUMER_IDS_CHANGED; ``scan_expired`` drops
clients that have not sent a heartbeat for 120 s.  ``ProducerRegistry`` does
the same for producer groups (transaction check-back needs a live producer).

Kafka consumer groups are tracked by the Kafka group coordinator; the
cross-protocol rule (a group may not be live on both protocols) is checked
in ``compat`` using ``ConsumerRegistry.is_live``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import structlog
from rokka.core.filter import Subscription
from rokka.core.storage.metafile import read_json, write_json_atomic

log = structlog.get_logger(__name__)

CHANNEL_EXPIRED_MS = 120_000
MESSAGE_MODEL_BROADCASTING = "BROADCASTING"
MESSAGE_MODEL_CLUSTERING = "CLUSTERING"


@dataclass
class SubscriptionGroupConfig:
    group_name: str
    consume_enable: bool = True
    consume_from_min_enable: bool = True
    consume_broadcast_enable: bool = True
    retry_queue_nums: int = 1
    retry_max_times: int = 16
    broker_id: int = 0
    which_broker_when_consume_slowly: int = 1
    notify_consumer_ids_changed_enable: bool = True

    _KEYS = {"groupName": "group_name", "consumeEnable": "consume_enable",
             "consumeFromMinEnable": "consume_from_min_enable",
             "consumeBroadcastEnable": "consume_broadcast_enable", "retryQueueNums": "retry_queue_nums",
             "retryMaxTimes": "retry_max_times", "brokerId": "broker_id",
             "whichBrokerWhenConsumeSlowly": "which_broker_when_consume_slowly",
             "notifyConsumerIdsChangedEnable": "notify_consumer_ids_changed_enable"}

    def to_json(self) -> dict[str, Any]:
        return {k: getattr(self, a) for k, a in self._KEYS.items()}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> SubscriptionGroupConfig:
        cfg = cls(group_name=str(d["groupName"]))
        for k, a in cls._KEYS.items():
            if k in d and k != "groupName":
                default = getattr(cfg, a)
                v = d[k]
                setattr(cfg, a, (str(v).lower() == "true" if isinstance(v, str) else bool(v))
                        if isinstance(default, bool) else int(v))
        return cfg


class SubscriptionGroupManager:
    def __init__(self, config_dir: Path, *, auto_create: bool = True) -> None:
        self._path = config_dir / "subscriptionGroup.json"
        self.auto_create = auto_create
        self._groups: dict[str, SubscriptionGroupConfig] = {}
        data = read_json(self._path) or {}
        for name, d in (data.get("subscriptionGroupTable") or {}).items():
            self._groups[name] = SubscriptionGroupConfig.from_json(d)

    def get(self, group: str, *, create: bool = True) -> SubscriptionGroupConfig | None:
        cfg = self._groups.get(group)
        if cfg is None and create and self.auto_create:
            cfg = self.put(SubscriptionGroupConfig(group))
        return cfg

    def put(self, cfg: SubscriptionGroupConfig) -> SubscriptionGroupConfig:
        self._groups[cfg.group_name] = cfg
        self._persist()
        return cfg

    def delete(self, group: str) -> bool:
        if self._groups.pop(group, None) is None:
            return False
        self._persist()
        return True

    def all(self) -> dict[str, SubscriptionGroupConfig]:
        return dict(self._groups)

    def _persist(self) -> None:
        write_json_atomic(self._path, {
            "dataVersion": {"counter": len(self._groups), "timestamp": int(time.time() * 1000)},
            "subscriptionGroupTable": {n: c.to_json() for n, c in self._groups.items()}})


@dataclass
class ClientInfo:
    client_id: str
    handle: Any                 # the gateway's connection object (opaque to core)
    language: str = "JAVA"
    version: int = 0
    last_update_ms: int = 0
    addr: str = ""


@dataclass
class ConsumerGroupInfo:
    group: str
    consume_type: str = "CONSUME_PASSIVELY"
    message_model: str = MESSAGE_MODEL_CLUSTERING
    consume_from_where: str = "CONSUME_FROM_LAST_OFFSET"
    clients: dict[str, ClientInfo] = field(default_factory=dict)
    subscriptions: dict[str, Subscription] = field(default_factory=dict)
    last_update_ms: int = 0

    def client_ids(self) -> list[str]:
        return sorted(self.clients)


class ConsumerRegistry:
    def __init__(self) -> None:
        self._groups: dict[str, ConsumerGroupInfo] = {}

    def register(self, group: str, client: ClientInfo, *, consume_type: str, message_model: str,
                 consume_from_where: str, subscriptions: list[Subscription], now_ms: int) -> bool:
        """Record a heartbeat; True when members or subscriptions changed."""
        info = self._groups.setdefault(group, ConsumerGroupInfo(group))
        changed = client.client_id not in info.clients
        old = info.clients.get(client.client_id)
        if old is not None and old.handle is not client.handle:
            changed = True
        client.last_update_ms = now_ms
        info.clients[client.client_id] = client
        info.consume_type, info.message_model = consume_type, message_model
        info.consume_from_where = consume_from_where
        new_subs = {s.topic: s for s in subscriptions}
        old_keys = {t: (s.sub_string, s.expression_type) for t, s in info.subscriptions.items()}
        new_keys = {t: (s.sub_string, s.expression_type) for t, s in new_subs.items()}
        # Like RocketMQ's ConsumerGroupInfo.updateSubscription, an unchanged expression keeps the
        # highest subVersion any member sent: the Java push consumer bumps it at every rebalance and
        # pulls with it, and a pull newer than the stored one gets SUBSCRIPTION_NOT_LATEST.
        for topic, sub in new_subs.items():
            prev = info.subscriptions.get(topic)
            if (prev is not None and (prev.sub_string, prev.expression_type) == new_keys[topic]
                    and prev.sub_version >= sub.sub_version):
                new_subs[topic] = prev
        if old_keys != new_keys:
            changed = True
            info.last_update_ms = now_ms
        info.subscriptions = new_subs
        if changed:
            log.info("groups.consumer_group_changed", group=group, clients=info.client_ids())
        return changed

    def unregister(self, group: str, client_id: str) -> bool:
        info = self._groups.get(group)
        if info is None or client_id not in info.clients:
            return False
        del info.clients[client_id]
        if not info.clients:
            del self._groups[group]
        log.info("groups.consumer_unregistered", group=group, client=client_id)
        return True

    def drop_handle(self, handle: Any) -> list[str]:
        """A connection closed: remove its clients; return the groups that changed."""
        changed = []
        for group, info in list(self._groups.items()):
            for cid, ci in list(info.clients.items()):
                if ci.handle is handle:
                    self.unregister(group, cid)
                    changed.append(group)
        return changed

    def scan_expired(self, now_ms: int) -> list[str]:
        changed = []
        for group, info in list(self._groups.items()):
            for cid, ci in list(info.clients.items()):
                if now_ms - ci.last_update_ms > CHANNEL_EXPIRED_MS:
                    log.warning("groups.consumer_channel_expired", group=group, client=cid)
                    self.unregister(group, cid)
                    changed.append(group)
        return changed

    def get(self, group: str) -> ConsumerGroupInfo | None:
        return self._groups.get(group)

    def is_live(self, group: str) -> bool:
        info = self._groups.get(group)
        return bool(info and info.clients)

    def groups(self) -> dict[str, ConsumerGroupInfo]:
        return dict(self._groups)


class ProducerRegistry:
    def __init__(self) -> None:
        self._groups: dict[str, dict[str, ClientInfo]] = {}

    def register(self, group: str, client: ClientInfo, now_ms: int) -> None:
        client.last_update_ms = now_ms
        self._groups.setdefault(group, {})[client.client_id] = client

    def unregister(self, group: str, client_id: str) -> None:
        members = self._groups.get(group)
        if members is not None:
            members.pop(client_id, None)
            if not members:
                del self._groups[group]

    def drop_handle(self, handle: Any) -> None:
        for group, members in list(self._groups.items()):
            for cid, ci in list(members.items()):
                if ci.handle is handle:
                    self.unregister(group, cid)

    def scan_expired(self, now_ms: int) -> None:
        for group, members in list(self._groups.items()):
            for cid, ci in list(members.items()):
                if now_ms - ci.last_update_ms > CHANNEL_EXPIRED_MS:
                    self.unregister(group, cid)

    def members(self, group: str) -> list[ClientInfo]:
        return list(self._groups.get(group, {}).values())

    def groups(self) -> dict[str, list[ClientInfo]]:
        return {g: list(m.values()) for g, m in self._groups.items()}
