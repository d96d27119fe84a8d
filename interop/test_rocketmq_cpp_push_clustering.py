"""RocketMQ C++ client: push consumer in clustering mode with a tag expression ("TagA || TagB"):
gets exactly the matching messages, keys and user properties intact."""

from __future__ import annotations

from pathlib import Path

import harness
import pytest
from rmq_cpp import bodies, duplicates, msgs, real, send, start_push, uniq, wait_bodies, wait_consuming

pytestmark = pytest.mark.usefixtures("need_cpp")


def test_push_clustering_tags(rokka: harness.ServerProcess, workdir: Path) -> None:
    topic = uniq("T_tags")
    send(rokka.namesrv, workdir, "sync", [{"topic": topic, "body": "probe-create", "tags": "TagA"}])
    consumer = start_push(rokka.namesrv, workdir, group=uniq("CG_tags"), topic=topic,
                          expression="TagA || TagB", props=["color", "n"])
    try:
        wait_consuming(rokka.namesrv, workdir, topic, [consumer], tags="TagA")
        messages = [{"topic": topic, "body": f"m{i}", "tags": ["TagA", "TagB", "TagC"][i % 3],
                     "keys": f"key-{i}", "props": {"color": "red" if i % 2 else "blue", "n": str(i)}}
                    for i in range(30)]
        send(rokka.namesrv, workdir, "sync", messages)
        want = {m["body"] for m in messages if m["tags"] != "TagC"}
        # A sentinel after the TagC messages: once it is in, any wrongly delivered TagC would be too.
        send(rokka.namesrv, workdir, "sync", [{"topic": topic, "body": "sentinel", "tags": "TagB"}])
        wait_bodies([consumer], want | {"sentinel"}, 60, "clustering consumer")
    finally:
        consumer.close()
    got = real(msgs(consumer))
    assert not duplicates(bodies(got))
    assert {m["body"] for m in got} == want | {"sentinel"}
    specs = {m["body"]: m for m in messages}
    for m in got:
        if m["body"] == "sentinel":
            continue
        spec = specs[m["body"]]
        assert (m["topic"], m["tags"], m["keys"]) == (topic, spec["tags"], spec["keys"])
        assert m["props"] == spec["props"]
