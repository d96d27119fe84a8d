"""One remoting connection driven by trio: ``Channel``.

Theory of operation
-------------------
A ``Channel`` wraps a trio stream and a sans-IO ``RemotingConnection``.  The
same class serves both ends: the broker / name server get one per accepted
socket (``RemotingServer``), and the client library gets one per outgoing
connection, so broker->client requests (NOTIFY_CONSUMER_IDS_CHANGED,
CHECK_TRANSACTION_STATE) and client->broker requests share one code path.

``run()`` is the only reader.  For every decoded command:

* a response (flag bit 0, whatever bit 1 says: C++ answers with flag 3) wakes
  the ``send_request`` waiter holding that opaque;
* a request is dispatched by code, each in its own task inside the channel's
  nursery (so a long-polling pull never blocks the connection), except when
  its handler says it will complete without waiting (``handler.inline(cmd)``
  true: a RocketMQ send under ASYNC_FLUSH): then the reader runs it itself
  and the responses of one read leave together in one write.  At most
  ``max_inflight`` requests run at once; above that the reader answers
  SYSTEM_BUSY itself to a two-way request, and stops reading (backpressure)
  for a oneway one, which could not be told and must not be dropped.
  Unknown code -> REQUEST_CODE_NOT_SUPPORTED; handler
  exception -> SYSTEM_ERROR with the exception text; a oneway request is
  never answered.

The cost of one request is mostly the trips through the event loop, so on a
plain TCP socket (not TLS) the channel works on the descriptor itself: a read
is a non-blocking ``recv`` that waits for readability only when the socket is
empty (after a short read it waits at once: no failing ``recv`` per request),
with no cancel scope per read (the idle timeout is a watchdog task,
``_watch_idle``, that cancels the reader once a wait lasted ``idle_timeout_s``;
only a read inside an unfinished frame carries its own deadline); a reader that
got bytes without waiting yields once before reading again, so a busy
connection cannot starve the others.  A write with nothing queued is a direct
non-blocking ``send`` (no task switch, no cancel scope); what the kernel does
not take at once goes the coalesced way below.  One lone sync send is thus one
pass through the event loop and three syscalls (wait, recv, send).

Writes are coalesced (``outbox.py``): frames queued while a write is in progress
go out together in the next write, each write shielded from its caller's
cancellation and ended only by the write timeout or close().  The channel
ends on EOF, on a protocol violation (logged, no reply: Netty closes too),
after ``idle_timeout_s`` without incoming bytes, or on ``close()``.  Ending
cancels in-flight handlers (a oneway request already read is served first: up
to ``ONEWAY_GRACE_S``), fails pending ``send_request`` calls with
``ChannelClosedError``, closes the socket and calls ``on_closed(channel)``
(sync or async; async ones run shielded for at most 5 s).

A write the kernel refuses because the peer is gone (EPIPE, ECONNRESET) does
not end the reader: the bytes the peer sent before it left are still read and
served (a client that sends oneway UPDATE_CONSUMER_OFFSETs and closes at once
resets the connection when a response it never read is still in its buffer),
only nothing more is written; the reader then ends at EOF, at the reset, or
after ``GONE_READ_S`` without bytes.  A write that times out (a peer that does
not read) or a budget that is spent closes the channel at once.

Budgets (server channels, see ``rokka.net.budget``): a ``lease`` is told
after every read how many bytes of an unfinished frame the decoder holds, and
the channel closes when the process-wide budget refuses them; a frame must be
finished within ``frame_timeout_s`` of waiting once its first byte arrived
(slowloris); request bodies being served may not exceed
``MAX_INFLIGHT_BYTES`` (reading pauses until handlers finish); responses
waiting to be written may not exceed ``max_pending_write_bytes`` on the
connection, and large ones queued behind a write in progress count against
the process-wide ``maxUnreadResponseBytes`` (a peer that sends requests but
never reads is closed).  Lines caused by what the peer sends are rate-limited
per address (``rokka.net.logs.limited``); malformed input is one line,
no traceback.

Editing rule: nothing here knows a request code's meaning; that lives in
handlers.  ``run()`` never raises (except Cancelled).
"""

from __future__ import annotations

import inspect
import itertools
import math
import os
import ssl
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

