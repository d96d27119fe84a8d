"""Memory and connection budgets shared by the three listeners (Kafka, RocketMQ broker, name server).

Theory of operation
-------------------
One ``Budget`` per process (``runtime`` builds it from broker.conf and hands it to every listener;
a listener built without one gets a private default).  It bounds what a peer can make the server
hold before it has proven anything:

* **Connections.**  (The runtime first raises the soft open-file limit to the hard one, as the JVM
  does, and ``maxConnections=0`` leaves ``FD_RESERVE`` descriptors of it to the store.)
  ``admit(listener, peer)`` is called for each accepted socket before a byte is
  read.  Above ``maxConnections`` in all, or ``maxConnectionsPerIp`` from one address (all
  listeners together), it returns ``None``: the caller closes the socket at once and the refusal is
  logged, at most a few lines per address per minute (``logs.limited``).  An admitted connection
  holds a ``Lease`` until it ends (``Lease.release``, idempotent).
* **Unfinished frames.**  After each read the connection reports the bytes it buffers for frames
  not yet complete (``Lease.buffer(n)``).  The sum over all connections may not exceed
  ``maxBufferedFrameBytes``: a connection whose growth would cross it is refused (``False``) and the
  caller closes it with a log line.  Closing, not pausing, was chosen: a paused reader would keep
  its bytes while the peers holding the budget keep theirs, and a closed client simply reconnects.
  The first ``SMALL_FRAME`` bytes of a connection are always granted, so heartbeats, metadata and
  other small requests keep working while the budget is exhausted.
* **Frame deadline.**  ``FrameClock`` gives a connection ``frameTimeoutSeconds`` of *waiting* to
  finish a frame whose first byte arrived (time spent serving its earlier requests does not
  count); idle time between frames is left to the listener's idle timeout.
* **Unread responses.**  A response whose first send left bytes unsent (the peer is not reading
  as fast) reserves them (``reserve_unread``) until the send completes; above
  ``maxUnreadResponseBytes`` over all connections the connection is closed at once, and a send
  that makes no progress for ``connectionWriteTimeoutSeconds`` closes it too.  On RocketMQ
  channels, large responses queued behind a write in progress reserve their bytes the same way,
  and a channel closes above ``maxPendingWriteBytes`` of responses queued on it alone (its write
  timeout is the same key, for a whole send).
* **Read-ahead.**  Kafka's Fetch read-ahead reserves its bytes here (``reserve_read_ahead``), at
  most ``maxReadAheadBytes`` over all connections, and gives them back when they are taken or the
  connection ends.
* **Idle spin.**  The process's ``IdleSpin`` (``spin``, ``idleSpinMicros``; ``rokka.net.spin``): the
  RocketMQ channels kick it after writing a response, and ``run()`` keeps the event loop polling that long
  before it may sleep.
* **Returning memory.**  glibc keeps freed heap (``allocator`` raises its trim threshold for
  speed), so memory freed by a departed hostile connection would stay in the process.  Leases
  count the largest buffer their connection made the process hold (``Lease.held``); when
  connections that held at least ``TRIM_AFTER_BYTES`` together have left, ``run()`` calls
  ``malloc_trim(0)`` (at most once a second).  Only departures count: steady traffic keeps the
  heap pages ``allocator`` wants reused.
"""

from __future__ import annotations

import ctypes
import functools
import resource
from dataclasses import dataclass
from typing import Any

import structlog
import trio
from rokka.net import logs
from rokka.net.logs import limited
from rokka.net.spin import IdleSpin

__all__ = ["Budget", "FrameClock", "Lease", "Limits", "raise_fd_limit"]

log = structlog.get_logger(__name__)

#: Bytes of an unfinished frame every connection may buffer even with the global budget spent.
SMALL_FRAME = 64 * 1024
#: File descriptors kept for the store and the process when ``maxConnections`` is derived (0 = auto).
FD_RESERVE = 512
#: Freed bytes after which the allocator is asked to give free pages back.
TRIM_AFTER_BYTES = 32 << 20
TRIM_INTERVAL_S = 1.0


