"""Hostile topic and group names against the live server (issue 19.1: path traversal).

A real ``rokka serve`` (interop/conftest.py) is attacked through rokka's own RocketMQ client with raw
remoting requests (the names a careful client would refuse to send), through the RocketMQ C++ client
and through kafka-python / confluent-kafka admin clients.  Every attack must be answered with the
protocol's error, logged as ``rocketmq.bad_name`` / ``kafka.bad_name``, create nothing outside the
store and delete nothing: every acknowledged record is still read back afterwards, also after a
restart (recovery finds the CommitLog whole).
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
import trio
from rokka.net.remoting.client import Admin, NamesrvClient, Producer, PullConsumer, RemotingClient
from rokka.net.remoting.client.types import MessageQueue, TopicRoute
from rokka.net.remoting.codec.codes import RequestCode, ResponseCode
from rokka.net.remoting.codec.remoting import RemotingCommand

from interop import harness

TRAVERSAL_GROUP = "g/../../../../X"


def _tree(root: Path, skip: Path | None = None) -> set[str]:
    """Every path under ``root`` (those under ``skip`` left out): what an attack must not change."""
    return {str(p.relative_to(root)) for p in root.rglob("*") if skip is None or not p.is_relative_to(skip)}


def _log_events(srv: harness.ServerProcess) -> list[dict[str, object]]:
    assert srv.stderr_path is not None
    out = []
    for line in srv.stderr_path.read_text().splitlines():
        try:
            out.append(json.loads(line))
        except ValueError:
            continue
    return out


def _run(timeout: float, fn, *args):  # noqa: ANN001, ANN202 - trio.run with every I/O bounded
    async def bounded():  # noqa: ANN202
        with trio.fail_after(timeout):
            return await fn(*args)

    return trio.run(bounded)


async def _invoke(admin: Admin, addr: str, code: int, ext: dict[str, str], body: bytes = b"") -> RemotingCommand:
    return await admin.invoke(addr, RemotingCommand(code, ext_fields=ext, body=body))


async def _send_and_pull_back(srv: harness.ServerProcess, topic: str, bodies: list[bytes]) -> list[bytes]:
    async with RemotingClient() as rc:
        ns = NamesrvClient(rc, [srv.namesrv])
        producer = Producer(rc, ns, "hostile-pg")
        for body in bodies:
            await producer.send(topic, body, queue=0)
        return await _pull_all(rc, ns, topic)


async def _route(ns: NamesrvClient, topic: str) -> TopicRoute:
    """The topic's route (an auto-created topic reaches the name server asynchronously)."""
    for _ in range(600):
        if (route := await ns.get_route(topic)) is not None:
            return route
        await trio.sleep(0.05)
    raise AssertionError(f"no route for {topic}")


async def _pull_all(rc: RemotingClient, ns: NamesrvClient, topic: str) -> list[bytes]:
    route = await _route(ns, topic)
    mq = MessageQueue(topic, route.broker_datas[0].broker_name, 0)
    pulled = await PullConsumer(rc, ns, "hostile-reader").pull(mq, 0, max_nums=64)
    return [m.body for m in pulled.messages]


async def _delete_attacks(srv: harness.ServerProcess, outside: Path) -> list[tuple[str, int, str | None]]:
    names = ["../commitlog", "..", ".", "", str(outside), f"../../../{outside.name}", "victim/../../commitlog"]
    out = []
    async with RemotingClient() as rc:
        admin = Admin(rc, NamesrvClient(rc, [srv.namesrv]))
        for name in names:
            resp = await _invoke(admin, srv.broker, RequestCode.DELETE_TOPIC_IN_BROKER, {"topic": name})
            out.append((name, resp.code, resp.remark))
    return out


def test_delete_topic_traversal_deletes_nothing(rokka: harness.ServerProcess, tmp_path: Path) -> None:
    outside = tmp_path / "precious"
    outside.mkdir()
    (outside / "keep.txt").write_text("keep")
    bodies = [f"acked-{i}".encode() for i in range(20)]
    assert _run(30, _send_and_pull_back, rokka, "victim", bodies) == bodies
    assert rokka.data_dir is not None
    before = _tree(rokka.data_dir)
    answers = _run(30, _delete_attacks, rokka, outside)
    for name, code, remark in answers:
        assert code == ResponseCode.SYSTEM_ERROR, (name, code, remark)
        assert remark and ("topic" in remark), (name, remark)
    assert (outside / "keep.txt").read_text() == "keep"
    assert _tree(rokka.data_dir) == before
    assert (rokka.data_dir / "commitlog").is_dir()

    async def read_back() -> list[bytes]:
        async with RemotingClient() as rc:
            return await _pull_all(rc, NamesrvClient(rc, [rokka.namesrv]), "victim")

    assert _run(30, read_back) == bodies
    refusals = [e for e in _log_events(rokka) if e.get("event") == "rocketmq.bad_name"]
    assert len(refusals) >= len(answers)
    rokka.restart()
    assert _run(30, read_back) == bodies       # recovery found the CommitLog whole


