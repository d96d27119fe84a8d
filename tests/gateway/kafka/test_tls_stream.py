"""TlsStream against trio's own TLS client over a real socket pair (certificates from trustme).

Bounded by trio.fail_after; no timing assertions.
"""

from __future__ import annotations

import ssl
from collections.abc import AsyncIterator

import pytest
import trio
import trustme
from rokka.gateway.kafka.tls_stream import SEND_CHUNK, TlsStream


@pytest.fixture
def contexts() -> tuple[ssl.SSLContext, ssl.SSLContext]:
    ca = trustme.CA()
    server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ca.issue_cert("rokka.test").configure_cert(server)
    client = ssl.create_default_context()
    ca.configure_trust(client)
    return server, client


async def handshaken(contexts: tuple[ssl.SSLContext, ssl.SSLContext]) -> tuple[TlsStream, trio.SSLStream]:
    """Our server stream and trio's client over a socket pair, both past the handshake."""
    a, b = trio.socket.socketpair()
    server = TlsStream(trio.SocketStream(a), contexts[0])
    client = trio.SSLStream(trio.SocketStream(b), contexts[1], server_hostname="rokka.test")
    with trio.fail_after(20):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(server.do_handshake)
            nursery.start_soon(client.do_handshake)
    return server, client


@pytest.fixture
async def pair(contexts: tuple[ssl.SSLContext, ssl.SSLContext]) -> AsyncIterator[tuple[TlsStream, trio.SSLStream]]:
    server, client = await handshaken(contexts)
    yield server, client
    with trio.move_on_after(2):
        await server.aclose()
        await client.aclose()


async def test_many_small_records_come_out_in_one_read(pair: tuple[TlsStream, trio.SSLStream]) -> None:
    server, client = pair
    with trio.fail_after(20):
        for i in range(20):             # one TLS record each, as librdkafka writes a request
            await client.send_all(bytes([i]) * 1000)
        got = await server.receive_some(1 << 20)
        assert got == b"".join(bytes([i]) * 1000 for i in range(20))


async def test_receive_respects_max_bytes(pair: tuple[TlsStream, trio.SSLStream]) -> None:
    server, client = pair
    with trio.fail_after(20):
        await client.send_all(b"a" * 50_000)
        first = await server.receive_some(10_000)
        rest = b""
        while len(first) + len(rest) < 50_000:
            rest += await server.receive_some(1 << 20)
        assert len(first) <= 10_000 and first + rest == b"a" * 50_000


async def test_send_parts_keeps_order_and_bytes(pair: tuple[TlsStream, trio.SSLStream]) -> None:
    server, client = pair
    parts: list[bytes | memoryview] = [b"head", bytes(range(256)) * 4, memoryview(b"z" * (SEND_CHUNK * 3 + 17)), b"",
                                       bytearray(b"tail") * 1000]
    want = b"".join(bytes(p) for p in parts)
    got = bytearray()
    with trio.fail_after(20):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(server.send_parts, parts)
            while len(got) < len(want):
                got += await client.receive_some(1 << 20)
    assert bytes(got) == want


async def test_close_notify_and_plain_close_read_as_eof(
        contexts: tuple[ssl.SSLContext, ssl.SSLContext], pair: tuple[TlsStream, trio.SSLStream]) -> None:
    server, client = pair
    with trio.fail_after(20):
        await client.send_all(b"bye")
        async with trio.open_nursery() as nursery:
            nursery.start_soon(client.aclose)       # close_notify, then waits for ours or EOF
            assert await server.receive_some(100) == b"bye"
            assert await server.receive_some(100) == b""
            await server.aclose()
    # A client that just drops the socket.  TLS 1.2: under 1.3 the server's session tickets follow
    # the handshake, and a socket closed with them unread is reset (a BrokenResourceError, as on a
    # plaintext connection) rather than closed.
    contexts[1].maximum_version = ssl.TLSVersion.TLSv1_2
    server, client = await handshaken(contexts)
    with trio.fail_after(20):
        await client.transport_stream.aclose()
        assert await server.receive_some(100) == b""
        await server.aclose()


async def test_garbage_and_plaintext_are_broken(contexts: tuple[ssl.SSLContext, ssl.SSLContext]) -> None:
    a, b = trio.socket.socketpair()
    server = TlsStream(trio.SocketStream(a), contexts[0])
    plain = trio.SocketStream(b)
    with trio.fail_after(20):
        await plain.send_all(b"\x00\x00\x00\x10" + b"\x00" * 16)      # a Kafka frame, not a ClientHello
        with pytest.raises(trio.BrokenResourceError) as info:
            await server.do_handshake()
        assert isinstance(info.value.__cause__, ssl.SSLError)
        await server.aclose()
        await plain.aclose()
