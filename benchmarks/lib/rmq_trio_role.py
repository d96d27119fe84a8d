"""Our trio RocketMQ client's load roles for ``bench_rocketmq``; run as a subprocess.

Run: ``python -m benchmarks.lib.rmq_trio_role`` with one JSON line of parameters on stdin; JSON lines
come back on stdout (the same protocol as ``rmq_cpp_role``, so both clients are measured the same
way, each in its own process).

Roles (``params["role"]``):

* ``send``: ``mode`` sync | oneway | batch; ``tasks`` concurrent trio tasks share one
  ``Producer`` (one connection); ``count`` calls in total or ``max_s``.  Oneway ends with one
  sync send per task as a fence.  Emits ``result {calls, messages, seconds, p50_us, p99_us}``.
* ``pull``: pulls ``topic`` from offset 0 on every queue (``max_nums`` 32, ``tasks`` per queue 1)
  until ``expect`` messages or ``max_s``; emits ``result {messages, requests, seconds}``.
  ``echo: true`` instead repeats pulls of queue 0 (the echo server returns no messages) for
  ``count`` requests and reports requests/s.
* ``poll``: the long-polling pull loop (suspend 15 s) of an e2e consumer: starts at each queue's
  max offset, measures ``now - ts`` of bodies ``ts:<time_ns>``; stops on stdin EOF or ``max_s``.
  Emits ``ready`` once every queue has a pull outstanding, then ``result {received, p50_us,
  p99_us, max_us}``.
* ``paced``: sends ``count`` messages ``ts:<time_ns>`` at ``rate`` msg/s (each send in its own
  task at its slot, so one slow send does not delay the next); first ``probes`` messages ``probe``
  every 0.2 s until stdin says ``{"go": true}``.  Emits ``result {sent, seconds, errors}``.
* ``count``: ``result {stored}``, the sum of the max offsets of every queue of ``topic``.
"""

from __future__ import annotations

import json
import sys
import time
from typing import Any

import structlog
import trio
from rokka.net.remoting.client import NamesrvClient, OutMessage, Producer, PullConsumer, RemotingClient
from rokka.net.remoting.client.types import MessageQueue


def emit(event: str, **fields: Any) -> None:
    sys.stdout.write(json.dumps({"event": event, **fields}) + "\n")
    sys.stdout.flush()


def percentile(sorted_vals: list[float], q: float) -> float:
    if not sorted_vals:
        return float("nan")
    return sorted_vals[min(len(sorted_vals) - 1, int(q * len(sorted_vals)))]


