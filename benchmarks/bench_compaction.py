"""Compaction cost: CPU per record of the compaction passes over a compacted topic, in process.

``python -m benchmarks.bench_compaction [--records 200000] [--keys 1000]`` stores Kafka-mapped
records (``compat.kafka_records.message_from_record``: 100-byte values, ``--keys`` distinct keys)
in one partition of a DiskStore (default ConsumeQueue file size: 300 000 units), then runs
``TopicRetention.compact`` passes with the broker's time budget (``--budget-ms``) until the partition is caught
up, and prints the passes' CPU per record (the event loop thread's part: scanning, and finishing the
file swaps whose copies a worker thread wrote), the longest pass (CPU and wall), and how many records
a reader still gets.  A second round appends
as many records again and compacts them (the incremental case).
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from rokka.compat.kafka_records import message_from_record
from rokka.core.storage import compaction
from rokka.core.storage.api import StoreConfig
from rokka.core.storage.engine import DiskStore
from rokka.core.topic_retention import COMPACT_SLICE_S, TopicRetention
from rokka.gateway.kafka.handlers import topic_configs  # noqa: F401 - registers the Kafka key reader


def _fill(store: DiskStore, n: int, keys: int, start: int) -> None:
    batch = []
    for i in range(start, start + n):
        batch.append(message_from_record("C", 0, key=b"key-%d" % (i % keys), value=b"v" * 100, headers=(),
                                         timestamp=1000 + i, log_append_time=False))
        if len(batch) == 256:
            store.put_messages(batch)
            batch = []
    if batch:
        store.put_messages(batch)
    store.flush()


def _compact(store: DiskStore, r: TopicRetention, budget_s: float | None) -> tuple[float, float, float, int, int]:
    """(total CPU s, longest pass CPU s, longest pass wall s, passes, holes) until the scan is caught up."""
    total = longest = longest_wall = 0.0
    passes = 0
    before = _live(store)
    while True:
        t0, w0 = time.thread_time(), time.perf_counter()
        r.compact(store, int(time.time() * 1000), {"C"}, budget_s)
        dt = time.thread_time() - t0
        longest_wall = max(longest_wall, time.perf_counter() - w0)
        passes += 1
        total += dt
        longest = max(longest, dt)
        for swaps in r.compactor._swaps.values():
            swaps.join()        # the worker thread's copy (not the event loop's time) is done
        state = r.compactor._state.get(("C", 0))
        if state is not None and state.scanned_to >= store.max_offset("C", 0):
            r.compactor.settle()    # the holes of the last scan
            break
    return total, longest, longest_wall, passes, before - _live(store)


def _live(store: DiskStore) -> int:
    n, at = 0, store.min_offset("C", 0)
    while at < store.max_offset("C", 0):
        runs, nxt = store.get_runs("C", 0, at, 32768, 1 << 30)
        n += sum(len(run.sizes) for run in runs)
        at = nxt
    return n


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.bench_compaction")
    ap.add_argument("--records", type=int, default=200_000)
    ap.add_argument("--keys", type=int, default=1000)
    ap.add_argument("--budget-ms", type=float, default=1000 * COMPACT_SLICE_S,
                    help="event-loop time a pass may take (the broker's: COMPACT_SLICE_S); 0: no limit")
    ap.add_argument("--quick", action="store_true", help="50,000 records (make bench --quick)")
    args = ap.parse_args(argv)
    if args.quick:
        args.records = min(args.records, 50_000)
    compaction.HOLES_EVERY_S = 0.0      # a swap whenever holes are found: the most the event loop can pay
    with tempfile.TemporaryDirectory() as tmp:
        store = DiskStore(StoreConfig(root_dir=Path(tmp) / "store")).open()
        try:
            r = TopicRetention(Path(tmp) / "config")
            r.set_config("C", "cleanup.policy", "compact")
            print(f"records={args.records} keys={args.keys} budget_ms={args.budget_ms}")
            for round_ in ("first", "incremental"):
                _fill(store, args.records, args.keys, store.max_offset("C", 0))
                total, longest, wall, passes, holes = _compact(store, r, args.budget_ms / 1000 or None)
                per = 1e6 * total / args.records
                print(f"{round_}: passes={passes} cpu_total_s={total:.3f} us_per_record={per:.2f}"
                      f" longest_pass_cpu_ms={1e3 * longest:.1f} longest_pass_wall_ms={1e3 * wall:.1f}"
                      f" holes={holes} readable={_live(store)}")
        finally:
            store.close()


if __name__ == "__main__":
    main()
