"""Soak load generators: one producer per process, every acknowledgement printed as a JSON line.

Theory of operation
-------------------
``python -m benchmarks.soak.loaders`` reads one JSON line of parameters from stdin (``role``,
``bootstrap`` / ``namesrv``, ``topic``, ``rate``, ``prefix``), then produces until stdin closes, flushes
(bounded) and prints ``{"e": "done"}``.  Each value is ``<prefix>-<n>``, unique per process.  What it
prints is the only truth the soak driver has about what the server acknowledged:

* ``idem``  confluent-kafka, ``enable.idempotence=true``, acks=all: ``{"e": "ack", "v": value}`` from the
  delivery report of every record without an error (``nack`` with the error otherwise);
* ``txn``   confluent-kafka transactional producer, 5 records per transaction, one in four aborted:
  ``commit`` / ``abort`` with the values once ``commit_transaction`` / ``abort_transaction`` returned,
  ``doubt`` when the outcome is unknown (a fatal error: the producer is recreated);
* ``plain`` kafka-python, acks=all, no idempotence: ``ack`` per record; ``kp-idem`` the same with
  ``enable_idempotence=True`` (the client issue 19 saw duplicate after crashes);
* ``rmq``   rokka's RocketMQ client, sync sends: ``ack`` per SEND_OK;
* ``cpp``   the RocketMQ C++ client (``rocketmq`` wheel), ``send_sync``: ``ack`` per SEND_OK.

The server is stopped and restarted under these clients all the time; their own retries and reconnects
carry them through.  Errors are printed (``nack``/``error``) and the loop goes on.
"""

from __future__ import annotations

import json
import random
import sys
import threading
import time
from typing import Any

_out = threading.Lock()
stop = threading.Event()


def emit(**fields: Any) -> None:
    with _out:
        sys.stdout.write(json.dumps(fields) + "\n")
        sys.stdout.flush()


def _watch_stdin() -> None:
    for _ in sys.stdin:
        pass
    stop.set()


class Pacer:
    def __init__(self, rate: float) -> None:
        self.interval, self.next = 1.0 / rate, time.monotonic()

    def wait(self) -> None:
        self.next += self.interval
        delay = self.next - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        elif delay < -1.0:
            self.next = time.monotonic()


def run_idem(p: dict[str, Any]) -> None:
    from confluent_kafka import Producer

    prod = Producer({"bootstrap.servers": p["bootstrap"], "enable.idempotence": True, "acks": "all",
                     "message.timeout.ms": 600_000, "linger.ms": 5, "reconnect.backoff.max.ms": 500})

    def report(err: Any, msg: Any) -> None:
        if err is None:
            emit(e="ack", v=msg.value().decode())
        else:
            emit(e="nack", v=msg.value().decode(), error=str(err))

    pace, n = Pacer(p["rate"]), 0
    while not stop.is_set():
        try:
            prod.produce(p["topic"], value=f"{p['prefix']}-{n}".encode(), on_delivery=report)
            n += 1
        except BufferError:
            prod.poll(0.1)
            continue
        prod.poll(0)
        pace.wait()
    emit(e="flush", left=prod.flush(120))


def _new_txn_producer(p: dict[str, Any], gen: int) -> Any:
    from confluent_kafka import Producer

    prod = Producer({"bootstrap.servers": p["bootstrap"], "transactional.id": f"{p['prefix']}-tid",
                     "transaction.timeout.ms": 60_000, "message.timeout.ms": 55_000,
                     "reconnect.backoff.max.ms": 500})
    for attempt in range(30):
        try:
            prod.init_transactions(30)
            return prod
        except Exception as exc:  # noqa: BLE001 - the broker may be down: try again
            emit(e="error", where="init_transactions", gen=gen, attempt=attempt, error=str(exc))
            time.sleep(1.0)
    raise RuntimeError("init_transactions failed 30 times")


def _end_txn(prod: Any, commit: bool) -> str:
    """``commit`` / ``abort`` once the broker confirmed; ``doubt`` (producer unusable) otherwise."""
    from confluent_kafka import KafkaException

    for _ in range(20):
        try:
            (prod.commit_transaction if commit else prod.abort_transaction)(30)
            return "commit" if commit else "abort"
        except KafkaException as exc:
            err = exc.args[0]
            if err.retriable():
                time.sleep(0.5)
                continue
            if err.txn_requires_abort():
                commit = False
                continue
            return "doubt"
    return "doubt"


