"""Message-arrival notifications (what wakes long-polling pulls and Kafka fetches).

Theory of operation
-------------------
The store calls ``ArrivalHub.notify`` synchronously after it dispatches a
message to a ConsumeQueue.  Waiters subscribe a plain callback for one
(topic, queue); the gateway's callback typically sets a ``trio.Event``.  The
hub is synchronous and never blocks: callbacks must be cheap and must not
raise (exceptions are logged and swallowed so a bad waiter cannot break an
append).  Subscriptions are removed by the waiter when it finishes, whether
it was woken or timed out.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable

import structlog

log = structlog.get_logger(__name__)

# (queue_offset, tags_code, properties); code and properties None: a run whose records may match.
Callback = Callable[[int, int | None, dict[str, str] | None], None]


class ArrivalHub:
    def __init__(self) -> None:
        self._waiters: dict[tuple[str, int], dict[int, Callback]] = {}
        self._ids = itertools.count(1)

    def subscribe(self, topic: str, queue_id: int, callback: Callback) -> tuple[str, int, int]:
        token = next(self._ids)
        self._waiters.setdefault((topic, queue_id), {})[token] = callback
        return (topic, queue_id, token)

    def unsubscribe(self, token: tuple[str, int, int]) -> None:
        topic, queue_id, tid = token
        waiters = self._waiters.get((topic, queue_id))
        if waiters is not None:
            waiters.pop(tid, None)
            if not waiters:
                del self._waiters[(topic, queue_id)]

    def notify(self, topic: str, queue_id: int, queue_offset: int, tags_code: int | None,
               properties: dict[str, str] | None) -> None:
        waiters = self._waiters.get((topic, queue_id))
        if not waiters:
            return
        for cb in list(waiters.values()):
            try:
                cb(queue_offset, tags_code, properties)
            except Exception:  # noqa: BLE001
                log.exception("arrivals.callback_failed", topic=topic, queue_id=queue_id)

    def waiter_count(self) -> int:
        return sum(len(w) for w in self._waiters.values())
