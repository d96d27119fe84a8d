"""Fetch read-ahead: a catching-up consumer's next Fetch, read while the client parses this one.

Theory of operation
-------------------
librdkafka (so confluent-kafka and kcat) and the Java client keep one Fetch in flight per broker:
the next request leaves only once the client has parsed the previous response.  A consumer that is
behind therefore spends every round trip twice: waiting while the broker reads and encodes, then
parsing while the broker idles.  After a Fetch response has been *sent* (``after_response`` hook of
the request context, run by the server), rokka reads, for each partition that returned records and
has more, what the same request will get at the next offset with the same partition limit, and
keeps it with the connection (``ctx.conn_state``).  The next Fetch that asks for exactly that
(topic, partition, offset, limit) takes the kept batches instead of reading; anything else is read
as usual.  Every Fetch drops what the previous one left, so nothing outlives one round trip.

What is kept is valid when it is used:

* stored records never change, and kept batches are copies (the Kafka encoding built from the
  CommitLog; ``read_batches`` has released the store's views before it returns);
* the topic must still be the same object (not deleted and re-created, which would reuse offsets);
  a fetch offset below the log start (DeleteRecords, retention) is OFFSET_OUT_OF_RANGE before
  anything kept is looked at; high watermark and log start are read fresh, as for any Fetch.

Bounded: at most ``MAX_BYTES`` per connection, at most ``maxReadAheadBytes`` over all connections
(reserved in the server's ``Budget``: what does not fit is simply not read ahead), and nothing for a
partition at its end (a consumer that follows the log pays nothing).  The reservation is given back
when the next Fetch takes the read-ahead, or when the connection ends (``ON_CLOSE`` hook), so a
consumer that stops reading, or leaves, holds nothing past that.  Filtered topics (views) are never
read ahead.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rokka.core.topics import TopicConfig
from rokka.gateway.kafka.context import ON_CLOSE, KafkaRequestContext
from rokka.gateway.kafka.handlers.common import KafkaEnv, read_batches
from rokka.net.budget import Budget

#: Most bytes of Kafka batches kept per connection.
MAX_BYTES = 16 << 20

_KEY = "fetch.readahead"
_HOOKED = "fetch.readahead.on_close"


@dataclass(frozen=True)
class Plan:
    """One partition to read ahead: Kafka ``name``/``partition`` is store ``topic``/``queue``."""

    name: str
    partition: int
    topic: str
    queue: int
    offset: int
    limit: int
    max_msgs: int
    config: TopicConfig


@dataclass(frozen=True)
class _Kept:
    plan: Plan
    data: Any           # Pieces of batches, as read_batches returns them
    count: int


class ReadAhead:
    """What the previous Fetch of one connection read ahead (taken by the next one)."""

    def __init__(self, kept: dict[tuple[str, int, int, int], _Kept], budget: Budget | None = None,
                 reserved: int = 0) -> None:
        self._kept = kept
        self._budget = budget
        self._reserved = reserved

    def release(self) -> None:
        """Give the reserved bytes back to the budget (once)."""
        if self._budget is not None and self._reserved:
            self._budget.release_read_ahead(self._reserved)
        self._reserved = 0

    def take(self, name: str, partition: int, offset: int, limit: int,
             config: TopicConfig | None) -> tuple[Any, int] | None:
        """The kept (batches, count) for exactly this read, if the topic is still the one read
        (the caller has checked the offset against the log start); else None."""
        k = self._kept.pop((name, partition, offset, limit), None)
        if k is None or config is not k.plan.config:
            return None
        return k.data, k.count


def previous(ctx: KafkaRequestContext) -> ReadAhead | None:
    """The read-ahead the previous Fetch of this connection left (dropped from the connection)."""
    ra: ReadAhead | None = ctx.conn_state.pop(_KEY, None)
    if ra is not None:
        ra.release()        # what this Fetch uses lives as long as the request, no longer
    return ra


def schedule(env: KafkaEnv, ctx: KafkaRequestContext, plans: list[Plan]) -> None:
    """Read ``plans`` ahead once this request's response has been sent."""
    if plans:
        budget = ctx.server.budget
        ctx.after_response.append(lambda: _read(env, ctx.conn_state, plans, budget))


def _read(env: KafkaEnv, conn_state: dict[str, Any], plans: list[Plan], budget: Budget) -> None:
    kept: dict[tuple[str, int, int, int], _Kept] = {}
    total = 0
    for plan in plans:
        if total >= MAX_BYTES:
            break
        if env.broker.topics.get(plan.topic) is not plan.config:
            continue
        data, count = read_batches(env, plan.topic, plan.queue, plan.offset, plan.limit, max_msgs=plan.max_msgs)
        if count:
            if not budget.reserve_read_ahead(len(data)):
                break       # the process-wide read-ahead budget is spent: read when asked
            kept[(plan.name, plan.partition, plan.offset, plan.limit)] = _Kept(plan, data, count)
            total += len(data)
    if kept:
        conn_state[_KEY] = ReadAhead(kept, budget, total)
        hooks = conn_state.get(ON_CLOSE)
        if hooks is not None and not conn_state.get(_HOOKED):
            conn_state[_HOOKED] = True
            hooks.append(lambda: _drop(conn_state))


def _drop(conn_state: dict[str, Any]) -> None:
    ra: ReadAhead | None = conn_state.pop(_KEY, None)
    if ra is not None:
        ra.release()