@dataclass(frozen=True)
class Limits:
    """broker.conf keys (see README, Security / Limits).  0 means: no limit (timeouts: none;
    ``maxConnections``: derived from the open-file limit; ``maxReadAheadBytes``: no read-ahead)."""

    max_connections: int = 0                     # maxConnections: all listeners (0 = open-file limit - 512)
    max_connections_per_ip: int = 1000           # maxConnectionsPerIp: all listeners (0 = no limit)
    max_buffered_frame_bytes: int = 256 << 20    # maxBufferedFrameBytes: unfinished frames, all connections
    frame_timeout_s: float = 30.0                # frameTimeoutSeconds: to finish a frame once started
    write_timeout_s: float = 30.0                # connectionWriteTimeoutSeconds: a send making no progress
    max_pending_write_bytes: int = 64 << 20      # maxPendingWriteBytes: RocketMQ responses waiting to be sent
    max_read_ahead_bytes: int = 128 << 20        # maxReadAheadBytes: Kafka Fetch read-ahead, all connections
    max_unread_response_bytes: int = 512 << 20   # maxUnreadResponseBytes: responses peers have not read, all
    idle_spin_s: float = 200e-6                  # idleSpinMicros: polling after a response (``rokka.net.spin``)


def raise_fd_limit() -> int:
    """Raise the soft open-file limit to the hard one, as the JVM does at start (``MaxFDLimit``);
    returns the soft limit in force."""
    try:
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        if soft != hard:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    except (OSError, ValueError):
        pass
    return _fd_limit()


def _fd_limit() -> int:
    try:
        soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    except (OSError, ValueError):
        return 1024
    return soft if soft != resource.RLIM_INFINITY else 1 << 20


class Budget:
    """Connection counts and buffered bytes of every listener of this process."""

    def __init__(self, limits: Limits | None = None) -> None:
        self.limits = limits = limits or Limits()
        self.max_connections = limits.max_connections or max(64, _fd_limit() - FD_RESERVE)
        self.connections = 0
        self.per_ip: dict[str, int] = {}
        self.buffered = 0
        self.read_ahead = 0
        self.unread = 0
        self.refused = 0
        self.over_budget = 0
        self._freed = 0
        self._trim: Any = _malloc_trim()
        #: the process's idle spin (``rokka.net.spin``): RocketMQ channels kick it after each response; ``run`` spins
        self.spin = IdleSpin(limits.idle_spin_s)

    # -- connections ---------------------------------------------------------------------
    def admit(self, listener: str, peer: tuple[str, int]) -> Lease | None:
        """A lease for a new connection from ``peer``, or None (logged): close it at once."""
        ip = peer[0]
        per_ip = self.per_ip.get(ip, 0)
        reason = ""
        if self.connections >= self.max_connections:
            reason = f"{self.connections} connections open (maxConnections={self.max_connections})"
        elif self.limits.max_connections_per_ip and per_ip >= self.limits.max_connections_per_ip:
            reason = f"{per_ip} connections from {ip} (maxConnectionsPerIp={self.limits.max_connections_per_ip})"
        if reason:
            self.refused += 1
            limited(log, "warning", "connection.refused", ip, listener=listener, peer=f"{ip}:{peer[1]}",
                    reason=reason, refused_total=self.refused)
            return None
        self.connections += 1
        self.per_ip[ip] = per_ip + 1
        return Lease(self, ip)

    def _release(self, lease: Lease) -> None:
        self.connections -= 1
        left = self.per_ip.get(lease.ip, 1) - 1
        if left > 0:
            self.per_ip[lease.ip] = left
        else:
            self.per_ip.pop(lease.ip, None)
        self.buffered -= lease.buffered
        self.freed(max(lease.held, lease.buffered))

    # -- read-ahead --------------------------------------------------------------------------
    def reserve_read_ahead(self, n: int) -> bool:
        if self.read_ahead + n > self.limits.max_read_ahead_bytes:
            return False
        self.read_ahead += n
        return True

    def release_read_ahead(self, n: int) -> None:
        self.read_ahead = max(0, self.read_ahead - n)

    # -- responses the peers do not read ------------------------------------------------------
    def reserve_unread(self, n: int) -> bool:
        limit = self.limits.max_unread_response_bytes
        if limit and self.unread + n > limit:
            return False
        self.unread += n
        return True

    def release_unread(self, n: int) -> None:
        self.unread = max(0, self.unread - n)

    # -- giving memory back ------------------------------------------------------------------
    def freed(self, n: int) -> None:
        """Note ``n`` bytes of large buffers freed (counted towards the next ``malloc_trim``)."""
        if n >= SMALL_FRAME:
            self._freed += n

    def trim_now(self) -> bool:
        """Give free heap pages back to the kernel if enough was freed; True if it trimmed."""
        if self._freed < TRIM_AFTER_BYTES or self._trim is None:
            return False
        self._freed = 0
        self._trim(0)
        return True

    async def run(self) -> None:
        """Trim loop (until cancelled): see the module doc; also reports lines the per-peer log
        limiter suppressed once their window ends; and the idle spin (``spin.run``) beside it."""
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self.spin.run)
            await self._trim_loop()

    async def _trim_loop(self) -> None:
        ticks = 0
        while True:
            await trio.sleep(TRIM_INTERVAL_S)
            ticks += 1
            if ticks % 10 == 0:
                logs.PEER_LOG.flush(log)
            if self._freed >= TRIM_AFTER_BYTES:
                # a pure C call without the GIL: the event loop goes on meanwhile
                await trio.to_thread.run_sync(self.trim_now)


