"""Trio remoting client: a pool of ``Channel``s keyed by ``"host:port"``.

Theory of operation
-------------------
``RemotingClient`` is an async context manager owning a nursery; each
outgoing connection is a ``Channel`` (the same class the server uses) whose
reader runs in that nursery.  ``invoke`` sends a two-way request and returns
the response command whatever its code; ``invoke_ok`` raises
``ResponseError`` unless the code is expected.  Requests the broker sends to
us (NOTIFY_CONSUMER_IDS_CHANGED, CHECK_TRANSACTION_STATE ...) go to
``handlers``; unknown ones are answered REQUEST_CODE_NOT_SUPPORTED unless
oneway.

Connections are opened lazily (one per address, guarded by a per-address
lock) and replaced when closed.  Errors surface as ``ConnectError``,
``RequestTimeoutError`` or ``ChannelClosedError``; all are ``ClientError``
subclasses or re-exported here.
"""

from __future__ import annotations

import ssl
from collections.abc import Mapping
from types import TracebackType

import structlog
import trio
from rokka.net.remoting.channel import Channel, ChannelClosedError, Handler, RequestTimeoutError
from rokka.net.remoting.codec.codes import DEFAULT_VERSION, ResponseCode
from rokka.net.remoting.codec.remoting import DEFAULT_MAX_FRAME_BYTES, RemotingCommand

log = structlog.get_logger(__name__)

__all__ = ["ChannelClosedError", "ClientError", "ConnectError", "NoRouteError", "RemotingClient", "RequestTimeoutError",
           "ResponseError", "split_addr"]


class ClientError(Exception):
    """Base of errors raised by the client library (besides timeouts/closed channels)."""


class NoRouteError(ClientError):
    """The name servers know no route for a topic (yet: a restarting broker re-registers within seconds)."""


class ConnectError(ClientError):
    """Could not connect to an address."""


class ResponseError(ClientError):
    """The peer answered with an unexpected response code.

    Attributes: ``code``, ``remark`` and the full ``response`` command.
    """

    def __init__(self, response: RemotingCommand, what: str = "") -> None:
        self.code = response.code
        self.remark = response.remark
        self.response = response
        try:
            name = ResponseCode(response.code).name
        except ValueError:
            name = str(response.code)
        super().__init__(f"{what + ': ' if what else ''}{name} ({response.code}): {response.remark}")


def split_addr(addr: str) -> tuple[str, int]:
    """``"host:port"`` or ``"[v6]:port"`` -> (host, port)."""
    host, _, port = addr.rpartition(":")
    if not host or not port.isdigit():
        raise ValueError(f"bad address {addr!r}, expected host:port")
    return host.strip("[]"), int(port)


