"""The failover controller (RocketMQ 5 controller mode, one controller, no Raft) as pure data.

Theory of operation
-------------------
One ``Controller`` runs inside the name server (``enableControllerInNamesrv``).
Brokers with ``enableControllerMode=true`` send it a heartbeat every
``brokerHeartbeatInterval`` (``Heartbeat``: cluster, broker set name, the
broker's remoting and HA addresses, its configured brokerId, its CommitLog max
offset, the start offset of its epoch when it is the master, and how long a
silence means it is dead).  Per broker set (``brokerName``) the controller keeps
what RocketMQ 5's ``ReplicasInfoManager`` keeps:

* the master (its remoting address) and the **master epoch**, bumped by every
  election; ``epochs`` maps each epoch to the CommitLog offset where it began
  (reported by the master of that epoch, -1 until then);
* the **sync-state set**: the master plus the replicas that caught up with it.
  A replica has caught up when the max offset it reports reaches what the master
  reported one heartbeat earlier; it leaves the set when it has not caught up for
  ``max_not_catchup_ms`` (Java's ``haMaxTimeSlaveNotCatchup``, 15 s) or is silent.

Elections (``scan``): a master silent for longer than its own timeout is replaced
by the live member of the sync-state set with the highest reported max offset
(ties: the lowest brokerId).  With no such member nothing changes (the master
stays down; ``enableElectUncleanMaster`` allows any live replica).  A broker set
without a master (a fresh start, or a controller that restarted and lost its
memory) elects once ``startup_grace_ms`` passed since its first heartbeat, so
every replica that is up has reported: the one with the highest (epoch, offset)
wins.  The heartbeat's answer (``ReplicaInfo``) tells the broker who the master
is, the epoch and the epoch start offsets: a broker that learns it is a slave
truncates its CommitLog where the first epoch after its own began (see
``gateway/ha/controlled.py``), as RocketMQ 5's epoch file does.

Limits: the controller is a single point: while it is down no failover happens
(brokers keep their roles); its state is in memory only, so after a restart the
epochs before the restart are unknown to it (a broker reports its own last epoch
and the election continues from the highest one reported).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

MASTER_ID = 0
MAX_NOT_CATCHUP_MS = 15_000


def _now_ms() -> int:
    return int(time.monotonic() * 1000)


@dataclass(frozen=True)
class Heartbeat:
    cluster: str
    broker_name: str
    broker_addr: str
    ha_addr: str
    broker_id: int
    max_offset: int
    epoch: int                  # the broker's last local epoch (0 = none)
    epoch_start: int = -1       # the master: where its epoch began in its CommitLog
    timeout_ms: int = 3000


@dataclass(frozen=True)
class ReplicaInfo:
    """The controller's answer: the master of the set (None while unknown), its epoch and HA address."""

    master_addr: str | None
    master_ha_addr: str | None
    epoch: int
    broker_id: int                       # the id the asking broker has in routes now
    epochs: tuple[tuple[int, int], ...]  # (epoch, start offset) known to the controller, ascending
    sync_state: tuple[str, ...] = ()


@dataclass
class Replica:
    addr: str
    ha_addr: str
    broker_id: int
    last_heartbeat_ms: int
    timeout_ms: int
    max_offset: int
    epoch: int
    caught_up_ms: int = -1

    def alive(self, now: int) -> bool:
        return now - self.last_heartbeat_ms <= self.timeout_ms


@dataclass
class BrokerSet:
    cluster: str
    name: str
    first_seen_ms: int
    replicas: dict[str, Replica] = field(default_factory=dict)
    master: str | None = None
    epoch: int = 0
    epochs: dict[int, int] = field(default_factory=dict)
    master_offsets: tuple[int, int] = (0, 0)      # the master's previous and last reported max offset
    sync_state: set[str] = field(default_factory=set)


@dataclass(frozen=True)
class Election:
    broker_name: str
    old_master: str | None
    new_master: str
    epoch: int


