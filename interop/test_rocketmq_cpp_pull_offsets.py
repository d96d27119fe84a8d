"""RocketMQ C++ client: pull consumer drains all queues, resumes from a saved offset table, and applies
a tag expression."""

from __future__ import annotations

from pathlib import Path

import harness
import pytest
from rmq_cpp import pull_all, send, uniq

pytestmark = pytest.mark.usefixtures("need_cpp")


def test_pull_with_offsets(rokka: harness.ServerProcess, workdir: Path) -> None:
    topic = uniq("T_pull")
    first = [{"topic": topic, "body": f"p{i}", "tags": "TagA" if i % 2 else "TagB"} for i in range(16)]
    send(rokka.namesrv, workdir, "sync", first)
    got, table = pull_all(rokka.namesrv, workdir, topic)
    assert sorted(m["body"] for m in got) == sorted(m["body"] for m in first)
    assert sum(table.values()) == len(first)  # next offsets per queue add up to the message count
    # per queue, offsets are 0..n-1 in order
    for q in {m["queue_id"] for m in got}:
        offs = [m["queue_offset"] for m in got if m["queue_id"] == q]
        assert offs == list(range(len(offs)))

    second = [{"topic": topic, "body": f"q{i}", "tags": "TagA"} for i in range(8)]
    send(rokka.namesrv, workdir, "sync", second)
    resumed, table2 = pull_all(rokka.namesrv, workdir, topic, offsets=table)
    assert sorted(m["body"] for m in resumed) == sorted(m["body"] for m in second)
    assert sum(table2.values()) == len(first) + len(second)

    tagged, _ = pull_all(rokka.namesrv, workdir, topic, expression="TagA")
    assert sorted(m["body"] for m in tagged) == sorted(
        m["body"] for m in first + second if m["tags"] == "TagA")
