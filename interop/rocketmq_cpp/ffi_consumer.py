"""RocketMQ C++ push consumer whose listener is a C callback registered through the wheel's ``ffi``.

Why: the wheel's ``PushConsumer.subscribe`` turns a Python exception into ``RECONSUME_LATER`` but then
re-raises it inside the ctypes callback, so ctypes prints it and returns 0 (CONSUME_SUCCESS) to the
C++ client: a failing listener can never ask for redelivery.  Here the callback is our own
``MSG_CALLBACK_FUNC`` returning the status we choose, registered with ``RegisterMessageCallback``
(or ``RegisterMessageCallbackOrderly``) on the wheel's consumer handle.

params: namesrv, group, topic, expression?, orderly?, instance?, threads?, props? (property names to
report), fail? ([{"prefix": "r-", "times": N}]: RECONSUME_LATER while the message's reconsumeTimes < N;
N < 0 means always; note the C API stops at the first failing message of a batch the C++ client hands
over and the whole batch is sent back, so messages stored together are retried together, some of
them without reaching the listener), sleep_ms? (time spent in the listener per message), max_life_s?
events: started, msg {... as push_consumer + born_ts, store_ts, start_ms, end_ms, status, thread},
error {error}, stopped.
"""

from __future__ import annotations

import sys
import threading
import time
from typing import Any

from _common import describe, emit, finish, read_params, set_log

CONSUME_SUCCESS = 0
RECONSUME_LATER = 1


def decide(body: str, reconsume_times: int, rules: list[dict[str, Any]]) -> int:
    for rule in rules:
        if body.startswith(rule["prefix"]):
            times = int(rule["times"])
            if times < 0 or reconsume_times < times:
                return RECONSUME_LATER
    return CONSUME_SUCCESS


def main() -> None:
    params = read_params()
    from rocketmq.client import PushConsumer, RecvMessage
    from rocketmq.ffi import MSG_CALLBACK_FUNC, dll

    orderly = bool(params.get("orderly"))
    consumer = PushConsumer(params["group"], orderly=orderly)
    set_log("push", consumer._handle)
    consumer.set_namesrv_addr(params["namesrv"])
    if params.get("instance"):
        consumer.set_instance_name(params["instance"])
    if params.get("threads"):
        consumer.set_thread_count(int(params["threads"]))
    props = list(params.get("props") or [])
    rules = list(params.get("fail") or [])
    sleep_s = float(params.get("sleep_ms", 0)) / 1000

    def on_message(_consumer: int, handle: int) -> int:
        try:
            start_ms = int(time.time() * 1000)
            msg = RecvMessage(handle)
            info = describe(msg, props)
            status = decide(info["body"] or "", int(info["reconsume_times"]), rules)
            if sleep_s:
                time.sleep(sleep_s)
            emit("msg", **info, born_ts=msg.born_timestamp, store_ts=msg.store_timestamp, start_ms=start_ms,
                 end_ms=int(time.time() * 1000), status=status, thread=threading.get_ident())
            return status
        except Exception as exc:  # noqa: BLE001 - never let an exception cross the C boundary
            emit("error", error=repr(exc))
            return CONSUME_SUCCESS

    callback = MSG_CALLBACK_FUNC(on_message)  # kept alive by this frame until shutdown
    rc = dll.Subscribe(consumer._handle, params["topic"].encode(), (params.get("expression") or "*").encode())
    register = dll.RegisterMessageCallbackOrderly if orderly else dll.RegisterMessageCallback
    rc2 = register(consumer._handle, callback)
    if int(rc) or int(rc2):
        emit("error", error=f"subscribe/register failed: {int(rc)}/{int(rc2)}")
        finish(1)
    consumer.start()
    emit("started")
    stop = threading.Event()

    def watch_stdin() -> None:
        sys.stdin.read()  # returns at EOF
        stop.set()

    threading.Thread(target=watch_stdin, daemon=True).start()
    stop.wait(timeout=float(params.get("max_life_s", 240)))
    consumer.shutdown()
    emit("stopped", callback=bool(callback))
    finish(0)


if __name__ == "__main__":
    main()
