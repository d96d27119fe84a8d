"""ali-ons 3.12 (node, interop/node/ali_ons_client.js): produce with tags, keys and user properties, then
consume with a tag expression (clustering), everything intact.

ali-ons cannot send to a topic that does not exist yet: on TOPIC_NOT_EXIST from the name server its
``getTopicRouteInfoFromNameServer`` falls through from the ``case`` into the default handler, which
throws, so its TBW102 (auto-create) fallback is never reached.  The topic is created first with
rokka's own admin client (UPDATE_AND_CREATE_TOPIC), as an operator would on a real cluster.
"""

from __future__ import annotations

import time
from pathlib import Path

import harness
import pytest
from rmq_cpp import PROBE, duplicates, uniq


@pytest.fixture(autouse=True)
def _ali_ons() -> None:
    harness.skip_unless_node("ali-ons")


def produce(srv: harness.ServerProcess, workdir: Path, messages: list[dict]) -> list[dict]:
    events = harness.run_node("ali_ons_client", {"action": "produce", "nameSrv": srv.namesrv, "group": uniq("PG"),
                                                 "messages": messages},
                              workdir=workdir / f"produce-{time.monotonic_ns()}", timeout=90)
    return [e for e in events if e["event"] == "sent"]


def test_produce_and_consume(rokka: harness.ServerProcess, workdir: Path) -> None:
    topic = uniq("T_ons")
    harness.create_rocketmq_topic(rokka, topic)
    consumer = harness.start_node("ali_ons_client", {"action": "consume", "nameSrv": rokka.namesrv,
                                                     "group": uniq("CG"), "topic": topic,
                                                     "expression": "TagA || TagB", "props": ["color", "n"]},
                                  name="ons-consumer", workdir=workdir / "consumer")
    try:
        consumer.wait_event("ready", timeout=60)
        deadline = time.monotonic() + 60
        while not consumer.of("msg"):  # assigned and pulling (probes match TagA)
            assert time.monotonic() < deadline, consumer.describe()
            produce(rokka, workdir, [{"topic": topic, "body": f"{PROBE}{i}", "tags": "TagA"} for i in range(4)])
            time.sleep(1)
        messages = [{"topic": topic, "body": f"m{i}", "tags": ["TagA", "TagB", "TagC"][i % 3], "keys": [f"k{i}"],
                     "props": {"color": "red" if i % 2 else "blue", "n": str(i)}} for i in range(24)]
        sent = produce(rokka, workdir, messages + [{"topic": topic, "body": "sentinel", "tags": "TagB"}])
        assert [e["status"] for e in sent] == ["SEND_OK"] * 25
        want = {m["body"] for m in messages if m["tags"] != "TagC"} | {"sentinel"}
        consumer.wait_for(lambda evs: want <= {e.get("body") for e in evs}, 60, "tagged messages")
    finally:
        consumer.close()
    got = [m for m in consumer.of("msg") if not m["body"].startswith(PROBE)]
    assert not duplicates([m["body"] for m in got])
    assert {m["body"] for m in got} == want
    specs = {m["body"]: m for m in messages}
    for m in got:
        if m["body"] == "sentinel":
            continue
        spec = specs[m["body"]]
        assert (m["topic"], m["tags"], m["keys"]) == (topic, spec["tags"], spec["keys"][0])
        assert m["props"] == spec["props"]
