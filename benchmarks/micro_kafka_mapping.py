"""The native Kafka <-> CommitLog mapping in process: nanoseconds per record, per shape.

Theory of operation
-------------------
The live shape rows (``bench_kafka_shapes``) move by up to 0.4 us per record between runs on this
2-core machine, more than a change to one C helper can.  This measures the two helpers that map
records by themselves, in process, best of 5 x ``--reps`` calls on one 375-record batch (the
size a confluent-kafka producer sends per partition at linger.ms 5 in the shape rows):

* ``_crecords.mapped_spans``: a Kafka RecordBatch payload -> values, timestamps, CommitLog properties
  and index keys (the produce side);
* ``_cstored.stored_records``: those records, encoded as CommitLog records, -> Kafka records (the
  Fetch side).

Shapes: text keys ``order-<n>``; 16-byte binary keys; a text key + ``traceparent`` + ``content-type``
the same on every record (``k2h-same``) or with a ``traceparent`` of its own per record, as tracing
sends (``k2h``); ten headers with a value of their own per record (``10h``).  100 B values.

Run: ``python -m benchmarks.micro_kafka_mapping [--reps N] [shape ...]``
"""

from __future__ import annotations

import argparse
import random
import time
from collections.abc import Callable
from typing import Any

from rokka.compat import kafka_pieces as KP
from rokka.compat import kafka_records as K
from rokka.core.storage import layout
from rokka.gateway.kafka.codec import records as R
from rokka.gateway.kafka.codec.stored_records import walk_native

try:
    from rokka.gateway.kafka.codec import _crecords
except ImportError:  # pragma: no cover - the extension is built by pip install
    _crecords = None  # type: ignore[assignment]

SHAPES = ("text-key", "binary-key", "k2h-same", "k2h", "10h")
RECORDS = 375


def _headers(shape: str, rnd: random.Random) -> tuple[R.Header, ...]:
    if shape in ("k2h", "k2h-same"):
        trace = (b"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01" if shape == "k2h-same" else
                 b"00-%032x-%016x-01" % (rnd.getrandbits(128), rnd.getrandbits(64)))
        return R.Header("traceparent", trace), R.Header("content-type", b"application/json")
    if shape == "10h":
        return tuple(R.Header(f"h{j}", f"value-{rnd.randrange(10**6)}".encode()) for j in range(10))
    return ()


def batch(shape: str, seed: int = 3) -> tuple[R.BatchHeader, memoryview]:
    """One uncompressed RecordBatch of ``RECORDS`` 100 B records of ``shape``: its header and payload."""
    rnd = random.Random(seed)
    recs = []
    for i in range(RECORDS):
        key = (bytes(rnd.getrandbits(8) for _ in range(16)) if shape == "binary-key"
               else f"order-{rnd.randrange(1000)}".encode())
        recs.append(R.Record(i, i, key, bytes(100), _headers(shape, rnd)))
    (b,), _ = R.split_batches(R.encode_batch(recs, base_timestamp=1_700_000_000_000))
    return b.header, b.payload_view(1 << 30)


def best(f: Callable[[], Any], reps: int) -> float:
    """Seconds per call: the best of 5 timings of ``reps`` calls."""
    out = float("inf")
    for _ in range(5):
        t = time.perf_counter()
        for _ in range(reps):
            f()
        out = min(out, (time.perf_counter() - t) / reps)
    return out


def measure(shape: str, reps: int) -> tuple[float, float]:
    """(mapped_spans, stored_records) nanoseconds per record for ``shape``."""
    assert _crecords is not None and walk_native is not None, "the native helpers are not built"
    h, payload = batch(shape)
    mapped = _crecords.mapped_spans(payload, h.record_count, h.base_timestamp, K.MAPPING_SYSTEM_NAMES,
                                    K.MAPPING_BUDGET)
    assert mapped is not None, f"{shape}: not mapped natively"
    run = K.mapped_span_run("t", 0, payload, mapped)
    data, _ = layout.encode_uniform("t", 0, run.bodies, run.born_timestamps, b"", flag=0, sysflag=0,
                                    born_host=run.born_host, store_timestamp=1, store_host=("127.0.0.1", 10911),
                                    queue_offset=0, commitlog_offset=0, tags_code=0, prefixes=run.record_props)
    data = bytes(data)
    walk = walk_native
    assert walk(data, 0, RECORDS, KP._PLAIN_PROPS, KP._FETCH_LAYOUT, K.FETCH_TABLE)[1] == RECORDS
    produce = best(lambda: _crecords.mapped_spans(payload, h.record_count, h.base_timestamp,
                                                  K.MAPPING_SYSTEM_NAMES, K.MAPPING_BUDGET), reps)
    fetch = best(lambda: walk(data, 0, RECORDS, KP._PLAIN_PROPS, KP._FETCH_LAYOUT, K.FETCH_TABLE), reps)
    return produce * 1e9 / RECORDS, fetch * 1e9 / RECORDS


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--reps", type=int, default=2000, help="calls per timing (best of 5)")
    ap.add_argument("shapes", nargs="*", default=list(SHAPES), help=f"any of {', '.join(SHAPES)}")
    args = ap.parse_args()
    print(f"| shape (100 B, {RECORDS} records) | mapped_spans ns/record | stored_records ns/record |")
    print("|---|---|---|")
    for shape in args.shapes:
        produce, fetch = measure(shape, args.reps)
        print(f"| {shape} | {produce:.1f} | {fetch:.1f} |")


if __name__ == "__main__":
    main()
