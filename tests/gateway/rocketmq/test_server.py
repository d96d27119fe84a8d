"""RemotingServer + Channel over real loopback sockets.

Rules: servers bind 127.0.0.1 port 0 and are started with ``nursery.start``;
every test is bounded by ``trio.fail_after``; peers are raw sockets speaking
bytes through ``RemotingConnection`` (no mocks).
"""

from __future__ import annotations

import struct

import trio
from rokka.net.remoting.channel import Channel
from rokka.net.remoting.codec import (
    FLAG_ONEWAY,
    REMARK_SYSTEM_BUSY,
    RemotingCommand,
    ResponseCode,
    encode_command,
)
from rokka.net.remoting.connection import RemotingConnection
from rokka.gateway.rocketmq.server import RemotingServer


class RawPeer:
    """A test peer: a socket plus a sans-IO connection."""

    def __init__(self, stream: trio.SocketStream) -> None:
        self.stream = stream
        self.conn = RemotingConnection()
        self.ready: list[RemotingCommand] = []     # frames read ahead (one read may hold several)

    @classmethod
    async def connect(cls, addr: tuple[str, int]) -> RawPeer:
        return cls(await trio.open_tcp_stream(*addr))

    async def request(self, cmd: RemotingCommand) -> RemotingCommand:
        await self.stream.send_all(self.conn.start_request(cmd))
        return await self.next()

    async def next(self) -> RemotingCommand:
        while not self.ready:
            data = await self.stream.receive_some(65536)
            assert data, "connection closed"
            self.ready += self.conn.receive_data(data)
        return self.ready.pop(0)

    async def wait_eof(self) -> None:
        while True:
            try:
                data = await self.stream.receive_some(65536)
            except trio.BrokenResourceError:
                return
            if not data:
                return


async def echo(channel: Channel, cmd: RemotingCommand) -> RemotingCommand:
    return cmd.make_response(ResponseCode.SUCCESS, remark=channel.peer[0], body=cmd.body)


async def boom(channel: Channel, cmd: RemotingCommand) -> RemotingCommand:
    raise ValueError("kaboom")


async def start(nursery: trio.Nursery, handlers: dict, **kw: object) -> tuple[RemotingServer, tuple[str, int]]:
    server = RemotingServer(handlers, name="test", **kw)  # type: ignore[arg-type]
    addrs = await nursery.start(server.serve, "127.0.0.1", [0])
    return server, addrs[0]


async def test_echo_unknown_and_exception() -> None:
    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            server, addr = await start(nursery, {10: echo, 11: boom})
            peer = await RawPeer.connect(addr)
            resp = await peer.request(RemotingCommand(code=10, body=b"hi"))
            assert resp.code == 0 and resp.body == b"hi" and resp.remark == "127.0.0.1"
            resp = await peer.request(RemotingCommand(code=999))
            assert resp.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED
            assert resp.remark == " request type 999 not supported"
            resp = await peer.request(RemotingCommand(code=11))
            assert resp.code == ResponseCode.SYSTEM_ERROR and resp.remark == "kaboom"
            resp = await peer.request(RemotingCommand(code=10, body=b"still alive"))
            assert resp.body == b"still alive"
            assert server.statistics().connections == 1
            await peer.stream.aclose()
            await server.aclose()


async def test_bad_header_field_is_system_error() -> None:
    from rokka.net.remoting.codec import Header

    async def needs_topic(channel: Channel, cmd: RemotingCommand) -> RemotingCommand:
        Header(cmd).str("topic")
        return cmd.make_response(0)

    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            server, addr = await start(nursery, {30: needs_topic})
            peer = await RawPeer.connect(addr)
            resp = await peer.request(RemotingCommand(code=30))
            assert resp.code == 1 and resp.remark == "the custom field <topic> is null"
            await server.aclose()


async def test_oneway_gets_no_reply() -> None:
    seen: list[int] = []

    async def record(channel: Channel, cmd: RemotingCommand) -> RemotingCommand:
        seen.append(cmd.code)
        return cmd.make_response(0)

    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            server, addr = await start(nursery, {15: record, 10: echo})
            peer = await RawPeer.connect(addr)
            await peer.stream.send_all(peer.conn.start_request(RemotingCommand(code=15), oneway=True))
            await peer.stream.send_all(
                encode_command(RemotingCommand(code=999, opaque=77, flag=FLAG_ONEWAY)))
            # The next thing we read must be the echo, not a reply to the oneways.
            resp = await peer.request(RemotingCommand(code=10, body=b"after"))
            assert resp.body == b"after"
            assert seen == [15]
            await server.aclose()


async def test_garbage_closes_only_that_connection() -> None:
    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            server, addr = await start(nursery, {10: echo}, max_frame_bytes=4096)
            good = await RawPeer.connect(addr)
            assert (await good.request(RemotingCommand(code=10, body=b"1"))).body == b"1"
            bad = await RawPeer.connect(addr)
            await bad.stream.send_all(struct.pack(">ii", 12, 99) + b"garbage!")
            await bad.wait_eof()
            huge = await RawPeer.connect(addr)
            await huge.stream.send_all(struct.pack(">i", 1 << 20))
            await huge.wait_eof()
            assert (await good.request(RemotingCommand(code=10, body=b"2"))).body == b"2"
            await server.aclose()


