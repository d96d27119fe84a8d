"""Shared JSON-lines plumbing of the matrix's Python role scripts (run as subprocesses).

Protocol (same as ``interop/rocketmq_cpp``): the first stdin line is a JSON object of parameters;
the script prints one JSON object per stdout line.  Producer roles are long-lived: every further
stdin line is a command ``{"op": "produce", "seq": n, "jobs": [...]}`` answered by
``{"event": "produced", "seq": n, "results": [{"acked": k, "error": ...}, ...]}``; EOF ends them.
Consumer roles are one-shot: they read every job until its ``expect`` count (or ``timeout_s``),
keep reading ``linger_s`` more to catch duplicates and leaks, commit when asked, and print
``msg`` events and one ``done``.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

_lock = threading.Lock()


def emit(event: str, **fields: Any) -> None:
    with _lock:
        sys.stdout.write(json.dumps({"event": event, **fields}) + "\n")
        sys.stdout.flush()


def read_params() -> dict[str, Any]:
    line = sys.stdin.readline()
    if not line:
        emit("error", error="no parameters on stdin")
        finish(2)
    return json.loads(line)


def commands() -> Iterator[dict[str, Any]]:
    for line in sys.stdin:
        if line.strip():
            yield json.loads(line)


def finish(code: int = 0) -> None:
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


class Counts:
    """Per-read-name counts against the jobs' ``expect``; decides when a consumer may stop."""

    def __init__(self, jobs: list[dict[str, Any]], timeout_s: float, linger_s: float) -> None:
        self.want = {j["read"]: int(j["expect"]) for j in jobs}
        self.have = dict.fromkeys(self.want, 0)
        self.deadline = time.monotonic() + timeout_s
        self.linger_s = linger_s
        self._full_at: float | None = None

    def add(self, read: str) -> None:
        self.have[read] = self.have.get(read, 0) + 1

    def done(self) -> bool:
        now = time.monotonic()
        if now > self.deadline:
            return True
        if all(self.have[r] >= n for r, n in self.want.items()):
            if self._full_at is None:
                self._full_at = now
            return now - self._full_at >= self.linger_s
        return False


def run_producer(produce_jobs: Callable[[list[dict[str, Any]]], list[dict[str, Any]]]) -> None:
    emit("started")
    for cmd in commands():
        try:
            results = produce_jobs(cmd["jobs"])
        except Exception as exc:  # noqa: BLE001 - reported to the driver
            results = [{"acked": 0, "error": repr(exc)} for _ in cmd["jobs"]]
        emit("produced", seq=cmd.get("seq"), results=results)
