"""Coalesced, shielded writes to one remoting stream: ``Outbox``.

Theory of operation
-------------------
A ``Channel`` (``channel.py``) hands every frame that cannot go out at once to its ``Outbox``.  Frames
queued while a write is in progress go out together in the next write (one syscall for many small
responses).  The task that finds no write in progress leads: it sends what is queued, round after
round, until the queue is empty; after ``LEAD_ROUNDS`` rounds it asks the channel to let a fresh task
lead the rest (``spawn``; its caller's own frame went out long ago).  The others wait for their round.

Each write is shielded from its caller's cancellation (a half-written frame would break the stream for
every queued one) and ended only by the write timeout (``trio.TooSlowError``) or ``cancel()`` (the
channel closes: ``trio.ClosedResourceError``).  A failed write fails every frame queued behind it, so no
writer waits forever.

Editing rule: nothing here knows frames or budgets; byte strings in, ``send_all`` out.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import trio

#: Rounds of queued frames one task writes before handing the queue to a fresh task.
LEAD_ROUNDS = 16
#: What a failed write raises to its writers.
WRITE_ERRORS = (trio.BrokenResourceError, trio.ClosedResourceError, trio.TooSlowError)


class _OutBatch:
    """Frames that go out in one write, and how that write ended."""

    __slots__ = ("parts", "done", "error")

    def __init__(self) -> None:
        self.parts: list[bytes] = []
        self.done = trio.Event()
        self.error: Exception | None = None

    def fail(self, exc: Exception) -> None:
        self.error = exc
        self.done.set()


class Outbox:
    """The write side of one stream.

    Args:
        stream: where the bytes go.
        write_timeout_s: bound of one write.
        spawn: starts ``fn()`` in a fresh task (False when it cannot: the caller keeps leading).
        closing: True once the channel is closing (a write that has not begun is refused then).
    """

    def __init__(self, stream: trio.abc.SendStream, write_timeout_s: float,
                 spawn: Callable[[Callable[[], Awaitable[None]]], bool], closing: Callable[[], bool]) -> None:
        self._stream = stream
        self._write_timeout_s = write_timeout_s
        self._spawn = spawn
        self._closing = closing
        self._out = _OutBatch()         # frames waiting for the write in progress
        self.writing = False
        self._write_scope: trio.CancelScope | None = None

    def cancel(self) -> None:
        """End the write in progress (the channel closes)."""
        if self._write_scope is not None:
            self._write_scope.cancel()

    async def send(self, data: bytes) -> None:
        """Send ``data`` with whatever else is queued; raises one of ``WRITE_ERRORS`` if its write failed."""
        batch = self._out
        batch.parts.append(data)
        if self.writing:
            await batch.done.wait()      # bounded: each write of the leader is (fail_after below)
            if batch.error is not None:
                raise batch.error
            return
        await self.lead()

    async def lead(self) -> None:
        """Write what is queued, round after round, until nothing is."""
        self.writing = True
        try:
            rounds = 0
            while (batch := self._out).parts:
                if rounds == LEAD_ROUNDS and self._spawn(self.lead):
                    return
                rounds += 1
                self._out = _OutBatch()
                parts = batch.parts
                try:
                    await self._send_shielded(parts[0] if len(parts) == 1 else b"".join(parts))
                except WRITE_ERRORS as exc:
                    batch.fail(exc)
                    self._out.fail(exc)
                    self._out = _OutBatch()
                    raise
                batch.done.set()
            self.writing = False
        except BaseException:
            self.writing = False
            if self._out.parts:         # nobody leads them now: their writers must not wait forever
                self._out.fail(trio.ClosedResourceError("the write in progress failed"))
                self._out = _OutBatch()
            raise

    async def _send_shielded(self, data: bytes) -> None:
        """``send_all`` that only the write timeout and ``cancel()`` interrupt (not the caller's cancellation)."""
        try:
            with trio.CancelScope(shield=True) as scope:
                self._write_scope = scope
                if self._closing():
                    scope.cancel()
                with trio.fail_after(self._write_timeout_s):
                    await self._stream.send_all(data)
        finally:
            self._write_scope = None
        if scope.cancelled_caught:
            raise trio.ClosedResourceError("the channel closed during the write")
