"""Broker answers the Java mqadmin needs (found by interop/test_mqadmin_java.py):

* GET_TOPIC_CONFIG (351): RocketMQ 5's mqadmin topicStatus reads one topic's config first
  ("request type 351 not supported" before); under aclEnable it needs SUB on the topic.
* GET_BROKER_RUNTIME_INFO: 4.9's clusterList splits ``putTps`` / ``getTransferedTps`` and prints
  the thread-pool, page-cache and disk keys; a missing ``putTps`` was a NullPointerException.
"""

from __future__ import annotations

import json
from pathlib import Path

import trio
from rokka.net.remoting.client import Producer, RemotingClient
from rokka.net.remoting.codec.codes import RequestCode, ResponseCode
from rokka.net.remoting.codec.remoting import RemotingCommand

from tests.gateway.rocketmq.broker_stack import check_needs_sub, stack_with_topic


async def test_topic_config_and_runtime_info(tmp_path: Path) -> None:
    with trio.fail_after(30):
        async with stack_with_topic(tmp_path, "TC", read=3, write=2) as (broker, rc, nsc):
            got = await rc.invoke(broker, RemotingCommand(RequestCode.GET_TOPIC_CONFIG,
                                                          ext_fields={"topic": "TC", "lo": "true"}))
            assert got.code == ResponseCode.SUCCESS
            body = json.loads(got.body)
            assert (body["topicName"], body["readQueueNums"], body["writeQueueNums"], body["perm"]) == \
                ("TC", 3, 2, 6)
            missing = await rc.invoke(broker, RemotingCommand(RequestCode.GET_TOPIC_CONFIG,
                                                              ext_fields={"topic": "Nope"}))
            assert missing.code == ResponseCode.TOPIC_NOT_EXIST

            def runtime_info() -> RemotingCommand:
                return RemotingCommand(RequestCode.GET_BROKER_RUNTIME_INFO)

            table = json.loads((await rc.invoke(broker, runtime_info())).body)["table"]
            assert table["earliestMessageTimeStamp"] == "-1"          # empty store
            assert len(table["putTps"].split(" ")) == 3 and len(table["getTransferedTps"].split(" ")) == 3
            assert 0.0 <= float(table["commitLogDiskRatio"]) <= 1.0
            for key in ("sendThreadPoolQueueHeadWaitTimeMills", "pageCacheLockTimeMills"):
                assert table[key] == "0"
            while await nsc.get_route("TC") is None:  # noqa: ASYNC110 - polls the name server
                await trio.sleep(0.05)
            await Producer(rc, nsc, "pg").send("TC", b"x", queue=0)
            table = json.loads((await rc.invoke(broker, runtime_info())).body)["table"]
            assert int(table["earliestMessageTimeStamp"]) > 0


def test_topic_config_needs_sub_rights(tmp_path: Path) -> None:
    check_needs_sub(tmp_path, lambda topic: RemotingCommand(RequestCode.GET_TOPIC_CONFIG, ext_fields={"topic": topic}))


async def test_reset_offset_answers_java_admins_with_the_keyed_table(tmp_path: Path) -> None:
    """mqadmin resetOffsetByTime (Java) decodes the answer as ResetOffsetBody: a map keyed by
    MessageQueue; the C++ array form failed it (fastjson: "syntax error, expect {, actual [")."""
    with trio.fail_after(30):
        async with stack_with_topic(tmp_path, "RT") as (broker, rc, nsc):
            ext = {"topic": "RT", "group": "g", "timestamp": "0", "isForce": "true"}
            java = await rc.invoke(broker, RemotingCommand(RequestCode.INVOKE_BROKER_TO_RESET_OFFSET,
                                                           language="JAVA", ext_fields=dict(ext)))
            assert java.code == ResponseCode.SUCCESS
            keyed = json.loads(java.body)["offsetTable"]
            assert [(json.loads(k)["queueId"], v) for k, v in keyed.items()] == [(0, 0)]
            async with RemotingClient(language="CPP") as cpp_rc:     # the C++ form: the array
                cpp = await cpp_rc.invoke(broker, RemotingCommand(RequestCode.INVOKE_BROKER_TO_RESET_OFFSET,
                                                                  ext_fields=dict(ext)))
                assert [(e["queueId"], e["offset"]) for e in json.loads(cpp.body)["offsetTable"]] == [(0, 0)]
