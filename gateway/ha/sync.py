"""The slave's metadata synchronisation (RocketMQ's ``SlaveSynchronize``): topics, groups, offsets.

Theory of operation
-------------------
Every ``SYNC_INTERVAL_S`` (Java: 10 s; at once after start, then again a
second later until the first success) a SLAVE asks its master over remoting
for GET_ALL_TOPIC_CONFIG, GET_ALL_SUBSCRIPTIONGROUP_CONFIG,
GET_ALL_CONSUMER_OFFSET and GET_ALL_DELAY_OFFSET and stores every topic config, group config,
consumer offset and delay-level offset that differs, so the slave serves PULL for the
master's topics (the queues themselves come from the replicated CommitLog),
a group that fails over resumes near where it committed on the master, and a
slave that becomes master resumes delivering delay messages where the master was
(Java's syncDelayOffset writes the master's delayOffset.json; here the schedule
service takes the table and persists it, as it would its own).  The master's remoting address is the
``masterAddr`` the name server answered the slave's last REGISTER_BROKER
with.  Errors are logged and retried; nothing here ever stops the slave.

``extras`` are more (what, request code, apply) steps of each round, given by the runtime:
rokka's Kafka state (``rokka.gateway.kafka.state_sync``: topic configs, ACLs, SASL users).  A
master that does not offer one (an Apache RocketMQ broker) is noted once and the round goes on.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import structlog
import trio
from rokka.core.delay import offset_table
from rokka.core.topics import TopicConfig
from rokka.net.remoting.codec.bodies import loads_body
from rokka.net.remoting.codec.codes import RequestCode, ResponseCode
from rokka.net.remoting.codec.remoting import RemotingCommand

log = structlog.get_logger(__name__)

SyncExtra = tuple[str, int, Callable[[bytes], int]]     # (what, request code, apply the body: changes)

SYNC_INTERVAL_S = 10.0
RETRY_S = 1.0
TIMEOUT_S = 5.0


def master_remoting_addr(registrar: Any) -> str | None:
    for result in (getattr(registrar, "last_results", None) or {}).values():
        addr = getattr(result, "master_addr", None)
        if addr:
            return str(addr)
    return None


def apply_consumer_offsets(broker: Any, body: bytes) -> int:
    """Take the master's consumer offsets (``{"offsetTable": {"topic@group": {queueId: offset}}}``) that
    differ here, as SlaveSynchronize.syncConsumerOffset does; returns how many changed."""
    table = (loads_body(body) or {}).get("offsetTable") or {}
    changed = 0
    for key, queues in table.items():
        topic, sep, group = str(key).partition("@")
        if not sep or not isinstance(queues, dict):
            continue
        for qid, offset in queues.items():
            try:
                qid_i, off_i = int(qid), int(offset)
            except (TypeError, ValueError):
                continue
            if broker.offsets.query(group, topic, qid_i) != off_i:
                broker.offsets.commit(group, topic, qid_i, off_i)
                changed += 1
    return changed


def apply_group_configs(broker: Any, body: bytes) -> int:
    """Take the master's subscription group configs that differ here; returns how many changed."""
    from rokka.core.groups import SubscriptionGroupConfig

    table = (loads_body(body) or {}).get("subscriptionGroupTable") or {}
    changed = 0
    for name, raw in table.items():
        try:
            cfg = SubscriptionGroupConfig.from_json({**raw, "groupName": name})
        except (KeyError, TypeError, ValueError) as exc:
            log.warning("ha.sync_bad_group_config", group=name, error=str(exc))
            continue
        if broker.sub_groups.get(name, create=False) != cfg:
            broker.sub_groups.put(cfg)
            changed += 1
    return changed


def apply_topic_configs(broker: Any, body: bytes) -> int:
    """Store the master's topic configs that differ here; returns how many changed."""
    table = (loads_body(body) or {}).get("topicConfigTable") or {}
    changed = 0
    for name, raw in table.items():
        try:
            tc = TopicConfig.from_json({"topicName": name, **raw})
        except (KeyError, TypeError, ValueError) as exc:
            log.warning("ha.sync_bad_topic_config", topic=name, error=str(exc))
            continue
        if broker.topics.get(name) != tc:
            try:
                broker.topics.put(tc)
            except ValueError as exc:       # a name this broker refuses
                log.warning("ha.sync_topic_refused", topic=name, error=str(exc))
                continue
            changed += 1
    return changed


