"""``rokka admin`` against a real ``rokka serve`` process: every command, JSON and text output.

Rules: see ``conftest``.  Each test uses its own topic and group names, so the module-scoped
server is shared safely; waits are bounded polls, no timing assertions.
"""

from __future__ import annotations

import json
import os
import subprocess
import time

import click
import pytest
import trio
from rokka.gateway.cli.admin import TIMESTAMP
from rokka.net.remoting.client import Admin, MessageQueue, NamesrvClient, Producer, PullConsumer, RemotingClient

from interop import harness
from tests.gateway.cli.conftest import AdminFn, create_topic, wait_for

BINARY = bytes(range(256)) + b"\xff\xfe\x00"


# -- topics and cluster ---------------------------------------------------------------------------

def test_topic_lifecycle(admin: AdminFn, server: harness.ServerProcess) -> None:
    created = create_topic(admin, "AdmTopic1", queues=3)
    assert created["brokers"] == [server.broker] and created["readQueueNums"] == 3
    assert "AdmTopic1" in admin("topicList", "--json").json()["topics"]
    assert "AdmTopic1" in admin("topicList", "-c", "DefaultCluster", "--json").json()["topics"]
    assert "AdmTopic1" in admin("topicList").stdout.splitlines()

    route = admin("topicRoute", "-t", "AdmTopic1", "--json").json()["route"]
    assert [(q["brokerName"], q["readQueueNums"], q["writeQueueNums"], q["perm"])
            for q in route["queueDatas"]] == [("broker-a", 3, 3, 6)]
    assert route["brokerDatas"][0]["brokerAddrs"]["0"] == server.broker
    text = admin("topicRoute", "-t", "AdmTopic1").stdout
    assert "broker-a" in text and server.broker in text

    status = admin("topicStatus", "-t", "AdmTopic1", "--json").json()
    assert [(q["queueId"], q["minOffset"], q["maxOffset"]) for q in status["queues"]] == [
        (0, 0, 0), (1, 0, 0), (2, 0, 0)]
    assert "maxOffset" in admin("topicStatus", "-t", "AdmTopic1").stdout

    # Update on a single broker by address.
    admin("updateTopic", "-t", "AdmTopic1", "-b", server.broker, "-r", "4", "-w", "4", "--json").json()
    wait_for(lambda: admin("topicRoute", "-t", "AdmTopic1", "--json").json()["route"]["queueDatas"][0]
             ["writeQueueNums"] == 4, "updated route")

    deleted = admin("deleteTopic", "-t", "AdmTopic1", "-c", "DefaultCluster", "--json").json()
    assert deleted["brokers"] == [server.broker] and deleted["namesrvs"] == [server.namesrv]
    assert "AdmTopic1" not in admin("topicList", "--json").json()["topics"]
    gone = admin("topicRoute", "-t", "AdmTopic1")
    assert gone.exit_code == 1 and "AdmTopic1" in gone.stderr
    again = admin("deleteTopic", "-t", "AdmTopic1")
    assert again.exit_code == 1 and "does not exist" in again.stderr


def test_cluster_list_and_broker_status(admin: AdminFn, server: harness.ServerProcess) -> None:
    brokers = admin("clusterList", "--json").json()["brokers"]
    assert [(b["cluster"], b["brokerName"], b["brokerId"], b["addr"], b["reachable"]) for b in brokers] == [
        ("DefaultCluster", "broker-a", 0, server.broker, True)]
    assert "DefaultCluster" in admin("clusterList").stdout
    table = admin("brokerStatus", "-b", server.broker, "--json").json()["table"]
    assert table["brokerVersionDesc"] and "commitLogMaxOffset" in table
    assert "brokerVersionDesc" in admin("brokerStatus", "-b", server.broker).stdout


# -- messages --------------------------------------------------------------------------------------

