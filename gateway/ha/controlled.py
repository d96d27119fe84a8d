"""A broker in controller mode (RocketMQ 5 ``enableControllerMode``): the controller decides its role.

Theory of operation
-------------------
``ControlledHA`` replaces the fixed ``brokerRole`` of ``service.start_ha``.
It starts *fenced*: the store refuses puts (as a slave's) and no HA port is
open, until the controller (``controllerAddr``, else the name servers, where
the controller is embedded) answers a heartbeat.  Every
``brokerHeartbeatInterval`` it sends ``Heartbeat`` (its addresses, CommitLog
max offset, last local epoch and, as master, where its epoch began) and
applies the answer (``ReplicaInfo``):

* **I am the master** (epoch E, not yet served): the HA client stops, the
  epoch file gets ``E-<max offset>``, the HA port opens (one ``HAMaster``,
  kept across promotions), SYNC replication is armed (every send waits for a
  slave's ack: the master flavour is ``brokerRole`` when it says
  ASYNC_MASTER, else SYNC_MASTER), the store takes puts, ``brokerRole`` in the
  config reads the new role (what PULL and other handlers look at) and the
  registration is sent again as brokerId 0 at once.
* **Someone else is the master** (epoch E): puts are refused, the HA port
  closes (its slaves and any sync waits end), then, before the first byte is
  replicated, the CommitLog is cut where the first epoch after this broker's
  own began (``controller.truncation_point``; a start the controller does not
  know yet means: wait for the next answer) -- what an old master wrote that
  its successor never got is dropped, so the replica is byte for byte the new
  master's and no record ever sits at two offsets.  The epoch file gets
  ``E-<offset>`` and an ``HASlave`` follows the master's HA address (with the
  metadata sync, ``sync.SlaveSync``).

A heartbeat that fails (controller down or unreachable) changes nothing: the
broker keeps its role (the controller is a single point, see
``core/namesrv/controller.py``).  The epoch file is ``epochFileCheckpoint`` in
the store's root (lines ``epoch-startOffset``, as RocketMQ 5's).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import structlog
import trio
import trio.lowlevel
from rokka.core.config import BrokerConfig
from rokka.core.namesrv.controller import Heartbeat, ReplicaInfo, truncation_point
from rokka.core.storage import PutStatus, ReplicaAppender
from rokka.gateway.controller.codec import BROKER_HEARTBEAT, decode_info, encode_heartbeat
from rokka.gateway.ha.master import HAMaster, HAParams, sync_result
from rokka.gateway.ha.slave import HASlave
from rokka.gateway.ha.sync import SlaveSync, SyncExtra
from rokka.net.remoting.codec.codes import ResponseCode
from rokka.net.remoting.codec.remoting import RemotingCommand

if TYPE_CHECKING:
    from rokka.core.storage import DiskStore

log = structlog.get_logger(__name__)

EPOCH_FILE = "epochFileCheckpoint"
REQUEST_TIMEOUT_S = 2.0


class EpochFile:
    """``epoch-startOffset`` lines, ascending; the last is the epoch of this CommitLog's newest bytes."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.entries: list[tuple[int, int]] = []
        if path.exists():
            for line in path.read_text().splitlines():
                e, sep, s = line.strip().partition("-")
                if sep and e.isdigit() and s.isdigit():
                    self.entries.append((int(e), int(s)))

    @property
    def last_epoch(self) -> int:
        return self.entries[-1][0] if self.entries else 0

    @property
    def last_start(self) -> int:
        return self.entries[-1][1] if self.entries else -1

    def append(self, epoch: int, start: int) -> None:
        self.entries = [(e, s) for e, s in self.entries if e < epoch and s <= start] + [(epoch, start)]
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text("".join(f"{e}-{s}\n" for e, s in self.entries))
        tmp.replace(self.path)


