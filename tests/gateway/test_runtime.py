"""The composition root (``rokka.gateway.runtime.BrokerRole`` + ``rokka.gateway.kafka.role.KafkaRole``)
on real sockets: the cross-protocol state is typed and filled, and shutdown drains the Kafka
listener before the store closes."""

from __future__ import annotations

import json
from pathlib import Path

import trio
from rokka.core.config import BrokerConfig
from rokka.gateway import runtime
from rokka.gateway.namesrv.server import NamesrvServer
from rokka.net.remoting.client import Admin, NamesrvClient, Producer, RemotingClient
from rokka.net.remoting.codec.codes import RequestCode
from rokka.net.remoting.codec.remoting import RemotingCommand


async def test_shared_state_is_typed_and_shutdown_stops_the_kafka_listener_first(tmp_path: Path) -> None:
    with trio.fail_after(60):
        async with trio.open_nursery() as nursery:
            host, port = await nursery.start(NamesrvServer().serve, "127.0.0.1", 0)
            cfg = BrokerConfig(listen_port=0, kafka_listen_port=0, store_path_root_dir=str(tmp_path / "store"),
                               namesrv_addr=f"{host}:{port}")
            role = runtime.BrokerRole(cfg)
            await nursery.start(role.run)
            shared = role.env.shared
            assert shared.kafka_addr == role.kafka_addr and shared.boot_ms > 0
            assert shared.refuse_rocketmq_group is not None and shared.refuse_rocketmq_group("g") is None
            broker = f"{role.broker_addr[0]}:{role.broker_addr[1]}"
            async with RemotingClient() as rc:
                nsc = NamesrvClient(rc, [f"{host}:{port}"])
                await Admin(rc, nsc).create_topic(broker, "T")
                while await nsc.get_route("T") is None:  # noqa: ASYNC110 - polls the name server
                    await trio.sleep(0.05)
                await Producer(rc, nsc, "pg").send("T", b"x", queue=0)
                info = await rc.invoke(broker, RemotingCommand(RequestCode.GET_BROKER_RUNTIME_INFO))
                table = json.loads(info.body)["table"]
                assert table["msgPutTotalTodayNow"] == "1" == str(shared.put_total)
                assert table["bootTimestamp"] == str(shared.boot_ms)
            kafka = role.kafka_server
            assert kafka is not None and kafka.statistics().address is not None
            kafka_host, kafka_port = role.kafka_addr
            idle = await trio.open_tcp_stream("127.0.0.1", kafka_port)
            await role.shutdown()
            assert await idle.receive_some(10) == b""         # a Kafka connection is ended by the drain
            try:
                late = await trio.open_tcp_stream("127.0.0.1", kafka_port)
            except OSError:
                late = None
            assert late is None, "the Kafka listener still accepts after shutdown"
            assert kafka.statistics().open_connections == 0
            nursery.cancel_scope.cancel()