def test_send_and_find_messages(admin: AdminFn) -> None:
    create_topic(admin, "AdmMsg", queues=2)
    before = int(time.time() * 1000) - 1
    text = admin("sendMessage", "-t", "AdmMsg", "-p", "héllo wörld", "-k", "order-1 cust-9", "-c", "TagA",
                 "-q", "0", "--property", "color=red", "--property", "n=1", "--json").json()
    binary = admin("sendMessage", "-t", "AdmMsg", "-p", BINARY.hex(), "--hex", "-c", "TagB", "-q", "1",
                   "--json").json()
    assert text["status"] == "SEND_OK" and (text["queueId"], text["queueOffset"]) == (0, 0)
    assert (binary["queueId"], binary["queueOffset"]) == (1, 0)
    assert "SEND_OK" in admin("sendMessage", "-t", "AdmMsg", "-p", "third", "-c", "TagA", "-b", "broker-a",
                              "-q", "0").stdout

    by_id = admin("queryMsgById", "-i", text["offsetMsgId"], "--json").json()["message"]
    assert by_id["body"] == "héllo wörld" and by_id["bodyEncoding"] == "utf-8"
    assert by_id["tags"] == "TagA" and by_id["keys"] == ["order-1", "cust-9"]
    assert by_id["properties"]["color"] == "red" and by_id["properties"]["n"] == "1"
    assert by_id["msgId"] == text["msgId"] and by_id["offsetMsgId"] == text["offsetMsgId"]
    assert (by_id["queueId"], by_id["queueOffset"]) == (0, 0) and by_id["storeTimestamp"] >= before
    assert by_id["storeHost"] and by_id["bornHost"] and by_id["bornTimestamp"] > 0
    raw = admin("queryMsgById", "-i", binary["offsetMsgId"], "--json").json()["message"]
    assert raw["bodyEncoding"] == "hex" and bytes.fromhex(raw["body"]) == BINARY
    human = admin("queryMsgById", "-i", text["offsetMsgId"]).stdout
    assert "héllo wörld" in human and "color=red" in human and text["msgId"] in human

    by_key = admin("queryMsgByKey", "-t", "AdmMsg", "-k", "cust-9", "--json").json()["messages"]
    assert [m["offsetMsgId"] for m in by_key] == [text["offsetMsgId"]]
    assert admin("queryMsgByKey", "-t", "AdmMsg", "-k", "nope", "--json").json()["messages"] == []
    future = str(int(time.time() * 1000) + 3_600_000)
    assert admin("queryMsgByKey", "-t", "AdmMsg", "-k", "cust-9", "--begin", future,
                 "--json").json()["messages"] == []
    by_uniq = admin("queryMsgByUniqueKey", "-t", "AdmMsg", "-i", binary["msgId"], "--json").json()["messages"]
    assert len(by_uniq) == 1 and bytes.fromhex(by_uniq[0]["body"]) == BINARY
    assert "1 message(s)" in admin("queryMsgByUniqueKey", "-t", "AdmMsg", "-i", text["msgId"]).stdout
    missing = admin("queryMsgByUniqueKey", "-t", "AdmMsg", "-i", "0" * 32)
    assert missing.exit_code == 1 and "no message" in missing.stderr

    everything = admin("printMsg", "-t", "AdmMsg", "--json").json()["messages"]
    assert [(m["queueId"], m["queueOffset"]) for m in everything] == [(0, 0), (0, 1), (1, 0)]
    assert {text["offsetMsgId"], binary["offsetMsgId"]} <= {m["offsetMsgId"] for m in everything}
    ranged = admin("printMsg", "-t", "AdmMsg", "-b", str(before), "-e", "now", "--json").json()["messages"]
    assert len(ranged) == 3
    tag_b = admin("printMsg", "-t", "AdmMsg", "-s", "TagB", "--json").json()["messages"]
    assert [bytes.fromhex(m["body"]) for m in tag_b] == [BINARY]
    assert admin("printMsg", "-t", "AdmMsg", "-b", future, "--json").json()["messages"] == []
    assert len(admin("printMsg", "-t", "AdmMsg", "-l", "1", "--json").json()["messages"]) == 1
    assert "3 message(s)" in admin("printMsg", "-t", "AdmMsg").stdout

    consumed = admin("consumeMessage", "-t", "AdmMsg", "-q", "0", "--json").json()
    assert [m["body"] for m in consumed["messages"]] == ["héllo wörld", "third"]
    assert consumed["committed"] == []
    one = admin("consumeMessage", "-t", "AdmMsg", "-q", "0", "-o", "1", "-c", "1", "--json").json()
    assert [m["body"] for m in one["messages"]] == ["third"]
    assert "TagB" in admin("consumeMessage", "-t", "AdmMsg", "-s", "TagB").stdout


