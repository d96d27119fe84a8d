"""Client library end to end: NamesrvServer + the real broker (BrokerRole) on loopback.

Rules: ports 0 on 127.0.0.1, a tmp_path store, every test bounded by
``trio.fail_after``; the peer is the project's own broker, not a mock.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import rokka.gateway.runtime as runtime  # noqa: E402
import trio
from rokka.core.config import BrokerConfig
from rokka.gateway.namesrv.server import NamesrvServer
from rokka.net.remoting.client import (
    Admin,
    MessageQueue,
    NamesrvClient,
    OutMessage,
    Producer,
    PullConsumer,
    RemotingClient,
)


async def start_stack(nursery: trio.Nursery, root: Path) -> tuple[str, str, object]:
    ns = NamesrvServer()
    host, port = await nursery.start(ns.serve, "127.0.0.1", 0)
    ns_addr = f"{host}:{port}"
    cfg = BrokerConfig()
    cfg.listen_port = 0
    cfg.kafka_listen_port = 0
    cfg.store_path_root_dir = str(root)
    cfg.namesrv_addr = ns_addr
    role = runtime.BrokerRole(cfg)
    await nursery.start(role.run)
    store = role.broker.store
    # Integration gap at the time of writing: core.broker.Broker builds a DiskStore but never
    # opens it.  Open it here so the client can be exercised; harmless once Broker does it.
    if getattr(store, "_writable", True) is False:
        store.open()
    return ns_addr, f"{role.broker_addr[0]}:{role.broker_addr[1]}", role


async def test_produce_pull_offsets_admin(tmp_path: Path) -> None:
    with trio.fail_after(30):
        async with trio.open_nursery() as nursery:
            ns_addr, broker_addr, role = await start_stack(nursery, tmp_path)
            async with RemotingClient() as rc:
                ns = NamesrvClient(rc, [ns_addr])
                admin = Admin(rc, ns)
                await admin.create_topic(broker_addr, "T1", read_queue_nums=2, write_queue_nums=2)
                with trio.fail_after(5):
                    while await ns.get_route("T1") is None:
                        await trio.sleep(0.05)
                producer = Producer(rc, ns, "pg")
                r1 = await producer.send("T1", b"hello", tags="A", keys="k1", queue=0)
                assert r1.status == "SEND_OK" and r1.queue == MessageQueue("T1", r1.queue.broker_name, 0)
                assert r1.queue_offset == 0 and len(r1.offset_msg_id) == 32 and len(r1.msg_id) == 32
                batch = await producer.send_batch("T1", [b"b1", OutMessage(b"b2", tags="B")], queue=0)
                assert batch.queue_offset == 1 and batch.msg_id.count(",") == 1
                await producer.send_oneway("T1", b"oneway", queue=1)
                # Auto-created topic through the TBW102 fallback.
                auto = await producer.send("AUTO1", b"x")
                assert auto.status == "SEND_OK"

                consumer = PullConsumer(rc, ns, "cg")
                mq = MessageQueue("T1", r1.queue.broker_name, 0)
                pulled = await consumer.pull(mq, 0)
                assert pulled.found
                assert [m.body for m in pulled.messages] == [b"hello", b"b1", b"b2"]
                assert pulled.messages[0].tags == "A" and pulled.next_begin_offset == 3
                assert (await consumer.pull(mq, 3)).code == 19
                assert await consumer.max_offset(mq) == 3 and await consumer.min_offset(mq) == 0
                await consumer.update_offset(mq, 2)
                assert await consumer.query_offset(mq) == 2
                assert await consumer.search_offset(mq, 0) == 0
                queues = await consumer.fetch_subscribe_queues("T1")
                assert len(queues) == 2
                await consumer.heartbeat({"T1": "*"})
                assert consumer.client_id in await consumer.consumer_ids("T1")

                msg = await admin.view_message(r1.offset_msg_id)
                assert msg.body == b"hello"
                found = await admin.query_message(broker_addr, "T1", "k1")
                assert [m.body for m in found] == [b"hello"]
                stats = await admin.topic_stats(broker_addr, "T1")
                assert stats[mq]["maxOffset"] == 3
                configs = await admin.get_all_topic_config(broker_addr)
                assert "T1" in configs["topicConfigTable"]
                assert await admin.broker_runtime_info(broker_addr)
                locked = await admin.lock_batch_mq(broker_addr, "cg", consumer.client_id, [mq])
                assert locked == [mq]
                await admin.unlock_batch_mq(broker_addr, "cg", consumer.client_id, [mq])
                await admin.delete_topic("T1")
                assert await ns.get_route("T1") is None
            nursery.cancel_scope.cancel()
        role.broker.close()  # flush + checkpoint (role.shutdown also stops the Kafka listener)


async def test_a_connection_the_peer_resets_at_once_is_a_connect_error(monkeypatch: pytest.MonkeyPatch) -> None:
    # A broker restarting accepts and resets: when the reset arrives before the client has read the
    # peer's address (getpeername: ENOTCONN), the client reports ConnectError -- what its callers
    # retry (the Spark source's queue ranges) -- instead of a bare OSError.
    import errno
    import socket
    import struct

    from rokka.net.remoting.client.remoting import ConnectError

    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    real_open = trio.open_tcp_stream

    async def open_then_reset(host: str, port: int, **kw: object) -> trio.SocketStream:
        stream = await real_open(host, port, **kw)  # type: ignore[arg-type]
        peer, _ = listener.accept()
        peer.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        peer.close()                                       # RST
        for _ in range(200):                               # until the reset has landed
            try:
                stream.socket.getpeername()
            except OSError as exc:
                assert exc.errno == errno.ENOTCONN
                return stream
            await trio.sleep(0.005)
        raise AssertionError("the reset never landed")

    monkeypatch.setattr(trio, "open_tcp_stream", open_then_reset)
    try:
        with trio.fail_after(10):
            async with RemotingClient() as rc:
                with pytest.raises(ConnectError):
                    await rc.channel(f"127.0.0.1:{listener.getsockname()[1]}")
    finally:
        listener.close()
