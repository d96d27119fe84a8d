"""RocketMQ C++ client: two push consumers of one group in broadcasting mode each get every message
matching their tag expression."""

from __future__ import annotations

from pathlib import Path

import harness
import pytest
from rmq_cpp import bodies, send, start_push, uniq, wait_bodies, wait_consuming

pytestmark = pytest.mark.usefixtures("need_cpp")


def test_push_broadcasting(rokka: harness.ServerProcess, workdir: Path) -> None:
    topic = uniq("T_bc")
    send(rokka.namesrv, workdir, "sync", [{"topic": topic, "body": "probe-create", "tags": "TagA"}])
    group = uniq("CG_bc")
    consumers = [start_push(rokka.namesrv, workdir, group=group, topic=topic, model="broadcasting",
                            expression="TagA", name=f"bc{i}") for i in range(2)]
    try:
        wait_consuming(rokka.namesrv, workdir, topic, consumers, tags="TagA")
        messages = [{"topic": topic, "body": f"b{i}", "tags": "TagA" if i % 4 else "TagX"} for i in range(24)]
        send(rokka.namesrv, workdir, "sync", messages)
        want = {m["body"] for m in messages if m["tags"] == "TagA"}
        send(rokka.namesrv, workdir, "sync", [{"topic": topic, "body": "sentinel", "tags": "TagA"}])
        for c in consumers:
            wait_bodies([c], want | {"sentinel"}, 60, f"broadcast consumer {c.name}")
    finally:
        for c in consumers:
            c.close()
    for c in consumers:
        got = bodies(c.of("msg"))
        assert sorted(got) == sorted(want | {"sentinel"}), c.name
