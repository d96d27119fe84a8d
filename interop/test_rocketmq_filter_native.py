"""Tag-filtered and SQL92 pulls on the native read path (issue 20), with real clients.

A broker with 64 KiB CommitLog segments and ConsumeQueue files of 100 units, so the filtered reads
cross segment and file ends; 600 messages sent by the RocketMQ C++ producer, tags ``Tag0`` ..
``Tag9`` in turn and a property ``n``.  The C++ pull consumer with ``Tag3 || Tag7`` gets exactly
those messages; our client gets exactly the ``Tag3`` ones with a tag pull (and only ``Aa`` of
``Aa`` and ``BB``, one Java hash) and exactly the selected ones with a SQL92 pull (PULL_MESSAGE
with expressionType SQL92; the broker runs with ``enablePropertyFilter=true``), and every answer's
records carry the queue offsets that walk the queue in order.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import harness
import pytest
import trio
from rmq_cpp import pull_all, send, uniq
from rokka.net.remoting.client import NamesrvClient, PullConsumer, RemotingClient
from rokka.net.remoting.client.consumer import decode_messages
from rokka.net.remoting.client.types import MessageQueue
from rokka.net.remoting.codec.codes import RequestCode, ResponseCode
from rokka.net.remoting.codec.remoting import RemotingCommand

pytestmark = pytest.mark.usefixtures("need_cpp")

COUNT = 600
CONF = {"mapedFileSizeCommitLog": str(64 * 1024), "mapedFileSizeConsumeQueue": str(20 * 100),
        "enablePropertyFilter": "true"}


async def _pull(consumer: PullConsumer, mq: MessageQueue, offset: int, expression: str, etype: str) -> Any:
    ext = {"consumerGroup": consumer.group, "topic": mq.topic, "queueId": str(mq.queue_id),
           "queueOffset": str(offset), "maxMsgNums": "32", "sysFlag": "4", "commitOffset": "0",
           "suspendTimeoutMillis": "0", "subscription": expression, "subVersion": "0", "expressionType": etype}
    return await consumer.client.invoke_ok(await consumer.broker_addr(mq),
                                           RemotingCommand(RequestCode.PULL_MESSAGE, ext_fields=ext), 20.0,
                                           (ResponseCode.SUCCESS, ResponseCode.PULL_NOT_FOUND,
                                            ResponseCode.PULL_RETRY_IMMEDIATELY))


async def _drain(namesrv: str, topic: str, expression: str, etype: str) -> list[tuple[str, str | None]]:
    """Every queue read to its end with our client: (body, TAGS) of what came back, checking that the
    queue offsets of each queue's records only go up."""
    got: list[tuple[str, str | None]] = []
    with trio.fail_after(60):
        async with RemotingClient(timeout_s=20.0) as rc:
            consumer = PullConsumer(rc, NamesrvClient(rc, [namesrv]), uniq("CG_filter"))
            for mq in await consumer.fetch_subscribe_queues(topic):
                offset, last = 0, -1
                while True:
                    resp = await _pull(consumer, mq, offset, expression, etype)
                    if resp.code == ResponseCode.PULL_NOT_FOUND:
                        break
                    msgs = decode_messages(resp.body) if resp.code == ResponseCode.SUCCESS else ()
                    assert resp.code == ResponseCode.PULL_RETRY_IMMEDIATELY or msgs
                    for m in msgs:
                        assert last < m.queue_offset < int(resp.ext_fields["nextBeginOffset"])
                        last = m.queue_offset
                        got.append((m.body.decode(), m.properties.get("TAGS")))
                    offset = int(resp.ext_fields["nextBeginOffset"])
    return got


def test_filtered_pulls_across_segments(configured_rokka: Any, workdir: Path) -> None:
    srv: harness.ServerProcess = configured_rokka(CONF, {})
    topic = uniq("T_filter")
    messages = [{"topic": topic, "body": f"m{i:04d}-" + "x" * 200, "tags": f"Tag{i % 10}",
                 "props": {"n": str(i)}} for i in range(COUNT)]
    send(srv.namesrv, workdir, "sync", messages, timeout=120)

    cpp, _ = pull_all(srv.namesrv, workdir, topic, expression="Tag3 || Tag7")
    assert sorted(m["body"] for m in cpp) == sorted(m["body"] for m in messages if m["tags"] in ("Tag3", "Tag7"))
    assert {m["tags"] for m in cpp} == {"Tag3", "Tag7"}

    tagged = trio.run(_drain, srv.namesrv, topic, "Tag3", "TAG")
    assert sorted(tagged) == sorted((m["body"], "Tag3") for m in messages if m["tags"] == "Tag3")

    # "Aa" and "BB" share one Java hash: the broker checks the string too, so our client (which does
    # not re-check, unlike Java's and the C++ client) gets only "Aa".
    clash = [{"topic": topic, "body": f"c{i}", "tags": ["Aa", "BB"][i % 2]} for i in range(10)]
    send(srv.namesrv, workdir, "sync", clash)
    assert sorted(trio.run(_drain, srv.namesrv, topic, "Aa", "TAG")) == [(f"c{i}", "Aa") for i in range(0, 10, 2)]

    sql = "n >= 100 AND n < 400 AND TAGS IN ('Tag1', 'Tag2')"
    selected = trio.run(_drain, srv.namesrv, topic, sql, "SQL92")
    assert sorted(b for b, _ in selected) == sorted(
        m["body"] for i, m in enumerate(messages) if 100 <= i < 400 and m["tags"] in ("Tag1", "Tag2"))
