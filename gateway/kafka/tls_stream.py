"""Server-side TLS stream for the Kafka listener, built for bulk reads and writes.

Theory of operation
-------------------
An ``ssl.SSLObject`` over two memory BIOs sits on a ``trio.SocketStream``.  ``receive_some`` reads
the socket once (up to the size asked for, plus room for TLS framing), then decrypts *every*
complete record that read brought and returns the plaintext in one piece.  trio's own
``SSLStream`` returns one TLS record per call (OpenSSL's ``SSL_read``), and librdkafka writes a
Produce request as many small records (~2.6 KiB each measured), so a 1 MiB request took ~400
trips through the scheduler and the request loop; here it takes one per socket read.
``send_parts`` encrypts a response's buffers in chunks of up to ``SEND_CHUNK`` (small neighbours
joined, so records stay large) and sends the ciphertext as it accumulates.

One task uses a stream at a time (the Kafka connection loop reads, handles, then writes), so
there is no send/receive conflict detection.  Whatever OpenSSL wants to send while reading
(TLS 1.3 KeyUpdate answers, session tickets after the handshake) is flushed right away.  A peer that
closes without close_notify (most Kafka clients simply close the socket) reads as EOF, as one that
says goodbye.  Protocol and certificate failures raise ``trio.BrokenResourceError`` with the
``ssl.SSLError`` as ``__cause__``.
"""

from __future__ import annotations

import ssl
from collections.abc import Sequence
from typing import Any

import trio

__all__ = ["SEND_CHUNK", "TlsStream"]

#: Plaintext bytes per ``SSLObject.write`` (TLS cuts them into 16 KiB records) and per socket send.
SEND_CHUNK = 256 * 1024
#: Bytes asked of the socket per read, at least: room for many records plus their framing.
RECEIVE_MIN = 256 * 1024


class TlsStream(trio.abc.Stream):
    def __init__(self, transport: trio.SocketStream, context: ssl.SSLContext) -> None:
        self.transport = transport
        self._incoming = ssl.MemoryBIO()
        self._outgoing = ssl.MemoryBIO()
        self._ssl = context.wrap_bio(self._incoming, self._outgoing, server_side=True)
        self._eof = False

    def getpeercert(self) -> dict[str, Any] | None:
        return self._ssl.getpeercert()

    async def do_handshake(self) -> None:
        """Complete the server handshake; BrokenResourceError (cause: the ssl error, or None at EOF)."""
        while True:
            try:
                self._ssl.do_handshake()
            except ssl.SSLWantReadError:
                await self._flush()
                if not await self._fill(RECEIVE_MIN):
                    raise trio.BrokenResourceError("connection closed during the TLS handshake") from None
                continue
            except ssl.SSLError as exc:
                try:                            # the alert telling the client why, when it can go
                    await self._flush()
                except trio.BrokenResourceError:
                    pass
                raise trio.BrokenResourceError(str(exc)) from exc
            await self._flush()
            return

    async def receive_some(self, max_bytes: int | None = None) -> bytes:
        limit = max_bytes or RECEIVE_MIN
        while True:
            chunks: list[bytes] = []
            have = 0
            try:
                while have < limit:
                    chunk = self._ssl.read(limit - have)
                    if not chunk:           # close_notify received
                        self._eof = True
                        break
                    chunks.append(chunk)
                    have += len(chunk)
            except ssl.SSLWantReadError:
                pass
            except (ssl.SSLZeroReturnError, ssl.SSLEOFError):
                self._eof = True
            except ssl.SSLError as exc:
                raise trio.BrokenResourceError(str(exc)) from exc
            if self._outgoing.pending:
                await self._flush()
            if chunks:
                return chunks[0] if len(chunks) == 1 else b"".join(chunks)
            if self._eof:
                return b""
            if not await self._fill(max(limit + limit // 16, RECEIVE_MIN)):
                self._eof = True
                return b""

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        await self.send_parts([data])

    async def send_parts(self, parts: Sequence[Any]) -> None:
        """Encrypt and send ``parts`` in order (a response frame's buffers)."""
        batch: list[Any] = []
        size = 0
        for part in parts:
            view = memoryview(part).cast("B")
            if len(view) >= SEND_CHUNK:
                await self._write(batch)
                batch, size = [], 0
                for off in range(0, len(view), SEND_CHUNK):
                    await self._write([view[off:off + SEND_CHUNK]])
                continue
            batch.append(view)
            size += len(view)
            if size >= SEND_CHUNK:
                await self._write(batch)
                batch, size = [], 0
        await self._write(batch)

    async def _write(self, batch: list[Any]) -> None:
        if not batch:
            return
        try:
            self._ssl.write(batch[0] if len(batch) == 1 else b"".join(batch))
        except ssl.SSLError as exc:
            raise trio.BrokenResourceError(str(exc)) from exc
        await self._flush()

    async def wait_send_all_might_not_block(self) -> None:
        await self.transport.wait_send_all_might_not_block()

    async def aclose(self) -> None:
        """close_notify when the socket takes it, then close the socket (also when cancelled)."""
        try:
            try:
                self._ssl.unwrap()
            except (ssl.SSLWantReadError, ssl.SSLError):
                pass
            await self._flush()
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass
        finally:
            await self.transport.aclose()

    async def _flush(self) -> None:
        data = self._outgoing.read()
        if data:
            await self.transport.send_all(data)

    async def _fill(self, max_bytes: int) -> bool:
        """One socket read into the incoming BIO; False at EOF."""
        data = await self.transport.receive_some(max_bytes)
        if not data:
            self._incoming.write_eof()
            return False
        self._incoming.write(data)
        return True
