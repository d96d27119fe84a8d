"""``rokka admin queryMsgTraceById``: the message trace of one message, as mqadmin prints it.

Theory of operation
-------------------
As mqadmin's ``QueryMsgTraceByIdSubCommand``: QUERY_MESSAGE on the trace topic (``-t``, default
``RMQ_SYS_TRACE_TOPIC``) with key = the message id (the client msgId, which trace clients put in
the trace message's KEYS), on every master of the trace topic's route; each trace message found is
decoded (``rokka.core.trace``) and the records of that id kept.  The text output is mqadmin's: one
``Pub`` block per publish record, then one block per consumer group of its ``SubAfter`` records
(type ``Sub``), times as local ``yyyy-MM-dd HH:mm:ss``; ``--json`` prints every record (SubBefore
included).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import click
from rokka.core import trace
from rokka.gateway.cli.admin_ops import Session, _query, now_ms

_ROW = "{:<10s} {:<20s} {:<20s} {:<20s} {:<10s} {:<10s}"


async def op_query_trace(s: Session, *, msg_id: str, trace_topic: str) -> dict[str, Any]:
    records: list[dict[str, Any]] = []
    for m in await _query(s, trace_topic, msg_id, 0, now_ms(), False):
        if msg_id not in m.keys:
            continue
        for r in trace.views(msg_id, m.body, m.born_host[0]):
            records.append({"type": r.type, "msgId": r.msg_id, "group": r.group, "clientHost": r.client_host,
                            "timestamp": r.timestamp, "costTime": r.cost_time, "status": r.status,
                            "topic": r.topic, "tags": r.tags, "keys": r.keys, "storeHost": r.store_host,
                            "offsetMsgId": r.offset_msg_id})
    return {"traceTopic": trace_topic, "msgId": msg_id, "records": records}


def _when(ms: int) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ms / 1000))


def render_trace(d: dict[str, Any]) -> str:
    out: list[str] = []
    subs: dict[str, list[dict[str, Any]]] = {}
    for r in d["records"]:
        if r["type"] == "Pub":
            out.append(_ROW.format("#Type", "#ProducerGroup", "#ClientHost", "#SendTime", "#CostTimes", "#Status"))
            out.append(_ROW.format("Pub", r["group"], r["clientHost"], _when(r["timestamp"]), f"{r['costTime']}ms",
                                   r["status"]))
            out.append("")
        elif r["type"] == "SubAfter":
            subs.setdefault(r["group"], []).append(r)
    for group_records in subs.values():
        out.append(_ROW.format("#Type", "#ConsumerGroup", "#ClientHost", "#ConsumerTime", "#CostTimes", "#Status"))
        for r in group_records:
            out.append(_ROW.format("Sub", r["group"], r["clientHost"], _when(r["timestamp"]), f"{r['costTime']}ms",
                                   r["status"]))
        out.append("")
    return "\n".join(out)


def register(admin: click.Group, run: Callable[..., None], json_option: Callable[[Any], Any]) -> None:
    """Add ``queryMsgTraceById`` to the ``admin`` group (called by ``admin.py``; no import loop)."""

    @admin.command("queryMsgTraceById")
    @click.option("-i", "--msg-id", "msg_id", required=True, help="The message id (client msgId).")
    @click.option("-t", "--trace-topic", "trace_topic", default=trace.TRACE_TOPIC, show_default=True,
                  help="The trace topic (a client's customizedTraceTopic).")
    @json_option
    def query_msg_trace_by_id(msg_id: str, trace_topic: str, as_json: bool) -> None:
        """The message trace of one message: its Pub and Sub records (QUERY_MESSAGE on the trace topic)."""
        run(op_query_trace, render_trace, as_json, msg_id=msg_id.strip(), trace_topic=trace_topic.strip())