async def test_overload_answers_system_busy() -> None:
    release = trio.Event()

    async def slow(channel: Channel, cmd: RemotingCommand) -> RemotingCommand:
        await release.wait()
        return cmd.make_response(0)

    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            server, addr = await start(nursery, {11: slow}, max_inflight=2)
            peer = await RawPeer.connect(addr)
            for _ in range(3):
                await peer.stream.send_all(peer.conn.start_request(RemotingCommand(code=11)))
            busy = await peer.next()
            assert busy.code == ResponseCode.SYSTEM_BUSY and busy.remark == REMARK_SYSTEM_BUSY
            assert busy.opaque == 3
            release.set()
            assert {(await peer.next()).opaque for _ in range(2)} == {1, 2}
            await server.aclose()


async def test_idle_timeout_closes(autojump_clock: trio.testing.MockClock) -> None:
    with trio.fail_after(1000):
        async with trio.open_nursery() as nursery:
            server, addr = await start(nursery, {10: echo}, idle_timeout_s=120)
            peer = await RawPeer.connect(addr)
            await peer.wait_eof()
            assert trio.current_time() >= 120
            await server.aclose()


async def test_broker_to_client_request_and_close_callback() -> None:
    closed: list[str] = []
    channels: list[Channel] = []
    ready = trio.Event()

    async def hello(channel: Channel, cmd: RemotingCommand) -> RemotingCommand:
        channels.append(channel)
        ready.set()
        return cmd.make_response(0)

    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            server, addr = await start(nursery, {34: hello},
                                       on_channel_closed=lambda ch: closed.append(ch.id))
            peer = await RawPeer.connect(addr)
            assert (await peer.request(RemotingCommand(code=34))).code == 0
            await ready.wait()
            [channel] = channels
            assert channel.local[1] == addr[1] and channel.peer[0] == "127.0.0.1"

            async def client_side() -> None:
                req = await peer.next()
                assert req.code == 307 and not req.is_response
                # C++ answers server-initiated requests with flag 3.
                reply = RemotingCommand(code=0, opaque=req.opaque, flag=3, body=b"running-info")
                await peer.stream.send_all(encode_command(reply))

            nursery.start_soon(client_side)
            resp = await channel.send_request(RemotingCommand(code=307), timeout_s=5)
            assert resp.body == b"running-info"
            await channel.send_oneway(RemotingCommand(code=40, ext_fields={"consumerGroup": "g"}))
            note = await peer.next()
            assert note.code == 40 and note.is_oneway
            await peer.stream.aclose()
            await channel.wait_closed()
            with trio.fail_after(5):
                while not closed:
                    await trio.sleep(0.01)
            assert closed == [channel.id]
            assert server.statistics().connections == 0
            await server.aclose()


async def test_send_request_timeout_and_channel_close() -> None:
    from rokka.net.remoting.channel import ChannelClosedError, RequestTimeoutError

    got: list[Channel] = []

    async def hello(channel: Channel, cmd: RemotingCommand) -> RemotingCommand:
        got.append(channel)
        return cmd.make_response(0)

    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            server, addr = await start(nursery, {34: hello})
            peer = await RawPeer.connect(addr)
            await peer.request(RemotingCommand(code=34))
            channel = got[0]
            try:
                await channel.send_request(RemotingCommand(code=307), timeout_s=0.05)
                raise AssertionError("expected timeout")
            except RequestTimeoutError:
                pass

            async def close_soon() -> None:
                await trio.sleep(0.05)
                await peer.stream.aclose()

            nursery.start_soon(close_soon)
            try:
                await channel.send_request(RemotingCommand(code=307), timeout_s=5)
                raise AssertionError("expected closed")
            except ChannelClosedError:
                pass
            await server.aclose()


async def test_graceful_stop_lets_inflight_finish() -> None:
    started = trio.Event()

    async def slowish(channel: Channel, cmd: RemotingCommand) -> RemotingCommand:
        started.set()
        await trio.sleep(0.1)
        return cmd.make_response(0, remark="done")

    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            server, addr = await start(nursery, {11: slowish})
            peer = await RawPeer.connect(addr)
            await peer.stream.send_all(peer.conn.start_request(RemotingCommand(code=11)))
            await started.wait()
            server.stop(grace_s=5)
            resp = await peer.next()
            assert resp.remark == "done"
            await peer.wait_eof()
        try:
            await trio.open_tcp_stream(*addr)
            raise AssertionError("still accepting")
        except OSError:
            pass


async def test_multiple_ports() -> None:
    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            server = RemotingServer({10: echo}, name="multi")
            addrs = await nursery.start(server.serve, "127.0.0.1", [0, 0])
            assert len(addrs) == 2 and addrs[0][1] != addrs[1][1]
            for addr in addrs:
                peer = await RawPeer.connect(addr)
                assert (await peer.request(RemotingCommand(code=10, body=b"p"))).body == b"p"
            server.stop()
