"""Comparing one scenario's outcome on rokka with its outcome on the Apache broker (``make conformance``).

Theory of operation
-------------------
A scenario's outcome is the JSON a Java client driver reported (records, offsets, exception classes,
assignments, group states), reduced by the scenario's own summary to the facts that must match.  Some
facts differ between any two runs on any broker -- message ids, store hosts, timestamps, cluster ids,
node ids -- and are dropped by ``normalize`` (keys in ``VOLATILE``) before ``diff`` walks both trees and
lists every path where they differ.  Lists of scalars are compared as they are (order is part of the
fact: offsets, assignment phases); a list of objects is compared element by element.
"""

from __future__ import annotations

from typing import Any

#: Keys whose values differ from run to run on every broker (ids, hosts, clocks, durations).
VOLATILE = frozenset({
    "msg_id", "msgId", "offset_msg_id", "offsetMsgId", "unique_id", "uniq_key", "transaction_id", "txn_msg_id",
    "store_host", "born_host", "broker", "broker_name", "broker_addr", "store_ts", "born_ts", "store_timestamp",
    "born_timestamp", "timestamp", "ts", "ts0", "elapsed_ms", "seconds", "ms", "version", "cluster_id",
    "controller", "leader", "node", "node_id", "client_id", "member_id", "consumer_id", "region",
    "trace_id", "stack", "id", "event",
})


def normalize(value: Any) -> Any:
    """``value`` without the keys in ``VOLATILE`` (recursively)."""
    if isinstance(value, dict):
        return {k: normalize(v) for k, v in sorted(value.items()) if k not in VOLATILE}
    if isinstance(value, list):
        return [normalize(v) for v in value]
    return value


def diff(a: Any, b: Any, path: str = "") -> list[str]:
    """Every path where ``a`` and ``b`` differ, as ``path: a != b`` (values cut to 80 characters)."""
    if isinstance(a, dict) and isinstance(b, dict):
        out: list[str] = []
        for k in sorted(set(a) | set(b), key=str):
            sub = f"{path}.{k}" if path else str(k)
            if k not in a or k not in b:
                out.append(f"{sub}: {'—' if k not in a else _cut(a[k])} != {'—' if k not in b else _cut(b[k])}")
            else:
                out += diff(a[k], b[k], sub)
        return out
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b) and any(isinstance(x, dict) for x in a):
        return [d for i, (x, y) in enumerate(zip(a, b, strict=True)) for d in diff(x, y, f"{path}[{i}]")]
    return [] if a == b else [f"{path or '.'}: {_cut(a)} != {_cut(b)}"]


def _cut(v: Any, n: int = 80) -> str:
    s = repr(v)
    return s if len(s) <= n else s[: n - 3] + "..."


def verdict(rokka: Any, apache: Any) -> tuple[str, list[str]]:
    """("same" | "DIFFERENT" | "error on rokka" | ..., the differing paths) for one scenario."""
    if isinstance(rokka, dict) and "error" in rokka and not (isinstance(apache, dict) and "error" in apache):
        return "error on rokka", [f"rokka: {_cut(rokka['error'], 200)}"]
    if isinstance(apache, dict) and "error" in apache and not (isinstance(rokka, dict) and "error" in rokka):
        return "error on Apache", [f"Apache: {_cut(apache['error'], 200)}"]
    paths = diff(normalize(rokka), normalize(apache))
    return ("same" if not paths else "DIFFERENT"), paths


def table(rows: list[tuple[str, str, str, str]]) -> str:
    """The Markdown conformance table: scenario, rokka, Apache, same?"""
    lines = ["| scenario | rokka | Apache | same? |", "|---|---|---|---|"]
    lines += [f"| {a} | {b} | {c} | {d} |" for a, b, c, d in rows]
    return "\n".join(lines)
