"""RocketMQ-protocol I/O for the Spark connector: queues, offsets, ranged pulls, sends.

Theory of operation
-------------------
Spark calls the connector from plain threads (driver) and from Python worker processes
(executors); none of them runs trio.  Every entry point here is therefore synchronous and wraps
one ``trio.run`` around a short-lived ``RemotingClient`` (``run_with_client``).  A connect on
loopback costs well under a millisecond, so a partition read runs one ``trio.run`` per chunk of
messages and yields between chunks (a generator cannot yield across ``trio.run``).

Reading a range ``[start, end)`` of one queue (``pull_range``): PULL_MESSAGE from the queue's
broker (the route's master), up to ``pull_batch`` messages per request, the next request sent
before the previous body is decoded so the broker works while we decode.  Filtering (TAG or
SQL92) happens on the broker; ``nextBeginOffset`` skips what did not match.  Messages at or past
``end`` are dropped, so a range is exact whatever the broker returns.

Failures: connection errors and timeouts (a broker restarting) are retried with a route refresh
for ``retry_s`` seconds, then raised; OFFSET_MOVED (data already deleted) raises ``DataLossError``
unless ``fail_on_data_loss`` is off, in which case the range continues at ``nextBeginOffset``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TypeVar

import structlog
import trio
from rokka.net.remoting.channel import ChannelClosedError, RequestTimeoutError
from rokka.net.remoting.client import (
    ClientError,
    ConnectError,
    MessageQueue,
    NamesrvClient,
    NoRouteError,
    OutMessage,
    Producer,
    PullConsumer,
    RemotingClient,
    ResponseError,
    SendResult,
)
from rokka.net.remoting.client.tools import first_offset_at_or_after
from rokka.net.remoting.codec.codes import RequestCode, ResponseCode
from rokka.net.remoting.codec.remoting import RemotingCommand
from rokka.net.remoting.codec.request_headers import PullMessageRequestHeader
from rokka.pipeline.options import EARLIEST, LATEST, OffsetSpec, queue_key

log = structlog.get_logger(__name__)

T = TypeVar("T")
# NoRouteError: after a broker restart its route is back once it re-registers (seconds).
RETRYABLE = (ConnectError, RequestTimeoutError, ChannelClosedError, trio.TooSlowError, NoRouteError)
_PULL_OK = (ResponseCode.SUCCESS, ResponseCode.PULL_NOT_FOUND, ResponseCode.PULL_RETRY_IMMEDIATELY,
            ResponseCode.PULL_OFFSET_MOVED)
FLAG_SUBSCRIPTION = 0x4


class DataLossError(RuntimeError):
    """Messages the read needs were already deleted from the broker (OFFSET_MOVED)."""


@dataclass(frozen=True, slots=True)
class QueueRange:
    """One queue's bounds: ``min`` (earliest available) and ``max`` (next offset to be written)."""

    mq: MessageQueue
    min: int
    max: int


def run_with_client(fn: Callable[[RemotingClient], Awaitable[T]], *, timeout_s: float = 120.0,
                    credentials: tuple[str, str] | None = None) -> T:
    """Run ``fn(client)`` in a fresh trio loop with a fresh RemotingClient (bounded); ``credentials``
    (accessKey, secretKey) sign every request for brokers with aclEnable."""
    async def main() -> T:
        with trio.fail_after(timeout_s):
            async with RemotingClient(timeout_s=10.0, credentials=credentials) as rc:
                return await fn(rc)
    try:
        return trio.run(main)
    except BaseExceptionGroup as group:  # the client's nursery wraps errors; show the one that matters
        leaf = _single_leaf(group)
        if leaf is None:
            raise
        raise leaf from None


def _single_leaf(group: BaseExceptionGroup) -> BaseException | None:
    excs = list(group.exceptions)
    while len(excs) == 1 and isinstance(excs[0], BaseExceptionGroup):
        excs = list(excs[0].exceptions)
    return excs[0] if len(excs) == 1 else None


