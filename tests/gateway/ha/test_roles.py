"""brokerRole in a whole broker (runtime.BrokerRole + gateway/ha/service.py) on real sockets: SYNC_MASTER answers
SLAVE_NOT_AVAILABLE without a slave and SEND_OK once one acked; the slave refuses sends as RocketMQ does and
learns the master's HA address from the name server's REGISTER_BROKER answer."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import trio
from rokka.core.config import BrokerConfig
from rokka.gateway import runtime
from rokka.gateway.namesrv.server import NamesrvServer
from rokka.gateway.rocketmq.handlers import build_handlers
from rokka.net.remoting.client import Admin, NamesrvClient, Producer, RemotingClient
from rokka.net.remoting.codec.codes import RequestCode, ResponseCode
from rokka.net.remoting.codec.headers import to_ext
from rokka.net.remoting.codec.remoting import RemotingCommand


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _kafka_brokers(host: str, port: int) -> list[int]:
    """The ports of the brokers a Kafka client learns from ``host:port`` (kafka-python's metadata)."""
    from kafka import KafkaAdminClient

    admin = KafkaAdminClient(bootstrap_servers=f"{host}:{port}", request_timeout_ms=10000)
    try:
        return sorted(b["port"] for b in admin.describe_cluster()["brokers"])
    finally:
        admin.close()


def _kafka_partition(host: str, port: int, topic: str) -> tuple[int, list[int], list[int]]:
    """Partition 0's (leader, replicas, isr) in the Metadata ``host:port`` answers (kafka-python)."""
    from kafka import KafkaAdminClient

    admin = KafkaAdminClient(bootstrap_servers=f"{host}:{port}", request_timeout_ms=10000)
    try:
        [desc] = admin.describe_topics([topic])
        p0 = next(p for p in desc["partitions"] if p["partition_index"] == 0)
        return p0["leader_id"], list(p0["replica_nodes"]), list(p0["isr_nodes"])
    finally:
        admin.close()


def _kafka_acks_all(host: str, port: int) -> str:
    """One acks=all record with kafka-python (no retries): the error's class name, or "ok"."""
    from kafka import KafkaProducer

    prod = KafkaProducer(bootstrap_servers=f"{host}:{port}", acks="all", retries=0, linger_ms=0,
                         enable_idempotence=False, request_timeout_ms=10000, max_block_ms=10000)
    try:
        prod.send("T", b"kafka acks=all", partition=0).get(timeout=20)
        return "ok"
    except Exception as exc:  # noqa: BLE001 - the class name is the result
        return type(exc).__name__
    finally:
        prod.close()


def _cfg(tmp_path: Path, name: str, ns: str, **kw: object) -> BrokerConfig:
    kw.setdefault("broker_name", "broker-ha")
    return BrokerConfig(listen_port=0, kafka_listen_port=0, store_path_root_dir=str(tmp_path / name),
                        namesrv_addr=ns, ha_send_heartbeat_interval=500, **kw)  # type: ignore[arg-type]


async def test_sync_master_waits_for_its_slave_and_the_slave_refuses_sends(tmp_path: Path) -> None:
    with trio.fail_after(90):
        async with trio.open_nursery() as nursery:
            host, port = await nursery.start(NamesrvServer().serve, "127.0.0.1", 0)
            ns = f"{host}:{port}"
            master = runtime.BrokerRole(_cfg(tmp_path, "m", ns, broker_role="SYNC_MASTER",
                                             ha_listen_port=_free_port(), slave_timeout=3000))
            await nursery.start(master.run)
            maddr = f"{master.broker_addr[0]}:{master.broker_addr[1]}"
            async with RemotingClient() as rc:
                nsc = NamesrvClient(rc, [ns])
                await Admin(rc, nsc).create_topic(maddr, "T")
                while await nsc.get_route("T") is None:  # noqa: ASYNC110 - polls the name server
                    await trio.sleep(0.05)
                producer = Producer(rc, nsc, "pg", retries=0)
                # A SYNC_MASTER send waits for a slave: never run inline in the connection's reader (that
                # would hold every later request of the connection behind the slave's ack).
                send_handler = build_handlers(master.env)[RequestCode.SEND_MESSAGE]
                assert send_handler.inline(None) is False
                alone = await producer.send("T", b"no slave yet", queue=0)
                assert alone.status == "SLAVE_NOT_AVAILABLE"        # stored, but no slave has it
                kafka_alone = await trio.to_thread.run_sync(_kafka_acks_all, *master.kafka_addr)
                assert kafka_alone == "NotEnoughReplicasAfterAppendError"
                slave = runtime.BrokerRole(_cfg(tmp_path, "s", ns, broker_role="SLAVE", broker_id=1))
                await nursery.start(slave.run)
                while not master.ha.slaves or master.ha.ack_offset < 0:  # noqa: ASYNC110 - HA state
                    await trio.sleep(0.05)
                ok = await producer.send("T", b"replicated", queue=0)
                assert ok.status == "SEND_OK"
                sstore = slave.broker.store
                assert sstore.max_offset("T", 0) == 3            # every record, those before it too
                assert await trio.to_thread.run_sync(_kafka_acks_all, *master.kafka_addr) == "ok"
                saddr = f"{slave.broker_addr[0]}:{slave.broker_addr[1]}"
                ext = to_ext(producerGroup="pg", topic="T", defaultTopic="TBW102", defaultTopicQueueNums=4,
                             queueId=0, sysFlag=0, bornTimestamp=0, flag=0, properties="", reconsumeTimes=0)
                resp = await rc.invoke(saddr, RemotingCommand(RequestCode.SEND_MESSAGE, ext_fields=ext,
                                                              body=b"to the slave"))
                assert resp.code == ResponseCode.SERVICE_NOT_AVAILABLE
                assert "put to the slave" in (resp.remark or "")
                assert sstore.max_offset("T", 0) == 4
                # A PULL on the slave reads the replicated records; its commitOffset is not stored there.
                pull = to_ext(consumerGroup="cg", topic="T", queueId=0, queueOffset=0, maxMsgNums=32,
                              sysFlag=0x1 | 0x4, commitOffset=1, suspendTimeoutMillis=0, subscription="*",
                              subVersion=0, expressionType="TAG")
                resp = await rc.invoke(saddr, RemotingCommand(RequestCode.PULL_MESSAGE, ext_fields=pull))
                assert resp.code == ResponseCode.SUCCESS and resp.body
                assert slave.broker.offsets.query("cg", "T", 0) is None
                # Consumer offsets committed on the master reach the slave (SlaveSynchronize).
                master.broker.offsets.commit("cg2", "T", 0, 2)
                group = master.broker.sub_groups.get("cg2")
                group.retry_max_times = 3
                master.broker.sub_groups.put(group)
                master.broker.retention.set_config("T", "max.message.bytes", "4096")   # Kafka state too
                assert await slave.ha.sync.once()
                assert slave.broker.offsets.query("cg2", "T", 0) == 2
                assert slave.broker.retention.configs("T") == {"max.message.bytes": "4096"}
                assert slave.broker.sub_groups.get("cg2", create=False).retry_max_times == 3
                # So do the delay levels' offsets (syncDelayOffset): a promoted slave resumes delivering
                # where the master was, not from the start of SCHEDULE_TOPIC_XXXX (duplicates).
                assert (await producer.send("T", b"delayed 1 s", queue=0, delay_level=1)).status == "SEND_OK"
                with trio.fail_after(20):
                    while master.broker.schedule.offsets.get(1) != 1:  # noqa: ASYNC110 - delivered on the master
                        await trio.sleep(0.1)
                assert slave.broker.schedule.offsets.get(1) != 1
                assert await slave.ha.sync.once()
                assert slave.broker.schedule.offsets.get(1) == 1
                saved = json.loads((tmp_path / "s" / "config" / "delayOffset.json").read_text())
                assert saved["offsetTable"]["1"] == 1
                # The broker set's Kafka endpoint stays the master's (a slave publishes a replica entry).
                kv = await nsc.kv_list("ROKKA_KAFKA")
                assert str(master.kafka_addr[1]) in kv["broker-ha"]
                assert str(slave.kafka_addr[1]) not in kv["broker-ha"]
                assert slave.kafka is not None and master.kafka is not None
                mid, sid = master.kafka.node.node_id, slave.kafka.node.node_id
                assert mid != sid
                # Kafka clients see both brokers; the master leads, the slave is a replica in the ISR
                # (the master's own answer at once, the slave's from the ISR the master published).
                for asked in (master, slave):
                    with trio.fail_after(20):
                        while True:
                            await asked.kafka.view.refresh_brokers()
                            placed = await trio.to_thread.run_sync(_kafka_partition, *asked.kafka_addr, "T")
                            if placed == (mid, [mid, sid], [mid, sid]):
                                break
                            await trio.sleep(0.3)
                    # Only the leader is listed as a broker: clients send admin requests to brokers they
                    # know, and a slave takes no writes.
                    assert await trio.to_thread.run_sync(_kafka_brokers, *asked.kafka_addr) == [master.kafka_addr[1]]
                assert await trio.to_thread.run_sync(_kafka_acks_all, *slave.kafka_addr) == "ok"
            await master.shutdown()
            # With the master gone the slave names itself; a produce there: it leads nothing
            with trio.fail_after(30):
                while True:
                    await slave.kafka.view.refresh_brokers()
                    if "broker-ha" not in slave.kafka.view._live:
                        break
                    await trio.sleep(0.2)
            assert await trio.to_thread.run_sync(_kafka_brokers, *slave.kafka_addr) == [slave.kafka_addr[1]]
            placed = await trio.to_thread.run_sync(_kafka_partition, *slave.kafka_addr, "T")
            assert placed == (sid, [sid], [sid])
            refused = await trio.to_thread.run_sync(_kafka_acks_all, *slave.kafka_addr)
            assert refused == "NotLeaderForPartitionError", refused
            await slave.shutdown()
            nursery.cancel_scope.cancel()


async def test_an_async_master_starts_when_its_default_ha_port_is_taken(tmp_path: Path) -> None:
    with socket.socket() as blocker:
        blocker.bind(("127.0.0.1", 0))
        blocker.listen()
        port = blocker.getsockname()[1] - 1         # the broker's port; its HA port (port + 1) is taken
        for p in (port, port - 2):                  # the broker's port and its VIP port must be free
            with socket.socket() as probe:
                try:
                    probe.bind(("127.0.0.1", p))
                except OSError:
                    return                          # busy: nothing to show on this machine now
        with trio.fail_after(60):
            async with trio.open_nursery() as nursery:
                cfg = BrokerConfig(listen_port=port, kafka_listen_port=0, store_path_root_dir=str(tmp_path / "m"),
                                   broker_role="ASYNC_MASTER")
                role = runtime.BrokerRole(cfg)
                await nursery.start(role.run)
                assert role.ha is None and role.broker is not None
                await role.shutdown()
                plain = runtime.BrokerRole(BrokerConfig(listen_port=0, kafka_listen_port=0,
                                                        store_path_root_dir=str(tmp_path / "p")))
                await nursery.start(plain.run)
                assert plain.ha is None         # no brokerRole, no haListenPort: no HA port at all
                await plain.shutdown()
                nursery.cancel_scope.cancel()


def _set_min_isr(host: str, port: int, topic: str, value: str) -> None:
    from kafka import KafkaAdminClient
    from kafka.admin import ConfigResource, ConfigResourceType

    admin = KafkaAdminClient(bootstrap_servers=f"{host}:{port}", request_timeout_ms=10000)
    try:
        admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, topic, configs={"min.insync.replicas": value})])
    finally:
        admin.close()


