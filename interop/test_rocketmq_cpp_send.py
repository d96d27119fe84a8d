"""RocketMQ C++ client (rocketmq==0.4.4): sync, async, oneway and batch sends; every message arrives
once with its tags, keys and user properties (read back with the C++ pull consumer)."""

from __future__ import annotations

from pathlib import Path

import harness
import pytest
from rmq_cpp import pull_all, send, uniq

pytestmark = pytest.mark.usefixtures("need_cpp")


@pytest.mark.parametrize("mode", ["sync", "async", "oneway", "batch"])
def test_send_modes(rokka: harness.ServerProcess, workdir: Path, mode: str) -> None:
    topic = uniq(f"T_{mode}")
    n = 20
    messages = [{"topic": topic, "body": f"{mode}-{i}", "tags": "TagA" if i % 2 else "TagB",
                 "keys": f"k{i} order{i % 3}", "props": {"p1": f"v{i}", "uni": "žluť 日本"}}
                for i in range(n)]
    sent = send(rokka.namesrv, workdir, mode, messages)
    if mode == "batch":
        # One result for the whole batch.  Its msg_id is empty with this client: the C++ SendResult takes
        # the id from the request message's UNIQ_KEY, and the batch wrapper has none.
        assert len(sent) == 1 and sent[0]["status"] == 0, sent
    else:
        assert [e["i"] for e in sent] == list(range(n))
    if mode in ("sync", "async"):
        assert all(e["status"] == 0 and e["msg_id"] for e in sent), sent
        assert len({e["msg_id"] for e in sent}) == n

    got, _ = pull_all(rokka.namesrv, workdir, topic, props=["p1", "uni"])
    assert sorted(m["body"] for m in got) == sorted(m["body"] for m in messages)
    by_body = {m["body"]: m for m in got}
    for spec in messages:
        m = by_body[spec["body"]]
        assert m["topic"] == topic
        assert m["tags"] == spec["tags"]
        assert m["keys"] == spec["keys"]
        assert m["props"] == spec["props"]
    if mode in ("sync", "async"):
        assert {e["msg_id"] for e in sent} == {m["msg_id"] for m in got}