async def _group_attacks(srv: harness.ServerProcess) -> dict[str, tuple[int, str | None]]:
    async with RemotingClient() as rc:
        ns = NamesrvClient(rc, [srv.namesrv])
        admin = Admin(rc, ns)
        sent = await Producer(rc, ns, "hostile-pg").send("victim2", b"to-retry", queue=0)
        await _route(ns, "victim2")
        pulled = await PullConsumer(rc, ns, "honest-cg").pull(sent.queue, 0)
        offset = pulled.messages[0].commitlog_offset
        heartbeat = PullConsumer(rc, ns, TRAVERSAL_GROUP).heartbeat_body({"victim2": "*"})
        out = {}
        out["heartbeat"] = await _invoke(admin, srv.broker, RequestCode.HEART_BEAT, {}, heartbeat)
        for level in (0, -1):   # %RETRY%<group>, then straight to %DLQ%<group>
            out[f"send_back{level}"] = await _invoke(admin, srv.broker, RequestCode.CONSUMER_SEND_MSG_BACK, {
                "offset": str(offset), "group": TRAVERSAL_GROUP, "delayLevel": str(level), "unitMode": "false"})
        out["pull"] = await _invoke(admin, srv.broker, RequestCode.PULL_MESSAGE, {
            "consumerGroup": TRAVERSAL_GROUP, "topic": "victim2", "queueId": "0", "queueOffset": "0",
            "maxMsgNums": "1", "sysFlag": "4", "commitOffset": "0", "suspendTimeoutMillis": "0",
            "subscription": "*", "subVersion": "0", "expressionType": "TAG"})
        out["create_group"] = await _invoke(admin, srv.broker, RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, {},
                                            json.dumps({"groupName": TRAVERSAL_GROUP}).encode())
        out["retry_send"] = await _invoke(admin, srv.broker, RequestCode.SEND_MESSAGE, _send_header(
            "%RETRY%" + TRAVERSAL_GROUP), b"x")
        groups = await _invoke(admin, srv.broker, RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG, {})
        topics = await admin.get_all_topic_config(srv.broker)
    answers = {k: (v.code, v.remark) for k, v in out.items()}
    answers["groups"] = (0, " ".join(json.loads(groups.body)["subscriptionGroupTable"]))
    answers["topics"] = (0, " ".join(topics["topicConfigTable"]))
    return answers


def _send_header(topic: str) -> dict[str, str]:
    return {"producerGroup": "hostile-pg", "topic": topic, "defaultTopic": "TBW102", "defaultTopicQueueNums": "4",
            "queueId": "0", "sysFlag": "0", "bornTimestamp": str(int(time.time() * 1000)), "flag": "0",
            "reconsumeTimes": "0", "unitMode": "false"}


def test_group_traversal_creates_nothing_outside_the_store(rokka: harness.ServerProcess, tmp_path: Path) -> None:
    assert rokka.data_dir is not None
    answers = _run(60, _group_attacks, rokka)
    assert answers["heartbeat"][0] == ResponseCode.SYSTEM_ERROR, answers
    assert "group" in (answers["heartbeat"][1] or "")
    for key in ("send_back0", "send_back-1", "pull"):
        assert answers[key][0] == ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST, (key, answers[key])
    assert answers["create_group"][0] == ResponseCode.SYSTEM_ERROR, answers["create_group"]
    assert answers["retry_send"][0] == ResponseCode.SYSTEM_ERROR, answers["retry_send"]
    assert "/" not in answers["groups"][1] and "/" not in answers["topics"][1], answers
    assert not (tmp_path / "X").exists()
    outside = _tree(tmp_path, skip=rokka.data_dir)
    assert not [p for p in outside if "X" in p.split("/") or "RETRY" in p or "DLQ" in p], outside
    assert not [p for p in _tree(rokka.data_dir) if "X" in p.split("/")]
    assert "rocketmq.bad_name" in {e.get("event") for e in _log_events(rokka)}


