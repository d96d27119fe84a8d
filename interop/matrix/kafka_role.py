"""kafka-python and confluent-kafka roles of the interop matrix (see ``_role``).

argv: ``kafka_role.py <kafka-python|confluent-kafka> <producer|consumer>``.
Producer params: bootstrap, txn_id (transactional.id, used only by jobs with ``txn``).
Consumer params: bootstrap, group, jobs, timeout_s, linger_s, commit.
"""

from __future__ import annotations

import sys
import time
from typing import Any

from _role import Counts, emit, finish, read_params, run_producer


def _headers(spec: dict[str, Any]) -> list[tuple[str, bytes]]:
    out = [(k, v.encode()) for k, v in spec["headers"]]
    if spec.get("tag"):
        out.append(("rocketmq.TAGS", spec["tag"].encode()))
    if spec.get("delay"):
        out.append(("rocketmq.DELAY", str(spec["delay"]).encode()))
    return out


def _text(b: Any) -> str | None:
    return None if b is None else bytes(b).decode()


def _key(spec: dict[str, Any]) -> bytes | None:
    return spec["key"].encode() if spec.get("key") is not None else None


# ------------------------------------------------------------------ kafka-python


def kp_producer(p: dict[str, Any]) -> None:
    from kafka import KafkaProducer

    plain = KafkaProducer(bootstrap_servers=p["bootstrap"], acks="all", retries=10, retry_backoff_ms=300,
                          request_timeout_ms=15000, max_block_ms=30000, reconnect_backoff_max_ms=1000)
    txp: list[Any] = []

    def transactional() -> Any:
        if not txp:
            t = KafkaProducer(bootstrap_servers=p["bootstrap"], transactional_id=p["txn_id"],
                              enable_idempotence=True, acks="all", request_timeout_ms=15000,
                              max_block_ms=30000)
            t.init_transactions()
            txp.append(t)
        return txp[0]

    def produce(jobs: list[dict[str, Any]]) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        for job in jobs:
            prod = transactional() if job.get("txn") else plain
            try:
                if job.get("txn"):
                    prod.begin_transaction()
                futs = [prod.send(job["topic"], value=m["value"].encode(), key=_key(m), headers=_headers(m))
                        for m in job["messages"]]
                if job.get("txn") == "commit":
                    prod.commit_transaction()
                elif job.get("txn") == "abort":
                    prod.abort_transaction()
                    out.append({"acked": len(futs), "error": None})
                    continue
                prod.flush(timeout=30)
                acked = sum(1 for f in futs if f.succeeded())
                errs = [repr(f.exception) for f in futs if f.failed()]
                out.append({"acked": acked, "error": errs[0] if errs else None})
            except Exception as exc:  # noqa: BLE001
                out.append({"acked": 0, "error": repr(exc)})
        return out

    run_producer(produce)
    plain.close(timeout=10)
    for t in txp:
        t.close(timeout=10)


def kp_consumer(p: dict[str, Any]) -> None:
    from kafka import KafkaConsumer

    c = KafkaConsumer(bootstrap_servers=p["bootstrap"], group_id=p["group"], auto_offset_reset="earliest",
                      enable_auto_commit=False, isolation_level="read_committed", fetch_max_wait_ms=200,
                      session_timeout_ms=10000, heartbeat_interval_ms=1000, request_timeout_ms=20000)
    c.subscribe(sorted({j["read"] for j in p["jobs"]}))
    counts = Counts(p["jobs"], p["timeout_s"], p["linger_s"])
    while not counts.done():
        for tp, recs in c.poll(timeout_ms=300).items():
            for r in recs:
                counts.add(tp.topic)
                emit("msg", read=tp.topic, value=r.value.decode(),
                     key=None if r.key is None else r.key.decode(),
                     headers=[[k, v.decode()] for k, v in (r.headers or [])], partition=tp.partition,
                     offset=r.offset)
    if p.get("commit"):
        c.commit()
    c.close()


# ------------------------------------------------------------------ confluent-kafka


def ck_producer(p: dict[str, Any]) -> None:
    from confluent_kafka import Producer

    base: dict[str, Any] = {"bootstrap.servers": p["bootstrap"], "acks": "all", "message.timeout.ms": 30000,
            "reconnect.backoff.max.ms": 1000}
    plain = Producer(base)
    txp: list[Any] = []

    def transactional() -> Any:
        if not txp:
            t = Producer({**base, "transactional.id": p["txn_id"]})
            t.init_transactions(30)
            txp.append(t)
        return txp[0]

    def produce(jobs: list[dict[str, Any]]) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        for job in jobs:
            prod = transactional() if job.get("txn") else plain
            state: dict[str, Any] = {"ok": 0, "err": []}

            def cb(err: Any, msg: Any, state: dict[str, Any] = state) -> None:
                if err is None:
                    state["ok"] += 1
                else:
                    state["err"].append(str(err))
            try:
                if job.get("txn"):
                    prod.begin_transaction()
                for m in job["messages"]:
                    prod.produce(job["topic"], value=m["value"].encode(), key=_key(m),
                                 headers=list(_headers(m)), on_delivery=cb)
                if job.get("txn") == "commit":
                    prod.commit_transaction(30)
                elif job.get("txn") == "abort":
                    prod.abort_transaction(30)
                    out.append({"acked": len(job["messages"]), "error": None})
                    continue
                prod.flush(30)
                out.append({"acked": state["ok"], "error": state["err"][0] if state["err"] else None})
            except Exception as exc:  # noqa: BLE001
                out.append({"acked": 0, "error": repr(exc)})
        return out

    run_producer(produce)
    plain.flush(10)


def ck_consumer(p: dict[str, Any]) -> None:
    from confluent_kafka import Consumer, KafkaException

    c = Consumer({"bootstrap.servers": p["bootstrap"], "group.id": p["group"],
                  "auto.offset.reset": "earliest", "enable.auto.commit": False,
                  "isolation.level": "read_committed",
                  "session.timeout.ms": 10000, "heartbeat.interval.ms": 1000, "fetch.wait.max.ms": 200})
    c.subscribe(sorted({j["read"] for j in p["jobs"]}))
    counts = Counts(p["jobs"], p["timeout_s"], p["linger_s"])
    errors: list[str] = []
    while not counts.done():
        m = c.poll(0.3)
        if m is None:
            continue
        if m.error():
            errors.append(str(m.error()))
            continue
        counts.add(m.topic())
        emit("msg", read=m.topic(), value=_text(m.value()), key=_text(m.key()),
             headers=[[h[0], _text(h[1]) or ""] for h in (m.headers() or [])], partition=m.partition(),
             offset=m.offset())
    if errors:
        emit("warning", errors=errors[:5])
    if p.get("commit"):
        try:
            c.commit(asynchronous=False)
        except KafkaException as exc:  # _NO_OFFSET when nothing was consumed
            emit("warning", errors=[str(exc)])
    c.close()


def main() -> None:
    client, role = sys.argv[1], sys.argv[2]
    params = read_params()
    roles = {("kafka-python", "producer"): kp_producer, ("kafka-python", "consumer"): kp_consumer,
             ("confluent-kafka", "producer"): ck_producer, ("confluent-kafka", "consumer"): ck_consumer}
    fn = roles[(client, role)]
    try:
        fn(params)
    except Exception as exc:  # noqa: BLE001
        emit("error", error=repr(exc))
        finish(1)
    emit("done", at=time.time())
    finish(0)


if __name__ == "__main__":
    main()
