"""Send back-pressure (issue 27): SYSTEM_BUSY with Java's remarks, nothing written, recovery after.

A real broker (``Broker`` on a temp store, its flush service running, the RocketMQ handlers behind a
``RemotingServer`` on 127.0.0.1 port 0) and real remoting clients.  A stalled CommitLog write-back
is a flush hook (the store's own API, run in the flush thread before the fsync) that waits until the
test lets it go, as a slow disk would.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest
import rokka.net.remoting.channel as channel_mod
import trio
from rokka.core.broker import Broker
from rokka.core.config import BrokerConfig
from rokka.net.remoting.channel import Channel
from rokka.net.remoting.client import RemotingClient
from rokka.net.remoting.client.producer import V1_TO_V2_SEND
from rokka.net.remoting.codec.codes import RequestCode, ResponseCode
from rokka.net.remoting.codec.headers import to_ext
from rokka.net.remoting.codec.remoting import RemotingCommand
from rokka.net.remoting.connection import RemotingConnection
from rokka.gateway.rocketmq.handlers import build_handlers
from rokka.gateway.rocketmq.handlers.context import BrokerEnv
from rokka.gateway.rocketmq.handlers.flow import SendGate
from rokka.gateway.rocketmq.server import RemotingServer

TOPIC = "BusyTopic"
REMARK_OVERLOAD = "[OVERLOAD]system busy, start flow control for a while"


@dataclass
class Stack:
    broker: Broker
    server: RemotingServer
    addr: str
    stall: threading.Event      # set = the write-back may go on
    stalling: threading.Event   # set by the hook while it holds a write-back


@asynccontextmanager
async def broker_stack(root: Path, **cfg_kw: object) -> AsyncIterator[Stack]:
    cfg = BrokerConfig(listen_port=0, kafka_listen_port=0, store_path_root_dir=str(root / "store"), **cfg_kw)
    broker = Broker(cfg)
    broker.topics.ensure(TOPIC, 1)
    stall, stalling = threading.Event(), threading.Event()
    stall.set()

    def hook() -> None:
        if not stall.is_set():
            stalling.set()
            stall.wait(30)

    broker.store.add_flush_hook(hook)
    try:
        async with trio.open_nursery() as nursery:
            await nursery.start(broker.run)
            ctx = BrokerEnv(broker, "127.0.0.1:0", nursery=nursery)
            server = RemotingServer(build_handlers(ctx), name="broker")
            (host, port), *_ = await nursery.start(server.serve, "127.0.0.1", [0])
            yield Stack(broker, server, f"{host}:{port}", stall, stalling)
            stall.set()
            await server.aclose()
            await broker.stop_background()
            nursery.cancel_scope.cancel()
    finally:
        stall.set()
        broker.close()


def send_cmd(body: bytes) -> RemotingCommand:
    v1 = to_ext(producerGroup="PG", topic=TOPIC, defaultTopic="TBW102", defaultTopicQueueNums=4, queueId=0,
                sysFlag=0, bornTimestamp=int(time.time() * 1000), flag=0, reconsumeTimes=0, unitMode=False)
    return RemotingCommand(RequestCode.SEND_MESSAGE_V2, body=body,
                           ext_fields={V1_TO_V2_SEND[k]: v for k, v in v1.items()})


def stored_bodies(broker: Broker) -> list[bytes]:
    res = broker.store.get_messages(TOPIC, 0, 0, 1000, max_bytes=1 << 20)
    out = []
    for off in res.queue_offsets:
        units = broker.store.cq_units(TOPIC, 0, off, 1)
        msg = broker.store.read_message(units[0].commitlog_offset)
        assert msg is not None
        out.append(msg.body)
    return out


async def test_full_send_queue_answers_overload_then_recovers(tmp_path: Path) -> None:
    """SYNC_FLUSH sends wait for their group commit; with the write-back stalled, the queue (4) fills
    and every further send is refused with [OVERLOAD] and writes nothing."""
    with trio.fail_after(30):
        async with broker_stack(tmp_path, flush_disk_type="SYNC_FLUSH", send_thread_pool_queue_capacity=4) as st, \
                RemotingClient(timeout_s=20) as rc:
            st.stall.clear()
            answers: dict[int, RemotingCommand] = {}
            eight = trio.Event()

            async def one(i: int) -> None:
                answers[i] = await rc.invoke(st.addr, send_cmd(b"m%d" % i), 20)
                if len(answers) == 8:
                    eight.set()

            async with trio.open_nursery() as nursery:
                for i in range(12):
                    nursery.start_soon(one, i)
                with trio.fail_after(10):
                    await eight.wait()      # the 8 beyond the queue are answered at once
                assert st.broker.store_busy_s() > 0         # the write-back is still held
                # a consumer's send-back goes through the same queue (Java's send pool runs both)
                back_cmd = RemotingCommand(RequestCode.CONSUMER_SEND_MSG_BACK,
                                           ext_fields={"offset": "0", "group": "CG", "delayLevel": "0"})
                back = await rc.invoke(st.addr, back_cmd, 20)
                assert (back.code, back.remark) == (ResponseCode.SYSTEM_BUSY, REMARK_OVERLOAD)
                # mqadmin brokerStatus shows the queue
                info = await rc.invoke(st.addr, RemotingCommand(RequestCode.GET_BROKER_RUNTIME_INFO), 20)
                table = json.loads(info.body)["table"]
                assert (table["sendThreadPoolQueueSize"], table["sendThreadPoolQueueCapacity"]) == ("4", "4")
                st.stall.set()
            busy = {i: r for i, r in answers.items() if r.code == ResponseCode.SYSTEM_BUSY}
            ok = {i: r for i, r in answers.items() if r.code == ResponseCode.SUCCESS}
            assert len(busy) == 8 and len(ok) == 4, {i: (r.code, r.remark) for i, r in answers.items()}
            assert {r.remark for r in busy.values()} == {REMARK_OVERLOAD}
            # recovery: the queue is empty again, a send goes through
            again = await rc.invoke(st.addr, send_cmd(b"after"), 20)
            assert again.code == ResponseCode.SUCCESS, again.remark
            # every acknowledged message is stored, nothing refused was written
            assert sorted(stored_bodies(st.broker)) == sorted([b"m%d" % i for i in ok] + [b"after"])
            assert st.server.statistics().inflight == 0


async def test_stalled_write_back_answers_rejectrequest(tmp_path: Path) -> None:
    """A CommitLog write-back running longer than osPageCacheBusyTimeOutMills: the store is busy and a new
    send gets [REJECTREQUEST]; once it ends, sends go through again."""
    with trio.fail_after(30):
        async with broker_stack(tmp_path, flush_disk_type="SYNC_FLUSH", os_page_cache_busy_time_out_mills=50,
                                sync_flush_timeout=20_000) as st, RemotingClient(timeout_s=20) as rc:
            st.stall.clear()
            first: list[RemotingCommand] = []

            async def parked() -> None:
                first.append(await rc.invoke(st.addr, send_cmd(b"first"), 20))

            async with trio.open_nursery() as nursery:
                nursery.start_soon(parked)
                await trio.to_thread.run_sync(st.stalling.wait, 10)
                await trio.sleep(0.15)      # the write-back has now run past the 50 ms limit
                assert st.broker.store_busy_s() > 0.1
                busy = await rc.invoke(st.addr, send_cmd(b"refused"), 20)
                assert busy.code == ResponseCode.SYSTEM_BUSY
                assert busy.remark == "[REJECTREQUEST]system busy, start flow control for a while"
                st.stall.set()
            assert first[0].code == ResponseCode.SUCCESS
            again = await rc.invoke(st.addr, send_cmd(b"after"), 20)
            assert again.code == ResponseCode.SUCCESS, again.remark
            assert stored_bodies(st.broker) == [b"first", b"after"]


async def test_send_that_waited_in_queue_answers_timeout_clean_queue(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """A send that waited waitTimeMillsInSendQueue or longer between being read and being served gets
    [TIMEOUT_CLEAN_QUEUE] with its time in the queue.  Here it waits behind a request whose body fills the
    connection's budget for bodies in service (the reader holds the send until that request ends)."""
    monkeypatch.setattr(channel_mod, "MAX_INFLIGHT_BYTES", 1000)
    release = trio.Event()

    async def holder(channel: Channel, cmd: RemotingCommand) -> RemotingCommand:
        await release.wait()
        return cmd.make_response(0)

    with trio.fail_after(30):
        async with broker_stack(tmp_path, wait_time_mills_in_send_queue=100) as st:
            st.server.register(9999, holder)
            host, port = st.addr.split(":")
            stream = await trio.open_tcp_stream(host, int(port))
            conn = RemotingConnection()
            # one write: both frames are read together; the send waits for the holder's body budget
            await stream.send_all(conn.start_request(RemotingCommand(code=9999, body=b"h" * 1000))
                                  + conn.start_request(send_cmd(b"late")))
            await trio.sleep(0.3)       # the queued send ages past the limit
            release.set()
            got: list[RemotingCommand] = []
            while len(got) < 2:
                data = await stream.receive_some(65536)
                assert data
                got += conn.receive_data(data)
            send = next(r for r in got if r.opaque == 2)
            assert send.code == ResponseCode.SYSTEM_BUSY, (send.code, send.remark)
            assert send.remark is not None
            assert send.remark.startswith("[TIMEOUT_CLEAN_QUEUE]broker busy, start flow control for a while, "
                                          "period in queue: ")
            assert int(send.remark.split("period in queue: ")[1].split("ms")[0]) >= 100
            assert stored_bodies(st.broker) == []
            # nothing waits any more: the next send is served
            await stream.send_all(conn.start_request(send_cmd(b"on time")))
            got = []
            while not got:
                data = await stream.receive_some(65536)
                assert data
                got += conn.receive_data(data)
            assert got[0].code == ResponseCode.SUCCESS, got[0].remark
            assert stored_bodies(st.broker) == [b"on time"]
            await stream.aclose()