async def test_async_master_acks_all_follows_the_isr_and_min_insync_replicas(tmp_path: Path) -> None:
    """ASYNC_MASTER answers RocketMQ sends at once, but a Kafka acks=all produce waits for the ISR: with
    min.insync.replicas above the ISR it is refused before anything is stored (NOT_ENOUGH_REPLICAS),
    with a caught-up slave it is acknowledged only once the slave has the bytes."""
    with trio.fail_after(90):
        async with trio.open_nursery() as nursery:
            host, port = await nursery.start(NamesrvServer().serve, "127.0.0.1", 0)
            ns = f"{host}:{port}"
            master = runtime.BrokerRole(_cfg(tmp_path, "m", ns, broker_role="ASYNC_MASTER",
                                             ha_listen_port=_free_port()))
            await nursery.start(master.run)
            maddr = f"{master.broker_addr[0]}:{master.broker_addr[1]}"
            async with RemotingClient() as rc:
                nsc = NamesrvClient(rc, [ns])
                await Admin(rc, nsc).create_topic(maddr, "T")
                assert master.kafka is not None
                mid = master.kafka.node.node_id
                await trio.to_thread.run_sync(_set_min_isr, *master.kafka_addr, "T", "2")
                # The ISR is the master alone: min.insync.replicas=2 refuses acks=all, stores nothing.
                assert await trio.to_thread.run_sync(_kafka_acks_all, *master.kafka_addr) == "NotEnoughReplicasError"
                assert master.broker.store.max_offset("T", 0) == 0
                assert await trio.to_thread.run_sync(_kafka_partition, *master.kafka_addr, "T") == (mid, [mid], [mid])
                slave = runtime.BrokerRole(_cfg(tmp_path, "s", ns, broker_role="SLAVE", broker_id=1))
                await nursery.start(slave.run)
                assert slave.kafka is not None
                sid = slave.kafka.node.node_id
                with trio.fail_after(20):
                    while master.kafka.view.replicas.local_isr() != [mid, sid]:  # noqa: ASYNC110 - HA + KV state
                        await master.kafka.view.refresh_brokers()
                        await trio.sleep(0.2)
                # Now acks=all succeeds, and the slave has the record when the answer comes.
                assert await trio.to_thread.run_sync(_kafka_acks_all, *master.kafka_addr) == "ok"
                assert slave.broker.store.max_offset("T", 0) == 1
                placed = await trio.to_thread.run_sync(_kafka_partition, *master.kafka_addr, "T")
                assert placed == (mid, [mid, sid], [mid, sid])
                await trio.to_thread.run_sync(_set_min_isr, *master.kafka_addr, "T", "3")
                assert await trio.to_thread.run_sync(_kafka_acks_all, *master.kafka_addr) == "NotEnoughReplicasError"
                # A RocketMQ send on an ASYNC_MASTER does not wait for the slave at all.
                producer = Producer(rc, nsc, "pg", retries=0)
                assert (await producer.send("T", b"rocketmq", queue=0)).status == "SEND_OK"
                await slave.shutdown()
                await trio.to_thread.run_sync(_set_min_isr, *master.kafka_addr, "T", "2")
                with trio.fail_after(20):
                    while master.ha.in_sync_peers():  # noqa: ASYNC110 - the slave's connection closes
                        await trio.sleep(0.1)
                assert await trio.to_thread.run_sync(_kafka_acks_all, *master.kafka_addr) == "NotEnoughReplicasError"
            await master.shutdown()
            nursery.cancel_scope.cancel()


