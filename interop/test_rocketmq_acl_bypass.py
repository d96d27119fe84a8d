"""RocketMQ ACL bypasses (issue 19 items 4 and 9) against ``rokka serve`` with ``aclEnable``: rokka's own
RocketMQ client signs raw requests (the header tricks no ordinary client sends) with a non-admin account
that may use ``Open`` and must never touch ``Secret``:

* a send whose header carries both ``topic`` and ``b`` (or only the field its request code does not
  use) is checked against the topic the broker stores it to;
* VIEW_MESSAGE_BY_ID and CONSUMER_SEND_MSG_BACK need SUB on the topic of the record they name by
  offset (a send-back could copy any record into the group's retry topic), the topic / group listings
  are admin-only, GET_CONSUME_STATS and INVOKE_BROKER_TO_RESET_OFFSET need SUB on their group and topic;
* the name server takes WIPE_WRITE_PERM_OF_BROKER from admin accounts only;
* ``aclEnable`` without Kafka ACLs says at start-up that the Kafka port is open.

Everything on 127.0.0.1 with free ports; every request is bounded.
"""

from __future__ import annotations

from typing import Any

import harness
import pytest
import trio
from rmq_acl import APP, OPS, acl_conf, plain_acl
from rokka.net.remoting.client import RemotingClient
from rokka.net.remoting.codec.codes import RequestCode as RC
from rokka.net.remoting.codec.codes import ResponseCode
from rokka.net.remoting.codec.remoting import RemotingCommand

ACL = plain_acl(["Open=PUB|SUB", "Secret=DENY"], ["appGroup=SUB", "secretGroup=DENY"], default_group_perm="DENY")
T = 10.0


@pytest.fixture
def acl_rokka(configured_rokka: Any) -> harness.ServerProcess:
    return configured_rokka(*acl_conf(ACL))


def _send(code: int, fields: dict[str, str], body: bytes = b"payload") -> RemotingCommand:
    """A send with the usual V1 fields (or their V2 letters) plus ``fields``."""
    base = {"producerGroup": "PG", "defaultTopic": "TBW102", "defaultTopicQueueNums": "4", "queueId": "0",
            "sysFlag": "0", "bornTimestamp": "1", "flag": "0", "properties": "", "reconsumeTimes": "0"}
    if code != RC.SEND_MESSAGE:
        letters = {"producerGroup": "a", "defaultTopic": "c", "defaultTopicQueueNums": "d", "queueId": "e",
                   "sysFlag": "f", "bornTimestamp": "g", "flag": "h", "properties": "i", "reconsumeTimes": "j"}
        base = {letters[k]: v for k, v in base.items()}
    return RemotingCommand(code=code, ext_fields={**base, **fields}, body=body)


async def _max_offset(client: RemotingClient, broker: str, topic: str) -> int:
    resp = await client.invoke(broker, RemotingCommand(code=RC.GET_MAX_OFFSET, ext_fields={
        "topic": topic, "queueId": "0"}))
    return int(resp.ext_fields.get("offset", 0)) if resp.code == ResponseCode.SUCCESS else 0


async def test_send_is_checked_against_the_topic_it_is_stored_to(acl_rokka: harness.ServerProcess) -> None:
    broker = acl_rokka.broker
    async with RemotingClient(credentials=OPS) as ops, RemotingClient(credentials=APP) as app:
        with trio.fail_after(T):
            for topic in ("Open", "Secret"):
                created = await ops.invoke(broker, RemotingCommand(code=RC.UPDATE_AND_CREATE_TOPIC, ext_fields={
                    "topic": topic, "defaultTopic": "TBW102", "readQueueNums": "1", "writeQueueNums": "1",
                    "perm": "6", "topicFilterType": "SINGLE_TAG", "topicSysFlag": "0", "order": "false"}))
                assert created.code == ResponseCode.SUCCESS, created.remark
            ok = await app.invoke(broker, _send(RC.SEND_MESSAGE, {"topic": "Open"}))
            assert ok.code == ResponseCode.SUCCESS, ok.remark          # the account may send to Open
            tricks = [_send(RC.SEND_MESSAGE, {"topic": "Open", "b": "Secret"}),
                      _send(RC.SEND_MESSAGE_V2, {"b": "Open", "topic": "Secret"}),
                      _send(RC.SEND_MESSAGE_V2, {"topic": "Secret"}),
                      _send(RC.SEND_BATCH_MESSAGE, {"topic": "Secret"})]
            for cmd in tricks:
                resp = await app.invoke(broker, cmd)
                assert resp.code == ResponseCode.SYSTEM_ERROR, (cmd.code, cmd.ext_fields, resp.code, resp.remark)
                assert "No permission for topic Secret" in (resp.remark or ""), resp.remark
            assert await _max_offset(ops, broker, "Secret") == 0      # nothing reached Secret
            assert await _max_offset(ops, broker, "Open") == 1


