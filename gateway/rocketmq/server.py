"""Trio remoting server shared by the broker and the name server.

Theory of operation
-------------------
``RemotingServer`` binds one listener per requested port (the broker passes
``[broker_port, vip_port]``, the name server ``[9876]``; port 0 picks a free
one), reports the bound ``(host, port)`` list through ``task_status`` and
runs one ``Channel`` per accepted connection.  Everything protocol-related
(dispatch by request code, SYSTEM_BUSY / NOT_SUPPORTED / SYSTEM_ERROR
answers, idle timeout, protocol violations closing only their connection)
is in ``channel.py``; this module only accepts, tracks and stops.

Stopping: ``stop()`` (or ``await aclose()``) stops accepting, waits up to
``grace_s`` for in-flight requests to finish, then closes every channel;
``serve`` returns when all connection tasks are done.  Cancelling ``serve``
instead closes everything at once.

Handlers are looked up per request in the live ``handlers`` mapping, so
``register()`` works while serving.

Budgets: every accepted socket asks the ``Budget`` (``rokka.net.budget``;
shared by all listeners of the process when the runtime passes one) for a
lease before anything is read; a refused one is closed at once (the refusal
is logged, rate-limited).  The channel reports its unfinished frame to the
lease, finishes frames within ``frameTimeoutSeconds`` and bounds the
responses a non-reading peer makes it hold.
"""

from __future__ import annotations

import errno
from collections.abc import Mapping
from dataclasses import dataclass

import structlog
import trio
from rokka.gateway.rocketmq.tls import RemotingTls
from rokka.net.budget import Budget
from rokka.net.remoting.channel import Channel, ClosedCallback, Handler, HostPort
from rokka.net.remoting.codec.remoting import DEFAULT_MAX_FRAME_BYTES

log = structlog.get_logger(__name__)

_ACCEPT_CAPACITY_ERRNOS = {errno.EMFILE, errno.ENFILE, errno.ENOMEM, errno.ENOBUFS}


@dataclass(frozen=True, slots=True)
class ServerStatistics:
    name: str
    addresses: tuple[HostPort, ...]
    connections: int
    inflight: int
    accepted_total: int