class RemotingClient:
    """Connection pool + request/response by opaque.

    Args:
        handlers: request code -> handler for requests the server sends us.
        connect_timeout_s: TCP connect timeout.
        timeout_s: default request timeout.
        language / version: what our request headers claim (Java 4.9.7 by default).
        credentials: (accessKey, secretKey): every request is signed as RocketMQ's
            ``AclClientRPCHook`` does (brokers with ``aclEnable``).
        tls: an ``ssl.SSLContext`` (``rokka.gateway.rocketmq.tls.client_context`` builds one): every
            connection speaks TLS, as Java's ``tls.enable=true``; the handshake is bounded by
            ``connect_timeout_s`` and a failed one raises ``ConnectError``.

    Use as ``async with RemotingClient() as client: ...``.
    """

    def __init__(self, *, handlers: Mapping[int, Handler] | None = None, connect_timeout_s: float = 3.0,
                 timeout_s: float = 3.0, max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES,
                 language: str = "JAVA", version: int = DEFAULT_VERSION,
                 credentials: tuple[str, str] | None = None, tls: ssl.SSLContext | None = None) -> None:
        self.tls = tls
        self.handlers: dict[int, Handler] = dict(handlers or {})
        self.credentials = credentials
        self.connect_timeout_s = connect_timeout_s
        self.timeout_s = timeout_s
        self.language = language
        self.version = version
        self._max_frame_bytes = max_frame_bytes
        self._channels: dict[str, Channel] = {}
        self._locks: dict[str, trio.Lock] = {}
        self._nursery: trio.Nursery | None = None
        self._cm = None

    async def __aenter__(self) -> RemotingClient:
        self._cm = trio.open_nursery()
        self._nursery = await self._cm.__aenter__()
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> bool | None:
        self.close_all()
        assert self._cm is not None and self._nursery is not None
        self._nursery.cancel_scope.cancel()
        self._nursery = None
        return await self._cm.__aexit__(exc_type, exc, tb)

    def close_all(self) -> None:
        for channel in self._channels.values():
            channel.close()
        self._channels.clear()

    def close(self, addr: str) -> None:
        channel = self._channels.pop(addr, None)
        if channel is not None:
            channel.close()

    async def channel(self, addr: str) -> Channel:
        """The open channel to ``addr``, connecting if needed.

        Raises:
            ConnectError: the TCP connect failed or timed out.
        """
        channel = self._channels.get(addr)
        if channel is not None and not channel.closed:
            return channel
        if self._nursery is None:
            raise ClientError("RemotingClient used outside 'async with'")
        lock = self._locks.setdefault(addr, trio.Lock())
        async with lock:
            channel = self._channels.get(addr)
            if channel is not None and not channel.closed:
                return channel
            host, port = split_addr(addr)
            try:
                with trio.fail_after(self.connect_timeout_s):
                    stream: trio.abc.Stream = await trio.open_tcp_stream(host, port)
                    if self.tls is not None:
                        stream = await self._tls_handshake(stream, host)
            except (OSError, trio.TooSlowError, trio.BrokenResourceError) as exc:
                raise ConnectError(f"cannot connect to {addr}: {exc!r}") from None
            try:
                channel = Channel(stream, handlers=self.handlers, name="client",
                                  max_frame_bytes=self._max_frame_bytes, idle_timeout_s=None)
            except OSError as exc:  # the peer reset it at once (a broker restarting): getpeername fails
                await trio.aclose_forcefully(stream)
                raise ConnectError(f"cannot connect to {addr}: {exc!r}") from None
            await self._nursery.start(channel.run)
            self._channels[addr] = channel
            return channel

    async def _tls_handshake(self, stream: trio.abc.Stream, host: str) -> trio.abc.Stream:
        from rokka.net.remoting.tls_stream import TlsSocketStream

        assert isinstance(stream, trio.SocketStream) and self.tls is not None
        tls = TlsSocketStream(stream, self.tls, server_side=False,
                              server_hostname=host if self.tls.check_hostname else None)
        try:
            await tls.do_handshake()
        except BaseException:
            await trio.aclose_forcefully(stream)
            raise
        return tls

    def _stamp(self, cmd: RemotingCommand) -> RemotingCommand:
        cmd.language = self.language
        cmd.version = self.version
        if self.credentials is not None:
            from rokka.net.remoting.signing import ACCESS_KEY, SIGNATURE, sign

            access_key, secret_key = self.credentials
            ext = dict(cmd.ext_fields or {})
            ext.pop(SIGNATURE, None)
            ext[ACCESS_KEY] = access_key
            ext[SIGNATURE] = sign(ext, cmd.body, secret_key)
            cmd.ext_fields = ext
        return cmd

    async def invoke(self, addr: str, cmd: RemotingCommand, timeout_s: float | None = None) -> RemotingCommand:
        """Send ``cmd`` to ``addr`` and return the response (any code).

        Raises:
            ConnectError, RequestTimeoutError, ChannelClosedError.
        """
        channel = await self.channel(addr)
        return await channel.send_request(self._stamp(cmd), timeout_s or self.timeout_s)

    async def invoke_ok(self, addr: str, cmd: RemotingCommand, timeout_s: float | None = None,
                        ok: tuple[int, ...] = (ResponseCode.SUCCESS,)) -> RemotingCommand:
        """Like ``invoke`` but raises ``ResponseError`` unless the code is in ``ok``."""
        resp = await self.invoke(addr, cmd, timeout_s)
        if resp.code not in ok:
            raise ResponseError(resp, f"request {cmd.code} to {addr}")
        return resp

    async def invoke_oneway(self, addr: str, cmd: RemotingCommand) -> None:
        """Send ``cmd`` with the oneway flag; no response is read."""
        channel = await self.channel(addr)
        await channel.send_oneway(self._stamp(cmd))
