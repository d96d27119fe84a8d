"""Controller mode in whole brokers (runtime.BrokerRole + gateway/ha/controlled.py) and a name server with the
controller, on real sockets: the controller elects the brokerId 0 broker, a SYNC master waits for its slave;
when the master stops, the slave is elected (epoch 2), takes sends alone and the route shows it as brokerId 0."""

from __future__ import annotations

import socket
from collections.abc import Callable
from pathlib import Path

import trio
from rokka.core.config import BrokerConfig
from rokka.core.namesrv.config import NamesrvConfig
from rokka.gateway import runtime
from rokka.gateway.namesrv.server import NamesrvServer
from rokka.net.remoting.client import Admin, NamesrvClient, Producer, RemotingClient


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _cfg(tmp_path: Path, name: str, ns: str, broker_id: int) -> BrokerConfig:
    return BrokerConfig(listen_port=0, kafka_listen_port=0, store_path_root_dir=str(tmp_path / name),
                        namesrv_addr=ns, broker_name="broker-c", broker_id=broker_id, broker_role="SYNC_MASTER",
                        enable_controller_mode=True, ha_listen_port=_free_port(), ha_send_heartbeat_interval=300,
                        broker_heartbeat_interval=200, broker_not_active_timeout_millis=1000)


async def _until(cond: Callable[[], object], what: str) -> None:
    with trio.move_on_after(30):
        while not cond():  # noqa: ASYNC110 - polls broker state
            await trio.sleep(0.05)
    assert cond(), f"no {what} within 30 s"


async def test_the_slave_is_elected_when_the_master_stops(tmp_path: Path) -> None:
    nscfg = NamesrvConfig.under(tmp_path / "ns")
    nscfg.enable_controller_in_namesrv = True
    nscfg.scan_not_active_broker_interval = 200
    with trio.fail_after(120):
        async with trio.open_nursery() as nursery:
            server = NamesrvServer(config=nscfg)
            host, port = await nursery.start(server.serve, "127.0.0.1", 0)
            ns = f"{host}:{port}"
            a = runtime.BrokerRole(_cfg(tmp_path, "a", ns, 0))
            b = runtime.BrokerRole(_cfg(tmp_path, "b", ns, 1))
            await nursery.start(a.run)
            await nursery.start(b.run)
            await _until(lambda: a.ha.role == "MASTER" and b.ha.role == "SLAVE", "roles")
            assert a.broker.store.replica_only is False and b.broker.store.replica_only is True
            aaddr = f"{a.broker_addr[0]}:{a.broker_addr[1]}"
            baddr = f"{b.broker_addr[0]}:{b.broker_addr[1]}"
            async with RemotingClient() as rc:
                nsc = NamesrvClient(rc, [ns])
                await Admin(rc, nsc).create_topic(aaddr, "T")
                while await nsc.get_route("T") is None:  # noqa: ASYNC110 - polls the name server
                    await trio.sleep(0.05)
                await _until(lambda: a.ha.master.slaves and a.ha.master.ack_offset >= 0, "HA connection")
                sent = await Producer(rc, nsc, "pg", retries=0).send("T", b"before", queue=0)
                assert sent.status == "SEND_OK"
                assert b.broker.store.max_offset("T", 0) == 1          # SYNC: the slave had it first
                a._cancel.cancel()                                    # the master stops answering
                await _until(lambda: b.ha.role == "MASTER", "the slave's election")
                assert b.ha.epoch == 2 and b.broker.store.replica_only is False
                assert b.ha.epochs.entries[-1] == (2, b.broker.store.clog.write_offset)
                await _until(lambda: server.routes.brokers["broker-c"].addrs == {0: baddr}, "the route change")
                route = await nsc.get_route("T")
                assert route is not None
                after = await Producer(rc, nsc, "pg2", retries=0).send("T", b"after", queue=0)
                assert after.status == "SEND_OK"                      # alone in its sync-state set
                assert b.broker.store.max_offset("T", 0) == 2
            await b.shutdown()
            nursery.cancel_scope.cancel()