class SlaveSync:
    """Forever: copy the master's topic configs (see the module docstring).

    ``new_queue(topic, queue_id)`` (the replica's callback for a queue seen for the first time)
    syncs at once; a topic the master cannot be asked about then (it is down) gets a config
    of its own here from the queues replicated (readable, at least ``defaultTopicQueueNums`` queues),
    so the slave serves it."""

    def __init__(self, broker: Any, registrar: Callable[[], Any], default_queue_nums: int,
                 extras: Sequence[SyncExtra] = ()) -> None:
        self.broker = broker
        self.registrar = registrar
        self.default_queue_nums = default_queue_nums
        self.extras = list(extras)
        self._not_offered: set[str] = set()
        self.unknown: dict[str, int] = {}       # topic -> highest queue id seen, not yet configured
        self._wake = trio.Event()

    def new_queue(self, topic: str, queue_id: int) -> None:
        if self.broker.topics.get(topic) is None:
            self.unknown[topic] = max(self.unknown.get(topic, 0), queue_id)
            self._wake.set()

    async def once(self) -> bool:
        reg = self.registrar()
        master = master_remoting_addr(reg)
        if master is None or reg is None:
            return False
        try:
            resp = await reg.client.invoke_ok(master, RemotingCommand(RequestCode.GET_ALL_TOPIC_CONFIG), TIMEOUT_S)
        except Exception as exc:  # noqa: BLE001 - any failure: log, retry later
            log.warning("ha.sync_failed", master=master, error=str(exc))
            return False
        changed = apply_topic_configs(self.broker, resp.body or b"{}")
        counts = {"topics": changed}
        for what, code, apply in (("groups", RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG, apply_group_configs),
                                  ("offsets", RequestCode.GET_ALL_CONSUMER_OFFSET, apply_consumer_offsets)):
            try:
                resp = await reg.client.invoke_ok(master, RemotingCommand(code), TIMEOUT_S)
            except Exception as exc:  # noqa: BLE001 - any failure: log, retry later
                log.warning("ha.sync_failed", master=master, error=str(exc), what=what)
                return False
            counts[what] = apply(self.broker, resp.body or b"{}")
        try:        # as SlaveSynchronize.syncDelayOffset: a promoted slave resumes the master's delay levels
            resp = await reg.client.invoke_ok(master, RemotingCommand(RequestCode.GET_ALL_DELAY_OFFSET), TIMEOUT_S)
        except Exception as exc:  # noqa: BLE001 - any failure: log, retry later
            log.warning("ha.sync_failed", master=master, error=str(exc), what="delay_offsets")
            return False
        counts["delay_offsets"] = await self.broker.schedule.adopt_offsets(offset_table(loads_body(resp.body or b"{}")))
        for what, code, apply in self.extras:
            try:
                resp = await reg.client.invoke(master, RemotingCommand(code), TIMEOUT_S)
            except Exception as exc:  # noqa: BLE001 - any failure: log, retry later
                log.warning("ha.sync_failed", master=master, error=str(exc), what=what)
                return False
            if resp.code != ResponseCode.SUCCESS:
                if what not in self._not_offered:
                    self._not_offered.add(what)
                    log.warning("ha.sync_not_offered", master=master, what=what, code=resp.code, remark=resp.remark)
                continue
            try:
                counts[what] = apply(resp.body or b"")
            except (ValueError, TypeError, KeyError, OSError) as exc:
                log.warning("ha.sync_bad_body", master=master, what=what, error=str(exc))
        if any(counts.values()):
            log.info("ha.sync", master=master, **counts)
        return True

    def _own_configs(self) -> None:
        for topic, top_qid in list(self.unknown.items()):
            if self.broker.topics.get(topic) is None:
                n = max(self.default_queue_nums, top_qid + 1)
                try:
                    self.broker.topics.put(TopicConfig(topic_name=topic, read_queue_nums=n, write_queue_nums=n))
                    log.warning("ha.sync_topic_from_replica", topic=topic, queues=n)
                except ValueError as exc:
                    log.warning("ha.sync_topic_refused", topic=topic, error=str(exc))
        self.unknown.clear()

    async def run(self) -> None:
        synced = False
        while True:
            ok = await self.once()
            synced = synced or ok
            if not ok and self.unknown:
                self._own_configs()
            self.unknown = {t: q for t, q in self.unknown.items() if self.broker.topics.get(t) is None}
            with trio.move_on_after(SYNC_INTERVAL_S if synced else RETRY_S):
                await self._wake.wait()
            self._wake = trio.Event()
