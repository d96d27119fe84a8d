"""Trio glue for the Kafka listener: sockets <-> KafkaServerConnection <-> handlers.

Theory of operation
-------------------
One task per TCP connection.  It reads bytes (with an idle timeout), feeds the
sans-IO connection, and for each decoded request awaits the registered
handler and writes the response *before* touching the next request.  That is
Kafka's ordering guarantee (kafka-wire.md §1.1): responses leave in request
order, and a handler that parks (Fetch long-poll, JoinGroup) blocks only its
own connection.  One exception to "write before the next": responses of quick
APIs (``Route.quick``: Metadata, ListOffsets, ...; ApiVersions) from one read are held and
leave with the next response in one send (still in order, never behind a
handler that may park).

A response is encoded as a list of buffers (``encode_response_parts``: record
batches of a Fetch stay where the handler made them) and a frame of several
buffers leaves by ``sendmsg`` (``send_parts``), never joined into one copy.

Routing is a dict api_key -> ``Route(handler, min_version, max_version)``.
ApiVersions is answered here and is *derived* from the routes (clipped to
what the codec can speak), so we never advertise an API nobody implements.  The routes are built
from the registry (``rokka.gateway.kafka.apis.routes``): which APIs are quick, which may come before
SASL authentication and who may call them under ACLs is said there, once per API.

Failure policy:

* ``KafkaProtocolError`` from the codec (garbage, unknown api, bad version, anything a hostile
  body trips) -> one warning line with the hint (no traceback), close this connection;
* ``KafkaError(code)`` from a handler -> reply with ``error_code=code`` when
  the response has a top-level error_code at that version, else close;
* any other handler exception -> log with traceback, close this connection
  (all three kinds of lines are rate-limited per peer address).
  Nothing escapes to ``serve_listeners`` (that would kill the server).

Produce with acks=0 never gets a reply; a handler returning ``None`` sends
nothing either.  throttle_time_ms is left at its default 0 everywhere.

SASL (``sasl`` = enabled mechanisms + users, see ``rokka.gateway.kafka.sasl``): each connection
gets a session (``sasl.new_session``, in ``conn_state``); the SASL layer's two routes
(SaslHandshake, SaslAuthenticate: ``Route.pre_auth``) run the exchange; until the session has a
principal, any API not marked ``pre_auth`` closes the connection and frames are limited to
``max_unauthenticated_frame_bytes``.

Lifecycle (as ``RemotingServer``): ``serve`` / ``serve_on`` run until cancelled or ``stop``;
``stop(grace_s)`` stops accepting, ends connections waiting for a request at once and lets the others
finish the requests they hold (then cancels what is left after ``grace_s``); ``aclose`` also waits
until serving has ended; ``statistics()`` is a snapshot of the counters.

Budgets (``budget``, see ``rokka.net.budget``; shared by every listener of the process when
the runtime passes one): a connection is admitted (``maxConnections``, ``maxConnectionsPerIp``)
before anything is read, else closed at once; after each read its unfinished frame is reported to
its lease and the connection is closed when the process-wide ``maxBufferedFrameBytes`` would be
crossed; a frame must be finished within ``frameTimeoutSeconds`` of waiting once its first byte
arrived.  A response send that makes no progress for ``write_timeout_s`` (the peer does not read)
closes the connection, so a consumer that never reads holds its one response for that long at
most; and responses the peers have not read (what the first ``sendmsg`` left unsent) may not
exceed ``maxUnreadResponseBytes`` over all connections: the connection that would cross it is
closed at once.  Hooks in ``conn_state[ON_CLOSE]`` run when the connection ends (Fetch read-ahead gives its
bytes back there).  Lines caused by the peer's input are rate-limited per address
(``rokka.net.logs.limited``): malformed input is one warning line without traceback.

TLS (``tls`` = an SSLContext, see ``rokka.gateway.kafka.tls``): each connection is wrapped in a
``TlsStream`` (``rokka.gateway.kafka.tls_stream``: bulk reads and writes) and must finish its handshake
within ``HANDSHAKE_TIMEOUT_S``; after that it is served as above (SASL_SSL when SASL is on too).
"""

