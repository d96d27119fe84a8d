"""The facts of each Java RocketMQ scenario outcome that must match between rokka and Apache RocketMQ.

Theory of operation
-------------------
``interop/java/rocketmq`` runs every scenario concurrently in one JVM, so which queue a message lands in,
its queue offset, the interleaving of deliveries and the consumer ids (hence which consumer gets which
queues) differ from run to run on either broker.  ``summarize(name, result)`` keeps what a user relies on:
send statuses, per-key order, which messages arrive (body, tags, keys, user and system properties, except
the per-delivery ones in ``VOLATILE_PROPS``), how they are split between consumers (sizes, not ids), delays
honoured, transaction outcomes and check-backs, lite-pull offsets, request-reply answers, trace records.
A scenario that reported an error stays ``{"error": ...}``.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

#: Properties whose values differ per delivery or per run (ids, clocks, the queue's current bounds).
VOLATILE_PROPS = frozenset({"UNIQ_KEY", "CONSUME_START_TIME", "MAX_OFFSET", "MIN_OFFSET"})
#: Nominal delay of the delay scenario's messages (levels 0, 1, 2 of the default table: none, 1 s, 5 s).
DELAY_MS = {"delay-0": 0, "delay-1": 1000, "delay-2": 5000}


def message(m: dict[str, Any]) -> dict[str, Any]:
    props = m.get("props", {})
    return {"body": m.get("body"), "tags": m.get("tags"), "keys": m.get("keys"), "reconsume": m.get("reconsume"),
            "props": {k: v for k, v in sorted(props.items()) if k not in VOLATILE_PROPS},
            "volatile_props": sorted(k for k in props if k in VOLATILE_PROPS)}


def messages(ms: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return sorted((message(m) for m in ms), key=lambda x: (str(x["body"]), str(x["tags"])))


def _send(r: dict[str, Any]) -> dict[str, Any]:
    orderly = r["orderly"]
    return {"sync": [x["status"] for x in r["sync"]], "async": [x.get("status") for x in r["async"]],
            "async_all_called_back": r["async_all_called_back"],
            "orderly_status": [x["status"] for x in orderly], "orderly_queues": [x["queue"] for x in orderly],
            "orderly_offsets_rise_per_key": all(
                [x["offset"] for x in orderly[k::3]] == sorted({x["offset"] for x in orderly[k::3]})
                for k in range(3)),
            "batch_status": r["batch"]["status"], "batch_ids": r["batch_ids"], "received": messages(r["received"])}


def _split(by_consumer: dict[str, list[str]], sizes: bool) -> dict[str, Any]:
    """Who got how many (``sizes``: only while no consumer came or left -- a rebalance may deliver a
    message again on either broker, at-least-once) and which messages arrived at all."""
    every = [v for vs in by_consumer.values() for v in vs]
    out: dict[str, Any] = {"consumers": len(by_consumer), "distinct": sorted(set(every))}
    if sizes:
        out["sizes"] = sorted(len(vs) for vs in by_consumer.values())
    return out


def _orderly(r: dict[str, Any]) -> dict[str, Any]:
    per_key: dict[str, set[int]] = defaultdict(set)
    in_order = True
    for seen in r["by_consumer"].values():
        per_key_here: dict[str, list[int]] = defaultdict(list)
        for item in seen:
            key, i = item.split(":")
            per_key_here[key].append(int(i))
        for key, idx in per_key_here.items():
            per_key[key].update(idx)
            in_order = in_order and idx == sorted(idx)
    # Which consumer owns a key's queue can change while the second consumer joins (on either broker):
    # what must hold is the order per key and that every message of every key arrived.
    return {"keys": sorted(per_key), "in_order_per_key_per_consumer": in_order,
            "distinct_per_key": {k: len(v) for k, v in sorted(per_key.items())}}


def _delay(r: dict[str, Any]) -> dict[str, Any]:
    return {"received": messages(r["received"]),
            "waited_at_least_the_level": {k: v >= DELAY_MS.get(k, 0) for k, v in sorted(r["waited_ms"].items())}}


def _transaction(r: dict[str, Any]) -> dict[str, Any]:
    return {"sent": sorted((x["body"], x.get("local_state"), x.get("status")) for x in r["sent"]),
            "checks": sorted(r["checks"]), "executed": sorted(r["executed"]), "received": messages(r["received"])}


def _litepull(r: dict[str, Any]) -> dict[str, Any]:
    """Seeks are exact; the subscribed member's messages come queue by queue in either order; the next member
    must get the new message -- whether it also gets the committed ones again depends on when the previous
    member's offsets, sent oneway at its shutdown by the 4.9 client, reach the broker (seen on Apache)."""
    return {**{k: v for k, v in r.items() if k.startswith("after_seek") or k == "committed"},
            "subscribed_even": sorted(r["subscribed_even"]), "resumed_gets_the_new_message": "l-after" in r["resumed"]}


SUMMARIES: dict[str, Any] = {
    "litepull": _litepull,
    "send": _send,
    "filter": lambda r: {k: messages(r[k]) for k in ("sql", "sql_tags", "tag")},
    "delay": _delay,
    "transaction": _transaction,
    "clustering": lambda r: {"round1": _split(r["round1"], True), "all": _split(r["all"], False)},
    "orderly": _orderly,
    "broadcast": lambda r: {"consumers": len(r["by_consumer"]),
                            "each_got": sorted(tuple(sorted(v)) for v in r["by_consumer"].values())},
    "trace": lambda r: {"consumed": sorted(r["consumed"]), "trace_types": r["trace_types"]},
    "request": lambda r: {**r, "served": sorted(r["served"]), "async_replies": sorted(r["async_replies"])},
}


def summarize(name: str, result: dict[str, Any]) -> dict[str, Any]:
    """The comparable facts of scenario ``name``'s ``result`` (the result itself for scenarios without a
    summary; ``{"error": ...}`` as it is, or when the result lacks a field the summary needs)."""
    if "error" in result:
        return {"error": result["error"]}
    fn = SUMMARIES.get(name)
    if fn is None:
        return result
    try:
        return fn(result)
    except (KeyError, TypeError, ValueError) as exc:
        return {"error": f"unexpected result shape ({type(exc).__name__}: {exc}): {str(result)[:200]}"}
