"""confluent-kafka load roles for ``bench_kafka``; run as a subprocess.

Run: ``python -m benchmarks.lib.kafka_role`` with one JSON line of parameters on stdin; JSON lines
on stdout (``{"event": "result", ...}``, or ``{"event": "error", ...}``).

Roles (``params["role"]``, all take ``bootstrap`` and optionally ``client``: more librdkafka
settings for every client of the role, e.g. ``security.protocol`` and ``ssl.ca.location``):

* ``create``: CreateTopics ``topics`` with ``partitions`` partitions, replication 1.
* ``produce``: ``count`` values of ``size`` bytes to ``topic`` (null key: librdkafka spreads them
  over the partitions; ``shape`` other than ``plain`` adds keys and headers, see ``SHAPES``),
  ``acks`` 1 | all, default batching (linger.ms 5); timed from the first
  ``produce()`` to the end of ``flush()``.  ``result {messages, seconds, errors, partitions}``
  (partitions: records delivered to each).  With ``txn`` (records a transaction) the producer is
  transactional (a fresh ``transactional.id``) and commits every ``txn`` records and at the end;
  ``messages`` then counts records of committed transactions.
* ``consume``: ``assign()`` every partition (or those in ``partition_list``) at the beginning (no
  group join; fetch.queue.backoff.ms 10, see ``consume``) and count records
  until ``count`` or ``max_s``; timed from the first record to the last (``consume()`` asks for
  one record first, then never more than the records still missing, so neither the wait for a
  full first batch nor the final timeout is in or out of the time by accident).
  ``result {messages, bytes, seconds}``.
* ``latency``: a consumer assigned at the end of every partition and, in the same process, a
  producer (acks 1, linger.ms 0) sending ``count`` values ``<time_ns>`` padded to ``size`` at
  ``rate`` msg/s; latency = receive time - send time.  ``result {received, p50_us, p99_us, max_us}``.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, OFFSET_END, Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic


def emit(event: str, **fields: Any) -> None:
    sys.stdout.write(json.dumps({"event": event, **fields}) + "\n")
    sys.stdout.flush()


def percentile(sorted_vals: list[float], q: float) -> float:
    if not sorted_vals:
        return float("nan")
    return sorted_vals[min(len(sorted_vals) - 1, int(q * len(sorted_vals)))]


def create(p: dict[str, Any]) -> None:
    admin = AdminClient({"bootstrap.servers": p["bootstrap"], **p.get("client", {})})
    futures = admin.create_topics([NewTopic(t, int(p["partitions"]), 1) for t in p["topics"]],
                                  operation_timeout=30, request_timeout=30)
    for fut in futures.values():
        try:
            fut.result(30)
        except KafkaException as exc:
            if "TOPIC_ALREADY_EXISTS" not in str(exc):
                raise
    deadline = time.monotonic() + 30  # wait until the metadata shows every partition
    # Per-topic Metadata requests: rokka rejects confluent's all-topics Metadata v12 ("3 trailing bytes").
    while time.monotonic() < deadline:
        ok = 0
        for t in p["topics"]:
            md = admin.list_topics(topic=t, timeout=10)
            ok += t in md.topics and len(md.topics[t].partitions) == int(p["partitions"])
        if ok == len(p["topics"]):
            emit("result", created=list(p["topics"]))
            return
        time.sleep(0.1)
    raise RuntimeError(f"topics {p['topics']} not visible with {p['partitions']} partitions within 30 s")


#: Record shapes of the ``produce`` role (``params["shape"]``; ``bench_kafka_shapes``): the keys and the
#: header lists cycled through (None: null keys / no headers).
SHAPES = ("plain", "text-key", "binary-key", "key+2-headers", "10-headers")


def _traceparent(i: int) -> bytes:
    """A W3C traceparent of its own trace and span for each i (as a tracing library stamps each record)."""
    trace = ((i + 1) * 0x9E3779B97F4A7C15_2545F4914F6CDD1D + 0x0AF7651916CD43DD) % (1 << 128)
    return b"00-%032x-%016x-01" % (trace, (trace * 31 + i) % (1 << 64))


def shape_parts(shape: str) -> tuple[list[bytes] | None, list[list[tuple[str, bytes]]] | None]:
    """(keys, header lists) of a record shape: text keys ``order-<n>``, binary keys (16 bytes, not
    UTF-8), ``traceparent`` (a different one per record, 1,000 cycled, as real tracing sends) +
    ``content-type`` headers, or ten ``h<i>`` text headers."""
    text_keys = [f"order-{i}".encode() for i in range(1000)]
    if shape == "plain":
        return None, None
    if shape == "text-key":
        return text_keys, None
    if shape == "binary-key":
        return [b"\xff\x00" + i.to_bytes(4, "big") + bytes(range(200, 210)) for i in range(1000)], None
    if shape == "key+2-headers":
        return text_keys, [[("traceparent", _traceparent(i)), ("content-type", b"application/json")]
                           for i in range(1000)]
    if shape == "10-headers":
        return None, [[(f"h{i}", f"value-{i}".encode()) for i in range(10)]]
    raise ValueError(f"unknown shape {shape!r} (one of {SHAPES})")


def produce(p: dict[str, Any]) -> None:
    errors: list[str] = []
    landed: dict[int, int] = {}      # partition -> records delivered there

    def on_delivery(err: Any, msg: Any) -> None:
        if err is not None:
            if len(errors) < 5:
                errors.append(str(err))
        else:
            landed[msg.partition()] = landed.get(msg.partition(), 0) + 1

    txn = int(p.get("txn", 0))
    conf = {"transactional.id": f"bench-{time.time_ns()}"} if txn else {"acks": str(p["acks"])}
    prod = Producer({"bootstrap.servers": p["bootstrap"], "linger.ms": 5, "queue.buffering.max.messages": 200000,
                     **conf, **p.get("client", {})})
    topic, value, count = p["topic"], b"v" * int(p["size"]), int(p["count"])
    keys, headers = shape_parts(str(p.get("shape", "plain")))
    if txn:
        prod.init_transactions(30)
        prod.begin_transaction()
    prod.produce(topic, value, on_delivery=on_delivery)  # warm up: metadata + connection
    if txn:
        prod.commit_transaction(30)
    prod.flush(30)
    deadline = time.monotonic() + float(p.get("max_s", 120))
    t0 = time.perf_counter()
    sent = committed = 0
    while sent < count and time.monotonic() < deadline:
        if txn and sent % txn == 0:
            if sent:
                prod.commit_transaction(max(deadline - time.monotonic(), 5))
                committed = sent
            prod.begin_transaction()
        try:
            if keys is None and headers is None:
                prod.produce(topic, value, on_delivery=on_delivery)
            else:
                prod.produce(topic, value, None if keys is None else keys[sent % len(keys)],
                             on_delivery=on_delivery, headers=None if headers is None else headers[sent % len(headers)])
            sent += 1
        except BufferError:
            prod.poll(0.005)
    if txn:
        prod.commit_transaction(max(deadline - time.monotonic(), 5))
        committed = sent
    left = prod.flush(max(deadline - time.monotonic(), 5))
    dt = time.perf_counter() - t0
    if txn:
        left = sent - committed
    # partitions: every record delivered, the warm-up one too (a reader of the topic sees it)
    emit("result", messages=sent - left, seconds=dt, errors=errors, partitions={str(k): v for k, v in landed.items()})


def consume(p: dict[str, Any]) -> None:
    # fetch.queue.backoff.ms: librdkafka (>= 2.3) stops fetching for this long (default 1000 ms) once
    # its local queue holds queued.min.messages (100,000) records; a broker that fills the queue faster
    # than this Python loop drains it would be timed through a full second of client sleep (measured:
    # 300k x 100 B, rokka: 0.25M msg/s with the default, 1.6M with 10 ms).  Same setting for every broker.
    cons = Consumer({"bootstrap.servers": p["bootstrap"], "group.id": p.get("group", "bench"),
                     "enable.auto.commit": False, "fetch.max.bytes": 52428800, "fetch.queue.backoff.ms": 10,
                     **p.get("client", {})})
    parts = p.get("partition_list") or range(int(p["partitions"]))     # a subset: one of several readers
    cons.assign([TopicPartition(p["topic"], i, OFFSET_BEGINNING) for i in parts])
    count, n, nbytes = int(p["count"]), 0, 0
    t_first = t_last = 0.0
    deadline = time.monotonic() + float(p.get("max_s", 120))
    while n < count and time.monotonic() < deadline:
        # consume(k, t) returns only when it has k records or t is over: ask for 1 first (the clock
        # starts when the first record arrives, not once 10,000 have), then never for more than the
        # records still missing (the final wait for records that will not come must not count).
        for m in cons.consume(1 if n == 0 else min(10000, count - n), 0.5):
            if m.error():
                continue
            if n == 0:
                t_first = time.perf_counter()
            n += 1
            nbytes += len(m.value() or b"")
        t_last = time.perf_counter() if n else t_last
    cons.close()
    emit("result", messages=n, bytes=nbytes, seconds=t_last - t_first)


def latency(p: dict[str, Any]) -> None:
    bs, topic, parts = p["bootstrap"], p["topic"], int(p["partitions"])
    cons = Consumer({"bootstrap.servers": bs, "group.id": "bench-lat", "enable.auto.commit": False})
    cons.assign([TopicPartition(topic, i, OFFSET_END) for i in range(parts)])
    cons.consume(1, 1.0)  # resolve the end offsets before producing
    lats: list[float] = []
    count, rate, size = int(p["count"]), float(p["rate"]), int(p["size"])
    done = threading.Event()

    def produce_paced() -> None:
        prod = Producer({"bootstrap.servers": bs, "acks": "1", "linger.ms": 0})
        prod.produce(topic, b"warm")
        prod.flush(10)
        time.sleep(0.5)
        t0 = time.perf_counter()
        for i in range(count):
            delay = t0 + i / rate - time.perf_counter()
            if delay > 0:
                time.sleep(delay)
            prod.produce(topic, str(time.time_ns()).encode().ljust(size, b" "))
            prod.poll(0)
        prod.flush(30)
        done.set()

    th = threading.Thread(target=produce_paced, daemon=True)
    th.start()
    deadline = time.monotonic() + count / rate + 60
    while len(lats) < count and time.monotonic() < deadline:
        m = cons.poll(0.1)  # one record at a time: consume(n, t) would wait for n records
        if m is not None and not m.error():
            now, v = time.time_ns(), m.value()
            if v and v[:1].isdigit():
                lats.append((now - int(v.split(b" ", 1)[0])) / 1000)
        if done.is_set() and len(lats) >= count:
            break
    cons.close()
    lats.sort()
    emit("result", received=len(lats), p50_us=percentile(lats, 0.5), p99_us=percentile(lats, 0.99),
         max_us=lats[-1] if lats else float("nan"))


def main() -> None:
    p = json.loads(sys.stdin.readline())
    try:
        {"create": create, "produce": produce, "consume": consume, "latency": latency}[p["role"]](p)
    except Exception as exc:  # noqa: BLE001 - reported to the caller
        emit("error", error=repr(exc))
    emit("done")


if __name__ == "__main__":
    main()
