"""IdleSpin: the event loop keeps polling for a moment after each RocketMQ response instead of sleeping.

Theory of operation
-------------------
A client that sends one request and waits for its answer (a RocketMQ sync send: an application thread
calling ``send()``) leaves the broker idle between its requests: the event loop blocks in
``epoll_wait``, the thread sleeps, the CPU halts.  Waking up costs more than the syscall: on the
project's VM (no halt polling in the guest) the next request's Python runs about twice as slow as it
does warm (BENCHMARKS.md, sessions 19-20: a 9 us piece of code takes 20 us after a sleep), so a lone
send cost ~150-175 us of server CPU and ~190 us of round trip where the same work costs ~45 us in a
loop.

So after a RocketMQ response is written (``kick``, from the remoting channel) the loop does not sleep at
once: a task (``run``) stays runnable for ``window_s``, which makes trio poll its sockets without
blocking (``epoll_wait`` with a zero timeout) between turns, and gives its CPU to any other runnable
process at each turn (``sched_yield``: on a machine shared with the clients, a client that has work runs
first).  A request
that arrives inside the window is read at the next turn by a warm thread.  Every response renews the
window; once none has been written for ``window_s`` the task waits for the next ``kick`` and the
process sleeps as before, so an idle broker spends nothing.  Seastar's ``--idle-poll-time-us``
(default 200 us) is the same trade.

Spinning only uses a CPU nothing else wants.  At each turn the spinner reads how long its thread has
waited, runnable, for its CPU (``/proc/thread-self/schedstat``, ~2 us): more than ``CROWDED_NS`` during
one spin means another task wanted that CPU, so the spin ends and none starts for ``HOLD_S``.
Measured on the 2-core VM, where the clients share the broker's machine: an unconditional spin cost 16
and 64 concurrent senders 10-35 % of their msg/s (the clients' threads needed that core); a spin that
stopped whenever the machine had more runnable tasks than CPUs (``/proc/loadavg``) lost the one-sender
gain too (the C++ client's own threads count).

The Kafka listener does not kick it: one confluent-kafka producer with acks=all and linger.ms 0 gained
nothing measurable (3,173-3,812 -> 3,123-4,807 requests/s), and in a batched produce row (linger.ms 5)
the spin filled the gaps between requests, ~5 % of the broker's samples (py-spy) -- CPU per record for no
gain there.

Requests too far apart to be caught (a client that pauses between sends) would only burn CPU: after
``MISS_LIMIT`` spin periods in a row that no request ended, only every ``PROBE_EVERY``-th response
starts one, until a probe catches a request again.

What it costs and gives, measured on the 2-core VM (BENCHMARKS.md, session 20; alternating rounds, the
machine is noisy): a raw lock-step RocketMQ sender, p50 round trip 177-219 -> 104-195 us and 4,533-5,518
-> 5,224-8,860 sends/s at about the same server CPU per send (the work runs warm); the trio client's one
sync sender 2,585-2,737 -> 2,384-4,473 msg/s and the C++ client's 2,344-2,526 -> 2,291-3,155, each
+50-70 us of server CPU per send; 16 and 64 senders unchanged within the noise.  An idle broker
spends nothing.  ``idleSpinMicros=0`` turns it off.

An error inside the spinner is logged once (``net.idle_spin_failed``) and turns the spin off; the
listeners go on as without it.  The deadline is read from ``time.perf_counter`` (never trio's clock: a
test's mock clock does not move while a task is runnable), and each spin is bounded by ``window_s`` of
real time after the last kick.
"""

from __future__ import annotations

import os
import time

import structlog
import trio

__all__ = ["MAX_WINDOW_S", "IdleSpin"]

#: The longest window broker.conf may ask for (``idleSpinMicros``, 10 ms).
MAX_WINDOW_S = 0.010
#: Waiting for its CPU this long during one spin means other work wants it: the spin ends ...
CROWDED_NS = 50_000
#: ... and none starts for this long.
HOLD_S = 0.005
#: After this many spin periods in a row that no new request cut short, only every ``PROBE_EVERY``-th
#: response starts one (until one is cut short again).
MISS_LIMIT = 4
PROBE_EVERY = 16


log = structlog.get_logger(__name__)

#: Gives this thread's CPU to any other runnable task on it (one name: tests that count polls replace it).
_yield_cpu = getattr(os, "sched_yield", None) or (lambda: None)


def _run_delay(fd: int) -> int:
    """Nanoseconds this thread has spent runnable but waiting for its CPU (``schedstat``'s second field)."""
    try:
        return int(os.pread(fd, 128, 0).split()[1])
    except (OSError, ValueError, IndexError):
        return 0


class IdleSpin:
    """One per process (``Budget.spin``): ``kick()`` after writing a response; ``run()`` spins."""

    __slots__ = ("_held_until", "_kicked", "_misses", "_skipped", "_until", "_wake", "crowded_ns", "held", "spins",
                 "window_s")

    def __init__(self, window_s: float, crowded_ns: int = CROWDED_NS) -> None:
        if not 0.0 <= window_s <= MAX_WINDOW_S:
            raise ValueError(f"idle spin window {window_s * 1e6:.0f} us outside 0..{MAX_WINDOW_S * 1e6:.0f} us")
        self.window_s = window_s
        self.crowded_ns = crowded_ns
        self._until = 0.0
        self._held_until = 0.0
        self._wake: trio.Event | None = None
        self._kicked = False        # a kick came while this spin period ran (it was worth it)
        self._misses = 0            # spin periods in a row that no request ended
        self._skipped = 0           # kicks not spun for since the last period (misses >= MISS_LIMIT)
        #: spin periods started, and those cut short because other work wanted the CPUs (statistics)
        self.spins = 0
        self.held = 0

    def kick(self) -> None:
        """A response was written: keep polling for ``window_s`` from now (cheap; a no-op when off, or
        for ``HOLD_S`` after other work wanted the CPUs)."""
        if not self.window_s:
            return
        now = time.perf_counter()
        if now < self._held_until:
            return
        wake = self._wake
        if wake is None:            # a period is running: it goes on
            self._kicked = True
        elif self._misses >= MISS_LIMIT and self._skipped < PROBE_EVERY:
            self._skipped += 1      # the requests come too far apart to be caught: spin now and then only
            return
        self._until = now + self.window_s
        if wake is not None:
            self._wake = None
            self._skipped = 0
            wake.set()

    async def run(self) -> None:
        """Spin after each kick until its window has passed (until cancelled; returns at once when off)."""
        if not self.window_s:
            return
        try:
            fd = os.open("/proc/thread-self/schedstat", os.O_RDONLY | os.O_CLOEXEC)
        except OSError:
            fd = -1         # no schedstat: spin without asking
        try:
            while True:
                self._wake = wake = trio.Event()
                await wake.wait()
                self.spins += 1
                self._kicked = False
                start = _run_delay(fd) if fd >= 0 else 0
                while time.perf_counter() < self._until:
                    # another task wanted this CPU meanwhile: give it up
                    if fd >= 0 and _run_delay(fd) - start > self.crowded_ns:
                        self._held_until = time.perf_counter() + HOLD_S
                        self.held += 1
                        break
                    _yield_cpu()
                    await trio.lowlevel.checkpoint()
                self._misses = 0 if self._kicked else self._misses + 1
        except Exception:       # noqa: BLE001 - an optimisation must never take the listeners down
            log.error("net.idle_spin_failed", exc_info=True)
            self.window_s = 0.0         # kicks are no-ops from now on: the loop sleeps as before
        finally:
            if fd >= 0:
                os.close(fd)
