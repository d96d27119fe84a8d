"""``TlsSocketStream``: TLS over an accepted or connected socket, for the remoting channel of either end
(the broker's listeners in ``rokka.gateway.rocketmq.tls``, the client library's connections)."""

from __future__ import annotations

import ssl
from typing import Any

import trio


class TlsSocketStream(trio.abc.Stream):
    """A ``trio.SSLStream`` over a socket stream, exposing ``socket`` (for ``Channel``)."""

    def __init__(self, transport: trio.SocketStream, context: ssl.SSLContext, *, server_side: bool,
                 server_hostname: str | None = None) -> None:
        self.transport = transport
        self.socket = transport.socket
        self.ssl = trio.SSLStream(transport, context, server_side=server_side, server_hostname=server_hostname,
                                  https_compatible=True)

    async def do_handshake(self) -> None:
        await self.ssl.do_handshake()

    def getpeercert(self) -> dict[str, Any] | None:
        return self.ssl.getpeercert()

    async def receive_some(self, max_bytes: int | None = None) -> bytes:
        return await self.ssl.receive_some(max_bytes)

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        await self.ssl.send_all(data)

    async def wait_send_all_might_not_block(self) -> None:
        await self.ssl.wait_send_all_might_not_block()

    async def aclose(self) -> None:
        await self.ssl.aclose()
