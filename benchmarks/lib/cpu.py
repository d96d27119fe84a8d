"""Server CPU time of processes, read from /proc to the nanosecond where the kernel keeps it.

Theory of operation
-------------------
A benchmark row's server CPU is the difference of two readings taken around the client's run,
summed over the server's processes (every thread).  ``/proc/PID/stat``'s utime + stime count whole
clock ticks (USER_HZ, 10 ms on this machine): a row that costs the server 100 ms reads +-10 %, and
two brokers within a tick of each other per row cannot be told apart (the "within a clock tick" of
earlier BENCHMARKS tables).  The scheduler's own on-CPU time of each thread
(``/proc/PID/task/TID/schedstat``, first field, ns; steal time excluded) is exact, but a thread that
exits takes its count with it, while the process's stat keeps what it used.

So a ``Reading`` holds both, per process, and ``after - before`` (seconds, a float) takes for each
process the sum of its threads' ns deltas (a thread born in between counts from 0) when every thread
of the first reading is still there in the second, else that process's tick difference
(``Reading.coarse`` of the later reading then names it, and a line on stderr says so).  A process
gone by the second reading counts 0; one that cannot be read is left out.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

TICKS = os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True)
class _Process:
    ticks_s: float                  # utime + stime from /proc/PID/stat
    threads: dict[int, int]         # tid -> on-CPU ns from /proc/PID/task/TID/schedstat


@dataclass
class Reading:
    """CPU of some processes at one moment; subtract an earlier reading to get the seconds used between."""

    processes: dict[int, _Process]
    coarse: list[int] = field(default_factory=list)     # pids whose last difference fell back to ticks

    def __sub__(self, before: Reading) -> float:
        total = 0.0
        self.coarse = []
        for pid, now in self.processes.items():
            then = before.processes.get(pid)
            if then is None:        # a process that started in between: all it used
                then, exact = _Process(0.0, {}), bool(now.threads)
            else:                   # every thread read then is still there to be read now
                exact = bool(now.threads) and bool(then.threads) and then.threads.keys() <= now.threads.keys()
            if exact:
                total += sum(ns - then.threads.get(tid, 0) for tid, ns in now.threads.items()) / 1e9
            else:
                total += now.ticks_s - then.ticks_s
                self.coarse.append(pid)
        if self.coarse:
            print(f"cpu: a thread of pid {self.coarse} exited during the row: its CPU counted in clock ticks "
                  f"(1/{TICKS} s)", file=sys.stderr, flush=True)
        return total


def _process(pid: int) -> _Process | None:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    threads: dict[int, int] = {}
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        tids = []
    for tid in tids:
        try:
            threads[int(tid)] = int(Path(f"/proc/{pid}/task/{tid}/schedstat").read_text().split()[0])
        except (OSError, ValueError, IndexError):
            continue        # exited while being read, or no schedstat: the tick figure is used
    return _Process((int(fields[11]) + int(fields[12])) / TICKS, threads)


def read(pids: int | Iterable[int]) -> Reading:
    """A reading of ``pids`` (one pid or several: a cluster's processes, a JVM broker and its name server)."""
    found = {}
    for pid in [pids] if isinstance(pids, int) else pids:
        if (proc := _process(pid)) is not None:
            found[pid] = proc
    return Reading(found)
