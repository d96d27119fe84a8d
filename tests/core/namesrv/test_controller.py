"""The failover controller's state (core/namesrv/controller.py) and the route change it makes (routes.set_master)."""

from __future__ import annotations

from rokka.core.namesrv.controller import Controller, Heartbeat, truncation_point
from rokka.core.namesrv.routes import RouteInfoManager

A, B = "10.0.0.1:10911", "10.0.0.2:10911"


class Clock:
    def __init__(self) -> None:
        self.ms = 1_000_000

    def __call__(self) -> int:
        return self.ms


def hb(addr: str, broker_id: int, offset: int, epoch: int = 0, start: int = -1) -> Heartbeat:
    return Heartbeat("C", "bs", addr, addr.replace("10911", "10912"), broker_id, offset, epoch, start, 3000)


def _started(clock: Clock) -> Controller:
    """A with brokerId 0 and B with brokerId 1, both at offset 0: A is elected after the grace."""
    c = Controller(clock)
    assert c.heartbeat(hb(A, 0, 0)).master_addr is None          # waits for the other replicas first
    c.heartbeat(hb(B, 1, 0))
    clock.ms += 3000
    info = c.heartbeat(hb(A, 0, 0))
    assert (info.master_addr, info.epoch, info.master_ha_addr) == (A, 1, "10.0.0.1:10912")
    assert c.route_id("bs", A, 1) == 0 and c.route_id("bs", B, 0) == 1
    return c


def test_initial_election_waits_for_the_replicas_and_prefers_the_highest_epoch_and_offset() -> None:
    clock = Clock()
    c = Controller(clock)
    c.heartbeat(hb(A, 0, 500, epoch=3))
    c.heartbeat(hb(B, 1, 900, epoch=4))
    clock.ms += 3000
    assert [(e.new_master, e.epoch) for e in c.scan()] == [(B, 5)]
    _started(Clock())


def test_a_silent_master_is_replaced_by_the_in_sync_slave_with_a_new_epoch() -> None:
    clock = Clock()
    c = _started(clock)
    c.heartbeat(hb(A, 0, 1000, epoch=1, start=0))
    assert c.info("bs", A).epochs == ((1, 0),)
    c.heartbeat(hb(A, 0, 2000, epoch=1, start=0))
    info = c.heartbeat(hb(B, 1, 1000, epoch=1))     # reached the master's previous offset: in sync
    assert set(info.sync_state) == {A, B}
    clock.ms += 2000
    c.heartbeat(hb(B, 1, 2000, epoch=1))
    assert c.scan() == []                            # the master is still alive
    clock.ms += 2000
    elected = c.scan()
    assert [(e.old_master, e.new_master, e.epoch) for e in elected] == [(A, B, 2)]
    info = c.heartbeat(hb(B, 1, 2000, epoch=2, start=2000))
    assert (info.master_addr, info.epoch, info.sync_state) == (B, 2, (B,))
    assert info.epochs == ((1, 0), (2, 2000))
    back = c.heartbeat(hb(A, 0, 2500, epoch=1))       # the old master returns: a slave now, not id 0
    assert back.master_addr == B and back.broker_id == 2
    assert truncation_point(1, back.epochs, 2500) == 2000


def test_a_slave_outside_the_sync_state_set_is_not_elected_unless_unclean() -> None:
    for unclean, want in ((False, []), (True, [B])):
        clock = Clock()
        c = _started(clock)
        c.elect_unclean = unclean
        c.heartbeat(hb(A, 0, 5000, epoch=1, start=0))
        c.heartbeat(hb(A, 0, 9000, epoch=1, start=0))
        c.heartbeat(hb(B, 1, 100, epoch=1))          # far behind: never caught up
        clock.ms += 3500
        c.heartbeat(hb(B, 1, 100, epoch=1))
        assert [e.new_master for e in c.scan()] == want


def test_a_slave_that_stops_catching_up_leaves_the_set() -> None:
    clock = Clock()
    c = _started(clock)
    c.heartbeat(hb(A, 0, 100, epoch=1, start=0))
    assert B in c.heartbeat(hb(B, 1, 100, epoch=1)).sync_state
    for _ in range(20):
        clock.ms += 1000
        c.heartbeat(hb(A, 0, clock.ms, epoch=1, start=0))
        info = c.heartbeat(hb(B, 1, 100, epoch=1))
    assert info.sync_state == (A,)


def test_truncation_point() -> None:
    assert truncation_point(2, ((1, 0), (2, 500)), 900) == 900        # already in the master's epoch
    assert truncation_point(1, ((1, 0), (2, 500), (3, 800)), 900) == 500
    assert truncation_point(0, ((1, 0),), 0) == 0                     # a fresh replica
    assert truncation_point(1, ((2, -1),), 900) is None              # start not reported yet: wait
    assert truncation_point(1, ((2, 1200),), 900) == 900


def test_set_master_moves_the_elected_slave_to_id_0_and_drops_the_old_master() -> None:
    routes = RouteInfoManager(clock=lambda: 1)
    table = {"T": {"readQueueNums": 4, "writeQueueNums": 4, "perm": 6}}
    routes.register_broker("C", "bs", A, 0, "a:1", table, {"v": 1}, "chA")
    routes.register_broker("C", "bs", B, 1, "b:1", table, {"v": 1}, "chB")
    assert routes.set_master("bs", B) == A
    assert routes.brokers["bs"].addrs == {0: B}
    assert A not in routes.live
    route = routes.get_route("T")
    assert route is not None and route["brokerDatas"][0]["brokerAddrs"] == {"0": B}
    assert routes.set_master("bs", "10.9.9.9:1") is None             # not registered: nothing changes
    res = routes.register_broker("C", "bs", A, 1, "a:1", table, {"v": 1}, "chA2")
    assert res.master_addr == B and res.ha_addr == "b:1"

