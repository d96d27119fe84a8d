"""RocketMQ C++ client (``rocketmq==0.4.4``) roles of the interop matrix (see ``_role``).

argv: ``cpp_role.py <producer|consumer>``.
Producer params: namesrv, group.  Sends each message with ``send_sync`` (KEYS, TAGS, user
properties, delay level from the spec).  The wheel has no transaction producer (its C API exports
no transactional create function), so jobs with ``txn`` are refused.
Consumer params: namesrv, group, jobs, timeout_s, linger_s: a clustering PushConsumer subscribed to
every job's topic with the job's tag expression; offsets are committed by the client itself
(periodically and at shutdown).
"""

from __future__ import annotations

import os
import sys
import threading
import time
from typing import Any

from _role import Counts, emit, finish, read_params, run_producer

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "rocketmq_cpp"))
from _common import set_log, to_str  # noqa: E402 - the C++ scripts' log-path helper


def producer(p: dict[str, Any]) -> None:
    from rocketmq.client import Message, Producer

    prod = Producer(p["group"], timeout=10000)
    set_log("producer", prod._handle)
    prod.set_namesrv_addr(p["namesrv"])
    prod.start()

    def produce(jobs: list[dict[str, Any]]) -> list[dict[str, Any]]:
        out = []
        for job in jobs:
            if job.get("txn"):
                out.append({"acked": 0, "error": "the rocketmq 0.4.4 wheel has no transaction producer"})
                continue
            acked, err = 0, None
            for spec in job["messages"]:
                m = Message(job["topic"])
                m.set_body(spec["value"].encode())
                if spec.get("tag"):
                    m.set_tags(spec["tag"])
                if spec.get("key"):
                    m.set_keys(spec["key"])
                for k, v in spec["headers"]:
                    m.set_property(k, v)
                if spec.get("delay"):
                    m.set_delay_time_level(int(spec["delay"]))
                try:
                    res = prod.send_sync(m)
                    if int(res.status) == 0:
                        acked += 1
                    else:
                        err = err or f"status {res.status}"
                except Exception as exc:  # noqa: BLE001
                    err = err or repr(exc)
            out.append({"acked": acked, "error": err})
        return out

    run_producer(produce)
    prod.shutdown()


def consumer(p: dict[str, Any]) -> None:
    from rocketmq.client import PushConsumer

    c = PushConsumer(p["group"])
    set_log("push", c._handle)
    c.set_namesrv_addr(p["namesrv"])
    c.set_instance_name(f"matrix-{os.getpid()}")
    counts = Counts(p["jobs"], p["timeout_s"], p["linger_s"])
    lock = threading.Lock()
    # One message callback per consumer (the C API registers one), so ask for the union of properties.
    props = sorted({k for job in p["jobs"] for k in job.get("props") or []})

    def on_message(msg: Any) -> None:
        topic = to_str(msg.topic)
        with lock:
            counts.add(topic)
        emit("msg", read=topic, value=to_str(msg.body), key=to_str(msg.keys), tags=to_str(msg.tags),
             props={k: to_str(msg.get_property(k)) for k in props}, born_ts=msg.born_timestamp,
             store_ts=msg.store_timestamp, queue_id=msg.queue_id, offset=msg.queue_offset)

    for job in p["jobs"]:
        c.subscribe(job["read"], on_message, job.get("expression") or "*")
    c.start()
    while True:
        with lock:
            if counts.done():
                break
        time.sleep(0.1)
    c.shutdown()  # persists the consumed offsets to the broker


def main() -> None:
    role = sys.argv[1]
    params = read_params()
    try:
        {"producer": producer, "consumer": consumer}[role](params)
    except Exception as exc:  # noqa: BLE001
        emit("error", error=repr(exc))
        finish(1)
    emit("done", at=time.time())
    finish(0)


if __name__ == "__main__":
    main()
