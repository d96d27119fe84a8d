"""RocketMQ C++ producer: sends a list of messages in one mode and reports each result.

params: namesrv, group, mode (sync | async | oneway | orderly | batch), messages [{topic, body, tags?,
keys?, props?, arg?}], timeout_ms?, credentials? ([accessKey, secretKey]: RocketMQ ACL signing),
resend? (sync mode: how many times a message whose send raised is sent again, 0.5 s apart; default 0)
events: started, sent {i, status, msg_id, offset} (one per message; one for the whole batch),
resent {i, error} (each resend and the error before it), error {i?, error}, done.
"""

from __future__ import annotations

import threading
import time

from _common import build_message, emit, finish, read_params, set_log


def main() -> None:
    params = read_params()
    from rocketmq.client import Producer

    producer = Producer(params["group"], timeout=params.get("timeout_ms", 5000))
    set_log("producer", producer._handle)
    producer.set_namesrv_addr(params["namesrv"])
    if params.get("credentials"):
        producer.set_session_credentials(*params["credentials"], "")
    producer.start()
    emit("started")
    mode = params["mode"]
    specs = params["messages"]
    try:
        if mode == "batch":
            res = producer.send_batch([build_message(s) for s in specs])
            emit("sent", i=0, status=int(res.status), msg_id=res.msg_id, offset=res.offset)
        elif mode == "async":
            send_async(producer, specs, params.get("wait_s", 30))
        else:
            for i, spec in enumerate(specs):
                msg = build_message(spec)
                if mode == "sync":
                    res = send_sync(producer, msg, i, int(params.get("resend", 0)))
                elif mode == "orderly":
                    res = producer.send_orderly(msg, int(spec["arg"]))
                elif mode == "oneway":
                    producer.send_oneway(msg)
                    emit("sent", i=i, status=None, msg_id=None, offset=None)
                    continue
                else:
                    raise ValueError(f"unknown mode {mode}")
                emit("sent", i=i, status=int(res.status), msg_id=res.msg_id, offset=res.offset)
    except Exception as exc:  # noqa: BLE001 - reported to the harness
        emit("error", error=repr(exc))
    if mode == "oneway":
        time.sleep(params.get("oneway_linger_s", 1.0))  # oneway frames are written asynchronously
    producer.shutdown()
    emit("done")
    finish(0)


def send_sync(producer, msg, i: int, resend: int):  # noqa: ANN001, ANN201
    """``send_sync``, sent again up to ``resend`` times if it raises (each one reported)."""
    for attempt in range(resend + 1):
        try:
            return producer.send_sync(msg)
        except Exception as exc:  # noqa: BLE001 - reported, then raised once resends are used up
            if attempt == resend:
                raise
            emit("resent", i=i, error=repr(exc))
            time.sleep(0.5)
    raise AssertionError("unreachable")


def send_async(producer, specs, wait_s: float) -> None:  # noqa: ANN001
    done = threading.Semaphore(0)
    msgs = []
    for i, spec in enumerate(specs):
        def ok(res, i=i):  # noqa: ANN001, ANN202
            emit("sent", i=i, status=int(res.status), msg_id=res.msg_id, offset=res.offset)
            done.release()

        def fail(exc, i=i):  # noqa: ANN001, ANN202
            emit("error", i=i, error=repr(exc))
            done.release()

        msg = build_message(spec)
        msgs.append(msg)  # keep the C message alive until its callback ran
        producer.send_async(msg, ok, fail)
    deadline = time.monotonic() + wait_s
    for i in range(len(specs)):
        if not done.acquire(timeout=max(deadline - time.monotonic(), 0)):
            emit("error", error=f"only {i} of {len(specs)} async callbacks within {wait_s}s")
            return


if __name__ == "__main__":
    main()