def _kafka_read_all(host: str, port: int, topic: str, want: int) -> list[bytes]:
    """Every record of partition 0 of ``topic`` through a kafka-python consumer bootstrapped at host:port."""
    from kafka import KafkaConsumer, TopicPartition

    c = KafkaConsumer(bootstrap_servers=f"{host}:{port}", enable_auto_commit=False, auto_offset_reset="earliest",
                      consumer_timeout_ms=2000, request_timeout_ms=10000)
    try:
        c.assign([TopicPartition(topic, 0)])
        got: list[bytes] = []
        for _ in range(20):
            got += [m.value for m in c]
            if len(got) >= want:
                break
        return got
    finally:
        c.close()


async def test_another_set_names_the_slave_of_a_set_whose_master_is_down(tmp_path: Path) -> None:
    """Two broker sets (A: master + slave, B: master alone); A's master stops: B's Kafka Metadata leads A's
    partitions by A's slave and lists it as a broker, so a Kafka reader bootstrapped at B reads A's records
    from the slave; the controller is never the slave."""
    with trio.fail_after(120):
        async with trio.open_nursery() as nursery:
            host, port = await nursery.start(NamesrvServer().serve, "127.0.0.1", 0)
            ns = f"{host}:{port}"
            a_master = runtime.BrokerRole(_cfg(tmp_path, "am", ns, broker_role="SYNC_MASTER",
                                               ha_listen_port=_free_port(), broker_name="set-a"))
            await nursery.start(a_master.run)
            a_slave = runtime.BrokerRole(_cfg(tmp_path, "as", ns, broker_role="SLAVE", broker_id=1,
                                              broker_name="set-a"))
            await nursery.start(a_slave.run)
            b = runtime.BrokerRole(BrokerConfig(listen_port=0, kafka_listen_port=0, namesrv_addr=ns,
                                                store_path_root_dir=str(tmp_path / "b"), broker_name="set-b"))
            await nursery.start(b.run)
            assert a_master.kafka is not None and a_slave.kafka is not None and b.kafka is not None
            maddr = f"{a_master.broker_addr[0]}:{a_master.broker_addr[1]}"
            async with RemotingClient() as rc:
                nsc = NamesrvClient(rc, [ns])
                await Admin(rc, nsc).create_topic(maddr, "TA", read_queue_nums=1, write_queue_nums=1)
                while not a_master.ha.slaves or a_master.ha.ack_offset < 0:  # noqa: ASYNC110 - HA state
                    await trio.sleep(0.05)
                producer = Producer(rc, nsc, "pg", retries=0)
                for i in range(5):
                    assert (await producer.send("TA", b"r%d" % i, queue=0)).status == "SEND_OK"
            view = b.kafka.view
            with trio.fail_after(20):
                while (view.layout("TA") is None or view.replica_set("set-a")[0]
                       != a_master.kafka.node.node_id):
                    await view.refresh_brokers()
                    await view.ensure(["TA"], force=True)
                    await trio.sleep(0.2)
            await a_master.shutdown()
            sid = a_slave.kafka.node.node_id
            with trio.fail_after(30):       # both B and the slave see the master gone (3 s refreshes)
                while view.replica_set("set-a")[0] != sid or a_slave.kafka.view.set_leader().node_id != sid:
                    await view.refresh_brokers()
                    await a_slave.kafka.view.refresh_brokers()
                    await trio.sleep(0.2)
            placed = await trio.to_thread.run_sync(_kafka_partition, *b.kafka_addr, "TA")
            assert placed[0] == sid
            assert a_slave.kafka_addr[1] in await trio.to_thread.run_sync(_kafka_brokers, *b.kafka_addr)
            assert b.kafka.view.node.node_id == min(n.node_id for n in view.nodes().values())
            got = await trio.to_thread.run_sync(_kafka_read_all, *b.kafka_addr, "TA", 5)
            assert got == [b"r%d" % i for i in range(5)]
            await a_slave.shutdown()
            await b.shutdown()
            nursery.cancel_scope.cancel()
