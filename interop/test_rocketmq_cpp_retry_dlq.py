"""RocketMQ C++ client: redelivery after a failing listener, and the dead-letter queue.

The listener is a C callback (``rocketmq_cpp/ffi_consumer.py``) that returns RECONSUME_LATER, so the
C++ client sends the message back (CONSUMER_SEND_MSG_BACK, delayLevel 0).  The broker runs with
``messageDelayLevel=1s 1s 1s 2s 3s 4s`` so the escalating retry delays (level 3 + reconsumeTimes) are
1 s, 2 s, 3 s.

* retry: a message failed 3 times comes back through ``%RETRY%<group>`` with reconsumeTimes 1, 2, 3,
  each time no earlier than the level's delay after the failure, and is consumed on the 4th delivery;
  the retry topic holds exactly those 3 copies (read with rokka's own client).
* DLQ: a group created with ``retryMaxTimes=2`` (UPDATE_AND_CREATE_SUBSCRIPTIONGROUP) and a listener
  that always fails: after 3 deliveries the message is in ``%DLQ%<group>`` with ORIGIN_MESSAGE_ID (the
  original's offsetMsgId) and RETRY_TOPIC; ``rokka admin resendDlq`` re-sends it to the original topic
  and the group's fixed (healthy) consumer receives it once; a second resendDlq sends nothing.
"""

from __future__ import annotations

import json
import subprocess
import time
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import harness
import pytest
import trio
from rmq_cpp import real, send, uniq, wait_consuming

pytestmark = pytest.mark.usefixtures("need_cpp")

LEVELS_MS = [1000, 1000, 1000, 2000, 3000, 4000]
PROPS = ["RETRY_TOPIC", "ORIGIN_MESSAGE_ID", "MAX_RECONSUME_TIMES"]


@pytest.fixture
def rokka_retry(tmp_path: Path) -> Iterator[harness.ServerProcess]:
    server_dir = tmp_path / "server"
    data = server_dir / "data"
    data.mkdir(parents=True)
    conf = server_dir / "broker.conf"
    conf.write_text("messageDelayLevel=" + " ".join(f"{ms // 1000}s" for ms in LEVELS_MS) + "\n")
    base = harness.serve_argv(data, "json")
    srv = harness.ServerProcess("rokka-serve", lambda ports: [*base(ports), "-c", str(conf)], server_dir,
                                data_dir=data).start()
    try:
        yield srv
    finally:
        print(f"--- server stderr tail ---\n{srv.stderr_tail(40)}")
        srv.stop_clean()


# --------------------------------------------------------------------------- rokka's own client


def prepare_group(srv: harness.ServerProcess, group: str, topic: str,
                  retry_max_times: int | None = None) -> None:
    """Create the group (``retryMaxTimes`` if given) and its %RETRY% topic before the C++ consumer starts.

    The C++ client looks routes up at start and then only every 30 s; a %RETRY% topic that only
    appears with the consumer's first heartbeat would not be consumed for up to 30 s.  A heartbeat of
    rokka's own client creates it (as the Java broker does), then that client leaves again.
    """
    from rokka.net.remoting.client import NamesrvClient, PullConsumer, RemotingClient
    from rokka.net.remoting.codec.codes import RequestCode
    from rokka.net.remoting.codec.remoting import RemotingCommand

    async def run() -> None:
        with trio.fail_after(30):
            async with RemotingClient() as rc:
                ns = NamesrvClient(rc, [srv.namesrv])
                if retry_max_times is not None:
                    body = json.dumps({"groupName": group, "retryMaxTimes": retry_max_times,
                                       "retryQueueNums": 1, "consumeEnable": True,
                                       "consumeBroadcastEnable": True}).encode()
                    create = RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP
                    await rc.invoke_ok(srv.broker, RemotingCommand(create, body=body))
                pc = PullConsumer(rc, ns, group, client_id="rokka-setup@prepare")
                await pc.heartbeat({topic: "*"}, consume_type="CONSUME_PASSIVELY")
                await pc.unregister()
                while await ns.get_route(f"%RETRY%{group}") is None:  # noqa: ASYNC110 - polling
                    await trio.sleep(0.1)

    trio.run(run)