import structlog
import trio
from rokka.net.budget import SMALL_FRAME, FrameClock, Lease
from rokka.net.logs import limited
from rokka.net.remoting.codec.codes import REMARK_SYSTEM_BUSY, ResponseCode, remark_not_supported
from rokka.net.remoting.codec.errors import HeaderFieldError, LocalProtocolError, RemoteProtocolError
from rokka.net.remoting.codec.remoting import DEFAULT_MAX_FRAME_BYTES, RemotingCommand
from rokka.net.remoting.connection import ConnectionState, RemotingConnection
from rokka.net.remoting.outbox import WRITE_ERRORS, Outbox

log = structlog.get_logger(__name__)

Handler = Callable[["Channel", RemotingCommand], Awaitable[RemotingCommand | None]]
ClosedCallback = Callable[["Channel"], Any]
HostPort = tuple[str, int]

RECEIVE_BYTES = 64 * 1024
#: Request bodies being served at once on one connection; above it reading pauses (backpressure).
MAX_INFLIGHT_BYTES = 64 << 20
#: How long oneway requests already read may still run once the connection has ended.
ONEWAY_GRACE_S = 5.0
#: How long the reader waits for more bytes once a write found the peer gone.
GONE_READ_S = 1.0
_ids = itertools.count(1)


class ChannelClosedError(Exception):
    """The channel closed before (or while) a request could be completed."""


class RequestTimeoutError(Exception):
    """No response arrived within the timeout."""


@dataclass(frozen=True, slots=True)
class ChannelStatistics:
    id: str
    peer: HostPort
    closed: bool
    inflight: int
    pending_requests: int
    frames_in: int
    frames_out: int
    stray_responses: int


class _Waiter:
    __slots__ = ("event", "response", "error")

    def __init__(self) -> None:
        self.event = trio.Event()
        self.response: RemotingCommand | None = None
        self.error: Exception | None = None


def _sockname(addr: Any) -> HostPort:
    if isinstance(addr, tuple) and len(addr) >= 2:
        return (str(addr[0]), int(addr[1]))
    return (str(addr), 0)


