"""Recovery-benchmark filler: write N bytes of 1 KiB messages, then wait to be SIGKILLed.

Usage: ``python -m benchmarks.storage_fill ROOT TARGET_BYTES``

ASYNC_FLUSH store with default (1 GiB) segments; every 64 MiB it does what the
background FlushService does (``flush()`` + ``checkpoint()``), so the kill
leaves a realistic checkpoint, an ``abort`` marker and an unflushed tail.
Prints ``filled <bytes>`` and sleeps until killed.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

from rokka.core.model import Message
from rokka.core.storage.api import StoreConfig
from rokka.core.storage.engine import DiskStore


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    root, target = Path(args[0]), int(args[1])
    store = DiskStore(StoreConfig(root_dir=root)).open()
    body = os.urandom(1024)
    n = 0
    next_cp = 64 << 20
    while store.commitlog_max_offset < target:
        batch = [Message("RecoveryTopic", (n + i) % 8, body,
                         {"TAGS": "TagA", "UNIQ_KEY": f"7F000001{n + i:024X}"}) for i in range(64)]
        n += 64
        store.put_messages(batch)
        if store.commitlog_max_offset >= next_cp:
            store.checkpoint()
            next_cp += 64 << 20
    print(f"filled {store.commitlog_max_offset}", flush=True)
    while True:
        time.sleep(1)


if __name__ == "__main__":
    main()
