"""RocketMQ C++ push consumer: reports every message it gets until stdin closes, then shuts down.

params: namesrv, group, topic, expression?, model (clustering | broadcasting)?, orderly?, instance?,
props? (property names to report), threads?, max_life_s?
events: started, msg {...} (see _common.describe), stopped.
"""

from __future__ import annotations

import sys
import threading

from _common import describe, emit, finish, read_params, set_log


def main() -> None:
    params = read_params()
    from rocketmq.client import PushConsumer
    from rocketmq.ffi import MessageModel

    model = MessageModel.BROADCASTING if params.get("model") == "broadcasting" else MessageModel.CLUSTERING
    consumer = PushConsumer(params["group"], orderly=bool(params.get("orderly")), message_model=model)
    set_log("push", consumer._handle)
    consumer.set_namesrv_addr(params["namesrv"])
    if params.get("instance"):
        consumer.set_instance_name(params["instance"])
    if params.get("threads"):
        consumer.set_thread_count(int(params["threads"]))
    props = list(params.get("props") or [])

    def on_message(msg) -> None:  # noqa: ANN001
        emit("msg", **describe(msg, props))

    consumer.subscribe(params["topic"], on_message, params.get("expression") or "*")
    consumer.start()
    emit("started")
    stop = threading.Event()

    def watch_stdin() -> None:
        sys.stdin.read()  # returns at EOF
        stop.set()

    threading.Thread(target=watch_stdin, daemon=True).start()
    stop.wait(timeout=float(params.get("max_life_s", 240)))
    consumer.shutdown()
    emit("stopped")
    finish(0)


if __name__ == "__main__":
    main()