def read_topic(srv: harness.ServerProcess, topic: str, *, want: int = 0,
               timeout: float = 20.0) -> list[Any]:
    """Every message of ``topic`` (waits until its route exists and it holds ``want`` messages)."""
    from rokka.net.remoting.client import NamesrvClient, PullConsumer, RemotingClient
    from rokka.net.remoting.client.tools import pull_range

    async def run() -> list[Any]:
        with trio.fail_after(timeout):
            async with RemotingClient() as rc:
                ns = NamesrvClient(rc, [srv.namesrv])
                pc = PullConsumer(rc, ns, "rokka-reader")
                while True:
                    if await ns.get_route(topic) is not None:
                        out = []
                        for mq in await pc.fetch_subscribe_queues(topic):
                            out += [m async for m in pull_range(pc, mq, 0, await pc.max_offset(mq))]
                        if len(out) >= want:
                            return out
                    await trio.sleep(0.2)

    return trio.run(run)


def offset_msg_id(m: Any) -> str:
    from rokka.core.storage.layout import encode_offset_msg_id

    return encode_offset_msg_id(m.store_host, m.commitlog_offset)


def rokka_admin(srv: harness.ServerProcess, *args: str) -> dict[str, Any]:
    r = subprocess.run([harness.rokka_executable(), "admin", "-n", srv.namesrv, "--json", *args],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, f"rokka admin {args} exited {r.returncode}: {r.stderr[-2000:]}"
    return json.loads(r.stdout)


# --------------------------------------------------------------------------- scenarios


def start_consumer(srv: harness.ServerProcess, workdir: Path, name: str, group: str, topic: str,
                   fail: list[dict[str, Any]]) -> harness.JsonLinesProcess:
    params = {"namesrv": srv.namesrv, "group": group, "topic": topic, "props": PROPS, "fail": fail,
              "instance": name}
    p = harness.start_cpp("ffi_consumer", params, name=name, workdir=workdir / name)
    p.wait_event("started", timeout=30)
    return p


def send_apart(srv: harness.ServerProcess, workdir: Path, messages: list[dict[str, Any]]) -> None:
    """Send, then pause, so that the retry copies of different messages are not stored back to back.

    The C++ client hands all messages of one pull to the C API listener wrapper, which stops calling
    the callback at the first RECONSUME_LATER and fails the whole batch: the client then sends back
    every message of it, including those the listener never saw (its log says "consume fail ...
    index is:1").  Copies stored apart arrive in separate pulls, so each delivery reaches the callback.
    """
    sent = send(srv.namesrv, workdir, "sync", messages)
    assert all(e["status"] == 0 for e in sent), sent
    time.sleep(0.3)


def brief(ds: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    """Deliveries as (reconsumeTimes, status, queueId, queueOffset, start_ms, end_ms) for failure messages."""
    return [(d["reconsume_times"], d["status"], d["queue_id"], d["queue_offset"], d["start_ms"], d["end_ms"])
            for d in ds]


def deliveries(p: harness.JsonLinesProcess, prefix: str) -> dict[str, list[dict[str, Any]]]:
    per: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for m in real(p.of("msg")):
        if m["body"].startswith(prefix):
            per[m["body"]].append(m)
    return per


@pytest.mark.timeout(120)
def test_retry_escalating_delay_then_consumed(rokka_retry: harness.ServerProcess, workdir: Path) -> None:
    srv = rokka_retry
    topic, group = uniq("T_retry"), uniq("CG_retry")
    send(srv.namesrv, workdir, "sync", [{"topic": topic, "body": "probe-create"}])
    prepare_group(srv, group, topic)
    failures = 3
    c = start_consumer(srv, workdir, "retry-consumer", group, topic, [{"prefix": "r-", "times": failures}])
    bodies = [f"r-{i}" for i in range(2)]
    try:
        wait_consuming(srv.namesrv, workdir, topic, [c])
        for b in bodies:  # one producer run each: see send_apart
            send_apart(srv, workdir, [{"topic": topic, "body": b, "tags": "TagR"}])
        c.wait_for(lambda evs: sum(e.get("body") in bodies and e.get("status") == 0 for e in evs)
                   == len(bodies), 60, "each message consumed after its retries")
        time.sleep(2.0)  # a further (wrong) redelivery would arrive within the next level's delay
    finally:
        c.close()
    originals = {m.body.decode(): m for m in read_topic(srv, topic) if m.body.decode() in bodies}
    for body, ds in deliveries(c, "r-").items():
        assert [d["reconsume_times"] for d in ds] == list(range(failures + 1)), (body, brief(ds))
        assert [d["status"] for d in ds] == [1] * failures + [0]
        assert len({d["msg_id"] for d in ds}) == 1, "the client msg id (UNIQ_KEY) changed on retry"
        for k, (failed, again) in enumerate(zip(ds, ds[1:], strict=False)):
            delay = LEVELS_MS[3 + k - 1]
            assert again["start_ms"] - failed["end_ms"] >= delay, f"retry {k + 1} of {body} came early"
            assert again["topic"] == topic and again["tags"] == "TagR"  # the client restores the topic
            assert again["props"]["RETRY_TOPIC"] == topic
            assert again["props"]["ORIGIN_MESSAGE_ID"] == offset_msg_id(originals[body])
        gaps = [b["start_ms"] - a["end_ms"] for a, b in zip(ds, ds[1:], strict=False)]
        print(f"{body}: redelivery gaps {gaps} ms (levels 3, 4, 5 = 1 s, 2 s, 3 s)")
    # The broker side: %RETRY%<group> holds exactly the 3 retries of each message.
    retried = read_topic(srv, f"%RETRY%{group}", want=failures * len(bodies))
    assert sorted((m.body.decode(), m.reconsume_times) for m in retried) == sorted(
        (b, k) for b in bodies for k in range(1, failures + 1))
    assert all(m.properties.get("RETRY_TOPIC") == topic for m in retried)


@pytest.mark.timeout(120)
def test_dlq_after_max_retries_and_resend(rokka_retry: harness.ServerProcess, workdir: Path) -> None:
    srv = rokka_retry
    topic, group = uniq("T_dlq"), uniq("CG_dlq")
    send(srv.namesrv, workdir, "sync", [{"topic": topic, "body": "probe-create"}])
    prepare_group(srv, group, topic, retry_max_times=2)
    c = start_consumer(srv, workdir, "failing", group, topic, [{"prefix": "x-", "times": -1}])
    bodies = [f"x-{i}" for i in range(2)]
    try:
        wait_consuming(srv.namesrv, workdir, topic, [c])
        for b in bodies:
            send_apart(srv, workdir, [{"topic": topic, "body": b, "keys": f"key-{b}"}])
        dlq = read_topic(srv, f"%DLQ%{group}", want=len(bodies), timeout=40)
        time.sleep(2.0)  # nothing more may be delivered once the message is dead
    finally:
        assert c.close() == 0  # commits the offsets: the originals are done for this group
    for body, ds in deliveries(c, "x-").items():
        # 1 + retryMaxTimes deliveries
        assert [d["reconsume_times"] for d in ds] == [0, 1, 2], (body, brief(ds))
        assert all(d["status"] == 1 for d in ds)
        assert ds[-1]["props"]["MAX_RECONSUME_TIMES"] == "2"
    originals = {m.body.decode(): m for m in read_topic(srv, topic) if m.body.decode() in bodies}
    assert sorted(m.body.decode() for m in dlq) == bodies
    for m in dlq:
        body = m.body.decode()
        assert m.topic == f"%DLQ%{group}" and m.queue_id == 0
        assert m.reconsume_times == 3
        assert m.properties["ORIGIN_MESSAGE_ID"] == offset_msg_id(originals[body])
        assert m.properties["RETRY_TOPIC"] == topic
        assert m.properties["KEYS"] == f"key-{body}"
        assert m.properties["UNIQ_KEY"] == originals[body].properties["UNIQ_KEY"]

    # Fix the consumer, re-send the dead letters: the group receives each once.
    healthy = start_consumer(srv, workdir, "healthy", group, topic, [])
    try:
        wait_consuming(srv.namesrv, workdir, topic, [healthy])
        out = rokka_admin(srv, "resendDlq", "-g", group)
        assert sorted(e["msgId"] for e in out["messages"]) == sorted(m.properties["UNIQ_KEY"] for m in dlq)
        assert all(e["status"] == "SEND_OK" and e["target"] == topic for e in out["messages"]), out
        healthy.wait_for(lambda evs: set(bodies) <= {e.get("body") for e in evs}, 60,
                         "the re-sent dead letters")
        assert rokka_admin(srv, "resendDlq", "-g", group)["messages"] == []  # the cursor moved past them
        time.sleep(1.5)
    finally:
        healthy.close()
    got = deliveries(healthy, "x-")
    assert sorted(got) == bodies and all(len(ds) == 1 and ds[0]["status"] == 0 for ds in got.values()), got
