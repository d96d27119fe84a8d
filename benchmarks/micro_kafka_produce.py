"""Whole Kafka Produce requests in process: server CPU per record and per request, per shape and layout.

Theory of operation
-------------------
The live produce rows (``bench_kafka_shapes``) swing by 30 % from run to run on the 2-core VM, more than
a change to the produce path moves them.  This drives the same code the server runs for a request --
decode the Produce v9 frame, ``handle_produce`` (parse, admit, append into a real ``DiskStore``, answer),
encode the response -- in one thread, and reports thread CPU (``time.thread_time``), best of
``--runs`` runs of ``--requests`` requests each.  The glibc allocator is set as ``rokka serve`` sets it
(``gateway/allocator.py``), so large encoded runs come from the heap as they do in the server.

Layouts are ``PxR``: P partitions of R records in each request.  confluent-kafka (librdkafka) sends one
partition per Produce request (librdkafka issue #1700), so keyed records spread over four partitions
make four ``1xR`` requests; the Java client, kafka-python, franz-go, sarama and kafkajs put every ready
partition of a broker into one request (``4x375``).  Shapes: no key (``plain``), text keys
``order-<n>``, 16-byte binary keys, a text key + a ``traceparent`` of its own per record +
``content-type`` (``k2h``).  100 B values.

``--sleep S`` sleeps S seconds before each request (not counted).  On a VM whose idle vCPU is given to
other tenants, the request that follows runs with cold caches: the CPU it costs grows with the idle
time before it (BENCHMARKS.md, session 22).  That is what a broker between a client's requests lives
with, and why live rows cost more than back-to-back requests here.

Run: ``python -m benchmarks.micro_kafka_produce [--requests N] [--runs N] [--sleep S] [--layouts 1x1500,4x375]
[shape ...]``
"""

from __future__ import annotations

import argparse
import random
import shutil
import tempfile
import time
from typing import Any

import trio
from rokka.core.broker import Broker
from rokka.core.config import BrokerConfig
from rokka.gateway import allocator
from rokka.gateway.kafka import KafkaServer
from rokka.gateway.kafka.codec import APIS, Struct
from rokka.gateway.kafka.codec import records as R
from rokka.gateway.kafka.handlers import KafkaEnv
from rokka.gateway.kafka.handlers import produce as P
from rokka.gateway.kafka.server import KafkaRequestContext

SHAPES = ("plain", "text-key", "binary-key", "k2h")
LAYOUTS = ("1x1500", "4x375", "8x45")
VERSION = 9


def _batch(shape: str, records: int, rnd: random.Random) -> bytes:
    recs = []
    for i in range(records):
        key = (None if shape == "plain" else bytes(rnd.getrandbits(8) for _ in range(16)) if shape == "binary-key"
               else f"order-{rnd.randrange(1000)}".encode())
        headers: tuple[R.Header, ...] = ()
        if shape == "k2h":
            headers = (R.Header("traceparent", b"00-%032x-%016x-01" % (rnd.getrandbits(128), rnd.getrandbits(64))),
                       R.Header("content-type", b"application/json"))
        recs.append(R.Record(i, i, key, rnd.randbytes(100), headers))
    return R.encode_batch(recs, base_timestamp=1_700_000_000_000)


def requests(shape: str, partitions: int, records: int, count: int, seed: int = 1) -> list[bytes]:
    """``count`` encoded Produce v9 request bodies (acks 1) of ``partitions`` batches of ``records``."""
    rnd = random.Random(seed)
    api = APIS[0]
    return [api.encode_request(VERSION, api.request.make(acks=1, timeout_ms=100, transactional_id=None, topic_data=[
        Struct(name="t", partition_data=[Struct(index=p, records=_batch(shape, records, rnd))
                                         for p in range(partitions)])]))
            for _ in range(count)]


def measure(shape: str, partitions: int, records: int, count: int = 60, runs: int = 5,
            sleep_s: float = 0.0) -> tuple[float, float, Any]:
    """(us per record, us per request, the broker's store) for ``count`` requests, best of ``runs``."""
    allocator.tune()
    root = tempfile.mkdtemp(prefix="rokka-micro-produce-")
    try:
        env = KafkaEnv(Broker(BrokerConfig(store_path_root_dir=root)), node_id=0, host="127.0.0.1", port=9092)
        env.broker.topics.ensure("t", max(8, partitions))
        ctx = KafkaRequestContext(("127.0.0.1", 1), "micro", 0, VERSION, 1, {},
                                  KafkaServer({}, max_frame_bytes=64 << 20))
        api = APIS[0]
        raws = requests(shape, partitions, records, count)

        async def once() -> float:
            cpu = 0.0
            for raw in raws:
                if sleep_s:
                    await trio.sleep(sleep_s)     # the thread idles in epoll_wait, as a server does
                t = time.thread_time()
                out = await P.handle_produce(env, ctx, api.decode_request(VERSION, raw))
                assert out is not None and all(p.error_code == 0 for t_ in out.responses
                                               for p in t_.partition_responses)
                api.encode_response(VERSION, out)
                cpu += time.thread_time() - t
            return cpu

        trio.run(once)      # warm: files created, code paths taken
        best = min(trio.run(once) for _ in range(runs))
        store = env.broker.store
        stored = [store.max_offset("t", p) for p in range(partitions)]
        return best / (count * partitions * records) * 1e6, best / count * 1e6, stored
    finally:
        shutil.rmtree(root, ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--requests", type=int, default=60, help="requests per run")
    ap.add_argument("--runs", type=int, default=5, help="runs (the best counts)")
    ap.add_argument("--sleep", type=float, default=0.0, help="seconds idle before each request")
    ap.add_argument("--layouts", default=",".join(LAYOUTS), help="PxR: P partitions of R records a request")
    ap.add_argument("shapes", nargs="*", default=list(SHAPES), help=f"any of {', '.join(SHAPES)}")
    args = ap.parse_args()
    print(f"| shape (100 B) | partitions x records a request | us/record | us/request (sleep {args.sleep} s) |")
    print("|---|---|---|---|")
    for shape in args.shapes:
        for layout in args.layouts.split(","):
            parts, per = (int(x) for x in layout.split("x"))
            rec, req, _ = measure(shape, parts, per, args.requests, args.runs, args.sleep)
            print(f"| {shape} | {layout} | {rec:.3f} | {req:.1f} |", flush=True)


if __name__ == "__main__":
    main()