from __future__ import annotations

import math
import os
import ssl
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import partial
from typing import Any

import structlog
import trio
from rokka.gateway.kafka.codec.framing import API_VERSIONS_KEY, APIS
from rokka.gateway.kafka.codec.schema import Struct
from rokka.gateway.kafka.connection import KafkaRequest, KafkaServerConnection
from rokka.gateway.kafka.context import ON_CLOSE, Handler, KafkaRequestContext, Route
from rokka.gateway.kafka.errors import KafkaError, KafkaProtocolError
from rokka.gateway.kafka.sasl import MAX_UNAUTHENTICATED_FRAME, SESSION, UserStore, new_session
from rokka.gateway.kafka.tls import HANDSHAKE_TIMEOUT_S
from rokka.gateway.kafka.tls import principal as tls_principal
from rokka.gateway.kafka.tls_stream import TlsStream
from rokka.net.budget import SMALL_FRAME, Budget, FrameClock, Lease
from rokka.net.logs import limited

__all__ = ["ON_CLOSE", "Handler", "KafkaRequestContext", "KafkaServer", "KafkaServerStatistics", "Route"]

log = structlog.get_logger(__name__)

RECEIVE_SIZE = 65536
RECEIVE_MAX = 4 << 20      # one receive call for up to this much of a frame already announced
CLOSE_TIMEOUT_S = 1.0
#: A TLS send may take ``write_timeout_s`` plus this long per byte (no per-write progress there).
TLS_MIN_RATE = 256 * 1024


class _Closing(Exception):
    """End this connection; the reason was logged already."""


@dataclass
class _Stats:
    connections: int = 0
    requests: int = 0
    protocol_errors: int = 0
    handler_errors: int = 0


@dataclass(frozen=True, slots=True)
class KafkaServerStatistics:
    """A snapshot of a Kafka listener (``KafkaServer.statistics()``)."""

    address: tuple[str, int] | None
    open_connections: int
    connections_total: int
    requests_total: int
    protocol_errors: int
    handler_errors: int


