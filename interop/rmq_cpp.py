"""Helpers for the RocketMQ C++ client scenarios (``interop/test_rocketmq_cpp_*.py``).

Theory of operation
-------------------
Each client role runs in its own subprocess (``interop/rocketmq_cpp/*.py``, see ``harness``).
Push consumers have no "I am assigned and pulling" signal, so readiness is observed from outside:
``wait_consuming`` keeps sending small batches of *probe* messages (body prefix ``probe-``) until
every given consumer has received at least one; scenario messages are sent after that, and probes
are ignored in assertions (``real()``).  Topics are created by the first send (the C++ producer
falls back to the TBW102 route), so a scenario sends before it starts its consumers.
"""

from __future__ import annotations

import itertools
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import harness

PROBE = "probe-"
_seq = itertools.count()


def uniq(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:8]}"


def send(namesrv: str, workdir: Path, mode: str, messages: list[dict[str, Any]], *,
         group: str | None = None, timeout: float = 60.0, resend: int = 0) -> list[dict[str, Any]]:
    """Send with the C++ producer; returns the ``sent`` events (sorted by index).  ``resend``: sync sends
    that raise are sent again up to that many times (producer.py)."""
    events = harness.run_cpp("producer", {"namesrv": namesrv, "group": group or uniq("PG"), "mode": mode,
                                          "messages": messages, "resend": resend},
                             workdir=workdir / f"producer-{next(_seq)}", timeout=timeout)
    sent = sorted((e for e in events if e["event"] == "sent"), key=lambda e: e["i"])
    return sent


def pull_all(namesrv: str, workdir: Path, topic: str, *, expression: str = "*",
             offsets: dict[str, int] | None = None, props: list[str] | None = None,
             group: str | None = None, timeout: float = 60.0) -> tuple[list[dict[str, Any]], dict[str, int]]:
    """Drain every queue of ``topic`` once with the C++ pull consumer: (messages, offset table)."""
    events = harness.run_cpp("pull_consumer", {"namesrv": namesrv, "group": group or uniq("CPG"), "topic": topic,
                                               "expression": expression, "offsets": offsets or {},
                                               "props": props or []},
                             workdir=workdir / f"pull-{next(_seq)}", timeout=timeout)
    msgs = [e for e in events if e["event"] == "msg"]
    table = next(e["table"] for e in events if e["event"] == "offsets")
    return msgs, table


def start_push(namesrv: str, workdir: Path, *, group: str, topic: str, expression: str = "*",
               model: str = "clustering", orderly: bool = False, props: list[str] | None = None,
               name: str | None = None) -> harness.JsonLinesProcess:
    name = name or f"push-{next(_seq)}"
    p = harness.start_cpp("push_consumer", {"namesrv": namesrv, "group": group, "topic": topic,
                                            "expression": expression, "model": model, "orderly": orderly,
                                            "props": props or [], "instance": name},
                          name=name, workdir=workdir / name)
    p.wait_event("started", timeout=30)
    return p


def msgs(p: harness.JsonLinesProcess) -> list[dict[str, Any]]:
    return p.of("msg")


def real(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [m for m in messages if not (m.get("body") or "").startswith(PROBE)]


def bodies(messages: list[dict[str, Any]]) -> list[str]:
    return [m["body"] for m in real(messages)]


def wait_consuming(namesrv: str, workdir: Path, topic: str, consumers: list[harness.JsonLinesProcess], *,
                   tags: str = "probe", timeout: float = 60.0, batch: int = 8) -> None:
    """Send probe batches until every consumer got at least one probe (so it is assigned and pulling)."""
    deadline = time.monotonic() + timeout
    n = 0
    while True:
        if all(any(m["body"].startswith(PROBE) for m in msgs(c)) for c in consumers):
            return
        if time.monotonic() > deadline:
            detail = "\n\n".join(c.describe() for c in consumers)
            raise harness.HarnessError(f"consumers did not receive probes within {timeout:.0f}s\n{detail}")
        # resend=2: the C++ client can fail a send inside itself while its heartbeat thread holds the transport
        # table to connect to another broker ("GetTransport ... get timed_mutex timeout", reported as "No route
        # info"; test_cluster_serve.py says more): a probe is sent again, as the measured sends are
        send(namesrv, workdir, "sync", [{"topic": topic, "body": f"{PROBE}{n + i}", "tags": tags}
                                        for i in range(batch)], resend=2)
        n += batch
        time.sleep(1.0)


def wait_bodies(consumers: list[harness.JsonLinesProcess], want: set[str], timeout: float, what: str) -> None:
    """Wait until the union of real bodies received by ``consumers`` covers ``want``."""
    deadline = time.monotonic() + timeout
    while True:
        got = {b for c in consumers for b in bodies(msgs(c))}
        if want <= got:
            return
        if time.monotonic() > deadline:
            missing = sorted(want - got)
            detail = "\n\n".join(c.describe() for c in consumers)
            raise harness.HarnessError(f"{what}: {len(missing)} of {len(want)} messages missing after "
                                       f"{timeout:.0f}s, e.g. {missing[:5]}\n{detail}")
        time.sleep(0.3)


def duplicates(values: list[str]) -> dict[str, int]:
    return {k: n for k, n in Counter(values).items() if n > 1}