class Channel:
    """A remoting connection: serves incoming requests, sends outgoing ones."""

    def __init__(
        self,
        stream: trio.abc.Stream,
        *,
        handlers: Mapping[int, Handler] | None = None,
        name: str = "remoting",
        max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES,
        max_inflight: int = 1024,
        idle_timeout_s: float | None = None,
        write_timeout_s: float = 30.0,
        on_closed: ClosedCallback | None = None,
        lease: Lease | None = None,
        frame_timeout_s: float | None = None,
        max_pending_write_bytes: int | None = None,
    ) -> None:
        self._stream = stream
        self._handlers: Mapping[int, Handler] = handlers if handlers is not None else {}
        self._conn = RemotingConnection(max_frame_bytes=max_frame_bytes)
        self._max_inflight = max_inflight
        self._idle_timeout_s = idle_timeout_s if idle_timeout_s else math.inf
        self._on_closed = on_closed
        self._lease = lease
        self._spin = lease.budget.spin if lease is not None else None   # kicked at each write (net/spin.py)
        self._frame_clock = FrameClock(frame_timeout_s or math.inf)
        self._max_pending_write = max_pending_write_bytes or math.inf
        self._pending_write = 0
        self._outbox = Outbox(stream, write_timeout_s, self._hand_over, lambda: self._close_requested)
        self._nursery: trio.Nursery | None = None
        # a plain TCP socket is read and written with non-blocking syscalls on its descriptor (TLS: the stream)
        self._fd: int | None = stream.socket.fileno() if isinstance(stream, trio.SocketStream) else None
        self._idle_scope: trio.CancelScope | None = None
        self._read_waiting: float | None = None  # trio.current_time() when the reader began waiting for bytes
        self._unyielded = False         # the last read returned without passing through the event loop
        self._more = False              # the last read filled its buffer: more may be there already
        self._answered: list[bytes] = []    # inline handlers' responses, written after the read
        self._waiters: dict[int, _Waiter] = {}
        self._inflight = 0
        self._inflight_bytes = 0
        self._slot_freed = trio.Event()
        self._cancel_scope: trio.CancelScope | None = None
        self._close_requested = False
        self._write_dead = False        # a write found the peer gone: read what it sent, write nothing
        self._oneways = 0               # oneway requests being served in their own tasks
        self._closed_event = trio.Event()
        self.name = name
        sock = getattr(stream, "socket", None)
        self.peer: HostPort = _sockname(sock.getpeername()) if sock is not None else ("", 0)
        self.local: HostPort = _sockname(sock.getsockname()) if sock is not None else ("", 0)
        self.id = f"{name}#{next(_ids)}@{self.peer[0]}:{self.peer[1]}"
        self.attrs: dict[str, Any] = {}
        self._log = log.bind(channel=self.id)

    # -- public ----------------------------------------------------------------
    @property
    def peer_addr(self) -> str:
        """``"host:port"`` of the peer."""
        return f"{self.peer[0]}:{self.peer[1]}"

    @property
    def closed(self) -> bool:
        return self._closed_event.is_set() or self._close_requested or self._write_dead

    @property
    def inflight(self) -> int:
        return self._inflight

    def close(self) -> None:
        """Ask the channel to end (non-blocking; ``wait_closed`` to wait)."""
        self._close_requested = True
        if self._cancel_scope is not None:
            self._cancel_scope.cancel()
        self._outbox.cancel()                 # a write shielded from its caller still ends on close

    async def wait_closed(self) -> None:
        await self._closed_event.wait()

    async def send_request(self, cmd: RemotingCommand, timeout_s: float) -> RemotingCommand:
        """Send a two-way request (fresh opaque assigned) and wait for its response.

        Raises:
            RequestTimeoutError: no response within ``timeout_s``.
            ChannelClosedError: the channel is or became closed.
        """
        if self.closed:
            raise ChannelClosedError(f"channel {self.id} is closed")
        data = self._start(cmd, oneway=False)
        waiter = _Waiter()
        self._waiters[cmd.opaque] = waiter
        try:
            with trio.move_on_after(timeout_s):
                await self._write(data)
                await waiter.event.wait()
            if waiter.error is not None:
                raise waiter.error
            if waiter.response is None:
                raise RequestTimeoutError(
                    f"no response to code {cmd.code} from {self.peer_addr} within {timeout_s}s")
            return waiter.response
        finally:
            self._waiters.pop(cmd.opaque, None)
            self._conn.forget(cmd.opaque)

    async def send_oneway(self, cmd: RemotingCommand) -> None:
        """Send a request with the oneway flag (no response is expected).

        Raises:
            ChannelClosedError: the channel is closed or the write failed.
        """
        if self.closed:
            raise ChannelClosedError(f"channel {self.id} is closed")
        await self._write(self._start(cmd, oneway=True))

    def statistics(self) -> ChannelStatistics:
        return ChannelStatistics(
            id=self.id, peer=self.peer, closed=self.closed, inflight=self._inflight,
            pending_requests=len(self._waiters), frames_in=self._conn.frames_in,
            frames_out=self._conn.frames_out, stray_responses=self._conn.stray_responses)

    # -- the reader --------------------------------------------------------------
    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Read and dispatch until the channel ends; then clean up.  Never raises."""
        try:
            async with trio.open_nursery() as nursery:
                self._cancel_scope = nursery.cancel_scope
                self._nursery = nursery
                if self._close_requested:
                    nursery.cancel_scope.cancel()
                task_status.started()
                await self._read_loop(nursery)
                if self._oneways and not self._close_requested:
                    # oneway requests already read are served although the peer left (nobody is told)
                    with trio.move_on_after(ONEWAY_GRACE_S):
                        while self._oneways:
                            self._slot_freed = trio.Event()
                            await self._slot_freed.wait()
                nursery.cancel_scope.cancel()
        except Exception:  # noqa: BLE001 - a channel must never take its server down
            self._note("error", "rocketmq.channel_crashed", exc_info=True)
        finally:
            await self._finish()

    def _note(self, level: str, event: str, **fields: Any) -> None:
        """A line caused by what the peer sent: rate-limited per peer address."""
        limited(self._log, level, event, self.peer[0], **fields)

    async def _read_loop(self, nursery: trio.Nursery) -> None:
        clock = self._frame_clock
        with trio.CancelScope() as idle_scope:      # cancelled by _watch_idle while a read waits too long
            self._idle_scope = idle_scope
            if self._fd is not None and self._idle_timeout_s != math.inf:
                nursery.start_soon(self._watch_idle)
            while True:
                pending = self._conn.buffered > 0
                started = trio.current_time() if pending else 0.0
                try:
                    data = await self._receive(pending)
                except (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as exc:
                    if isinstance(exc.__cause__, ssl.SSLError):     # a TLS record the peer sent is bad
                        self._note("warning", "rocketmq.tls_error", error=str(exc.__cause__))
                    else:
                        self._log.debug("rocketmq.connection_lost", error=str(exc))
                    return
                if data is None:
                    break
                try:
                    commands = self._conn.receive_data(data)
                except RemoteProtocolError as exc:
                    self._note("warning", "rocketmq.protocol_violation", error=str(exc))
                    return
                except Exception as exc:  # noqa: BLE001 - undecodable input is the peer's fault: one line
                    self._note("warning", "rocketmq.protocol_violation",
                               error=f"{type(exc).__name__}: {str(exc)[:200]}")
                    return
                if pending or clock.spent_s:
                    clock.waited(trio.current_time() - started if pending else 0.0,
                                 pending and self._conn.buffered > 0, bool(commands))
                if self._lease is not None and not self._lease.buffer(self._conn.buffered):
                    budget = self._lease.budget
                    self._note("warning", "rocketmq.memory_budget",
                               buffered=self._conn.buffered, budget_in_use=budget.buffered,
                               max_buffered_frame_bytes=budget.limits.max_buffered_frame_bytes)
                    return
                for cmd in commands:
                    await self._dispatch(cmd, nursery)
                if self._answered:      # the inline handlers' responses of this read: one write
                    answered, self._answered = self._answered, []
                    try:
                        if not self._write_dead:
                            await self._write(answered[0] if len(answered) == 1 else b"".join(answered))
                    except ChannelClosedError:
                        if not self._write_dead:
                            return
                if not data:
                    return
                if self._unyielded:     # data came without waiting: let other tasks run before the next read
                    self._unyielded = False
                    await trio.lowlevel.checkpoint()
        if pending:
            self._note("warning", "rocketmq.frame_timeout",
                       frame_timeout_s=clock.limit_s, buffered=self._conn.buffered)
        else:
            self._log.info("rocketmq.idle_connection_closing", idle_timeout_s=self._idle_timeout_s)

    async def _receive(self, pending: bool) -> bytes | None:
        """The next bytes (``b""``: EOF), or None when the wait for them timed out.

        On a plain socket the read is a non-blocking ``recv`` that waits for readability only when nothing
        is there (one pass through the event loop per request, no cancel scope per read): the idle timeout
        is ``_watch_idle``'s, and only a read inside an unfinished frame carries its own deadline."""
        fd = self._fd
        if fd is None:
            limit = self._frame_clock.timeout(self._idle_timeout_s, pending)
            with trio.move_on_after(min(limit, GONE_READ_S) if self._write_dead else limit) as scope:
                return await self._stream.receive_some(RECEIVE_BYTES)
            return None if scope.cancelled_caught else b""
        waited = False
        while True:
            if self._more or waited:    # after a short read the socket is empty: wait before reading
                try:
                    data = os.read(fd, RECEIVE_BYTES)
                except BlockingIOError:
                    pass
                else:
                    self._more = len(data) == RECEIVE_BYTES
                    self._unyielded = not waited
                    return data
            waited = True
            if pending:
                with trio.move_on_after(self._frame_clock.timeout(self._idle_timeout_s, pending)) as scope:
                    await trio.lowlevel.wait_readable(fd)
                if scope.cancelled_caught:
                    return None
            elif self._write_dead:         # the peer is gone: what it sent is there already
                with trio.move_on_after(GONE_READ_S) as scope:
                    await trio.lowlevel.wait_readable(fd)
                if scope.cancelled_caught:
                    return b""
            else:
                self._read_waiting = trio.current_time()
                try:
                    await trio.lowlevel.wait_readable(fd)
                finally:
                    self._read_waiting = None
                if self._idle_scope is not None and self._idle_scope.cancel_called:
                    return None     # the idle deadline passed as the bytes came: closing as idle
            if self._close_requested:
                raise trio.ClosedResourceError("the channel is closing")

    async def _watch_idle(self) -> None:
        """Cancel the reader's scope once a read has waited ``idle_timeout_s`` with no frame unfinished."""
        idle = self._idle_timeout_s
        while True:
            since = self._read_waiting
            now = trio.current_time()
            if since is not None and now - since >= idle:
                if self._idle_scope is not None:
                    self._idle_scope.cancel()
                return
            await trio.sleep_until((now if since is None else since) + idle)

    async def _dispatch(self, cmd: RemotingCommand, nursery: trio.Nursery) -> None:
        if cmd.is_response:
            waiter = self._waiters.get(cmd.opaque)
            if waiter is not None:
                waiter.response = cmd
                waiter.event.set()
            return
        if self._inflight >= self._max_inflight:
            if cmd.is_oneway:
                # A oneway request cannot be told SYSTEM_BUSY (it gets no answer): dropping it would
                # silently lose data, so stop reading this connection until a slot frees up.
                while self._inflight >= self._max_inflight:
                    self._slot_freed = trio.Event()
                    await self._slot_freed.wait()
            else:
                self._note("warning", "rocketmq.too_many_inflight", code=cmd.code, inflight=self._inflight)
                busy = cmd.make_response(ResponseCode.SYSTEM_BUSY, REMARK_SYSTEM_BUSY)
                await self._reply(cmd, busy)
                return
        # bodies of requests being served are bounded per connection: reading pauses until
        # handlers finish (a parked SYNC_FLUSH send holds its body until the flush)
        while self._inflight and self._inflight_bytes + len(cmd.body) > MAX_INFLIGHT_BYTES:
            cmd.held = True
            self._slot_freed = trio.Event()
            await self._slot_freed.wait()
        self._inflight += 1
        self._inflight_bytes += len(cmd.body)
        if self._lease is not None:
            self._lease.note(self._inflight_bytes)
        inline = getattr(self._handlers.get(cmd.code), "inline", None)
        if inline is not None and inline(cmd):
            await self._run_inline(cmd)
        else:
            if cmd.is_oneway:
                self._oneways += 1
            nursery.start_soon(self._run_handler, cmd)

    async def _run_inline(self, cmd: RemotingCommand) -> None:
        """Run a handler that says it completes without waiting (``handler.inline(cmd)``) in the reader
        itself: no task, and its response leaves with the others of the same read in one write."""
        try:
            response = await self._call_handler(cmd)
        finally:
            self._inflight -= 1
            self._inflight_bytes -= len(cmd.body)
            self._slot_freed.set()
        if response is not None and not cmd.is_oneway:
            self._answered.append(self._encode_reply(cmd, response))

    async def _run_handler(self, cmd: RemotingCommand) -> None:
        try:
            response = await self._call_handler(cmd)
            if response is not None:
                await self._reply(cmd, response)
        finally:
            self._inflight -= 1
            self._inflight_bytes -= len(cmd.body)
            if cmd.is_oneway:
                self._oneways -= 1
            self._slot_freed.set()

    async def _call_handler(self, cmd: RemotingCommand) -> RemotingCommand | None:
        handler = self._handlers.get(cmd.code)
        if handler is None:
            self._note("info", "rocketmq.code_not_supported", code=cmd.code)
            return cmd.make_response(ResponseCode.REQUEST_CODE_NOT_SUPPORTED, remark_not_supported(cmd.code))
        try:
            return await handler(self, cmd)
        except HeaderFieldError as exc:
            self._note("info", "rocketmq.bad_header", code=cmd.code, error=str(exc))
            return cmd.make_response(ResponseCode.SYSTEM_ERROR, str(exc))
        except ChannelClosedError:
            return None
        except Exception as exc:  # noqa: BLE001 - answered as SYSTEM_ERROR, server keeps going
            self._note("error", "rocketmq.handler_failed", code=cmd.code, exc_info=True)
            return cmd.make_response(ResponseCode.SYSTEM_ERROR, str(exc) or type(exc).__name__)

    async def _reply(self, request: RemotingCommand, response: RemotingCommand) -> None:
        if request.is_oneway or self.closed:
            return
        try:
            await self._write(self._encode_reply(request, response))
        except ChannelClosedError:
            pass

    def _encode_reply(self, request: RemotingCommand, response: RemotingCommand) -> bytes:
        try:
            return self._conn.encode_response(request, response)
        except LocalProtocolError as exc:
            self._log.error("rocketmq.response_unencodable", code=request.code, error=str(exc))
            return self._conn.encode_response(request, request.make_response(ResponseCode.SYSTEM_ERROR, str(exc)))

    # -- writing -------------------------------------------------------------------
    def _start(self, cmd: RemotingCommand, *, oneway: bool) -> bytes:
        if self._conn.state is not ConnectionState.OPEN:
            raise ChannelClosedError(f"channel {self.id} is closed")
        return self._conn.start_request(cmd, oneway=oneway)

    def _peer_gone(self, exc: BaseException) -> None:
        """A write found the peer gone: write nothing more, but keep reading what it sent (module doc)."""
        if not self._write_dead:
            self._log.info("rocketmq.peer_gone_on_write", error=repr(exc))
        self._write_dead = True
        self._outbox.cancel()

    def _write_failed(self, exc: BaseException) -> None:
        """A failed write: the peer gone (reading goes on) or not reading in time (the channel closes)."""
        if self._write_dead:        # a write cancelled by _peer_gone, or a later one
            return
        if isinstance(exc, (OSError, trio.BrokenResourceError)):
            self._peer_gone(exc)
        else:
            self._log.info("rocketmq.write_failed_closing", error=repr(exc))
            self.close()

    async def _write(self, data: bytes) -> None:
        if not data:
            return
        if self._spin is not None:
            self._spin.kick()
        if self._write_dead:
            raise ChannelClosedError(f"channel {self.id}: the peer is gone")
        if self._fd is not None and not self._outbox.writing:
            # nothing queued: try the socket at once, without a task switch or a cancel scope; what the
            # kernel does not take now goes the coalesced, timed way below
            if self._close_requested:
                raise ChannelClosedError(f"channel {self.id} is closed")
            try:
                sent = os.write(self._fd, data)
            except BlockingIOError:
                sent = 0
            except OSError as exc:
                self._write_failed(exc)
                raise ChannelClosedError(f"channel {self.id}: write failed: {exc!r}") from None
            if sent == len(data):
                if self._lease is not None:
                    self._lease.note(sent)
                return
            data = data[sent:]
        self._check_pending_write(len(data))
        # a large response queued behind a write in progress counts against the process-wide
        # maxUnreadResponseBytes until it leaves
        budget = self._lease.budget if self._lease is not None else None
        queued = len(data) if budget is not None and len(data) >= SMALL_FRAME and self._pending_write else 0
        if budget is not None and queued and not budget.reserve_unread(queued):
            self._note("warning", "rocketmq.unread_budget",
                       unread_in_use=budget.unread, max_unread_response_bytes=budget.limits.max_unread_response_bytes)
            self.close()
            raise ChannelClosedError(f"channel {self.id}: responses not read beyond the budget")
        self._pending_write += len(data)
        if self._lease is not None:
            self._lease.note(self._pending_write)
        try:
            await self._outbox.send(data)
        except WRITE_ERRORS as exc:
            self._write_failed(exc)
            raise ChannelClosedError(f"channel {self.id}: write failed: {exc!r}") from None
        finally:
            self._pending_write -= len(data)
            if budget is not None and queued:
                budget.release_unread(queued)

    def _hand_over(self, lead: Callable[[], Awaitable[None]]) -> bool:
        """Let a fresh task lead the writes still queued (``Outbox``)."""
        if self._nursery is None:
            return False
        try:
            self._nursery.start_soon(self._lead_rest, lead)
        except RuntimeError:        # the channel's nursery is closing: keep writing here
            return False
        return True

    async def _lead_rest(self, lead: Callable[[], Awaitable[None]]) -> None:
        try:
            await lead()
        except WRITE_ERRORS as exc:
            self._write_failed(exc)

    def _check_pending_write(self, size: int) -> None:
        if self._pending_write and self._pending_write + size > self._max_pending_write:
            self._note("warning", "rocketmq.slow_reader",
                       pending_write_bytes=self._pending_write, max_pending_write_bytes=self._max_pending_write)
            self.close()
            raise ChannelClosedError(f"channel {self.id}: {self._pending_write} bytes of responses not read")

    # -- teardown --------------------------------------------------------------------
    async def _finish(self) -> None:
        self._close_requested = True
        if self._lease is not None:
            self._lease.note(self._conn.buffered)
        self._conn.close()
        for waiter in self._waiters.values():
            waiter.error = ChannelClosedError(f"channel {self.id} closed")
            waiter.event.set()
        self._closed_event.set()
        with trio.CancelScope(shield=True):
            await trio.aclose_forcefully(self._stream)
            if self._lease is not None:
                self._lease.release()
            if self._on_closed is not None:
                with trio.move_on_after(5):
                    try:
                        result = self._on_closed(self)
                        if inspect.isawaitable(result):
                            await result
                    except Exception:  # noqa: BLE001
                        self._log.exception("rocketmq.on_closed_callback_failed")