class KafkaServer:
    """Kafka listener: serves registered handlers, answers ApiVersions itself."""

    def __init__(
        self,
        handlers: Mapping[int, Route],
        *,
        max_frame_bytes: int = 100 * 1024 * 1024,
        idle_timeout_s: float = 600.0,
        sasl: tuple[tuple[str, ...], UserStore] | None = None,
        tls: ssl.SSLContext | None = None,
        budget: Budget | None = None,
        max_unauthenticated_frame_bytes: int = MAX_UNAUTHENTICATED_FRAME,
    ) -> None:
        self.routes = dict(handlers)
        self.budget = budget if budget is not None else Budget()
        self.max_unauthenticated_frame_bytes = max_unauthenticated_frame_bytes
        self.sasl = sasl
        self.tls = tls
        #: (api_key, seconds in the handler) after each routed request, when metrics are on
        self.observe: Callable[[int, float], None] | None = None
        self.max_frame_bytes = max_frame_bytes
        self.idle_timeout_s = idle_timeout_s
        self.advertised = self._derive_advertised()
        self.stats = _Stats()
        self.bound: tuple[str, int] | None = None
        self._open = 0
        self._stop = trio.Event()
        self._stopped = trio.Event()
        self._grace_s = 5.0
        self._waiting: set[trio.CancelScope] = set()     # connections waiting for their next request

    def _derive_advertised(self) -> dict[int, tuple[int, int]]:
        out: dict[int, tuple[int, int]] = {}
        for key, route in self.routes.items():
            api = APIS.get(key)
            if api is None:
                raise ValueError(f"no codec declaration for api_key {key}")
            lo, hi = max(route.min_version, api.min_version), min(route.max_version, api.max_version)
            if lo > hi:
                raise ValueError(f"{api.name}: handler versions outside {api.min_version}-{api.max_version}")
            out[key] = (lo, hi)
        api_versions = APIS[API_VERSIONS_KEY]
        out[API_VERSIONS_KEY] = (api_versions.min_version, api_versions.max_version)
        if self.sasl is not None and not any(r.pre_auth for r in self.routes.values()):
            raise ValueError("SASL is on but no route may be used before authentication "
                             "(build the routes with apis.routes(KafkaServices(..., sasl=True)))")
        return out

    async def serve(
        self,
        host: str,
        port: int,
        *,
        task_status: trio.TaskStatus[tuple[str, int]] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        """Listen on (host, port) until cancelled; report the bound (host, port) via task_status."""
        listeners = await trio.open_tcp_listeners(port, host=host)
        await self.serve_on(listeners, task_status=task_status)

    async def serve_on(
        self,
        listeners: list[trio.SocketListener],
        *,
        task_status: trio.TaskStatus[tuple[str, int]] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        """Serve connections accepted on ``listeners`` (already bound) until cancelled or ``stop``."""
        sockname = listeners[0].socket.getsockname()
        self.bound = (sockname[0], sockname[1])
        log.info("kafka.listening", host=self.bound[0], port=self.bound[1])
        try:
            async with trio.open_nursery() as connections:
                async with trio.open_nursery() as accepting:
                    accepting.start_soon(partial(trio.serve_listeners, self.handle_stream, listeners,
                                                 handler_nursery=connections))
                    task_status.started(self.bound)
                    await self._stop.wait()
                    accepting.cancel_scope.cancel()
                for scope in list(self._waiting):
                    scope.cancel()
                with trio.move_on_after(self._grace_s):
                    while self._open:       # noqa: ASYNC110 - connections end on their own
                        await trio.sleep(0.01)
                connections.cancel_scope.cancel()
        finally:
            with trio.CancelScope(shield=True):
                for listener in listeners:
                    await trio.aclose_forcefully(listener)
            self._stopped.set()

    def stop(self, grace_s: float = 5.0) -> None:
        """Begin a graceful stop (non-blocking): no new connections; a connection waiting for a
        request ends at once, one handling requests ends once they are answered (``grace_s`` at most)."""
        self._grace_s = grace_s
        self._stop.set()

    async def aclose(self, grace_s: float = 5.0) -> None:
        """Graceful stop, waiting until serving has ended (when it was serving at all)."""
        self.stop(grace_s)
        if self.bound is not None:
            await self._stopped.wait()

    def statistics(self) -> KafkaServerStatistics:
        s = self.stats
        return KafkaServerStatistics(address=self.bound, open_connections=self._open,
                                     connections_total=s.connections, requests_total=s.requests,
                                     protocol_errors=s.protocol_errors, handler_errors=s.handler_errors)

    async def handle_stream(self, stream: trio.SocketStream) -> None:
        """Serve one connection until EOF, idle timeout, or a protocol/handler failure."""
        try:
            peer = stream.socket.getpeername()
            peer_addr = (str(peer[0]), int(peer[1]))
        except OSError:
            await trio.aclose_forcefully(stream)
            return
        lease = self.budget.admit("kafka", peer_addr)
        if lease is None:
            await trio.aclose_forcefully(stream)
            return
        self.stats.connections += 1
        self._open += 1
        conn = KafkaServerConnection(max_frame_bytes=self.max_frame_bytes, advertised=self.advertised)
        state: dict[str, Any] = {"lease": lease, ON_CLOSE: []}
        try:
            await self._handle_admitted(stream, conn, peer_addr, state)
        finally:
            self._open -= 1
            lease.note(conn.buffered)
            conn.release()
            for hook in state.pop(ON_CLOSE, []):
                _run_hooks([hook])
            state.clear()
            lease.release()

    async def _handle_admitted(self, stream: trio.SocketStream, conn: KafkaServerConnection,
                               peer_addr: tuple[str, int], state: dict[str, Any]) -> None:
        if self.sasl is not None:
            state[SESSION] = new_session(self.sasl)
            conn.max_frame_bytes = min(self.max_frame_bytes, self.max_unauthenticated_frame_bytes)
        if self.tls is not None:
            secure = await _tls_handshake(stream, self.tls, peer_addr)
            if secure is None:
                return
            state["tls_principal"] = tls_principal(secure.getpeercert())
            if state["tls_principal"] is not None:
                log.info("kafka.tls_client", peer=peer_addr, principal=state["tls_principal"])
            await self._serve_stream(secure, conn, peer_addr, state)
        else:
            await self._serve_stream(stream, conn, peer_addr, state)

    async def _serve_stream(self, stream: trio.abc.Stream, conn: KafkaServerConnection,
                            peer_addr: tuple[str, int], state: dict[str, Any]) -> None:
        try:
            await self._serve_connection(stream, conn, peer_addr, state)
        except KafkaProtocolError as e:
            self.stats.protocol_errors += 1
            limited(log, "warning", "kafka.protocol_error", peer_addr[0], peer=peer_addr, hint=e.hint)
        except _Closing:
            pass
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            log.debug("kafka.connection_lost", peer=peer_addr)
        except Exception:
            self.stats.handler_errors += 1
            limited(log, "error", "kafka.handler_failed", peer_addr[0], peer=peer_addr, exc_info=True)
        finally:
            # bounded: TLS sends close_notify, and the peer may not be reading (the socket is
            # closed all the same when the wait is cut short)
            with trio.CancelScope(shield=True), trio.move_on_after(CLOSE_TIMEOUT_S):
                await stream.aclose()

    async def _serve_connection(
        self,
        stream: trio.abc.Stream,
        conn: KafkaServerConnection,
        peer: tuple[str, int],
        state: dict[str, Any],
    ) -> None:
        clock = FrameClock(self.budget.limits.frame_timeout_s or math.inf)
        lease: Lease = state["lease"]
        while True:
            requests = await self._read_requests(stream, conn, clock, lease, peer)
            if requests is None:
                return
            held: list[Any] = []     # responses of quick requests, sent together (below)
            hooks: list[Callable[[], None]] = []    # after_response of requests answered in `held`
            for req in requests:
                if state.get("close"):
                    break
                self.stats.requests += 1
                if not self._quick(req.api_key):
                    if held:
                        await self._send(stream, held, peer, lease)
                        held = []
                    _run_hooks(hooks)
                ctx = KafkaRequestContext(peer, req.client_id, req.api_key, req.api_version,
                                          req.correlation_id, state, self)
                try:
                    held += await self._respond(conn, req, ctx)
                except Exception:
                    if held:        # answers already due leave before the connection closes
                        await self._send(stream, held, peer, lease)
                    raise
                hooks += ctx.after_response
            if held:
                await self._send(stream, held, peer, lease)
            _run_hooks(hooks)
            if state.get("close") or self._stop.is_set():
                return

    def _quick(self, api_key: int) -> bool:
        route = self.routes.get(api_key)
        return route.quick if route is not None else api_key == API_VERSIONS_KEY

    async def _read_requests(self, stream: trio.abc.Stream, conn: KafkaServerConnection, clock: FrameClock,
                             lease: Lease, peer: tuple[str, int]) -> list[KafkaRequest] | None:
        """The requests completed by the next read ([] = none yet); None = end the connection (EOF,
        idle, frame deadline or memory budget; logged)."""
        pending = conn.buffered > 0
        started = trio.current_time()
        with trio.move_on_after(clock.timeout(self.idle_timeout_s, pending)) as idle:
            if not pending:         # ``stop`` ends a connection that waits for its next request
                if self._stop.is_set():
                    return None
                self._waiting.add(idle)
            try:
                # a large frame (a produce batch) is read in as few calls as the socket allows
                data = await stream.receive_some(min(max(RECEIVE_SIZE, conn.bytes_wanted()), RECEIVE_MAX))
            finally:
                self._waiting.discard(idle)
        if self._stop.is_set() and not pending and idle.cancelled_caught:
            return None
        if idle.cancelled_caught:
            if pending:
                limited(log, "warning", "kafka.frame_timeout", peer[0], peer=peer, buffered=conn.buffered,
                        frame_timeout_s=clock.limit_s)
            else:
                log.info("kafka.idle_timeout", peer=peer)
            return None
        requests = conn.receive_data(data)
        if not data:
            return None
        clock.waited(trio.current_time() - started, pending and conn.buffered > 0, bool(requests))
        if not lease.buffer(conn.buffered):
            limited(log, "warning", "kafka.memory_budget", peer[0], peer=peer, buffered=conn.buffered,
                    budget_in_use=lease.budget.buffered,
                    max_buffered_frame_bytes=lease.budget.limits.max_buffered_frame_bytes)
            return None
        return requests

    async def _send(self, stream: trio.abc.Stream, parts: list[Any], peer: tuple[str, int], lease: Lease) -> None:
        """Send a response; a peer that accepts no byte for ``write_timeout_s`` is closed."""
        budget = self.budget
        timeout = budget.limits.write_timeout_s or math.inf
        size = sum(len(x) if isinstance(x, bytes | bytearray) else memoryview(x).nbytes for x in parts)
        lease.note(size)
        reserved = 0

        def stalled(left: int) -> None:     # the peer has not read what is already in flight
            nonlocal reserved
            if left >= SMALL_FRAME:
                if not budget.reserve_unread(left):
                    limited(log, "warning", "kafka.unread_budget", peer[0], peer=peer, unsent_bytes=left,
                            unread_in_use=budget.unread,
                            max_unread_response_bytes=budget.limits.max_unread_response_bytes)
                    raise _Closing
                reserved = left

        try:
            if isinstance(stream, trio.SocketStream):
                await send_parts(stream, parts, progress_timeout_s=timeout, stalled=stalled)
            else:
                with trio.fail_after(timeout + size / TLS_MIN_RATE):
                    await _send(stream, parts)
        except trio.TooSlowError:
            limited(log, "warning", "kafka.slow_reader", peer[0], peer=peer, response_bytes=size,
                    write_timeout_s=timeout)
            raise _Closing from None
        finally:
            if reserved:
                budget.release_unread(reserved)

    async def _respond(
        self, conn: KafkaServerConnection, req: KafkaRequest, ctx: KafkaRequestContext
    ) -> list[Any]:
        """The response frame as buffers to send in order ([] when none is due)."""
        if req.api_key == API_VERSIONS_KEY:
            if req.unsupported_version:
                return [conn.encode_unsupported_api_versions(req)]
            return conn.encode_response_parts(req, conn.api_versions_body())
        assert req.body is not None
        route = self.routes[req.api_key]
        session = ctx.conn_state.get(SESSION)
        if session is not None and session.principal is None and not route.pre_auth:
            raise KafkaProtocolError(f"{APIS[req.api_key].name} request before SASL authentication")
        observe = self.observe
        started = time.perf_counter() if observe is not None else 0.0
        try:
            body = await route.handler(ctx, req.body)
        except KafkaError as e:
            body = self._error_body(req, e, ctx.peer)
        if route.pre_auth and session is not None and session.principal is not None:
            conn.max_frame_bytes = self.max_frame_bytes     # authenticated: the listener's own limit
        if observe is not None:
            observe(req.api_key, time.perf_counter() - started)
        if body is None or not req.expects_response:
            return []
        return conn.encode_response_parts(req, body)

    def _error_body(self, req: KafkaRequest, err: KafkaError, peer: tuple[str, int]) -> Struct:
        api = APIS[req.api_key]
        has_code = any(
            fl.name == "error_code" and fl.versions[0] <= req.api_version <= fl.versions[1]
            for fl in api.response.fields
        )
        if not has_code:
            raise err
        limited(log, "info", "kafka.request_error", peer[0], peer=peer, api=api.name, error_code=err.error_code,
                message=err.message)
        return Struct(error_code=err.error_code)


#: Buffers per sendmsg call (below every platform's IOV_MAX).
SENDMSG_MAX_BUFFERS = 512

def _run_hooks(hooks: list[Callable[[], None]]) -> None:
    """Run and clear ``hooks`` (``KafkaRequestContext.after_response``); failures are logged."""
    for hook in hooks:
        try:
            hook()
        except Exception:
            log.exception("kafka.after_response_failed")
    hooks.clear()


#: What the usual handshake failures mean for a Kafka client (OpenSSL reason -> hint).
TLS_HINTS = {
    "WRONG_VERSION_NUMBER": "not TLS: a plaintext client? (set security.protocol=SSL or SASL_SSL)",
    "HTTP_REQUEST": "not TLS: an HTTP request",
    "TLSV1_ALERT_UNKNOWN_CA": "the client does not trust rokka's certificate (its CA file)",
    "SSLV3_ALERT_BAD_CERTIFICATE": "the client rejected rokka's certificate (host name or validity?)",
    "PEER_DID_NOT_RETURN_A_CERTIFICATE": "no client certificate, and kafkaSslClientAuth=required",
    "CERTIFICATE_VERIFY_FAILED": "the client certificate does not chain to kafkaSslCaFile",
}


async def _tls_handshake(stream: trio.SocketStream, context: ssl.SSLContext,
                         peer: tuple[str, int]) -> TlsStream | None:
    """The connection wrapped in TLS once its handshake completed; None (logged, socket closed)
    when it failed or took longer than ``HANDSHAKE_TIMEOUT_S``."""
    secure = TlsStream(stream, context)
    reason = ""
    with trio.move_on_after(HANDSHAKE_TIMEOUT_S) as timer:
        try:
            await secure.do_handshake()
            return secure
        except trio.BrokenResourceError as exc:
            cause = exc.__cause__
            code = (getattr(cause, "reason", None) or str(cause) or type(cause).__name__) if cause else ""
            reason = f"{code}: {TLS_HINTS[code]}" if code in TLS_HINTS else \
                code or "connection closed during the handshake"
    if timer.cancelled_caught:
        reason = f"no TLS handshake within {HANDSHAKE_TIMEOUT_S:.0f} s"
    limited(log, "warning", "kafka.tls_failed", peer[0], peer=peer, reason=reason)
    await trio.aclose_forcefully(stream)
    return None


async def _send(stream: trio.abc.Stream, parts: list[Any]) -> None:
    if len(parts) == 1:
        await stream.send_all(parts[0])
    elif isinstance(stream, TlsStream):
        await stream.send_parts(parts)
    else:
        assert isinstance(stream, trio.SocketStream)
        await send_parts(stream, parts)


async def send_parts(stream: trio.SocketStream, parts: list[Any], *, progress_timeout_s: float = math.inf,
                     stalled: Callable[[int], None] | None = None) -> None:
    """Send ``parts`` in order by scatter/gather ``writev`` on the descriptor (no joined copy of a large
    frame; what the socket buffer takes at once costs no scheduler trip).

    Partial sends resume inside the buffer they stopped in.  Socket errors surface as trio's
    ``BrokenResourceError``, as from ``SocketStream.send_all``; ``trio.TooSlowError`` when the
    socket accepted no byte for ``progress_timeout_s`` (the peer does not read).  ``stalled(n)``
    is called once when the first ``sendmsg`` left ``n`` bytes unsent (it may raise to give up)."""
    fd = stream.socket.fileno()
    views = [memoryview(x) for x in parts]
    left = sum(v.nbytes for v in views)
    i = 0
    try:
        while i < len(views):
            # straight to the (non-blocking) descriptor: a response the socket buffer takes at once costs
            # no trip through the scheduler and no cancel scope; only a full buffer waits, bounded
            try:
                sent = os.writev(fd, views[i:i + SENDMSG_MAX_BUFFERS])
            except BlockingIOError:
                with trio.fail_after(progress_timeout_s):
                    await trio.lowlevel.wait_writable(fd)
                continue
            left -= sent
            if stalled is not None and left:
                stalled(left)
                stalled = None
            while i < len(views) and sent >= len(views[i]):
                sent -= len(views[i])
                i += 1
            if sent:
                views[i] = views[i][sent:]
    except OSError as exc:
        raise trio.BrokenResourceError from exc
    finally:
        for v in views:
            v.release()
