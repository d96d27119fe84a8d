"""Responses that become ready together leave in one write; sends that complete without waiting are served
by the reader itself (issue 20: many small requests).

A server ``Channel`` on a real socket pair; its stream counts ``send_all`` calls (instrumentation of
the server's own socket, not a stand-in for the peer).  The peer is a plain ``RemotingConnection``
over the other socket.
"""

from __future__ import annotations

from pathlib import Path

import trio
import trio.testing
from rokka.core.broker import Broker
from rokka.core.config import BrokerConfig
from rokka.net.remoting.channel import Channel
from rokka.net.remoting.codec.codes import RequestCode
from rokka.net.remoting.codec.remoting import RemotingCommand
from rokka.net.remoting.connection import RemotingConnection
from rokka.gateway.rocketmq.handlers import build_handlers
from rokka.gateway.rocketmq.handlers.context import BrokerEnv


class CountingStream(trio.abc.HalfCloseableStream):
    def __init__(self, inner: trio.SocketStream) -> None:
        self.inner = inner
        self.writes = 0

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        self.writes += 1
        await self.inner.send_all(data)

    async def wait_send_all_might_not_block(self) -> None:
        await self.inner.wait_send_all_might_not_block()

    async def receive_some(self, max_bytes: int | None = None) -> bytes | bytearray:
        return await self.inner.receive_some(max_bytes)

    async def send_eof(self) -> None:
        await self.inner.send_eof()

    async def aclose(self) -> None:
        await self.inner.aclose()


async def _responses(peer: trio.SocketStream, conn: RemotingConnection, n: int) -> list[RemotingCommand]:
    got: list[RemotingCommand] = []
    while len(got) < n:
        data = await peer.receive_some(65536)
        assert data, "server closed the connection"
        got += conn.receive_data(data)
    return got


async def test_parked_responses_leave_in_few_writes() -> None:
    n = 50
    release, all_parked = trio.Event(), trio.Event()
    parked = 0

    async def slow(channel: Channel, cmd: RemotingCommand) -> RemotingCommand:
        nonlocal parked
        parked += 1
        if parked == n:
            all_parked.set()
        await release.wait()
        return cmd.make_response(0, remark=str(cmd.opaque), body=cmd.body)

    a, b = trio.socket.socketpair()
    server_stream = CountingStream(trio.SocketStream(a))
    peer = trio.SocketStream(b)
    conn = RemotingConnection()
    with trio.fail_after(20):
        async with trio.open_nursery() as nursery:
            channel = Channel(server_stream, handlers={11: slow}, name="t")
            nursery.start_soon(channel.run)
            await peer.send_all(b"".join(conn.start_request(RemotingCommand(code=11, body=bytes([i])))
                                         for i in range(n)))
            await all_parked.wait()
            release.set()
            got = await _responses(peer, conn, n)
            assert sorted(int(r.remark or 0) for r in got) == list(range(1, n + 1))
            assert all(r.body == bytes([int(r.remark or 0) - 1]) for r in got)
            # the first response goes alone, the other 49 queue behind it and share the next write
            assert server_stream.writes <= 5, server_stream.writes
            channel.close()
            await peer.aclose()


async def _broker_channel_sends(tmp_path: Path, flush: str, n: int) -> tuple[list[RemotingCommand], int, bool]:
    """``n`` pipelined sends in one write to a broker channel: (responses, server writes, send inline?)."""
    cfg = BrokerConfig(listen_port=0, kafka_listen_port=0, store_path_root_dir=str(tmp_path / "store"),
                       flush_disk_type=flush)
    broker = Broker(cfg)
    broker.topics.ensure("T", 1)
    try:
        async with trio.open_nursery() as nursery:
            await nursery.start(broker.run)
            handlers = build_handlers(BrokerEnv(broker, "127.0.0.1:0", nursery=nursery))
            a, b = trio.socket.socketpair()
            server_stream = CountingStream(trio.SocketStream(a))
            peer = trio.SocketStream(b)
            conn = RemotingConnection()
            channel = Channel(server_stream, handlers=handlers, name="t")
            nursery.start_soon(channel.run)
            ext = {"a": "PG", "b": "T", "c": "TBW102", "d": "4", "e": "0", "f": "0", "g": "0", "h": "0",
                   "i": "TAGS\x01x\x02", "j": "0", "k": "false"}
            await peer.send_all(b"".join(conn.start_request(RemotingCommand(RequestCode.SEND_MESSAGE_V2,
                                                                            ext_fields=ext, body=b"b%d" % i))
                                         for i in range(n)))
            got = await _responses(peer, conn, n)
            inline = bool(getattr(handlers[RequestCode.SEND_MESSAGE_V2], "inline", lambda c: False)(got[0]))
            channel.close()
            await peer.aclose()
            await broker.stop_background()
            nursery.cancel_scope.cancel()
    finally:
        broker.close()
    return got, server_stream.writes, inline


async def test_pipelined_sends_are_answered_inline_in_one_write_per_read(tmp_path: Path) -> None:
    """ASYNC_FLUSH: a send completes without waiting, so the reader serves it itself and the responses
    of one read leave in one write, each with its own queue offset."""
    with trio.fail_after(30):
        got, writes, inline = await _broker_channel_sends(tmp_path, "ASYNC_FLUSH", 40)
    assert inline
    assert all(r.code == 0 for r in got), [(r.code, r.remark) for r in got]
    assert sorted(int(r.ext_fields["queueOffset"]) for r in got) == list(range(40))
    assert writes <= 3, writes


async def test_sync_flush_sends_are_not_inline(tmp_path: Path) -> None:
    """SYNC_FLUSH: a send waits for its group commit, so it runs in a task of its own (sends wait together)."""
    with trio.fail_after(30):
        got, _, inline = await _broker_channel_sends(tmp_path, "SYNC_FLUSH", 20)
    assert not inline
    assert sorted(int(r.ext_fields["queueOffset"]) for r in got) == list(range(20))


async def test_close_ends_a_write_the_peer_never_reads() -> None:
    """A write is shielded from its caller's cancellation, but close() still ends it at once (not only the
    write timeout)."""
    started = trio.Event()

    async def big(channel: Channel, cmd: RemotingCommand) -> RemotingCommand:
        started.set()
        return cmd.make_response(0, body=b"z" * (16 << 20))    # far more than the socket buffers hold

    a, b = trio.socket.socketpair()
    peer = trio.SocketStream(b)
    conn = RemotingConnection()
    with trio.fail_after(20):
        async with trio.open_nursery() as nursery:
            channel = Channel(trio.SocketStream(a), handlers={11: big}, name="t", write_timeout_s=600)
            nursery.start_soon(channel.run)
            await peer.send_all(conn.start_request(RemotingCommand(code=11)))
            await started.wait()
            await trio.sleep(0.2)       # the response is now stuck in a write nobody reads
            channel.close()
            with trio.fail_after(5):
                await channel.wait_closed()
            await peer.aclose()
