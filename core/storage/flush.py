"""FlushService: ASYNC_FLUSH background fsync and SYNC_FLUSH group commit (trio).

Theory of operation
-------------------
The store itself is synchronous; durability is driven from here.  ``run()``
is a long-lived task (start it with ``nursery.start(flusher.run)``):

The offset to report durable is read here, on the event-loop thread that
appends, and passed to ``store.flush(upto)``: the store runs its flush hooks
(the idempotent-producer journal) before the CommitLog fdatasync, so what
they make durable for those records is durable first.

* **ASYNC_FLUSH**: every ``flush_interval_ms`` it runs ``store.flush()`` on
  a worker thread (``trio.to_thread.run_sync``) if anything new was
  written, and ``store.checkpoint()`` at most once a second.
* **SYNC_FLUSH** (group commit): ``wait_durable(offset)`` registers the
  offset and wakes the flusher; the flusher runs one ``store.flush()`` for
  *all* current waiters (the flush covers everything written so far, so
  waiters that arrive during a flush are served by the next one), then
  wakes every waiter whose offset is now durable.  ``wait_durable`` returns
  False after ``sync_flush_timeout_ms`` -- the caller answers
  FLUSH_DISK_TIMEOUT, as RocketMQ does.  The background checkpoint still
  runs every second.

``busy_s()`` says how long the fsync in progress has run: the broker's
store-busy signal (``osPageCacheBusyTimeOutMills``, see the RocketMQ
gateway's ``handlers/flow.py``).

An fsync error is logged and counted; waiters keep waiting (and time out),
so the client sees FLUSH_DISK_TIMEOUT rather than a false success.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from functools import partial

import structlog
import trio
from rokka.core.storage.api import FlushDiskType, MessageStore

log = structlog.get_logger(__name__)

CHECKPOINT_INTERVAL_S = 1.0


@dataclass(frozen=True, slots=True)
class FlushStatistics:
    flushes: int
    errors: int
    waiters: int
    flushed_offset: int


class FlushService:
    def __init__(self, store: MessageStore) -> None:
        self.store = store
        self.sync = store.config.flush_disk_type is FlushDiskType.SYNC_FLUSH
        self._wakeup = trio.Event()
        self._durable_changed = trio.Event()
        self._waiters = 0
        self._flushes = 0
        self._errors = 0
        self._flush_began: float | None = None     # time.monotonic() when the fsync in progress began

    def busy_s(self) -> float:
        """Seconds the CommitLog write-back in progress has run (0.0 when none runs)."""
        began = self._flush_began
        return 0.0 if began is None else time.monotonic() - began

    def statistics(self) -> FlushStatistics:
        return FlushStatistics(self._flushes, self._errors, self._waiters, self.store.flushed_offset)

    async def wait_durable(self, offset: int) -> bool:
        """Wait until the CommitLog is durable up to ``offset``; False on sync_flush_timeout_ms."""
        if self.store.flushed_offset >= offset:
            return True
        self._waiters += 1
        try:
            with trio.move_on_after(self.store.config.sync_flush_timeout_ms / 1000):
                while self.store.flushed_offset < offset:
                    changed = self._durable_changed
                    self._wakeup.set()
                    await changed.wait()
        finally:
            self._waiters -= 1
        return self.store.flushed_offset >= offset

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Flush forever; cancel the enclosing scope to stop (a final flush is the owner's job)."""
        task_status.started()
        interval = self.store.config.flush_interval_ms / 1000
        last_checkpoint = trio.current_time()
        while True:
            timeout = interval if not self.sync else max(0.0, CHECKPOINT_INTERVAL_S)
            with trio.move_on_after(timeout if timeout > 0 else math.inf):
                await self._wakeup.wait()
            self._wakeup = trio.Event()
            await self._flush_once()
            if trio.current_time() - last_checkpoint >= CHECKPOINT_INTERVAL_S:
                last_checkpoint = trio.current_time()
                await self._checkpoint()

    async def _flush_once(self) -> None:
        store = self.store
        target = store.commitlog_max_offset     # read here, on the appending thread (see DiskStore.flush)
        if target > store.flushed_offset:
            self._flush_began = time.monotonic()
            try:
                await trio.to_thread.run_sync(partial(store.flush, target))
                self._flushes += 1
            except OSError as exc:
                self._errors += 1
                log.error("store.commitlog_fsync_failed", error=str(exc))
            finally:
                self._flush_began = None
        changed, self._durable_changed = self._durable_changed, trio.Event()
        changed.set()

    async def _checkpoint(self) -> None:
        try:
            await trio.to_thread.run_sync(self.store.checkpoint)
        except OSError as exc:
            self._errors += 1
            log.error("store.checkpoint_failed", error=str(exc))