async def test_reads_and_admin_views_need_their_rights(acl_rokka: harness.ServerProcess) -> None:
    broker = acl_rokka.broker
    async with RemotingClient(credentials=OPS) as ops, RemotingClient(credentials=APP) as app:
        with trio.fail_after(T):
            sent = await ops.invoke(broker, _send(RC.SEND_MESSAGE, {"topic": "Secret"}, b"top secret"))
            assert sent.code == ResponseCode.SUCCESS, sent.remark
            offset = str(int(sent.ext_fields["msgId"][-16:], 16))
            viewed = await ops.invoke(broker, RemotingCommand(code=RC.VIEW_MESSAGE_BY_ID,
                                                              ext_fields={"offset": offset}))
            assert viewed.code == ResponseCode.SUCCESS and b"top secret" in (viewed.body or b"")
            mine = await ops.invoke(broker, _send(RC.SEND_MESSAGE, {"topic": "Open"}, b"open data"))
            mine_offset = str(int(mine.ext_fields["msgId"][-16:], 16))
            refused = {
                "view": RemotingCommand(code=RC.VIEW_MESSAGE_BY_ID, ext_fields={"offset": offset}),
                "copy": RemotingCommand(code=RC.CONSUMER_SEND_MSG_BACK, ext_fields={
                    "offset": offset, "group": "appGroup", "delayLevel": "0", "originMsgId": "x",
                    "originTopic": "Open"}),          # would copy Secret's record into %RETRY%appGroup
                "topics": RemotingCommand(code=RC.GET_ALL_TOPIC_CONFIG, ext_fields={}),
                "groups": RemotingCommand(code=RC.GET_ALL_SUBSCRIPTIONGROUP_CONFIG, ext_fields={}),
                "stats": RemotingCommand(code=RC.GET_CONSUME_STATS, ext_fields={"consumerGroup": "secretGroup",
                                                                                "topic": "Secret"}),
                "reset": RemotingCommand(code=RC.INVOKE_BROKER_TO_RESET_OFFSET, ext_fields={
                    "topic": "Secret", "group": "appGroup", "timestamp": "0", "isForce": "true"}),
            }
            for what, cmd in refused.items():
                resp = await app.invoke(broker, cmd)
                assert resp.code == ResponseCode.SYSTEM_ERROR, (what, resp.code, resp.remark)
                assert "AclException" in (resp.remark or ""), (what, resp.remark)
                assert b"top secret" not in (resp.body or b""), what
            allowed = await app.invoke(broker, RemotingCommand(code=RC.GET_CONSUME_STATS, ext_fields={
                "consumerGroup": "appGroup", "topic": "Open"}))
            assert "AclException" not in (allowed.remark or ""), allowed.remark
            own = await app.invoke(broker, RemotingCommand(code=RC.VIEW_MESSAGE_BY_ID,
                                                           ext_fields={"offset": mine_offset}))
            assert own.code == ResponseCode.SUCCESS and b"open data" in (own.body or b""), own.remark
            back = await app.invoke(broker, RemotingCommand(code=RC.CONSUMER_SEND_MSG_BACK, ext_fields={
                "offset": mine_offset, "group": "appGroup", "delayLevel": "0", "originMsgId": "x",
                "originTopic": "Open"}))
            assert "AclException" not in (back.remark or ""), back.remark


async def test_name_server_wipe_write_perm_needs_an_admin(acl_rokka: harness.ServerProcess) -> None:
    ns = acl_rokka.namesrv

    def wipe() -> RemotingCommand:
        return RemotingCommand(code=RC.WIPE_WRITE_PERM_OF_BROKER, ext_fields={"brokerName": "no-such-broker"})

    async with RemotingClient() as anon, RemotingClient(credentials=APP) as app, \
            RemotingClient(credentials=OPS) as ops:
        with trio.fail_after(T):
            for client, reason in ((anon, "No accessKey is configured"), (app, "is not admin")):
                resp = await client.invoke(ns, wipe())
                assert resp.code == ResponseCode.SYSTEM_ERROR and reason in (resp.remark or ""), resp.remark
            ok = await ops.invoke(ns, wipe())
            assert ok.code == ResponseCode.SUCCESS and ok.ext_fields.get("wipeTopicCount") == "0", ok.remark
            route = await anon.invoke(ns, RemotingCommand(code=RC.GET_BROKER_CLUSTER_INFO, ext_fields={}))
            assert route.code == ResponseCode.SUCCESS           # the rest of the name server stays open
    assert "security.kafka_port_open" in acl_rokka.stderr_tail(400)