class ControlledHA:
    """HA role of a broker in controller mode (see the module docstring)."""

    def __init__(self, cfg: BrokerConfig, broker: Any, registrar: Callable[[], Any], params: HAParams,
                 ha_service_nursery: trio.Nursery, sync_extras: Sequence[SyncExtra] = ()) -> None:
        self.cfg = cfg
        self.sync_extras = sync_extras
        self.broker = broker
        self.store: DiskStore = broker.store
        self.registrar = registrar
        self.params = params
        self.nursery = ha_service_nursery
        self.flavour = "ASYNC_MASTER" if cfg.broker_role.upper() == "ASYNC_MASTER" else "SYNC_MASTER"
        self.configured_id = cfg.broker_id
        self.epochs = EpochFile(Path(self.store.root) / EPOCH_FILE)
        self.addr = f"{cfg.advertised_host}:{cfg.listen_port}"
        self.ha_addr = f"{cfg.advertised_host}:{cfg.ha_port}"
        self.controllers = [a.strip() for a in (cfg.controller_addr or cfg.namesrv_addr).split(";") if a.strip()]
        self.role = "FENCED"            # FENCED | MASTER | SLAVE
        self.epoch = 0                  # the epoch of the role held now
        self.master_ha: str | None = None
        self.master: HAMaster | None = None
        self.slave: HASlave | None = None
        self._scope: trio.CancelScope | None = None     # the HA master's listener or the slave's client
        self.role_changed = trio.Event()
        self.sync_state: tuple[str, ...] = ()
        self._offsets: deque[tuple[float, int]] = deque()
        self._near_mark = 0
        self.store.replica_only = True
        self.cfg.broker_role = "SLAVE"

    def in_sync_peers(self) -> set[str] | None:
        """As ``HAMaster.in_sync_peers`` while this broker is the master; None otherwise."""
        return self.master.in_sync_peers() if self.role == "MASTER" and self.master is not None else None

    @property
    def local_addr(self) -> str:
        """This slave's end of its HA connection ("" when it is not a connected slave)."""
        return self.slave.local_addr if self.slave is not None else ""

    # -- the heartbeat loop ----------------------------------------------------------
    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        task_status.started()
        while True:
            self._sample_offset()
            info = await self._heartbeat()
            if info is not None and info.master_addr:
                try:
                    await self.apply(info)
                except OSError as exc:
                    log.error("ha.controller_role_switch_failed", error=str(exc), master=info.master_addr)
            await trio.sleep(self.cfg.broker_heartbeat_interval / 1000)

    def _client(self) -> Any:
        reg = self.registrar()
        return getattr(reg, "client", None)

    async def _heartbeat(self) -> ReplicaInfo | None:
        client = self._client()
        if client is None:
            return None
        hb = Heartbeat(self.cfg.broker_cluster_name, self.cfg.broker_name, self.addr, self.ha_addr,
                       self.configured_id, self.store.clog.write_offset, self.epochs.last_epoch,
                       self.epochs.last_start if self.role == "MASTER" else -1,
                       self.cfg.broker_not_active_timeout_millis)
        for addr in self.controllers:
            try:
                resp = await client.invoke(addr, RemotingCommand(BROKER_HEARTBEAT, ext_fields=encode_heartbeat(hb)),
                                           REQUEST_TIMEOUT_S)
            except Exception as exc:  # noqa: BLE001 - any failure: try the next controller, keep the role
                log.debug("ha.controller_heartbeat_failed", controller=addr, error=str(exc))
                continue
            if resp.code == ResponseCode.SUCCESS:
                return decode_info(resp.ext_fields)
            log.warning("ha.controller_heartbeat_refused", controller=addr, code=resp.code, remark=resp.remark)
        return None

    # -- role switches ---------------------------------------------------------------
    async def apply(self, info: ReplicaInfo) -> None:
        self.sync_state = info.sync_state
        if info.master_addr == self.addr:
            if self.role != "MASTER" or self.epoch != info.epoch:
                await self._become_master(info.epoch)
        elif self.role != "SLAVE" or self.epoch != info.epoch or self.master_ha != info.master_ha_addr:
            await self._become_slave(info)

    def _stop_current(self) -> None:
        if self._scope is not None:
            self._scope.cancel()
            self._scope = None
        self.slave = None

    async def _become_master(self, epoch: int) -> None:
        self._stop_current()
        start = self.store.clog.write_offset
        if self.epochs.last_epoch != epoch:
            self.epochs.append(epoch, start)
        if self.master is None:
            self.master = HAMaster(self.store, self.params)
        scope = self._scope = trio.CancelScope()
        await self.nursery.start(self._serve_master, scope)
        if self.flavour == "SYNC_MASTER":
            self.broker.replica_wait = self._replica_wait
        self.role, self.epoch, self.master_ha = "MASTER", epoch, self.ha_addr
        self.cfg.broker_role = self.flavour
        self.store.replica_only = False
        self._register_as(0)
        log.warning("ha.controller_became_master", epoch=epoch, epoch_start=start, flavour=self.flavour)
        self._changed()

    async def _replica_wait(self, offset: int) -> PutStatus | None:
        """SYNC replication in controller mode (RocketMQ 5: the sync-state set acks, minInSyncReplicas 1).

        A slave must ack (FLUSH_SLAVE_TIMEOUT / SLAVE_NOT_AVAILABLE as a SYNC_MASTER) when it is near
        (its ack reached where this master was two heartbeats ago: the controller may already count
        it in the set) or when the sync-state set names another replica; a master alone in its set
        with no near slave answers at once (no other replica can be elected, so nothing it acks is
        lost by a failover; a slave still catching up is not waited for, so the records it has not
        got are not answered with an error that a client would retry into a duplicate).  With a
        replica in the set and none connected: SLAVE_NOT_AVAILABLE until the controller drops it."""
        master = self.master
        if master is None:
            return PutStatus.SLAVE_NOT_AVAILABLE
        others = bool(set(self.sync_state) - {self.addr})
        near = any(s.reports.ack_offset >= self._near_mark for s in master.slaves.values())
        if near or (others and master.slaves):
            return sync_result(await master.wait_for_ack(offset, self.cfg.slave_timeout / 1000))
        return PutStatus.SLAVE_NOT_AVAILABLE if others else None

    def _sample_offset(self) -> None:
        """Keep the write offsets of the last two heartbeat intervals: a slave whose ack reached the
        oldest of them is *near* (the controller may add it to the sync-state set at its next
        heartbeat, so the master waits for it from now on)."""
        now, keep = trio.current_time(), 2.5 * self.cfg.broker_heartbeat_interval / 1000
        self._offsets.append((now, self.store.clog.write_offset))
        while len(self._offsets) > 1 and now - self._offsets[0][0] > keep:
            self._offsets.popleft()
        self._near_mark = self._offsets[0][1]

    async def _serve_master(self, scope: trio.CancelScope, *,
                            task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        assert self.master is not None
        with scope:
            await self.master.serve(self.cfg.listen_host, self.cfg.ha_port, task_status=task_status)

    async def _become_slave(self, info: ReplicaInfo) -> None:
        was_master = self.role == "MASTER"
        self.store.replica_only = True
        self.broker.replica_wait = None
        self.cfg.broker_role = "SLAVE"
        if self.role != "SLAVE" or self.epoch != info.epoch:
            cut = truncation_point(self.epochs.last_epoch, info.epochs, self.store.clog.write_offset)
            if cut is None:
                log.info("ha.controller_waits_for_epoch_start", epoch=info.epoch)
                self._stop_current()
                self.role = "FENCED"
                return
            self._stop_current()
            await trio.lowlevel.checkpoint()         # let the cancelled HA tasks leave the store
            if cut < self.store.clog.write_offset:
                await trio.to_thread.run_sync(ReplicaAppender(self.store).truncate, cut)
            if self.epochs.last_epoch < info.epoch:
                self.epochs.append(info.epoch, self.store.clog.write_offset)
        else:
            self._stop_current()
        self.role, self.epoch, self.master_ha = "SLAVE", info.epoch, info.master_ha_addr
        slave = self.slave = HASlave(self.store, self.params, lambda: self.master_ha)
        sync = SlaveSync(self.broker, self.registrar, self.cfg.default_topic_queue_nums, self.sync_extras)
        slave.appender.on_new_queue.append(sync.new_queue)
        slave.sync = sync
        scope = self._scope = trio.CancelScope()
        self.nursery.start_soon(self._run_slave, scope, slave, sync)
        self._register_as(info.broker_id if info.broker_id > 0 else max(1, self.configured_id))
        log.warning("ha.controller_became_slave", epoch=info.epoch, master=info.master_addr,
                    master_ha=info.master_ha_addr, was_master=was_master, offset=self.store.clog.write_offset)
        self._changed()

    async def _run_slave(self, scope: trio.CancelScope, slave: HASlave, sync: SlaveSync) -> None:
        with scope:
            async with trio.open_nursery() as nursery:
                await nursery.start(slave.run)
                nursery.start_soon(sync.run)

    def _register_as(self, broker_id: int) -> None:
        reg = self.registrar()
        if reg is not None:
            reg.broker_id = broker_id
            reg.trigger()

    def _changed(self) -> None:
        self.role_changed.set()
        self.role_changed = trio.Event()
