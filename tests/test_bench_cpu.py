"""``benchmarks.lib.cpu``: the server CPU the benchmark tables report, read from /proc.

A thread that burns a known amount of CPU (thread CPU clock) between two readings must show up to well
under a clock tick when every thread of the first reading is still alive (the per-thread schedstat
sum); when one of them exited in between, the reading falls back to the process's tick count (which
keeps a dead thread's time) and says so, instead of losing that thread's CPU.
"""

from __future__ import annotations

import os
import threading
import time

from benchmarks.lib import cpu


def _burn(seconds: float) -> float:
    """Spin for ``seconds`` of this thread's CPU; the thread CPU actually used."""
    start = time.thread_time()
    while time.thread_time() - start < seconds:
        pass
    return time.thread_time() - start


def test_live_threads_are_read_to_well_under_a_tick() -> None:
    tick = 1 / cpu.TICKS
    release = threading.Event()
    used: list[float] = []
    ready = threading.Event()

    def worker() -> None:
        used.append(_burn(0.013))
        ready.set()
        release.wait(10)

    before = cpu.read(os.getpid())
    t = threading.Thread(target=worker)
    t.start()
    assert ready.wait(10)
    used.append(_burn(0.027))
    after = cpu.read(os.getpid())
    release.set()
    t.join()
    got = after - before
    assert after.coarse == []
    # the two burns, plus what this thread did around them (reading /proc, starting the worker)
    assert sum(used) <= got <= sum(used) + 0.4 * tick, (got, used)


def test_a_thread_that_exited_is_counted_in_ticks_not_lost() -> None:
    go = threading.Event()
    t = threading.Thread(target=lambda: go.wait(10) and _burn(0.01))
    t.start()       # alive at the first reading ...
    before = cpu.read([os.getpid()])
    assert t.native_id in before.processes[os.getpid()].threads
    go.set()
    t.join()        # ... gone at the second: its schedstat is gone, its time stays in /proc/PID/stat
    spent = _burn(0.05)
    after = cpu.read([os.getpid()])
    got = after - before
    assert after.coarse == [os.getpid()]
    assert got >= spent - 2 / cpu.TICKS


def test_a_process_gone_or_unknown_counts_nothing() -> None:
    before = cpu.read([os.getpid(), os.getppid(), 2 ** 22 + 17])   # no such pid: left out of the reading
    assert list(before.processes) == [os.getpid(), os.getppid()]
    assert cpu.read([os.getpid(), os.getppid()]) - before >= 0.0
    assert cpu.read([]) - before == 0.0
