"""Send back-pressure as the Java broker signals it: SYSTEM_BUSY with Java's remarks.

Theory of operation
-------------------
The Java broker runs sends on a thread pool with a bounded queue (``sendThreadPoolQueueCapacity``,
10000) and refuses, with SYSTEM_BUSY (code 2), what it cannot take (``NettyRemotingAbstract`` and
``BrokerFastFailure`` of 4.9.7):

* the pool's queue is full: ``[OVERLOAD]system busy, start flow control for a while``;
* the store is busy (``isOSPageCacheBusy``: the put in progress has held the CommitLog longer than
  ``osPageCacheBusyTimeOutMills``, 1000 ms): ``[REJECTREQUEST]system busy, start flow control for a
  while`` for a new send, ``[PCBUSY_CLEAN_QUEUE]broker busy, ...`` for those already queued
  (``brokerFastFailureEnable``);
* a send waited in the queue ``waitTimeMillsInSendQueue`` (200 ms) or longer:
  ``[TIMEOUT_CLEAN_QUEUE]broker busy, start flow control for a while, period in queue: Nms, size of
  queue: M`` (``brokerFastFailureEnable``).

Clients treat SYSTEM_BUSY as "back off and retry" (Java 4.9's producer throws MQBrokerException with
it, 5.x retries it; the C++ client throws).

rokka's equivalents (one event loop, no send thread pool):

* the send queue is every send accepted and not yet answered, on all connections (a SYNC_FLUSH send
  waiting for its group commit included: its body is held until then); ``SendGate.inflight``;
* the time a send waited in the queue is from the moment its frame was read
  (``RemotingCommand.received_at``) to the moment its handler starts, and it counts only when the
  send was queued behind others: other sends were in flight, or the connection's reader held it
  behind requests whose bodies filled its budget (``RemotingCommand.held``).  A send with nothing
  ahead of it is at the head of an empty queue, which Java's idle send thread takes at once
  (``cleanExpiredRequestInQueue`` only expires requests still queued), however late the event loop
  came to it: on a loaded 2-core machine a lone send is never refused for a slow scheduler;
* the store is busy when the CommitLog write-back in progress (the flush service's fsync) has run
  longer than ``osPageCacheBusyTimeOutMills`` under SYNC_FLUSH, where sends wait for it: their
  writes are not getting through, which is what Java's check detects (under ASYNC_FLUSH a slow
  fsync delays no send, and no send is refused for it).  A send that arrives then is refused with
  REJECTREQUEST; one that was queued across it (its wait began before the stall passed the limit) is
  refused with PCBUSY_CLEAN_QUEUE.

Gated: SEND_MESSAGE, SEND_MESSAGE_V2, SEND_BATCH_MESSAGE and CONSUMER_SEND_MSG_BACK (Java's send pool
runs them all).  Java's fourth remark, ``[PC_SYNCHRONIZED]broker busy, ...`` (SYSTEM_ERROR), comes from
the put itself when the store turned busy between the admission check and the put; in rokka the check
and the put run without a yield in between, so it does not occur.

A refused send writes nothing.  Refusals log one rate-limited ``rocketmq.send_busy`` line per client
address.  ``refusal`` is checked before anything else in the send handler, ``enter`` / ``leave``
bracket the rest.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import structlog
from rokka.net.logs import limited
from rokka.net.remoting.codec.codes import ResponseCode

if TYPE_CHECKING:
    from rokka.core.broker import Broker
    from rokka.net.remoting.codec.remoting import RemotingCommand

log = structlog.get_logger(__name__)

REMARK_OVERLOAD = "[OVERLOAD]system busy, start flow control for a while"
REMARK_REJECT = "[REJECTREQUEST]system busy, start flow control for a while"
REMARK_PCBUSY = "[PCBUSY_CLEAN_QUEUE]broker busy, start flow control for a while, period in queue: {}ms, " \
                "size of queue: {}"
REMARK_TIMEOUT = "[TIMEOUT_CLEAN_QUEUE]broker busy, start flow control for a while, period in queue: {}ms, " \
                 "size of queue: {}"


@dataclass
class SendGate:
    """Process-wide state of the send queue (one per broker context)."""

    broker: Broker
    inflight: int = 0           # sends accepted and not yet answered
    refused: int = 0            # SYSTEM_BUSY answers so far

    def refusal(self, req: RemotingCommand, peer: Any) -> str | None:
        """The SYSTEM_BUSY remark for ``req``, or None when it may go on."""
        cfg = self.broker.cfg
        remark = None
        if self.inflight >= max(1, cfg.send_thread_pool_queue_capacity):
            remark = REMARK_OVERLOAD
        else:
            now = time.monotonic()
            busy_s = self.broker.store_busy_s()
            waited_ms = int((now - req.received_at) * 1000) if req.received_at else 0
            if busy_s * 1000 > cfg.os_page_cache_busy_time_out_mills:
                stalled_since = now - busy_s + cfg.os_page_cache_busy_time_out_mills / 1000
                if cfg.broker_fast_failure_enable and req.received_at and req.received_at < stalled_since:
                    remark = REMARK_PCBUSY.format(waited_ms, self.inflight)
                else:
                    remark = REMARK_REJECT
            elif (cfg.broker_fast_failure_enable and waited_ms >= cfg.wait_time_mills_in_send_queue
                  and (self.inflight > 0 or req.held)):
                remark = REMARK_TIMEOUT.format(waited_ms, self.inflight)
        if remark is not None:
            self.refused += 1
            host = str(peer[0]) if isinstance(peer, tuple) and peer else "?"
            limited(log, "warning", "rocketmq.send_busy", host, code=int(ResponseCode.SYSTEM_BUSY),
                    remark=remark, queue=self.inflight, refused_total=self.refused)
        return remark
