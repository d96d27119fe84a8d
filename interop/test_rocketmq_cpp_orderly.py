"""RocketMQ C++ client: orderly send with a queue selector + orderly push consumer.  All messages of
one order land on one queue (arg % queue count) and are consumed in send order."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import harness
import pytest
from rmq_cpp import msgs, real, send, start_push, uniq, wait_bodies, wait_consuming

pytestmark = pytest.mark.usefixtures("need_cpp")


def test_orderly(rokka: harness.ServerProcess, workdir: Path) -> None:
    topic = uniq("T_ord")
    send(rokka.namesrv, workdir, "sync", [{"topic": topic, "body": "probe-create"}])
    group = uniq("CG_ord")
    consumer = start_push(rokka.namesrv, workdir, group=group, topic=topic, orderly=True)
    try:
        wait_consuming(rokka.namesrv, workdir, topic, [consumer])
        orders, steps = 5, 12
        messages = [{"topic": topic, "body": f"o{o}-s{s}", "keys": f"order{o}", "arg": o}
                    for s in range(steps) for o in range(orders)]
        sent = send(rokka.namesrv, workdir, "orderly", messages)
        assert all(e["status"] == 0 for e in sent) and len(sent) == len(messages)
        wait_bodies([consumer], {m["body"] for m in messages}, 60, "orderly consumer")
    finally:
        consumer.close()
    per_order: dict[int, list[dict]] = defaultdict(list)
    for m in real(msgs(consumer)):
        per_order[int(m["body"].split("-")[0][1:])].append(m)
    queues = set()
    for o, ms in per_order.items():
        assert [m["body"] for m in ms] == [f"o{o}-s{s}" for s in range(steps)], f"order {o} out of order"
        assert len({m["queue_id"] for m in ms}) == 1, f"order {o} spread over queues"
        offs = [m["queue_offset"] for m in ms]
        assert offs == sorted(offs)
        queues.add(ms[0]["queue_id"])
    assert len(queues) > 1  # the selector really spread orders over queues