class RemotingServer:
    """Accepts remoting connections and dispatches requests to ``handlers``.

    Args:
        handlers: request code -> ``async handler(channel, cmd)`` returning the
            response (or ``None`` for no reply).
        name: label used in logs and channel ids.
        max_frame_bytes: limit on a frame's length prefix (16 MiB like Java).
        idle_timeout_s: close connections silent for this long (Java: 120 s).
        max_inflight: concurrent requests per connection before SYSTEM_BUSY.
        on_channel_closed: called with the ``Channel`` when a connection ends.
        budget: connection and memory budget (default: a private one with default limits).
        tls: ``tls.server.mode`` and certificates (``rokka.gateway.rocketmq.tls``; None: plaintext only).
    """

    def __init__(
        self,
        handlers: Mapping[int, Handler],
        *,
        name: str,
        max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES,
        idle_timeout_s: float | None = 120.0,
        max_inflight: int = 1024,
        write_timeout_s: float = 30.0,
        on_channel_closed: ClosedCallback | None = None,
        budget: Budget | None = None,
        tls: RemotingTls | None = None,
    ) -> None:
        self.handlers: dict[int, Handler] = dict(handlers)
        self.name = name
        self._max_frame_bytes = max_frame_bytes
        self._idle_timeout_s = idle_timeout_s
        self._max_inflight = max_inflight
        self._write_timeout_s = write_timeout_s
        self._on_channel_closed = on_channel_closed
        self.budget = budget if budget is not None else Budget()
        self.tls = tls
        self._classifying: set[trio.CancelScope] = set()
        self._channels: dict[str, Channel] = {}
        self._addresses: tuple[HostPort, ...] = ()
        self._accepted = 0
        self._stop = trio.Event()
        self._stopped = trio.Event()
        self._grace_s = 5.0
        self._log = log.bind(server=name)

    # -- public ----------------------------------------------------------------
    def register(self, code: int, handler: Handler) -> None:
        self.handlers[int(code)] = handler

    @property
    def channels(self) -> list[Channel]:
        return list(self._channels.values())

    @property
    def addresses(self) -> tuple[HostPort, ...]:
        return self._addresses

    def statistics(self) -> ServerStatistics:
        return ServerStatistics(
            name=self.name, addresses=self._addresses, connections=len(self._channels),
            inflight=sum(c.inflight for c in self._channels.values()), accepted_total=self._accepted)

    def stop(self, grace_s: float = 5.0) -> None:
        """Begin a graceful stop (non-blocking)."""
        self._grace_s = grace_s
        self._stop.set()

    async def wait_stopped(self) -> None:
        """Wait until ``serve`` has returned (after ``stop`` or cancellation)."""
        await self._stopped.wait()

    async def aclose(self, grace_s: float = 5.0) -> None:
        """Graceful stop, waiting until ``serve`` has finished."""
        self.stop(grace_s)
        await self._stopped.wait()

    async def serve(self, host: str | None, ports: list[int], *,
                    task_status: trio.TaskStatus[list[HostPort]] = trio.TASK_STATUS_IGNORED) -> None:
        """Bind every port, report ``[(host, port), ...]`` via ``task_status``, serve until stopped."""
        listeners: list[trio.SocketListener] = []
        try:
            for port in ports:
                listeners += await trio.open_tcp_listeners(port, host=host)
            self._addresses = tuple(
                (str(ln.socket.getsockname()[0]), int(ln.socket.getsockname()[1])) for ln in listeners)
            self._log.info("listening", addresses=self._addresses)
            async with trio.open_nursery() as conn_nursery:
                async with trio.open_nursery() as accept_nursery:
                    for listener in listeners:
                        accept_nursery.start_soon(self._accept_loop, listener, conn_nursery)
                    task_status.started(list(self._addresses))
                    await self._stop.wait()
                    accept_nursery.cancel_scope.cancel()
                await self._drain()
        finally:
            with trio.CancelScope(shield=True):
                for listener in listeners:
                    await trio.aclose_forcefully(listener)
            self._stopped.set()

    # -- internals -------------------------------------------------------------------
    async def _drain(self) -> None:
        with trio.move_on_after(self._grace_s):
            while any(c.inflight for c in self._channels.values()):  # noqa: ASYNC110 - counts live in many channels
                await trio.sleep(0.01)
        for scope in list(self._classifying):
            scope.cancel()
        for channel in list(self._channels.values()):
            channel.close()

    async def _accept_loop(self, listener: trio.SocketListener, conn_nursery: trio.Nursery) -> None:
        while True:
            try:
                stream = await listener.accept()
            except OSError as exc:
                if exc.errno in _ACCEPT_CAPACITY_ERRNOS:
                    self._log.error("rocketmq.accept_failed_backing_off", error=str(exc))
                    await trio.sleep(0.1)
                    continue
                raise
            self._accepted += 1
            conn_nursery.start_soon(self._handle_stream, stream)

    async def _handle_stream(self, stream: trio.SocketStream) -> None:
        try:
            peer = stream.socket.getpeername()
        except OSError as exc:  # peer already gone
            self._log.info("rocketmq.connection_lost_before_setup", error=str(exc))
            await trio.aclose_forcefully(stream)
            return
        lease = self.budget.admit(self.name, (str(peer[0]), int(peer[1])))
        if lease is None:
            await trio.aclose_forcefully(stream)
            return
        limits = self.budget.limits
        served: trio.abc.Stream = stream
        if self.tls is not None:    # tls.server.mode: TLS / plaintext by the first byte
            accepted = None
            with trio.CancelScope() as scope:   # a stop cancels connections not yet serving
                self._classifying.add(scope)
                accepted = await self.tls.accept(stream, f"{peer[0]}:{peer[1]}", self._idle_timeout_s)
            self._classifying.discard(scope)
            if accepted is None:
                lease.release()
                await trio.aclose_forcefully(stream)
                return
            served = accepted
        try:
            channel = Channel(
                served, handlers=self.handlers, name=self.name, max_frame_bytes=self._max_frame_bytes,
                max_inflight=self._max_inflight, idle_timeout_s=self._idle_timeout_s,
                write_timeout_s=self._write_timeout_s, on_closed=self._channel_closed, lease=lease,
                frame_timeout_s=limits.frame_timeout_s, max_pending_write_bytes=limits.max_pending_write_bytes)
        except OSError as exc:  # peer already gone (getpeername fails)
            lease.release()
            self._log.info("rocketmq.connection_lost_before_setup", error=str(exc))
            await trio.aclose_forcefully(stream)
            return
        self._channels[channel.id] = channel
        self._log.debug("rocketmq.connection_accepted", channel=channel.id)
        await channel.run()

    async def _channel_closed(self, channel: Channel) -> None:
        self._channels.pop(channel.id, None)
        self._log.debug("connection closed", channel=channel.id)
        if self._on_channel_closed is not None:
            result = self._on_channel_closed(channel)
            if hasattr(result, "__await__"):
                await result
