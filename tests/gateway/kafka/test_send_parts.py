"""send_parts: scatter/gather sends over a real socket pair, partial sends included."""

from __future__ import annotations

import os

import pytest
import trio
import trio.lowlevel
from rokka.gateway.kafka.server import SENDMSG_MAX_BUFFERS, send_parts


async def _read_all(stream: trio.SocketStream, n: int) -> bytes:
    got = bytearray()
    while len(got) < n:
        chunk = await stream.receive_some(7919)      # small reads: the sender's sendmsg calls return short
        assert chunk, "closed early"
        got += chunk
        await trio.lowlevel.checkpoint()
    return bytes(got)


async def test_every_byte_arrives_in_order_across_partial_sends() -> None:
    sizes = [1, 61, 70_000, 3, 1 << 20, *([97] * (SENDMSG_MAX_BUFFERS + 40)), 250_000]
    parts: list[bytes | memoryview] = [os.urandom(n) for n in sizes]
    parts[3] = memoryview(bytearray(b"abc"))
    a, b = trio.socket.socketpair()
    with trio.fail_after(30):
        async with trio.SocketStream(a) as tx, trio.SocketStream(b) as rx, trio.open_nursery() as nursery:
            result: list[bytes] = []

            async def reader() -> None:
                result.append(await _read_all(rx, sum(sizes)))

            nursery.start_soon(reader)
            await send_parts(tx, parts)
    assert result == [b"".join(parts)]


async def test_a_closed_peer_is_a_broken_resource() -> None:
    a, b = trio.socket.socketpair()
    b.close()
    with trio.fail_after(10):
        async with trio.SocketStream(a) as tx:
            with pytest.raises(trio.BrokenResourceError):
                await send_parts(tx, [os.urandom(1 << 20), os.urandom(1 << 20)])
