"""Not a test: the long-lived RocketMQ C++ producer that ``test_failover.py`` runs as a subprocess.

params (first stdin line, JSON): namesrv, group, topic, prefix, pause_s?, timeout_ms?
It sends ``<prefix><i>`` for i = 0, 1, ... with ``send_sync``, one at a time; a send that fails is
retried with the same body (so a body acknowledged twice is a duplicate the broker side made, and
one acknowledged once must be read once).  events (JSON lines): started, acked {body, t, offset,
queue}, failed {body, t, error}, done.  EOF on stdin stops it.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time


def _emit(lock: threading.Lock, event: str, **fields: object) -> None:
    with lock:
        sys.stdout.write(json.dumps({"event": event, **fields}) + "\n")
        sys.stdout.flush()


def main() -> None:
    params = json.loads(sys.stdin.readline())
    from rocketmq.client import Message, Producer

    lock = threading.Lock()
    stop = threading.Event()
    threading.Thread(target=lambda: (sys.stdin.read(), stop.set()), daemon=True).start()
    producer = Producer(params["group"], timeout=int(params.get("timeout_ms", 3000)))
    producer.set_namesrv_addr(params["namesrv"])
    producer.start()
    _emit(lock, "started")
    pause = float(params.get("pause_s", 0.01))
    i = 0
    while not stop.is_set():
        body = f"{params['prefix']}{i}"
        msg = Message(params["topic"])
        msg.set_body(body.encode())
        try:
            res = producer.send_sync(msg)
        except Exception as exc:  # noqa: BLE001 - reported, then the same body again
            _emit(lock, "failed", body=body, t=time.time(), error=str(exc)[:200])
            time.sleep(0.1)
            continue
        if int(res.status) == 0:
            _emit(lock, "acked", body=body, t=time.time(), offset=res.offset)
            i += 1
        else:
            _emit(lock, "failed", body=body, t=time.time(), error=f"status {int(res.status)}")
        time.sleep(pause)
    producer.shutdown()
    _emit(lock, "done")
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
