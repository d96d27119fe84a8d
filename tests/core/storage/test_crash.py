"""SIGKILL crash test: every acknowledged (durable) message survives, byte-exact.

A writer subprocess (``benchmarks.storage_crash_writer``) puts messages in
SYNC_FLUSH mode and prints an id only after ``wait_durable`` returned True.
We SIGKILL it at random moments, 20 times on the same store (each restart
runs recovery), then reopen and check: every printed id is at its printed
offset with the exact body, every ConsumeQueue unit points at a record that
verifies (magic, sizes, CRC), and nothing else is readable garbage.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

from rokka.core.storage import layout
from rokka.core.storage.engine import DiskStore

from benchmarks.storage_crash_writer import body_for, crash_config

ROOT = Path(__file__).resolve().parents[3]
ROUNDS = 20


def _run_round(store_dir: Path, out: Path, round_no: int, rng: random.Random) -> None:
    with open(out, "wb") as f:
        proc = subprocess.Popen([sys.executable, "-m", "benchmarks.storage_crash_writer", str(store_dir),
                                 f"r{round_no}", str(64 * 1024)], stdout=f, stderr=subprocess.PIPE, cwd=ROOT)
        try:
            deadline = time.monotonic() + 20
            while b"ready" not in out.read_bytes():
                assert proc.poll() is None, proc.stderr.read().decode() if proc.stderr else ""
                assert time.monotonic() < deadline, "writer did not start"
                time.sleep(0.01)
            time.sleep(rng.uniform(0.02, 0.4))
        finally:
            proc.send_signal(signal.SIGKILL)
            proc.wait(timeout=20)
            if proc.stderr:
                proc.stderr.close()


def test_sigkill_never_loses_acknowledged_messages(tmp_path: Path) -> None:
    rng = random.Random(1234)
    store_dir = tmp_path / "store"
    acked: dict[str, int] = {}
    for r in range(ROUNDS):
        out = tmp_path / f"acked-{r}.txt"
        _run_round(store_dir, out, r, rng)
        for line in out.read_bytes().split(b"\n")[:-1]:   # a torn last line is not an ack
            parts = line.decode().split()
            if len(parts) == 2:
                acked[parts[0]] = int(parts[1])
    print(f"{len(acked)} acknowledged messages over {ROUNDS} SIGKILLs")
    assert len(acked) > 100, "the writer acknowledged too little to prove anything"
    assert (store_dir / "abort").exists()
    s = DiskStore(crash_config(store_dir, 64 * 1024)).open()
    try:
        for mid, off in acked.items():
            m = s.read_message(off)
            assert m is not None, f"acknowledged {mid} missing at {off}"
            assert m.properties["UNIQ_KEY"] == mid and m.body == body_for(mid)
        for topic, qids in s.queues().items():
            for q in qids:
                units = s.cq_units(topic, q, 0, 10**9)
                assert [u.queue_offset for u in units] == list(range(len(units)))
                for u in units:
                    rec = s.read_record(u.commitlog_offset, u.size)
                    assert rec is not None
                    head = layout.check_record(rec)
                    assert head.queue_offset == u.queue_offset and head.topic == topic.encode()
    finally:
        s.close()
    os.sync()