def test_config_keys_from_broker_conf(tmp_path: Path) -> None:
    from rokka.core.config import load_broker_conf

    conf = tmp_path / "broker.conf"
    conf.write_text("sendThreadPoolQueueCapacity=16\nosPageCacheBusyTimeOutMills=300\n"
                    "waitTimeMillsInSendQueue=50\nbrokerFastFailureEnable=false\n")
    cfg, unknown = load_broker_conf(conf)
    assert unknown == []
    assert (cfg.send_thread_pool_queue_capacity, cfg.os_page_cache_busy_time_out_mills,
            cfg.wait_time_mills_in_send_queue, cfg.broker_fast_failure_enable) == (16, 300, 50, False)
    assert BrokerConfig().send_thread_pool_queue_capacity == 10_000


async def test_lone_send_late_only_for_a_busy_event_loop_is_served(tmp_path: Path) -> None:
    """A send with nothing queued ahead of it is at the head of an empty queue: Java's idle send thread
    takes it at once, so a late event loop (a loaded 2-core machine) alone never makes it SYSTEM_BUSY.
    Queued behind other sends, or held by its connection's reader, the same wait is refused."""
    async with broker_stack(tmp_path, wait_time_mills_in_send_queue=100) as st:
        gate = SendGate(st.broker)
        late = send_cmd(b"late")
        late.received_at = time.monotonic() - 0.5
        assert gate.refusal(late, ("127.0.0.1", 1)) is None
        late.held = True
        remark = gate.refusal(late, ("127.0.0.1", 1))
        assert remark is not None and remark.startswith("[TIMEOUT_CLEAN_QUEUE]")
        late.held = False
        gate.inflight = 1
        remark = gate.refusal(late, ("127.0.0.1", 1))
        assert remark is not None and remark.startswith("[TIMEOUT_CLEAN_QUEUE]")
        assert "size of queue: 1" in remark
        gate.inflight = 0
        on_time = send_cmd(b"on time")
        on_time.received_at = time.monotonic()
        on_time.held = True
        assert gate.refusal(on_time, ("127.0.0.1", 1)) is None