class Lease:
    """One admitted connection's share of the ``Budget``."""

    __slots__ = ("budget", "ip", "buffered", "held", "released")

    def __init__(self, budget: Budget, ip: str) -> None:
        self.budget = budget
        self.ip = ip
        self.buffered = 0       # bytes of unfinished frames now
        self.held = 0           # the largest buffer this connection made the process hold
        self.released = False

    def buffer(self, n: int) -> bool:
        """This connection now buffers ``n`` bytes of unfinished frames; False = over the global
        budget (nothing was granted: close the connection)."""
        grow = n - self.buffered
        b = self.budget
        limit = b.limits.max_buffered_frame_bytes
        if grow > 0 and n > SMALL_FRAME and limit and b.buffered + grow > limit:
            b.over_budget += 1
            return False
        b.buffered += grow
        self.buffered = n
        if n > self.held:
            self.held = n
        return True

    def note(self, n: int) -> None:
        """The connection made the process hold a buffer of ``n`` bytes (a response, a request)."""
        if n > self.held:
            self.held = n

    def release(self) -> None:
        if not self.released:
            self.released = True
            self.budget._release(self)


class FrameClock:
    """Waiting time left to finish the frame being received (``frameTimeoutSeconds``).

    ``timeout(idle_s, pending)`` is how long the next read may wait: the idle timeout between
    frames, or what is left of the frame deadline while bytes of an unfinished frame are buffered.
    ``waited(s, pending, completed)`` records a read: the clock restarts whenever a frame completed
    or nothing is pending, so only waiting for *this* frame counts."""

    __slots__ = ("limit_s", "spent_s")

    def __init__(self, limit_s: float) -> None:
        self.limit_s = limit_s
        self.spent_s = 0.0

    def timeout(self, idle_s: float, pending: bool) -> float:
        if not pending:
            return idle_s
        return min(idle_s, max(0.0, self.limit_s - self.spent_s))

    def waited(self, s: float, pending: bool, completed: bool) -> None:
        self.spent_s = self.spent_s + s if pending and not completed else 0.0

    def expired(self, pending: bool) -> bool:
        return pending and self.spent_s >= self.limit_s


@functools.cache
def _malloc_trim() -> Any:
    """glibc's ``malloc_trim`` (None elsewhere: musl, macOS)."""
    try:
        fn = ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):
        return None
    fn.argtypes = [ctypes.c_size_t]
    fn.restype = ctypes.c_int
    return fn
