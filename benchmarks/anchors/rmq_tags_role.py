"""Tag roles of ``bench_anchor_rocketmq`` with the RocketMQ C++ client (``rocketmq`` wheel); run as a subprocess.

Protocol as ``benchmarks/lib/rmq_cpp_role.py``: one JSON line of parameters on stdin, JSON lines back.

* ``fill``: ``count`` messages of ``body_size`` bytes to ``topic``, single sync sends from ``threads`` threads
  sharing one producer, tags alternating over ``tags`` (``["A", "B"]``: every second message is ``A``).
  Single sends, not batches: Apache RocketMQ 4.9 stores a C++ client batch as ONE message (the client does
  not set the header's batch flag), so a batch-filled topic would not hold the same messages on both brokers.
  The topic's first message goes alone (auto-creation); a send that fails ("No route info": the C++ client
  drops a route whose 30 s refresh timed out under load, see ``bench_rocketmq``) is retried every 200 ms.
  ``result {messages, errors}``.
* ``pull``: drains every queue of ``topic`` from offset 0 with ``PullConsumer.pull(topic, expression)``
  (``expression`` a tag expression such as ``A``; the broker filters on the tag hash, the client on the
  tag itself) and counts the messages and those whose tag is not in the expression.
  ``result {messages, foreign, seconds}`` (first to last message).
"""

from __future__ import annotations

import sys
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "interop" / "rocketmq_cpp"))

from _common import emit, finish, read_params, set_log  # noqa: E402


def run_fill(p: dict[str, Any]) -> None:
    from rocketmq.client import Message, Producer

    producer = Producer(p["group"], timeout=int(p.get("timeout_ms", 10000)))
    set_log("producer", producer._handle)
    producer.set_namesrv_addr(p["namesrv"])
    producer.start()
    tags, body, topic = list(p.get("tags", ["A", "B"])), b"x" * int(p.get("body_size", 100)), p["topic"]
    count, threads = int(p["count"]), int(p.get("threads", 16))
    sent = [0] * threads
    errors: list[str] = []
    first = Message(topic)  # the topic's first message alone: auto-creation and the route, before 64 threads
    first.set_body(body)
    first.set_tags(tags[0])
    deadline = time.monotonic() + 30
    while True:
        try:
            producer.send_sync(first)
            break
        except Exception:  # noqa: BLE001 - "No route info" until the broker registered the new topic
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)
    deadline = time.monotonic() + float(p.get("max_s", 120))

    def worker(t: int) -> None:
        msgs = []
        for tag in tags:
            m = Message(topic)
            m.set_body(body)
            m.set_tags(tag)
            msgs.append(m)
        for i in range(1 + t, count, threads):  # message i carries tags[i % len(tags)]
            for attempt in range(100):  # the client may drop a route under load
                try:
                    producer.send_sync(msgs[i % len(tags)])
                    sent[t] += 1
                    break
                except Exception as exc:  # noqa: BLE001 - retried, then reported
                    if attempt == 99 or time.monotonic() > deadline:
                        errors.append(repr(exc))
                        return
                    time.sleep(0.2)

    ts = [threading.Thread(target=worker, args=(t,)) for t in range(threads)]
    for th in ts:
        th.start()
    for th in ts:
        th.join()
    emit("result", messages=1 + sum(sent), errors=errors[:5])
    # no shutdown: the wheel's shutdown sometimes aborts the process ("terminate called after throwing an
    # instance of 'boost::thread_interrupted'") after the result is out; main() ends with os._exit instead


def run_pull(p: dict[str, Any]) -> None:
    from rocketmq.client import PullConsumer

    consumer = PullConsumer(p["group"])
    set_log("pull", consumer._handle)
    consumer.set_namesrv_addr(p["namesrv"])
    PullConsumer.offset_table.clear()
    consumer.start()
    wanted = set(str(p.get("expression", "*")).replace(" ", "").split("||"))
    n = foreign = 0
    t_first = t_last = time.perf_counter()
    deadline = time.monotonic() + float(p.get("max_s", 60))
    for msg in consumer.pull(p["topic"], str(p.get("expression", "*")), int(p.get("max_num", 32))):
        if n == 0:
            t_first = time.perf_counter()
        n += 1
        tag = msg.tags.decode() if isinstance(msg.tags, bytes) else str(msg.tags)
        foreign += "*" not in wanted and tag not in wanted
        t_last = time.perf_counter()
        if time.monotonic() > deadline:
            break
    emit("result", messages=n, foreign=foreign, seconds=t_last - t_first)  # no shutdown: see run_fill


def main() -> None:
    p = read_params()
    try:
        {"fill": run_fill, "pull": run_pull}[p["role"]](p)
    except Exception as exc:  # noqa: BLE001 - reported to the caller
        emit("error", error=repr(exc))
    emit("done")
    finish(0)


if __name__ == "__main__":
    main()
