"""Responses that become ready together leave in one write (issue 20: many small requests).

A server ``Channel`` on a real socket pair; its stream counts ``send_all`` calls (instrumentation of
the server's own socket, not a stand-in for the peer).  The peer is a plain ``RemotingConnection``
over the other socket.
"""

from __future__ import annotations

import trio
import trio.testing
from rokka.gateway.rocketmq.channel import Channel
from rokka.gateway.rocketmq.codec.remoting import RemotingCommand
from rokka.gateway.rocketmq.connection import RemotingConnection


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