async def run_send(rc: RemotingClient, ns: NamesrvClient, p: dict[str, Any]) -> None:
    producer = Producer(rc, ns, p["group"], send_timeout_s=10.0)
    topic, mode, batch = p["topic"], p["mode"], int(p.get("batch_size", 1))
    body = b"x" * int(p.get("body_size", 100))
    for _ in range(int(p.get("warmup", 200))):
        await producer.send(topic, body, tags="bench")
    emit("warm")
    tasks = int(p.get("tasks", 8))
    per_task = max(1, int(p["count"]) // tasks)
    deadline = time.monotonic() + float(p.get("max_s", 30))
    lats: list[float] = []
    pc = time.perf_counter

    async def worker() -> None:
        msgs = [OutMessage(body, tags="bench") for _ in range(batch)]
        for _ in range(per_task):
            t0 = pc()
            if mode == "sync":
                await producer.send(topic, body, tags="bench")
            elif mode == "oneway":
                await producer.send_oneway(topic, body, tags="bench")
            else:
                await producer.send_batch(topic, msgs)
            lats.append(pc() - t0)
            if time.monotonic() > deadline:
                break
        if mode == "oneway":
            await producer.send(topic, body, tags="bench")

    t0 = pc()
    async with trio.open_nursery() as nursery:
        for _ in range(tasks):
            nursery.start_soon(worker)
    dt = pc() - t0
    lats.sort()
    emit("result", calls=len(lats), messages=len(lats) * (batch if mode == "batch" else 1), seconds=dt,
         p50_us=percentile(lats, 0.5) * 1e6, p99_us=percentile(lats, 0.99) * 1e6)


async def run_pull(rc: RemotingClient, ns: NamesrvClient, p: dict[str, Any]) -> None:
    consumer = PullConsumer(rc, ns, p["group"])
    queues = await consumer.fetch_subscribe_queues(p["topic"])
    deadline = time.monotonic() + float(p.get("max_s", 60))
    stats = {"messages": 0, "requests": 0}
    max_nums = int(p.get("max_nums", 32))

    async def drain(mq: MessageQueue, limit: int) -> None:
        offset = 0
        for _ in range(limit):
            res = await consumer.pull(mq, offset, max_nums=max_nums)
            stats["requests"] += 1
            stats["messages"] += len(res.messages)
            if not res.messages and not p.get("echo"):
                return
            offset = res.next_begin_offset
            if time.monotonic() > deadline:
                return

    t0 = time.perf_counter()
    async with trio.open_nursery() as nursery:
        if p.get("echo"):
            for _ in range(int(p.get("tasks", 4))):
                nursery.start_soon(drain, queues[0], int(p["count"]) // int(p.get("tasks", 4)))
        else:
            for mq in queues:
                nursery.start_soon(drain, mq, 1_000_000)
    emit("result", seconds=time.perf_counter() - t0, **stats)


async def run_poll(rc: RemotingClient, ns: NamesrvClient, p: dict[str, Any]) -> None:
    consumer = PullConsumer(rc, ns, p["group"])
    queues = await consumer.fetch_subscribe_queues(p["topic"])
    lats: list[float] = []
    store_lags: list[float] = []    # store timestamp - send time: where a delay comes from
    started = {"n": 0}

    async def loop(mq: MessageQueue) -> None:
        offset = await consumer.max_offset(mq)
        first = True
        while True:
            if first:
                started["n"] += 1
                if started["n"] == len(queues):
                    trio.lowlevel.current_trio_token().run_sync_soon(lambda: emit("ready"))
                first = False
            res = await consumer.pull(mq, offset, max_nums=32, suspend_ms=15000)
            now = time.time_ns()
            for m in res.messages:
                if m.body.startswith(b"ts:"):
                    sent = int(m.body[3:])
                    lats.append((now - sent) / 1000)
                    store_lags.append(m.store_timestamp * 1000 - sent / 1000)
            offset = res.next_begin_offset

    async with trio.open_nursery() as nursery:
        for mq in queues:
            nursery.start_soon(loop, mq)
        with trio.move_on_after(float(p.get("max_s", 120))):
            await trio.to_thread.run_sync(sys.stdin.read, abandon_on_cancel=True)
        nursery.cancel_scope.cancel()
    lats.sort()
    store_lags.sort()
    emit("result", received=len(lats), p50_us=percentile(lats, 0.5), p99_us=percentile(lats, 0.99),
         max_us=lats[-1] if lats else float("nan"), store_p50_us=percentile(store_lags, 0.5),
         store_p99_us=percentile(store_lags, 0.99))


async def run_paced(rc: RemotingClient, ns: NamesrvClient, p: dict[str, Any]) -> None:
    producer = Producer(rc, ns, p["group"], send_timeout_s=10.0)
    topic = p["topic"]
    go = trio.Event()

    async def watch() -> None:
        line = await trio.to_thread.run_sync(sys.stdin.readline, abandon_on_cancel=True)
        if line:
            go.set()

    errors: list[str] = []
    async with trio.open_nursery() as nursery:
        nursery.start_soon(watch)
        with trio.move_on_after(float(p.get("probe_max_s", 60))):
            while not go.is_set():
                await producer.send(topic, b"probe")
                await trio.sleep(0.2)
        emit("going")
        rate, count = float(p["rate"]), int(p["count"])

        async def one() -> None:
            try:
                await producer.send(topic, f"ts:{time.time_ns()}".encode())
            except Exception as exc:  # noqa: BLE001 - counted and reported
                errors.append(repr(exc))

        t0 = trio.current_time()
        async with trio.open_nursery() as senders:
            for i in range(count):
                await trio.sleep_until(t0 + i / rate)
                senders.start_soon(one)
        dt = trio.current_time() - t0
        nursery.cancel_scope.cancel()
    emit("result", sent=count - len(errors), seconds=dt, errors=errors[:5])


async def run_count(rc: RemotingClient, ns: NamesrvClient, p: dict[str, Any]) -> None:
    consumer = PullConsumer(rc, ns, p["group"])
    queues = await consumer.fetch_subscribe_queues(p["topic"])
    total = 0
    for mq in queues:
        total += await consumer.max_offset(mq)
    emit("result", stored=total)


async def amain(p: dict[str, Any]) -> None:
    roles = {"send": run_send, "pull": run_pull, "poll": run_poll, "paced": run_paced, "count": run_count}
    role = roles[p["role"]]
    async with RemotingClient(timeout_s=10.0) as rc:
        ns = NamesrvClient(rc, [p["namesrv"]])
        await role(rc, ns, p)


def main() -> None:
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(30),
                        logger_factory=structlog.PrintLoggerFactory(sys.stderr))
    line = sys.stdin.readline()
    try:
        trio.run(amain, json.loads(line))
    except Exception as exc:  # noqa: BLE001 - reported to the caller
        emit("error", error=repr(exc))
    emit("done")


if __name__ == "__main__":
    main()