async def retrying(what: str, retry_s: float, call: Callable[[], Awaitable[T]]) -> T:
    """``call()`` again on network errors (0.25 s .. 2 s apart) until ``retry_s`` has passed."""
    deadline = trio.current_time() + retry_s
    delay = 0.25
    while True:
        try:
            return await call()
        except RETRYABLE as exc:
            if trio.current_time() + delay > deadline:
                raise
            log.warning("pipeline.rokka_call_failed_retrying", what=what, error=repr(exc), delay_s=delay)
            await trio.sleep(delay)
            delay = min(delay * 2, 2.0)


# -- queues and offsets -------------------------------------------------------------------------

async def queue_ranges(rc: RemotingClient, namesrv: str, topics: Sequence[str], retry_s: float,
                       group: str) -> list[QueueRange]:
    """Every readable queue of ``topics`` with its min/max offsets (sorted)."""
    consumer = PullConsumer(rc, NamesrvClient(rc, namesrv), group)
    out: list[QueueRange] = []
    for topic in topics:
        mqs = await retrying(f"route {topic}", retry_s, lambda t=topic: consumer.fetch_subscribe_queues(t))
        for mq in mqs:
            lo = await retrying("min offset", retry_s, lambda m=mq: consumer.min_offset(m))
            hi = await retrying("max offset", retry_s, lambda m=mq: consumer.max_offset(m))
            out.append(QueueRange(mq, lo, hi))
    return sorted(out, key=lambda r: r.mq)


async def resolve_offsets(rc: RemotingClient, namesrv: str, ranges: Iterable[QueueRange], spec: OffsetSpec,
                          *, default: int, retry_s: float, group: str) -> dict[MessageQueue, int]:
    """Absolute offset of each queue for ``spec`` (clamped to the queue's [min, max])."""
    consumer = PullConsumer(rc, NamesrvClient(rc, namesrv), group)
    out: dict[MessageQueue, int] = {}
    for r in ranges:
        if spec.kind == "timestamp":
            # RocketMQ's search answers the *nearest* message; step to the first stored at/after the time
            off = await retrying("search offset", retry_s,
                                 lambda m=r.mq: first_offset_at_or_after(consumer, m, spec.timestamp_ms))
        else:
            wanted = {"earliest": EARLIEST, "latest": LATEST}.get(spec.kind, default)
            if spec.kind == "json":
                wanted = spec.for_queue(r.mq.topic, queue_key(r.mq.broker_name, r.mq.queue_id), default)
            off = r.min if wanted == EARLIEST else r.max if wanted == LATEST else wanted
        out[r.mq] = max(r.min, min(off, r.max))
    return out


async def commit_group_offsets(rc: RemotingClient, namesrv: str, group: str,
                               offsets: dict[MessageQueue, int], retry_s: float) -> None:
    """UPDATE_CONSUMER_OFFSET for each queue (so ``rokka admin consumerProgress`` shows the lag)."""
    consumer = PullConsumer(rc, NamesrvClient(rc, namesrv), group)
    for mq, off in sorted(offsets.items()):
        await retrying("commit offset", retry_s, lambda m=mq, o=off: consumer.update_offset(m, o))


# -- ranged reads --------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class PullSpec:
    """What a ranged read needs besides the queue and range."""

    namesrv: str
    group: str
    expression: str
    expression_type: str
    pull_batch: int
    fail_on_data_loss: bool
    retry_s: float
    credentials: tuple[str, str] | None = None