async def _dot_topic_attacks(srv: harness.ServerProcess) -> list[tuple[str, str, int]]:
    out = []
    async with RemotingClient() as rc:
        ns = NamesrvClient(rc, [srv.namesrv])
        admin = Admin(rc, ns)
        for name in (".", ".."):
            create = await _invoke(admin, srv.broker, RequestCode.UPDATE_AND_CREATE_TOPIC, {
                "topic": name, "defaultTopic": "TBW102", "readQueueNums": "4", "writeQueueNums": "4", "perm": "6",
                "topicFilterType": "SINGLE_TAG", "topicSysFlag": "0", "order": "false"})
            out.append(("create", name, create.code))
            send = await _invoke(admin, srv.broker, RequestCode.SEND_MESSAGE, _send_header(name), b"x")
            out.append(("send", name, send.code))
            route = await _invoke(admin, srv.namesrv, RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": name})
            out.append(("route", name, route.code))
        topics = await admin.get_all_topic_config(srv.broker)
        out.append(("table", " ".join(sorted(topics["topicConfigTable"])), 0))
    return out


def test_dot_topics_are_refused(rokka: harness.ServerProcess) -> None:
    answers = _run(30, _dot_topic_attacks, rokka)
    for what, name, code in answers[:-1]:
        expected = ResponseCode.TOPIC_NOT_EXIST if what == "route" else ResponseCode.SYSTEM_ERROR
        assert code == expected, (what, name, code)
    table = answers[-1][1].split()
    assert "." not in table and ".." not in table
    assert rokka.data_dir is not None
    assert not [p for p in _tree(rokka.data_dir.parent) if p.split("/")[-1].isdigit() and "commitlog" not in p]


def test_cpp_client_send_to_dotdot_is_refused(rokka: harness.ServerProcess, workdir: Path, need_cpp: None) -> None:
    p = harness.JsonLinesProcess(harness.cpp_argv("producer"), name="cpp-producer", workdir=workdir)
    try:
        p.send({"namesrv": rokka.namesrv, "group": "hostile_cpp_pg", "mode": "sync",
                "messages": [{"topic": "..", "body": "x"}]})
        assert p.close(timeout=60) == 0, p.describe()
    finally:
        p.kill()
    assert p.of("sent") == [] and p.of("error"), p.describe()       # the send failed: nothing acknowledged
    refused = [e for e in _log_events(rokka) if e.get("event") == "rocketmq.bad_name" and e.get("op") == "send"]
    assert refused and refused[0]["name"] == "..", refused           # ... because the broker refused it
    assert rokka.data_dir is not None
    assert not (rokka.data_dir / "0").exists() and not (rokka.data_dir.parent / "0").exists()


def test_kafka_create_topics_dotdot_is_invalid(rokka: harness.ServerProcess) -> None:
    from confluent_kafka import KafkaError, KafkaException
    from confluent_kafka.admin import AdminClient, NewTopic
    from kafka import KafkaAdminClient
    from kafka.admin import NewTopic as KpNewTopic
    from kafka.errors import InvalidTopicError

    admin = AdminClient({"bootstrap.servers": rokka.kafka})
    for name in ("..", ".", "a/b"):
        fut = admin.create_topics([NewTopic(name, num_partitions=1, replication_factor=1)],
                                  request_timeout=15)[name]
        with pytest.raises(KafkaException) as info:
            fut.result(timeout=20)
        assert info.value.args[0].code() == KafkaError.TOPIC_EXCEPTION, info.value
    kp = KafkaAdminClient(bootstrap_servers=rokka.kafka, request_timeout_ms=15000)
    try:
        with pytest.raises(InvalidTopicError):
            result = kp.create_topics([KpNewTopic("..", 1, 1)])
            for _name, code, *_rest in getattr(result, "topic_errors", getattr(result, "topics", [])):
                if code == InvalidTopicError.errno:
                    raise InvalidTopicError()
    finally:
        kp.close()
    events = _log_events(rokka)
    assert sum(e.get("event") == "kafka.bad_name" for e in events) >= 4
    assert rokka.data_dir is not None
    assert not (rokka.data_dir / "consumequeue" / "a").exists() and not (rokka.data_dir / "0").exists()
