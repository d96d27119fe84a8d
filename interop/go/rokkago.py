"""pytest side of the Go clients (franz-go, sarama, rocketmq-client-go v2): ``interop/go/bin/rokka-go``.

Theory of operation
-------------------
``interop/go/install.sh`` builds one program, ``rokka-go <client> <action>``; it reads its parameters
as one JSON line on stdin and prints JSON lines (``harness.JsonLinesProcess``).  ``run()`` is the
one-shot form (params in, events out, non-zero exit or an ``error`` event fails the test with the
program's stderr); ``start()`` keeps a long-lived action (a group member) running until ``close()``.
Every call gets its own work dir and HOME (rocketmq-client-go keeps broadcast offsets under HOME).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import harness
import pytest

BIN = harness.INTEROP / "go" / "bin" / "rokka-go"


_NOT_BUILT = f"{BIN} is not built (interop/go/install.sh builds it)"
#: ``pytestmark = go.requires_go``: a test module's tests are skipped where the program is not built
requires_go = pytest.mark.skipif(not BIN.exists(), reason=_NOT_BUILT)


def need_go() -> None:
    if not BIN.exists():
        pytest.skip(_NOT_BUILT)


def _dir(workdir: Path, client: str, action: str) -> Path:
    return workdir / f"{client}-{action}-{time.monotonic_ns()}"


def run(client: str, action: str, workdir: Path, timeout: float = 60, **params: Any) -> list[dict[str, Any]]:
    return harness.run_json([str(BIN), client, action], name=f"go-{client}-{action}",
                            workdir=_dir(workdir, client, action), params=params, timeout=timeout)


def run_raw(client: str, action: str, workdir: Path, timeout: float = 60,
            **params: Any) -> harness.JsonLinesProcess:
    """Like ``run`` but returns the finished process whatever its exit (for refusals)."""
    p = harness.JsonLinesProcess([str(BIN), client, action], name=f"go-{client}-{action}",
                                 workdir=_dir(workdir, client, action))
    try:
        p.send(params)
        p.close(timeout=timeout)
    finally:
        p.kill()
    return p


def start(client: str, action: str, workdir: Path, proc_name: str, **params: Any) -> harness.JsonLinesProcess:
    p = harness.JsonLinesProcess([str(BIN), client, action], name=proc_name, workdir=workdir / proc_name)
    p.send(params)
    return p


def one(events: list[dict[str, Any]], event: str) -> dict[str, Any]:
    (e,) = [x for x in events if x.get("event") == event]
    return e


def of(events: list[dict[str, Any]], event: str) -> list[dict[str, Any]]:
    return [x for x in events if x.get("event") == event]


def delivered(members: list[harness.JsonLinesProcess]) -> list[tuple[str, str, bool]]:
    """(member, value, committed) of every batch the group members printed."""
    return [(b["member"], v, b["committed"]) for m in members for b in m.of("batch") for v in b["values"]]
