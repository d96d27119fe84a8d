"""Human-readable rendering of ``rokka admin`` documents (plain aligned text, no colours).

Each ``render_*`` takes the dict an ``admin_ops.op_*`` returned and gives the text to print.
``--json`` prints the dict itself, so anything shown here must come from the dict.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Sequence
from typing import Any


def fmt_ms(ms: int | None) -> str:
    """Milliseconds since the epoch as local ``YYYY-MM-DD HH:MM:SS.mmm`` ('-' for 0/None)."""
    if not ms:
        return "-"
    return dt.datetime.fromtimestamp(ms / 1000).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """Left-aligned columns separated by two spaces."""
    cells = [[str(h) for h in headers]] + [["-" if v is None else str(v) for v in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in cells)


def kv(pairs: Sequence[tuple[str, Any]]) -> str:
    width = max((len(k) for k, _ in pairs), default=0)
    return "\n".join(f"{k.ljust(width)}  {'-' if v is None else v}" for k, v in pairs)


def render_update_topic(d: dict[str, Any]) -> str:
    return (f"topic {d['topic']} created/updated on {', '.join(d['brokers'])} "
            f"(read {d['readQueueNums']}, write {d['writeQueueNums']}, perm {d['perm']})")


def render_delete_topic(d: dict[str, Any]) -> str:
    return (f"topic {d['topic']} deleted from brokers [{', '.join(d['brokers'])}] "
            f"and name servers [{', '.join(d['namesrvs'])}]")


def render_delete_sub_group(d: dict[str, Any]) -> str:
    what = "config and offsets" if d["removeOffset"] else "config"
    return f"subscription group {d['group']} deleted ({what}) from brokers [{', '.join(d['brokers'])}]"


def render_topic_list(d: dict[str, Any]) -> str:
    return "\n".join(d["topics"])


def render_topic_route(d: dict[str, Any]) -> str:
    route = d["route"]
    brokers = [(b.get("cluster"), b.get("brokerName"), bid, addr) for b in route.get("brokerDatas") or []
               for bid, addr in sorted((b.get("brokerAddrs") or {}).items())]
    queues = [(q.get("brokerName"), q.get("readQueueNums"), q.get("writeQueueNums"), q.get("perm"))
              for q in route.get("queueDatas") or []]
    return (table(["cluster", "brokerName", "brokerId", "addr"], brokers) + "\n\n"
            + table(["brokerName", "readQueues", "writeQueues", "perm"], queues))


def render_topic_status(d: dict[str, Any]) -> str:
    rows = [(q["brokerName"], q["queueId"], q["minOffset"], q["maxOffset"], fmt_ms(q["lastUpdateTimestamp"]))
            for q in d["queues"]]
    return table(["brokerName", "queue", "minOffset", "maxOffset", "lastUpdated"], rows)


def render_cluster_list(d: dict[str, Any]) -> str:
    rows = [(b["cluster"], b["brokerName"], b["brokerId"], b["addr"], b.get("version"),
             b.get("putTotalToday"),
             "yes" if b.get("reachable") else "NO") for b in d["brokers"]]
    return table(["cluster", "brokerName", "id", "addr", "version", "putToday", "reachable"], rows)


def render_broker_status(d: dict[str, Any]) -> str:
    return kv(list(d["table"].items()))


def render_consumer_progress(d: dict[str, Any]) -> str:
    if "groups" in d:
        return table(["group", "topics", "diffTotal"],
                     [(g["group"], ",".join(g["topics"]) or "-", g["diffTotal"]) for g in d["groups"]])
    rows = [(q["topic"], q["brokerName"], q["queueId"], q["brokerOffset"], q["consumerOffset"], q["diff"],
             fmt_ms(q["lastTimestamp"])) for q in d["queues"]]
    headers = ["topic", "brokerName", "queue", "brokerOffset", "consumerOffset", "diff", "lastTime"]
    return (table(headers, rows)
            + f"\n\nconsumer offset total {d['consumerOffsetTotal']}, broker offset total "
              f"{d['brokerOffsetTotal']}, diff total {d['diffTotal']}")


def render_connections(d: dict[str, Any]) -> str:
    rows = [(c["brokerName"], c.get("clientId"), c.get("clientAddr"), c.get("language"), c.get("version"))
            for c in d["connections"]]
    text = table(["brokerName", "clientId", "clientAddr", "language", "version"], rows)
    subs = d.get("subscriptionTable") or {}
    if subs:
        text += "\n\n" + table(["topic", "subExpression"], [(t, s.get("subString")) for t, s in subs.items()])
    if d.get("messageModel"):
        text += f"\n\n{d.get('consumeType')} {d['messageModel']} {d.get('consumeFromWhere')}"
    return text


def render_message(m: dict[str, Any]) -> str:
    props = " ".join(f"{k}={v}" for k, v in m["properties"].items())
    return kv([("topic", m["topic"]), ("tags", m["tags"]), ("keys", " ".join(m["keys"]) or None),
               ("msgId", m["msgId"]), ("offsetMsgId", m["offsetMsgId"]), ("queueId", m["queueId"]),
               ("queueOffset", m["queueOffset"]), ("commitLogOffset", m["commitLogOffset"]),
               ("reconsumeTimes", m["reconsumeTimes"]), ("bornTimestamp", fmt_ms(m["bornTimestamp"])),
               ("bornHost", m["bornHost"]), ("storeTimestamp", fmt_ms(m["storeTimestamp"])),
               ("storeHost", m["storeHost"]), ("sysFlag", m["sysFlag"]), ("properties", props),
               (f"body ({m['bodyLength']} bytes, {m['bodyEncoding']})", m["body"])])


def render_messages(d: dict[str, Any]) -> str:
    msgs = d["messages"]
    if not msgs:
        return "no message"
    return "\n\n".join(render_message(m) for m in msgs) + f"\n\n{len(msgs)} message(s)"


def render_one_message(d: dict[str, Any]) -> str:
    return render_message(d["message"])


def render_send(d: dict[str, Any]) -> str:
    return kv([("status", d["status"]), ("msgId", d["msgId"]), ("offsetMsgId", d["offsetMsgId"]),
               ("brokerName", d["brokerName"]), ("queueId", d["queueId"]), ("queueOffset", d["queueOffset"])])


def render_consume(d: dict[str, Any]) -> str:
    text = render_messages(d)
    if d["committed"]:
        text += "\ncommitted: " + ", ".join(f"{c['brokerName']}/{c['queueId']}={c['offset']}"
                                            for c in d["committed"])
    return text


def render_reset(d: dict[str, Any]) -> str:
    rows = [(q["brokerName"], q["queueId"], q["oldOffset"], q["newOffset"]) for q in d["queues"]]
    clients = [(c["brokerName"], c["brokerAddr"], c["status"]) for c in d["clients"]]
    return (f"group {d['group']} topic {d['topic']} reset to {fmt_ms(d['timestamp'])} ({d['timestamp']})\n"
            + table(["brokerName", "queue", "oldOffset", "newOffset"], rows) + "\n\n"
            + table(["brokerName", "addr", "live clients"], clients))


def render_resend_dlq(d: dict[str, Any]) -> str:
    rows = [(m["dlqOffset"], m["msgId"], m["target"], m["status"], m.get("queueOffset"))
            for m in d["messages"]]
    head = f"{d['dlqTopic']} -> {d['target']}{' (dry run)' if d['dryRun'] else ''}: {len(rows)} message(s)"
    if not rows:
        return head
    return head + "\n" + table(["dlqOffset", "msgId", "target", "status", "newQueueOffset"], rows)


Renderer = Callable[[dict[str, Any]], str]
