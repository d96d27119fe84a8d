"""Crash-test writer: SYNC_FLUSH puts, printing each id only after it is durable.

Usage: ``python -m benchmarks.storage_crash_writer ROOT ROUND [SEGMENT_SIZE]``

Opens ``DiskStore(ROOT)`` in SYNC_FLUSH mode (running recovery, as a
restarted broker would), then 4 concurrent trio tasks put batches of 1-8
messages forever.  A message's id is ``<ROUND>-<task>-<n>-<i>``, its body is
``body_for(id)`` and its UNIQ_KEY is the id.  After ``wait_durable``
returns True, one line ``<id> <commitlog offset>`` per message is written
to stdout and flushed.  The parent SIGKILLs it at a random moment and later
checks that every printed id is present, byte-exact.  Prints ``ready`` once
open.
"""

from __future__ import annotations

import hashlib
import random
import sys
from pathlib import Path

import trio
import trio.lowlevel
from rokka.core.model import Message
from rokka.core.storage.api import FlushDiskType, StoreConfig
from rokka.core.storage.engine import DiskStore
from rokka.core.storage.flush import FlushService


def body_for(msg_id: str) -> bytes:
    seed = hashlib.sha256(msg_id.encode()).digest()
    return seed * (1 + seed[0] % 40)


def crash_config(root: Path, segment_size: int) -> StoreConfig:
    return StoreConfig(root_dir=root, commitlog_file_size=segment_size, consumequeue_file_size=20 * 500,
                       index_hash_slots=1024, index_max_entries=4096,
                       flush_disk_type=FlushDiskType.SYNC_FLUSH, sync_flush_timeout_ms=10_000)


async def _writer(store: DiskStore, flusher: FlushService, name: str, out: list[str]) -> None:
    rng = random.Random(name)
    n = 0
    while True:
        batch = []
        for i in range(rng.randint(1, 8)):
            mid = f"{name}-{n}-{i}"
            batch.append(Message(topic=f"C{rng.randint(0, 2)}", queue_id=rng.randint(0, 3),
                                 body=body_for(mid), properties={"UNIQ_KEY": mid, "TAGS": "t"}))
        res = store.put_messages(batch)
        if not res.ok:
            raise SystemExit(f"put failed: {res.status} {res.remark}")
        if await flusher.wait_durable(res.end_offset):
            sys.stdout.write("".join(f"{m.properties['UNIQ_KEY']} {a.commitlog_offset}\n"
                                     for m, a in zip(batch, res.appended, strict=True)))
            sys.stdout.flush()
        n += 1
        await trio.lowlevel.checkpoint()


async def _main(root: Path, round_no: str, segment_size: int) -> None:
    store = DiskStore(crash_config(root, segment_size)).open()
    flusher = FlushService(store)
    print("ready", flush=True)
    async with trio.open_nursery() as nursery:
        await nursery.start(flusher.run)
        for t in range(4):
            nursery.start_soon(_writer, store, flusher, f"{round_no}-{t}", [])


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    seg = int(args[2]) if len(args) > 2 else 256 * 1024
    trio.run(_main, Path(args[0]), args[1], seg)


if __name__ == "__main__":
    main()