# -- consumer groups and offsets ---------------------------------------------------------------------

async def _pull_and_commit(namesrv: str, topic: str, group: str, upto: int) -> int:
    """Pull queue 0 with the project client and commit ``upto`` through the pull's commitOffset."""
    with trio.fail_after(20):
        async with RemotingClient() as rc:
            consumer = PullConsumer(rc, NamesrvClient(rc, namesrv), group)
            mq = MessageQueue(topic, "broker-a", 0)
            res = await consumer.pull(mq, 0, max_nums=upto)
            await consumer.pull(mq, res.next_begin_offset, commit_offset=upto)
            return len(res.messages)


def _progress(admin: AdminFn, group: str, topic: str) -> list[tuple[int, int, int, int]]:
    doc = admin("consumerProgress", "-g", group, "-t", topic, "--json").json()
    return [(q["queueId"], q["brokerOffset"], q["consumerOffset"], q["diff"]) for q in doc["queues"]]


def test_consumer_progress_and_reset_offset(admin: AdminFn, server: harness.ServerProcess) -> None:
    create_topic(admin, "AdmProg", queues=1)
    stamps = []
    for i in range(4):
        sent = admin("sendMessage", "-t", "AdmProg", "-p", f"m{i}", "--json").json()
        stamps.append(admin("queryMsgById", "-i", sent["offsetMsgId"], "--json").json()["message"]
                      ["storeTimestamp"])
        time.sleep(0.01)  # distinct store times, so a reset by time has one right answer
    assert trio.run(_pull_and_commit, server.namesrv, "AdmProg", "GProg", 3) == 3

    assert _progress(admin, "GProg", "AdmProg") == [(0, 4, 3, 1)]
    doc = admin("consumerProgress", "-g", "GProg", "--json").json()
    assert doc["diffTotal"] == 1 and doc["consumerOffsetTotal"] == 3
    assert "diff total 1" in admin("consumerProgress", "-g", "GProg").stdout
    groups = {g["group"]: g for g in admin("consumerProgress", "--json").json()["groups"]}
    assert groups["GProg"]["diffTotal"] == 1 and groups["GProg"]["topics"] == ["AdmProg"]
    assert "GProg" in admin("consumerProgress").stdout

    reset = admin("resetOffsetByTime", "-g", "GProg", "-t", "AdmProg", "-s", "0", "--json").json()
    assert [(q["oldOffset"], q["newOffset"]) for q in reset["queues"]] == [(3, 0)]
    assert reset["clients"] and all(c["status"] for c in reset["clients"])
    assert _progress(admin, "GProg", "AdmProg") == [(0, 4, 0, 4)]
    mid = admin("resetOffsetByTime", "-g", "GProg", "-t", "AdmProg", "-s", str(stamps[2]), "--json").json()
    assert mid["queues"][0]["newOffset"] == 2
    now = admin("resetOffsetByTime", "-g", "GProg", "-t", "AdmProg", "-s", "now", "--json").json()
    assert now["queues"][0]["newOffset"] == 4
    assert _progress(admin, "GProg", "AdmProg") == [(0, 4, 4, 0)]
    assert "newOffset" in admin("resetOffsetByTime", "-g", "GProg", "-t", "AdmProg", "-s", "now").stdout

    # consumeMessage with a group starts at its offset and commits past what it printed.
    admin("resetOffsetByTime", "-g", "GProg", "-t", "AdmProg", "-s", "0", "--json").json()
    got = admin("consumeMessage", "-t", "AdmProg", "-g", "GProg", "-c", "2", "--commit", "--json").json()
    assert [m["body"] for m in got["messages"]] == ["m0", "m1"] and got["committed"][0]["offset"] == 2
    got = admin("consumeMessage", "-t", "AdmProg", "-g", "GProg", "--json").json()
    assert [m["body"] for m in got["messages"]] == ["m2", "m3"]

    # A group that never committed: on a named topic its lag is everything; without one, an error.
    assert _progress(admin, "NeverConsumed", "AdmProg") == [(0, 4, 0, 4)]
    unknown = admin("consumerProgress", "-g", "NeverConsumed")
    assert unknown.exit_code == 1 and "no consume stats" in unknown.stderr

    # deleteSubGroup keeps the offsets unless -r (mqadmin's removeOffset) is given.
    kept = admin("deleteSubGroup", "-g", "GProg", "-c", "DefaultCluster", "--json").json()
    assert kept == {"group": "GProg", "brokers": [server.broker], "removeOffset": False}
    assert _progress(admin, "GProg", "AdmProg")[0][2] == 2
    assert "config and offsets" in admin("deleteSubGroup", "-g", "GProg", "-b", server.broker, "-r").stdout
    assert admin("consumerProgress", "-g", "GProg").exit_code == 1       # nothing committed any more
    assert admin("deleteSubGroup", "-g", "GProg").exit_code == 2          # neither -b nor -c