class Controller:
    """Masters, epochs and sync-state sets of broker sets (see the module docstring)."""

    def __init__(self, clock: Callable[[], int] = _now_ms, *, max_not_catchup_ms: int = MAX_NOT_CATCHUP_MS,
                 elect_unclean: bool = False, startup_grace_ms: int | None = None) -> None:
        self.clock = clock
        self.max_not_catchup_ms = max_not_catchup_ms
        self.elect_unclean = elect_unclean
        self.startup_grace_ms = startup_grace_ms
        self.sets: dict[str, BrokerSet] = {}

    # -- heartbeats -------------------------------------------------------------------
    def heartbeat(self, hb: Heartbeat) -> ReplicaInfo:
        now = self.clock()
        bs = self.sets.get(hb.broker_name)
        if bs is None:
            bs = self.sets[hb.broker_name] = BrokerSet(hb.cluster, hb.broker_name, now)
        r = bs.replicas.get(hb.broker_addr)
        if r is None:
            r = bs.replicas[hb.broker_addr] = Replica(hb.broker_addr, hb.ha_addr, hb.broker_id, now,
                                                      hb.timeout_ms, hb.max_offset, hb.epoch)
        r.ha_addr, r.broker_id, r.last_heartbeat_ms = hb.ha_addr, hb.broker_id, now
        r.timeout_ms, r.max_offset, r.epoch = hb.timeout_ms, hb.max_offset, hb.epoch
        if bs.master == hb.broker_addr:
            bs.master_offsets = (bs.master_offsets[1], hb.max_offset)
            r.caught_up_ms = now
            if hb.epoch == bs.epoch and hb.epoch_start >= 0 and bs.epochs.get(bs.epoch, -1) < 0:
                bs.epochs[bs.epoch] = hb.epoch_start
        elif bs.master is not None and hb.epoch == bs.epoch and hb.max_offset >= bs.master_offsets[0]:
            r.caught_up_ms = now
        if bs.master is None:
            self._elect_initial(bs, now)
        self._update_sync_state(bs, now)
        return self.info(hb.broker_name, hb.broker_addr)

    def _update_sync_state(self, bs: BrokerSet, now: int) -> None:
        members = {bs.master} if bs.master is not None else set()
        for addr, r in bs.replicas.items():
            if addr != bs.master and r.alive(now) and r.caught_up_ms >= 0 \
                    and now - r.caught_up_ms <= self.max_not_catchup_ms:
                members.add(addr)
        bs.sync_state = members

    def info(self, broker_name: str, broker_addr: str) -> ReplicaInfo:
        bs = self.sets.get(broker_name)
        if bs is None:
            return ReplicaInfo(None, None, 0, -1, ())
        master = bs.replicas.get(bs.master) if bs.master is not None else None
        return ReplicaInfo(bs.master, master.ha_addr if master else None, bs.epoch,
                           self.route_id(broker_name, broker_addr, -1),
                           tuple(sorted(bs.epochs.items())), tuple(sorted(bs.sync_state)))

    def route_id(self, broker_name: str, broker_addr: str, registered_id: int) -> int:
        """The brokerId a registration of ``broker_addr`` gets in routes: 0 for the elected master, the
        configured id (or one above the others when it was 0) for every other replica."""
        bs = self.sets.get(broker_name)
        if bs is None or bs.master is None:
            return registered_id
        if broker_addr == bs.master:
            return MASTER_ID
        r = bs.replicas.get(broker_addr)
        own = r.broker_id if r is not None else registered_id
        if own > MASTER_ID:
            return own
        return 1 + max((x.broker_id for x in bs.replicas.values()), default=0)

    def manages(self, broker_name: str) -> bool:
        return broker_name in self.sets

    # -- elections ----------------------------------------------------------------------
    def _elect_initial(self, bs: BrokerSet, now: int) -> None:
        grace = self.startup_grace_ms
        if grace is None:
            grace = max((r.timeout_ms for r in bs.replicas.values()), default=0)
        if now - bs.first_seen_ms < grace:
            return
        live = [r for r in bs.replicas.values() if r.alive(now)]
        if not live:
            return
        best = max(live, key=lambda r: (r.epoch, r.max_offset, -r.broker_id))
        self._promote(bs, best, max(bs.epoch, max(r.epoch for r in bs.replicas.values())) + 1)

    def _promote(self, bs: BrokerSet, r: Replica, epoch: int) -> Election:
        old = bs.master
        bs.master, bs.epoch = r.addr, epoch
        bs.epochs[epoch] = -1
        bs.master_offsets = (r.max_offset, r.max_offset)
        r.caught_up_ms = self.clock()
        bs.sync_state = {r.addr}
        return Election(bs.name, old, r.addr, epoch)

    def scan(self) -> list[Election]:
        """Replace every master that went silent (and elect where a set has none yet)."""
        now = self.clock()
        out: list[Election] = []
        for bs in self.sets.values():
            if bs.master is None:
                self._elect_initial(bs, now)
                if bs.master is not None:
                    out.append(Election(bs.name, None, bs.master, bs.epoch))
                continue
            master = bs.replicas.get(bs.master)
            if master is not None and master.alive(now):
                self._update_sync_state(bs, now)
                continue
            candidates = [r for a, r in bs.replicas.items() if a != bs.master and r.alive(now)
                          and (self.elect_unclean or a in bs.sync_state)]
            if not candidates:
                continue
            best = max(candidates, key=lambda r: (r.max_offset, -r.broker_id))
            out.append(self._promote(bs, best, bs.epoch + 1))
        return out


def truncation_point(own_epoch: int, epochs: tuple[tuple[int, int], ...] | list[tuple[int, int]],
                     own_max: int) -> int | None:
    """Where a broker whose last local epoch is ``own_epoch`` must cut its CommitLog before it follows the
    master: the start of the first epoch after its own (its bytes from there on were never the new
    masters'), or its own max when no later epoch exists.  None when that start is not known yet."""
    later = [(e, s) for e, s in epochs if e > own_epoch]
    if not later:
        return own_max
    start = min(later)[1]
    if start < 0:
        return None
    return min(start, own_max)