class _Puller:
    """PULL_MESSAGE with a chosen expression type (the client's ``pull`` only speaks TAG)."""

    def __init__(self, rc: RemotingClient, spec: PullSpec) -> None:
        self.rc = rc
        self.spec = spec
        self.consumer = PullConsumer(rc, NamesrvClient(rc, spec.namesrv), spec.group)

    async def pull(self, mq: MessageQueue, offset: int, max_nums: int) -> tuple[int, int, bytes, str | None]:
        s = self.spec
        header = PullMessageRequestHeader(
            consumer_group=s.group, topic=mq.topic, queue_id=mq.queue_id, queue_offset=offset, max_msg_nums=max_nums,
            sys_flag=FLAG_SUBSCRIPTION, commit_offset=0, suspend_timeout_millis=0, subscription=s.expression,
            sub_version=0, expression_type=s.expression_type)

        async def once() -> RemotingCommand:
            addr = await self.consumer.broker_addr(mq)
            try:
                return await self.rc.invoke_ok(addr, header.command(RequestCode.PULL_MESSAGE),
                                               15.0, _PULL_OK)
            except RETRYABLE:
                await self.consumer.fetch_subscribe_queues(mq.topic)  # refresh the route
                raise

        resp = await retrying(f"pull {mq}", s.retry_s, once)
        nxt = int(resp.ext_fields.get("nextBeginOffset", offset))
        return resp.code, nxt, resp.body if resp.code == ResponseCode.SUCCESS else b"", resp.remark


async def pull_range(rc: RemotingClient, spec: PullSpec, mq: MessageQueue, start: int, end: int,
                     limit: int, sink: Callable[[bytes, int], None]) -> int:
    """Pull ``[start, min(end, start+limit))`` of ``mq`` (filtered) into ``sink``; returns where it stopped.

    ``sink(body, stop)`` gets each PULL body undecoded; only its records with a queue offset below
    ``stop`` belong to the range.  The next request is in flight while ``sink`` runs.
    """
    puller = _Puller(rc, spec)
    stop = min(end, start + limit)
    offset = start
    empty_polls = 0
    send, recv = trio.open_memory_channel[tuple[int, int, bytes, str | None, int]](1)

    async def prefetch() -> None:
        pos = offset
        async with send:
            while pos < stop:
                code, nxt, body, remark = await puller.pull(mq, pos, min(spec.pull_batch, stop - pos))
                await send.send((code, nxt, body, remark, pos))
                if code == ResponseCode.PULL_OFFSET_MOVED and spec.fail_on_data_loss:
                    return
                if nxt <= pos:  # nothing yet at pos (not dispatched): back off briefly
                    await trio.sleep(0.05)
                pos = max(pos, nxt)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(prefetch)
        async with recv:
            async for code, nxt, body, remark, pos in recv:
                if code == ResponseCode.PULL_OFFSET_MOVED:
                    if spec.fail_on_data_loss:
                        raise DataLossError(f"{mq}: offset {pos} is no longer available ({remark}); "
                                            "set failOnDataLoss=false to skip deleted messages")
                    log.warning("pipeline.deleted_messages_skipped", mq=str(mq), offset=pos, next=nxt)
                if body:
                    sink(body, stop)
                empty_polls = empty_polls + 1 if nxt <= pos else 0
                if empty_polls > max(20, int(spec.retry_s / 0.05)):
                    raise ClientError(f"{mq}: no progress at offset {pos} (code {code}: {remark})")
                offset = max(offset, min(nxt, stop))
    return offset


# -- sending -------------------------------------------------------------------------------------

async def send_all(rc: RemotingClient, namesrv: str, group: str, topic: str,
                   batches: Iterable[tuple[int | None, list[OutMessage]]], retry_s: float) -> list[SendResult]:
    """SEND_BATCH_MESSAGE per (queue id or None, messages) group; network errors retried."""
    producer = Producer(rc, NamesrvClient(rc, namesrv), group, send_timeout_s=10.0)
    results = []
    for queue, msgs in batches:
        if not msgs:
            continue
        if queue is None and len(msgs) == 1:
            results.append(await retrying("send", retry_s, lambda m=msgs[0]: producer.send(topic, m)))
        else:
            results.append(await retrying("send batch", retry_s,
                                          lambda m=msgs, q=queue: producer.send_batch(topic, m, queue=q)))
    return results


__all__ = ["DataLossError", "PullSpec", "QueueRange", "ResponseError", "commit_group_offsets", "pull_range",
           "queue_ranges", "resolve_offsets", "retrying", "run_with_client", "send_all"]