async def _dead_letter(namesrv: str, topic: str, group: str) -> None:
    """Send the first message of ``topic`` back with delay level -1: straight to %DLQ%group."""
    with trio.fail_after(20):
        async with RemotingClient() as rc:
            ns = NamesrvClient(rc, namesrv)
            consumer = PullConsumer(rc, ns, group)
            mq = MessageQueue(topic, "broker-a", 0)
            msg = (await consumer.pull(mq, 0, max_nums=1)).messages[0]
            await Admin(rc, ns).send_msg_back(await consumer.broker_addr(mq), offset=msg.commitlog_offset,
                                              group=group, delay_level=-1, origin_topic=topic)


def test_dlq_read_and_resend(admin: AdminFn, server: harness.ServerProcess) -> None:
    create_topic(admin, "AdmDlq", queues=1)
    sent = admin("sendMessage", "-t", "AdmDlq", "-p", "poison", "-k", "pk", "-c", "TagX", "-q", "0",
                 "--json").json()
    trio.run(_dead_letter, server.namesrv, "AdmDlq", "GDlq")
    wait_for(lambda: admin("topicRoute", "-t", "%DLQ%GDlq").exit_code == 0, "DLQ route")

    dead = admin("printMsg", "-t", "%DLQ%GDlq", "--json").json()["messages"]
    assert [(m["body"], m["msgId"], m["properties"]["RETRY_TOPIC"]) for m in dead] == [
        ("poison", sent["msgId"], "AdmDlq")]
    dry = admin("resendDlq", "-g", "GDlq", "--dry-run", "--json").json()
    assert [(m["target"], m["status"]) for m in dry["messages"]] == [("AdmDlq", "dry-run")]

    done = admin("resendDlq", "-g", "GDlq", "--json").json()["messages"]
    assert [(m["target"], m["status"], m["queueOffset"]) for m in done] == [("AdmDlq", "SEND_OK", 1)]
    again = admin("consumeMessage", "-t", "AdmDlq", "-o", "1", "--json").json()["messages"]
    assert [(m["body"], m["tags"], m["keys"], m["msgId"]) for m in again] == [("poison", "TagX", ["pk"],
                                                                                 sent["msgId"])]
    # The cursor moved: running again re-sends nothing; --from-start would.
    assert admin("resendDlq", "-g", "GDlq", "--json").json()["messages"] == []
    assert "dry run" in admin("resendDlq", "-g", "GDlq", "--from-start", "--dry-run").stdout
    retry = admin("resendDlq", "-g", "GDlq", "--from-start", "--to", "retry", "--dry-run", "--json").json()
    assert retry["messages"][0]["target"] == "%RETRY%GDlq"


# -- errors ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("args", [
    ["topicRoute", "-t", "NoSuchTopic"],
    ["topicStatus", "-t", "NoSuchTopic"],
    ["printMsg", "-t", "NoSuchTopic"],
    ["sendMessage", "-t", "NoSuchTopic", "-p", "x"],
    ["consumeMessage", "-t", "NoSuchTopic"],
    ["queryMsgByKey", "-t", "NoSuchTopic", "-k", "k"],
    ["resetOffsetByTime", "-g", "g", "-t", "NoSuchTopic", "-s", "now"],
    ["resendDlq", "-g", "NoSuchGroup"],
    ["queryMsgById", "-i", "not-an-id"],
    ["queryMsgById", "-i", "7F00000100000001000000000FFFFFFF"],
])
def test_errors_are_one_line(admin: AdminFn, args: list[str]) -> None:
    r = admin(*args, "--json")
    assert r.exit_code == 1 and r.stdout == ""
    assert r.stderr.startswith("error: ") and r.stderr.count("\n") == 1 and "Traceback" not in r.stderr


