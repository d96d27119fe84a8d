"""RocketMQ C++ client: two push consumers in one group (clustering) share the topic's queues; when one
leaves, the other takes over its queues and nothing is lost."""

from __future__ import annotations

from pathlib import Path

import harness
import pytest
from rmq_cpp import bodies, msgs, real, send, start_push, uniq, wait_bodies, wait_consuming

pytestmark = pytest.mark.usefixtures("need_cpp")


def test_two_consumers_share_then_take_over(rokka: harness.ServerProcess, workdir: Path) -> None:
    topic = uniq("T_grp")
    send(rokka.namesrv, workdir, "sync", [{"topic": topic, "body": "probe-create"}])
    group = uniq("CG_grp")
    c1 = start_push(rokka.namesrv, workdir, group=group, topic=topic, name="c1")
    c2 = start_push(rokka.namesrv, workdir, group=group, topic=topic, name="c2")
    try:
        # Both get probes only once the group is rebalanced over both members.
        wait_consuming(rokka.namesrv, workdir, topic, [c1, c2], timeout=90)
        first = [{"topic": topic, "body": f"a{i}"} for i in range(40)]
        send(rokka.namesrv, workdir, "sync", first)
        wait_bodies([c1, c2], {m["body"] for m in first}, 60, "shared consumption")
        q1 = {m["queue_id"] for m in real(msgs(c1))}
        q2 = {m["queue_id"] for m in real(msgs(c2))}
        assert q1 and q2 and not (q1 & q2), (q1, q2)  # split, disjoint
        assert c2.close() == 0  # leaves the group (UNREGISTER_CLIENT)
        second = [{"topic": topic, "body": f"b{i}"} for i in range(40)]
        send(rokka.namesrv, workdir, "sync", second)
        wait_bodies([c1], {m["body"] for m in second}, 60, "take-over by c1")
    finally:
        c1.close()
        c2.kill()
    # Every "a" message was consumed by someone, the "b" ones all by c1 (at-least-once: no loss).
    assert {m["body"] for m in first} <= set(bodies(msgs(c1))) | set(bodies(msgs(c2)))
    assert {m["body"] for m in second} <= set(bodies(msgs(c1)))
    assert {m["queue_id"] for m in real(msgs(c1)) if m["body"].startswith("b")} >= q1 | q2
