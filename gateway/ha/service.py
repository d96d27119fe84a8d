"""Start the HA role of a broker from broker.conf (called by gateway/runtime.py).

Theory of operation
-------------------
``brokerRole`` decides (not set and no ``haListenPort``: a plain master with
no HA port, so a broker that nobody replicates from opens no port that
serves its CommitLog to whoever connects):

* ASYNC_MASTER / SYNC_MASTER: an ``HAMaster`` listens on ``haListenPort``
  (default listenPort + 1, advertised to the name server as haServerAddr;
  an ASYNC_MASTER whose default HA port is taken starts without it, with a
  warning, so a single broker never fails to start over replication).
  SYNC_MASTER also sets ``Broker.replica_wait``: every send is answered only
  when a slave acked its bytes (``slaveTimeout``, 3 s -> FLUSH_SLAVE_TIMEOUT,
  no slave or one further behind than ``haSlaveFallbehindMax`` ->
  SLAVE_NOT_AVAILABLE; the records are stored either way, as in RocketMQ).
* SLAVE: the store refuses puts (``DiskStore.replica_only``: SEND_MESSAGE
  answers SERVICE_NOT_AVAILABLE as RocketMQ's slave does) and an ``HASlave``
  replicates from ``haMasterAddress``, or else from the haServerAddr the name
  server answered the last REGISTER_BROKER with; ``sync.SlaveSync``
  copies the master's topic configs.

``enableControllerMode=true``: the failover controller decides the role
instead (``controlled.ControlledHA``; ``brokerRole`` then only picks the
master flavour: ASYNC_MASTER, else SYNC_MASTER).

A store other than ``DiskStore`` (the in-memory one) has no CommitLog
bytes to replicate: HA is then off with a warning.

``replica_hooks`` is what the Kafka side learns of the role started here
(``rokka.gateway.kafka.replicas``): the in-sync slaves (the ISR), the slave's
HA connection address, and acks=all's wait for an in-sync slave on a master
that answers sends at once.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import structlog
import trio
from rokka.core.config import BrokerConfig
from rokka.core.storage import PutStatus
from rokka.gateway.ha.controlled import ControlledHA
from rokka.gateway.ha.master import HAMaster, HAParams, sync_result
from rokka.gateway.ha.slave import HASlave
from rokka.gateway.ha.sync import SlaveSync, SyncExtra
from rokka.gateway.kafka.replicas import ReplicaHooks

log = structlog.get_logger(__name__)

def params_from(cfg: BrokerConfig) -> HAParams:
    return HAParams(heartbeat_s=cfg.ha_send_heartbeat_interval / 1000,
                    housekeeping_s=cfg.ha_housekeeping_interval / 1000,
                    batch_bytes=cfg.ha_transfer_batch_size, fallbehind_max=cfg.ha_slave_fallbehind_max)


def master_from_registration(registrar: Callable[[], Any]) -> Callable[[], str | None]:
    """The master's HA address from the name servers' last REGISTER_BROKER answers (None if unknown)."""
    def lookup() -> str | None:
        reg = registrar()
        for result in (getattr(reg, "last_results", None) or {}).values():
            ha_addr = getattr(result, "ha_addr", None)
            if ha_addr:
                return str(ha_addr)
        return None
    return lookup


async def start_ha(nursery: trio.Nursery, cfg: BrokerConfig, broker: Any, registrar: Callable[[], Any],
                   sync_extras: Sequence[SyncExtra] = ()) -> HAMaster | HASlave | ControlledHA | None:
    """Start the HA master or slave for ``broker`` (see the module docstring); a slave's metadata sync
    also runs ``sync_extras`` (``rokka.gateway.ha.sync``)."""
    from rokka.core.storage import DiskStore

    store = broker.store
    if cfg.enable_controller_mode:
        if not isinstance(store, DiskStore):
            log.warning("ha.disabled", reason="the store is not a DiskStore", mode="controller")
            return None
        controlled = ControlledHA(cfg, broker, registrar, params_from(cfg), nursery, sync_extras)
        await nursery.start(controlled.run)
        log.info("ha.controller_mode", controllers=controlled.controllers, flavour=controlled.flavour)
        return controlled
    role = cfg.broker_role.upper() or "ASYNC_MASTER"
    if not cfg.broker_role and not cfg.ha_listen_port:
        log.debug("ha.off", reason="neither brokerRole nor haListenPort is set")
        return None
    if not isinstance(store, DiskStore):
        log.warning("ha.disabled", reason="the store is not a DiskStore", role=role)
        return None
    params = params_from(cfg)
    if role == "SLAVE":
        store.replica_only = True
        source = (lambda: cfg.ha_master_address) if cfg.ha_master_address else master_from_registration(registrar)
        slave = HASlave(store, params, source)
        await nursery.start(slave.run)
        sync = SlaveSync(broker, registrar, cfg.default_topic_queue_nums, sync_extras)
        slave.appender.on_new_queue.append(sync.new_queue)
        slave.sync = sync
        nursery.start_soon(sync.run)
        log.info("ha.slave_started", master=cfg.ha_master_address or "from the name server")
        return slave
    master = HAMaster(store, params)
    try:
        await nursery.start(master.serve, cfg.listen_host, cfg.ha_port)
    except OSError as exc:
        if role == "SYNC_MASTER" or cfg.ha_listen_port:
            raise
        # ASYNC_MASTER on the default port (listenPort + 1): a broker that nobody replicates from
        # must not fail to start because that port is taken.
        log.warning("ha.listen_failed", port=cfg.ha_port, error=str(exc),
                    hint="no slave can replicate from this broker; set haListenPort to a free port")
        return None
    if role == "SYNC_MASTER":
        timeout_s = cfg.slave_timeout / 1000          # RocketMQ 4.9: slaveTimeout (CommitLog.submitReplicaRequest)

        async def replica_wait(offset: int) -> PutStatus | None:
            return sync_result(await master.wait_for_ack(offset, timeout_s))
        broker.replica_wait = replica_wait
    return master


def replica_hooks(ha: HAMaster | HASlave | ControlledHA | None, cfg: BrokerConfig) -> ReplicaHooks:
    """The Kafka side's view of the HA role ``start_ha`` returned (module docstring)."""
    if ha is None:
        return ReplicaHooks()
    timeout_s = cfg.slave_timeout / 1000

    def master() -> HAMaster | None:
        if isinstance(ha, HAMaster):
            return ha
        if isinstance(ha, ControlledHA) and ha.role == "MASTER":
            return ha.master
        return None

    def in_sync_peers() -> set[str] | None:
        m = master()
        return m.in_sync_peers() if m is not None else None

    async def isr_wait(offset: int) -> PutStatus | None:
        """acks=all: an in-sync slave's ack of ``offset`` (None at once when the ISR is the master alone or
        a slave dropped out while waiting; FLUSH_SLAVE_TIMEOUT after slaveTimeout)."""
        m = master()
        if m is None or not m.in_sync_peers():
            return None
        return PutStatus.FLUSH_SLAVE_TIMEOUT if await m.wait_for_ack(offset, timeout_s) == "timeout" else None

    return ReplicaHooks(replicated=True, in_sync_peers=in_sync_peers,
                        ha_client=lambda: getattr(ha, "local_addr", ""), isr_wait=isr_wait)
