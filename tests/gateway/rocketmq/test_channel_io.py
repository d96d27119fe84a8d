"""The channel's socket fast paths (``channel.py``: direct ``recv`` / ``send`` on the descriptor, the idle
watchdog) and the frame splitter they feed (``FrameDecoder.split``), over real loopback sockets.

Rules as ``test_server.py``: servers on 127.0.0.1 port 0, every test bounded by ``trio.fail_after``,
raw peers speaking bytes, no mocks, no timed assertions.
"""

from __future__ import annotations

import socket
import struct

import pytest
import trio
from hypothesis import given, settings
from hypothesis import strategies as st
from rokka.net.remoting.channel import Channel
from rokka.net.remoting.codec import RemotingCommand, ResponseCode
from rokka.net.remoting.codec.errors import RemoteProtocolError
from rokka.net.remoting.codec.remoting import FrameDecoder

from tests.gateway.rocketmq.test_server import RawPeer, echo, start


def _frames(payloads: list[bytes]) -> bytes:
    return b"".join(struct.pack(">i", len(p)) + p for p in payloads)


def _by_next_payload(chunks: list[bytes], limit: int) -> list[bytes]:
    dec, out = FrameDecoder(limit), []
    for chunk in chunks:
        dec.feed(chunk)
        while (p := dec.next_payload()) is not None:
            out.append(p)
    return out


@settings(max_examples=200, deadline=None)
@given(st.lists(st.binary(min_size=4, max_size=40), max_size=8), st.lists(st.integers(0, 400), max_size=6))
def test_split_yields_what_next_payload_yields(payloads: list[bytes], cuts: list[int]) -> None:
    """Frames cut at any boundaries come out of ``split`` whole, in order, and the rest stays buffered,
    exactly as feeding the same chunks to ``next_payload`` gives them."""
    data = _frames(payloads)
    bounds = sorted({0, len(data), *(c % (len(data) + 1) for c in cuts)})
    chunks = [data[a:b] for a, b in zip(bounds, bounds[1:], strict=False)]
    dec, got = FrameDecoder(1 << 20), []
    for chunk in chunks:
        got += dec.split(chunk)
    assert got == payloads == _by_next_payload(chunks, 1 << 20)
    assert dec.buffered == 0


@pytest.mark.parametrize("prefix", [b"", _frames([b"okay"])])
def test_split_refuses_a_length_out_of_bounds_before_buffering_it(prefix: bytes) -> None:
    dec = FrameDecoder(100)
    with pytest.raises(RemoteProtocolError, match="exceeds the limit"):
        dec.split(prefix + struct.pack(">i", 101) + b"x")
    with pytest.raises(RemoteProtocolError, match="smaller than 4"):
        FrameDecoder(100).split(prefix + struct.pack(">i", 3))


async def inline_echo(channel: Channel, cmd: RemotingCommand) -> RemotingCommand:
    return cmd.make_response(ResponseCode.SUCCESS, body=cmd.body)


inline_echo.inline = lambda cmd: True  # type: ignore[attr-defined]


async def test_pipelined_burst_larger_than_one_read_is_answered_in_order() -> None:
    """Thousands of requests in one burst, served in the reader (``inline``): reads fill their buffer (the
    reader reads again at once, and yields between reads), every request is answered once, in order."""
    with trio.fail_after(60):
        async with trio.open_nursery() as nursery:
            server, addr = await start(nursery, {10: inline_echo})
            peer = await RawPeer.connect(addr)
            n = 3000
            burst = b"".join(peer.conn.start_request(RemotingCommand(code=10, body=b"%06d" % i)) for i in range(n))
            assert len(burst) > 4 * 65536
            nursery.start_soon(peer.stream.send_all, burst)
            bodies = [(await peer.next()).body for _ in range(n)]
            assert bodies == [b"%06d" % i for i in range(n)]
            await server.aclose()


async def test_response_larger_than_the_socket_buffer_reaches_a_late_reader_whole() -> None:
    """A response the kernel cannot take at once: the rest goes through the coalesced, timed write path
    and arrives intact (no other frame cut into it), beside the other response, once the peer reads."""
    big = bytes(range(256)) * (32 * 1024)        # 8 MiB

    async def large(channel: Channel, cmd: RemotingCommand) -> RemotingCommand:
        return cmd.make_response(ResponseCode.SUCCESS, body=big if cmd.body == b"big" else cmd.body)

    with trio.fail_after(60):
        async with trio.open_nursery() as nursery:
            server, addr = await start(nursery, {10: large})
            peer = await RawPeer.connect(addr)
            await peer.stream.send_all(peer.conn.start_request(RemotingCommand(code=10, body=b"big")))
            await peer.stream.send_all(peer.conn.start_request(RemotingCommand(code=10, body=b"small")))
            await trio.sleep(0.2)       # let the server fill the socket buffer before anything is read
            answers = {(await peer.next()).body for _ in range(2)}     # each in its own task: any order
            assert answers == {big, b"small"}
            await server.aclose()


async def test_idle_watchdog_spares_a_connection_that_keeps_talking(autojump_clock: trio.testing.MockClock) -> None:
    """The idle timeout counts one wait, not the connection's age: requests every 100 s on a 120 s timeout
    keep it open for 10 minutes; then silence closes it after 120 s."""
    with trio.fail_after(2000):
        async with trio.open_nursery() as nursery:
            server, addr = await start(nursery, {10: echo}, idle_timeout_s=120)
            peer = await RawPeer.connect(addr)
            for i in range(6):
                await trio.sleep(100)
                assert (await peer.request(RemotingCommand(code=10, body=b"%d" % i))).body == b"%d" % i
            quiet_since = trio.current_time()
            await peer.wait_eof()
            assert trio.current_time() - quiet_since >= 120
            await server.aclose()


async def test_requests_read_before_the_peer_left_are_served_when_a_write_finds_it_gone() -> None:
    """A peer that resets its connection (a close with answers unread) leaves oneway requests behind it: the
    write that finds it gone does not end the reader, which still serves what the peer sent before it left."""
    release, all_served, served = trio.Event(), trio.Event(), []

    async def parked(channel: Channel, cmd: RemotingCommand) -> RemotingCommand:
        await release.wait()
        return cmd.make_response(ResponseCode.SUCCESS)

    async def note(channel: Channel, cmd: RemotingCommand) -> None:
        served.append(cmd.body)
        if len(served) == 3:
            all_served.set()

    with trio.fail_after(20):
        async with trio.open_nursery() as nursery:
            server, addr = await start(nursery, {10: parked, 11: note}, max_inflight=1)
            peer = await RawPeer.connect(addr)
            oneways = [peer.conn.start_request(RemotingCommand(code=11, body=b"%d" % i), oneway=True)
                       for i in range(3)]
            # one request in flight (the slot), then three oneways the reader must hold back (backpressure)
            await peer.stream.send_all(peer.conn.start_request(RemotingCommand(code=10)) + b"".join(oneways))
            while not any(c.inflight for c in server._channels.values()):  # noqa: ASYNC110 - the parked one was read
                await trio.sleep(0.01)
            peer.stream.socket.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            peer.stream.socket.close()                  # reset: its answer can no longer be written
            release.set()
            await all_served.wait()
            assert served == [b"0", b"1", b"2"]
            await server.aclose()
