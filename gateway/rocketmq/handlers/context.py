"""State the RocketMQ broker handlers share: the core broker plus wire-side helpers.

Theory of operation
-------------------
``BrokerEnv`` is built once per broker process.  It holds the core
``Broker`` facade, the advertised address (what goes into STOREHOST and the
name server registration), and the wire-level actions that need a client
connection: notifying a consumer group that its membership changed
(NOTIFY_CONSUMER_IDS_CHANGED, oneway, to every member).  Handlers are plain
async functions ``(env, channel, request) -> response | None`` bound to the
context by ``rokka.gateway.rocketmq.handlers.build_handlers``.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import structlog
import trio
from rokka.core.broker import Broker
from rokka.gateway.rocketmq.handlers.flow import SendGate
from rokka.net.remoting.codec.codes import RequestCode
from rokka.net.remoting.codec.remoting import RemotingCommand

if TYPE_CHECKING:
    from rokka.gateway.rocketmq.acl import PlainAcl

log = structlog.get_logger(__name__)


def physical_memory_bytes() -> int:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError):  # pragma: no cover
        return 8 << 30


def in_memory(env: BrokerEnv, commitlog_offset: int) -> bool:
    """Java's "in memory" rule for a read at ``commitlog_offset``: within accessMessageInMemoryMaxRatio % of
    the machine's RAM of the CommitLog's end (farther back, a read is taken to hit the disk)."""
    behind = env.broker.store.commitlog_max_offset - commitlog_offset
    return behind <= physical_memory_bytes() * env.cfg.access_message_in_memory_max_ratio / 100


@dataclass
class SharedState:
    """What the two protocols share at run time, typed (set by ``rokka.gateway.runtime``)."""

    boot_ms: int = field(default_factory=lambda: int(time.time() * 1000))   # BrokerStats' bootTimestamp
    put_total: int = 0          # messages stored by RocketMQ sends (msgPutTotalTodayNow)
    #: why a RocketMQ consumer may not join a group (Kafka members are live in it), else None
    refuse_rocketmq_group: Callable[[str], str | None] | None = None
    kafka_addr: tuple[str, int] | None = None   # the Kafka listener's advertised (host, port)


@dataclass
class BrokerEnv:
    broker: Broker
    broker_addr: str                    # advertised "ip:port" of the main listener
    nursery: trio.Nursery | None = None  # for fire-and-forget wire actions
    topic_changed: Callable[[], None] = lambda: None  # re-register with name servers
    acl: PlainAcl | None = None         # the broker's plain ACL, edited by the ACL request codes (admin_acl.py)
    #: queue locks of orderly consumers: group -> (topic, brokerName, queueId) -> (clientId, locked at ms)
    mq_locks: dict[str, dict[tuple[str, str, int], tuple[str, int]]] = field(default_factory=dict)
    #: VIEW_BROKER_STATS_DATA samples: (stats name, key) -> [(ms, total)] (admin_stats.py)
    stats_samples: dict[tuple[str, str], list[tuple[int, int]]] = field(default_factory=dict)
    #: the broker config's data version, bumped by UPDATE_BROKER_CONFIG (admin_config.py)
    config_data_version: dict[str, int] = field(
        default_factory=lambda: {"counter": 0, "timestamp": int(time.time() * 1000)})
    shared: SharedState = field(default_factory=SharedState)  # what the Kafka side and runtime share
    send_gate: SendGate = field(init=False)     # the send queue's bound and busy signals (handlers/flow.py)

    def __post_init__(self) -> None:
        self.send_gate = SendGate(self.broker)

    @property
    def cfg(self):  # noqa: ANN201
        return self.broker.cfg

    def notify_consumer_ids_changed(self, group: str) -> None:
        """Send NOTIFY_CONSUMER_IDS_CHANGED (oneway) to every live member of ``group``."""
        sub_cfg = self.broker.sub_groups.get(group, create=False)
        if sub_cfg is not None and not sub_cfg.notify_consumer_ids_changed_enable:
            return
        info = self.broker.consumers.get(group)
        if info is None or self.nursery is None:
            return
        for client in list(info.clients.values()):
            self.nursery.start_soon(self._notify_one, client.handle, group)

    async def _notify_one(self, channel: Any, group: str) -> None:
        cmd = RemotingCommand(code=RequestCode.NOTIFY_CONSUMER_IDS_CHANGED,
                              ext_fields={"consumerGroup": group})
        try:
            await channel.send_oneway(cmd)
        except Exception as exc:  # noqa: BLE001 - a dead client must not hurt the others
            log.info("rocketmq.notify_consumer_ids_changed_failed", group=group, error=str(exc))