def test_unreachable_name_server_and_usage_errors() -> None:
    from tests.gateway.cli.conftest import run_admin

    r = run_admin("127.0.0.1:1", "topicList")
    assert r.exit_code == 1 and r.stderr.startswith("error: ") and "127.0.0.1:1" in r.stderr
    assert r.stderr.count("\n") == 1
    assert run_admin("127.0.0.1:1", "updateTopic", "-t", "X").exit_code == 2  # neither -b nor -c
    bad_time = run_admin("127.0.0.1:1", "resetOffsetByTime", "-g", "g", "-t", "t", "-s", "yesterday")
    assert bad_time.exit_code == 2


def test_timestamp_parsing() -> None:
    assert TIMESTAMP.convert("1700000000123", None, None) == 1700000000123
    assert TIMESTAMP.convert("2024-05-01T12:00:00+00:00", None, None) == 1714564800000
    assert TIMESTAMP.convert("2024-05-01T12:00:00Z", None, None) == 1714564800000
    assert abs(TIMESTAMP.convert("now", None, None) - time.time() * 1000) < 60_000
    with pytest.raises(click.BadParameter):
        TIMESTAMP.convert("soon", None, None)


def test_console_script_subprocess(server: harness.ServerProcess) -> None:
    """The installed ``rokka admin``: global --json before the command, exit codes, clean stderr."""
    exe = harness.rokka_executable()
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
    ok = subprocess.run([exe, "admin", "-n", server.namesrv, "--json", "clusterList"], capture_output=True,
                        text=True, timeout=60, env=env)
    assert ok.returncode == 0, ok.stderr
    assert '"broker-a"' in ok.stdout and ok.stdout.count("\n") == 1
    bad = subprocess.run([exe, "admin", "-n", server.namesrv, "topicStatus", "-t", "NoSuchTopic"],
                         capture_output=True, text=True, timeout=60, env=env)
    assert bad.returncode == 1 and bad.stdout == "" and bad.stderr.startswith("error: topic NoSuchTopic")


async def _admin_subprocess(namesrv: str, *args: str) -> tuple[int, str, str]:
    res = await trio.run_process([harness.rokka_executable(), "admin", "-n", namesrv, *args],
                                 capture_stdout=True, capture_stderr=True, check=False)
    return res.returncode, res.stdout.decode(), res.stderr.decode()


async def test_consumer_and_producer_connections(server: harness.ServerProcess) -> None:
    with trio.fail_after(60):
        async with RemotingClient() as rc:
            ns = NamesrvClient(rc, server.namesrv)
            consumer = PullConsumer(rc, ns, "GConn", client_id="conn-test@1")
            await consumer.heartbeat({"TBW102": "TagA || TagB"})
            producer = Producer(rc, ns, "PConn")
            await producer.route("TBW102")
            await producer.heartbeat("conn-test@2")

            ns_addr = server.namesrv
            code, out, err = await _admin_subprocess(ns_addr, "consumerConnection", "-g", "GConn", "--json")
            assert code == 0, err
            doc = json.loads(out)
            assert [c["clientId"] for c in doc["connections"]] == ["conn-test@1"]
            assert doc["subscriptionTable"]["TBW102"]["subString"] == "TagA || TagB"
            code, out, err = await _admin_subprocess(server.namesrv, "consumerConnection", "-g", "GConn")
            assert code == 0 and "conn-test@1" in out and "TagA || TagB" in out
            code, out, err = await _admin_subprocess(ns_addr, "producerConnection", "-g", "PConn", "--json")
            assert code == 0, err
            assert [c["clientId"] for c in json.loads(out)["connections"]] == ["conn-test@2"]

            code, out, err = await _admin_subprocess(server.namesrv, "consumerConnection", "-g", "Nobody")
            assert code == 1 and out == ""
            assert err.startswith("error: consumer group Nobody has no live client")
