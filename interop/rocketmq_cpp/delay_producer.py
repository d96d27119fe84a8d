"""RocketMQ C++ producer sending messages with a delay level (``Message.set_delay_time_level``).

params: namesrv, group, messages [{topic, body, tags?, keys?, props?, delay_level?}], timeout_ms?
events: started, sent {i, status, msg_id, offset, sent_ms} (one per message, sync sends), error, done.
"""

from __future__ import annotations

import time

from _common import build_message, emit, finish, read_params, set_log


def main() -> None:
    params = read_params()
    from rocketmq.client import Producer

    producer = Producer(params["group"], timeout=params.get("timeout_ms", 5000))
    set_log("producer", producer._handle)
    producer.set_namesrv_addr(params["namesrv"])
    producer.start()
    emit("started")
    try:
        for i, spec in enumerate(params["messages"]):
            msg = build_message(spec)
            if spec.get("delay_level"):
                msg.set_delay_time_level(int(spec["delay_level"]))
            sent_ms = int(time.time() * 1000)
            res = producer.send_sync(msg)
            emit("sent", i=i, status=int(res.status), msg_id=res.msg_id, offset=res.offset, sent_ms=sent_ms)
    except Exception as exc:  # noqa: BLE001 - reported to the harness
        emit("error", error=repr(exc))
    producer.shutdown()
    emit("done")
    finish(0)


if __name__ == "__main__":
    main()