def run_txn(p: dict[str, Any]) -> None:
    from confluent_kafka import KafkaException

    rng, gen, n = random.Random(p["prefix"]), 0, 0
    prod = _new_txn_producer(p, gen)
    pace = Pacer(p["rate"] / 5)
    while not stop.is_set():
        values = [f"{p['prefix']}-{n + i}" for i in range(5)]
        n += 5
        commit = rng.random() >= 0.25
        try:
            prod.begin_transaction()
            for v in values:
                prod.produce(p["topic"], value=v.encode())
            outcome = _end_txn(prod, commit)
        except KafkaException as exc:
            err = exc.args[0]
            outcome = _end_txn(prod, False) if err.txn_requires_abort() else "doubt"
        emit(e=outcome, vs=values)
        if outcome == "doubt":
            gen += 1
            prod = _new_txn_producer(p, gen)
        pace.wait()


def run_plain(p: dict[str, Any], idempotent: bool = False) -> None:
    from kafka import KafkaProducer

    prod = KafkaProducer(bootstrap_servers=p["bootstrap"], acks="all", enable_idempotence=idempotent,
                         request_timeout_ms=30_000, max_block_ms=120_000, delivery_timeout_ms=300_000,
                         reconnect_backoff_max_ms=500)
    pace, n = Pacer(p["rate"]), 0
    while not stop.is_set():
        v = f"{p['prefix']}-{n}"
        n += 1
        try:
            fut = prod.send(p["topic"], value=v.encode())
        except Exception as exc:  # noqa: BLE001
            emit(e="nack", v=v, error=repr(exc))
            continue
        fut.add_callback(lambda _md, v=v: emit(e="ack", v=v))
        fut.add_errback(lambda exc, v=v: emit(e="nack", v=v, error=repr(exc)))
        pace.wait()
    prod.flush(timeout=120)
    prod.close(timeout=30)


def run_rmq(p: dict[str, Any]) -> None:
    import trio
    from rokka.net.remoting.client import NamesrvClient, Producer, RemotingClient

    async def main() -> None:
        pace, n = Pacer(p["rate"]), 0
        while not stop.is_set():
            try:
                async with RemotingClient() as rc:
                    producer = Producer(rc, NamesrvClient(rc, [p["namesrv"]]), "soak-pg")
                    while not stop.is_set():
                        v = f"{p['prefix']}-{n}"
                        n += 1
                        with trio.fail_after(30):
                            r = await producer.send(p["topic"], v.encode())
                        if r.status == "SEND_OK":
                            emit(e="ack", v=v)
                        else:
                            emit(e="nack", v=v, error=r.status)
                        await trio.sleep(max(0.0, pace.next + pace.interval - time.monotonic()))
                        pace.next = max(pace.next + pace.interval, time.monotonic() - 1.0)
            except Exception as exc:  # noqa: BLE001 - the server went away: reconnect
                emit(e="error", error=repr(exc)[:300])
                await trio.sleep(0.3)

    trio.run(main)


def run_cpp(p: dict[str, Any]) -> None:
    """The RocketMQ C++ client (the ``rocketmq`` wheel): ``send_sync``; SEND_OK (status 0) is an ack."""
    from rocketmq.client import Message, Producer

    prod = Producer("soak-cpp-pg", timeout=10_000)
    prod.set_namesrv_addr(p["namesrv"])
    prod.start()
    pace, n = Pacer(p["rate"]), 0
    try:
        while not stop.is_set():
            v = f"{p['prefix']}-{n}"
            n += 1
            m = Message(p["topic"])
            m.set_body(v)
            try:
                res = prod.send_sync(m)
            except Exception as exc:  # noqa: BLE001 - the broker is down: go on
                emit(e="nack", v=v, error=repr(exc)[:200])
                time.sleep(0.2)
                continue
            if int(res.status) == 0:
                emit(e="ack", v=v)
            else:
                emit(e="nack", v=v, error=str(res.status))
            pace.wait()
    finally:
        prod.shutdown()


def run_kp_idem(p: dict[str, Any]) -> None:
    run_plain(p, idempotent=True)


ROLES = {"idem": run_idem, "kp-idem": run_kp_idem, "txn": run_txn, "plain": run_plain, "rmq": run_rmq,
         "cpp": run_cpp}


def main() -> None:
    params = json.loads(sys.stdin.readline())
    threading.Thread(target=_watch_stdin, daemon=True).start()
    emit(e="started", role=params["role"])
    ROLES[params["role"]](params)
    emit(e="done")


if __name__ == "__main__":
    main()
