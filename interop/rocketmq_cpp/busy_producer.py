"""RocketMQ C++ producer under back-pressure: many threads send single messages and back off on SYSTEM_BUSY.

params: namesrv, group, topic, threads, per_thread, max_s?, backoff_s?
Each thread sends bodies ``t<thread>-<i>`` with ``send_sync``; a send that fails is retried (same
body) after ``backoff_s`` until it succeeds or ``max_s`` passed.  events: started, result {acked
[bodies], busy (failures whose text says the broker is busy), other [first error texts], gave_up
[bodies]}, done.
"""

from __future__ import annotations

import threading
import time

from _common import emit, finish, read_params, set_log


def main() -> None:
    p = read_params()
    from rocketmq.client import Message, Producer

    producer = Producer(p["group"], timeout=int(p.get("timeout_ms", 10000)))
    set_log("producer", producer._handle)
    producer.set_namesrv_addr(p["namesrv"])
    producer.start()
    warm = Message(p["topic"])      # route + topic creation before the flood
    warm.set_body(b"warm")
    producer.send_sync(warm)
    emit("started")
    lock = threading.Lock()
    acked: list[str] = ["warm"]
    gave_up: list[str] = []
    other: list[str] = []
    busy = [0]
    deadline = time.monotonic() + float(p.get("max_s", 60))
    backoff = float(p.get("backoff_s", 0.05))

    def worker(t: int) -> None:
        for i in range(int(p["per_thread"])):
            body = f"t{t}-{i}"
            msg = Message(p["topic"])
            msg.set_body(body.encode())
            while True:
                try:
                    producer.send_sync(msg)
                    with lock:
                        acked.append(body)
                    break
                except Exception as exc:  # noqa: BLE001 - classified and reported
                    text = str(exc)
                    with lock:
                        if "busy" in text.lower():
                            busy[0] += 1
                        elif len(other) < 5:
                            other.append(text[:300])
                    if time.monotonic() > deadline:
                        with lock:
                            gave_up.append(body)
                        break
                    time.sleep(backoff)

    threads = [threading.Thread(target=worker, args=(t,)) for t in range(int(p["threads"]))]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    emit("result", acked=acked, busy=busy[0], other=other, gave_up=gave_up)
    producer.shutdown()
    emit("done")
    finish(0)


if __name__ == "__main__":
    main()
