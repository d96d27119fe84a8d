"""RocketMQ C++ client (the ``rocketmq`` 0.4.4 wheel) load roles for ``bench_rocketmq``; run as a subprocess.

Protocol (same as ``interop/rocketmq_cpp``): the first stdin line is a JSON object of parameters,
one JSON object per stdout line comes back, the script ends with ``os._exit``.

Roles (``params["role"]``):

* ``send``: ``mode`` sync | oneway | batch; ``threads`` producer threads share one C++ producer;
  each thread reuses its own prebuilt message(s) (the broker treats the UNIQ_KEY as opaque) and
  sends until ``count`` calls are done in total or ``max_s`` passed.  Every call is timed
  (``perf_counter``); oneway ends with one sync send per thread as a fence (the broker answers it
  after the frames before it on the same connection).  Emits ``result {calls, messages, seconds,
  p50_us, p99_us, errors}``.
* ``push``: a push consumer; bodies ``ts:<time_ns>`` give produce-to-consume latency, bodies
  ``probe`` are reported once (``probe``) so the caller knows the consumer is assigned.  Stops on
  stdin EOF or after ``max_s``; emits ``result {received, p50_us, p99_us, max_us}``.
* ``pull``: drains every queue of ``topic`` with the wheel's ``PullConsumer.pull``; emits
  ``result {messages, seconds}`` (first to last message).
"""

from __future__ import annotations

import ctypes
import sys
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "interop" / "rocketmq_cpp"))

from _common import emit, finish, read_params, set_log  # noqa: E402


def percentile(sorted_vals: list[float], q: float) -> float:
    if not sorted_vals:
        return float("nan")
    return sorted_vals[min(len(sorted_vals) - 1, int(q * len(sorted_vals)))]


def run_send(p: dict[str, Any]) -> None:
    from rocketmq.client import Message, Producer
    from rocketmq.ffi import dll

    producer = Producer(p["group"], timeout=int(p.get("timeout_ms", 5000)))
    set_log("producer", producer._handle)
    producer.set_namesrv_addr(p["namesrv"])
    # The C++ client zlib-compresses any body over 4 KiB, a 100-message batch body included (the
    # broker rejects that: "bad batch body"); Java never compresses batches, so neither do we.
    dll.SetProducerCompressMsgBodyOverHowmuch.argtypes = [ctypes.c_void_p, ctypes.c_int]
    dll.SetProducerCompressMsgBodyOverHowmuch(producer._handle, 1 << 30)
    producer.start()
    body = b"x" * int(p.get("body_size", 100))
    mode, topic, batch = p["mode"], p["topic"], int(p.get("batch_size", 1))

    def message() -> Any:
        m = Message(topic)
        m.set_body(body)
        m.set_tags("bench")
        return m

    for _ in range(int(p.get("warmup", 200))):  # routes, connection, broker-side topic creation
        producer.send_sync(message())
    emit("warm")
    threads = int(p.get("threads", 8))
    per_thread = max(1, int(p["count"]) // threads)
    deadline = time.monotonic() + float(p.get("max_s", 30))
    lats: list[list[float]] = [[] for _ in range(threads)]
    errors: list[str] = []

    def worker(i: int) -> None:
        msg = message()
        msgs = [message() for _ in range(batch)] if mode == "batch" else []
        out = lats[i]
        pc = time.perf_counter
        try:
            for _ in range(per_thread):
                t0 = pc()
                if mode == "sync":
                    producer.send_sync(msg)
                elif mode == "oneway":
                    producer.send_oneway(msg)
                else:
                    producer.send_batch(msgs)
                out.append(pc() - t0)
                if time.monotonic() > deadline:
                    break
            if mode == "oneway":
                producer.send_sync(msg)
        except Exception as exc:  # noqa: BLE001 - reported
            errors.append(repr(exc))

    ts = [threading.Thread(target=worker, args=(i,)) for i in range(threads)]
    t0 = time.perf_counter()
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    dt = time.perf_counter() - t0
    all_lats = sorted(x for per in lats for x in per)
    calls = len(all_lats)
    emit("result", calls=calls, messages=calls * (batch if mode == "batch" else 1), seconds=dt,
         p50_us=percentile(all_lats, 0.50) * 1e6, p99_us=percentile(all_lats, 0.99) * 1e6, errors=errors[:5])
    producer.shutdown()


def run_push(p: dict[str, Any]) -> None:
    from rocketmq.client import PushConsumer

    consumer = PushConsumer(p["group"])
    set_log("push", consumer._handle)
    consumer.set_namesrv_addr(p["namesrv"])
    consumer.set_thread_count(int(p.get("threads", 4)))
    lock = threading.Lock()
    lats: list[float] = []
    probed = threading.Event()

    def on_message(msg: Any) -> None:
        now = time.time_ns()
        body = msg.body
        if body.startswith(b"ts:"):
            with lock:
                lats.append((now - int(body[3:])) / 1000)
        elif not probed.is_set():
            probed.set()
            emit("probe")

    consumer.subscribe(p["topic"], on_message, "*")
    consumer.start()
    emit("started")
    stop = threading.Event()
    threading.Thread(target=lambda: (sys.stdin.read(), stop.set()), daemon=True).start()
    stop.wait(timeout=float(p.get("max_s", 120)))
    consumer.shutdown()
    with lock:
        s = sorted(lats)
    emit("result", received=len(s), p50_us=percentile(s, 0.5), p99_us=percentile(s, 0.99),
         max_us=s[-1] if s else float("nan"))


def run_pull(p: dict[str, Any]) -> None:
    from rocketmq.client import PullConsumer

    consumer = PullConsumer(p["group"])
    set_log("pull", consumer._handle)
    consumer.set_namesrv_addr(p["namesrv"])
    PullConsumer.offset_table.clear()
    consumer.start()
    n = 0
    t_first = t_last = time.perf_counter()
    deadline = time.monotonic() + float(p.get("max_s", 60))
    for _ in consumer.pull(p["topic"], "*", int(p.get("max_num", 32))):
        if n == 0:
            t_first = time.perf_counter()
        n += 1
        t_last = time.perf_counter()
        if time.monotonic() > deadline:
            break
    emit("result", messages=n, seconds=t_last - t_first)
    consumer.shutdown()


def main() -> None:
    p = read_params()
    try:
        {"send": run_send, "push": run_push, "pull": run_pull}[p["role"]](p)
    except Exception as exc:  # noqa: BLE001 - reported to the caller
        emit("error", error=repr(exc))
    emit("done")
    finish(0)


if __name__ == "__main__":
    main()
