"""RocketMQ ACL holes (``rokka.gateway.rocketmq.acl``): the resources of a request are read from exactly
the fields its handler uses (a send's topic as ``normalize_send_header`` gives it, whatever the code),
the read-anything codes are admin-only, consume stats / reset offset need SUB, and the name server's
WIPE_WRITE_PERM_OF_BROKER needs an admin signature (a real name server on 127.0.0.1, port 0)."""

from __future__ import annotations

from pathlib import Path

import pytest
import trio
from rokka.gateway.namesrv.server import NamesrvServer
from rokka.gateway.rocketmq.acl import PUB, SUB, PlainAcl, resources, sign
from rokka.net.remoting.client import RemotingClient
from rokka.net.remoting.codec.codes import RequestCode as RC
from rokka.net.remoting.codec.codes import ResponseCode
from rokka.net.remoting.codec.remoting import RemotingCommand

ACL = """\
accounts:
  - accessKey: admin-key
    secretKey: admin-secret
    admin: true
  - accessKey: app-key
    secretKey: app-secret
    defaultTopicPerm: DENY
    defaultGroupPerm: DENY
    topicPerms: [open=PUB|SUB, secret=DENY]
    groupPerms: [mine=SUB]
"""
APP, ADMIN = ("app-key", "app-secret"), ("admin-key", "admin-secret")


@pytest.fixture
def acl(tmp_path: Path) -> PlainAcl:
    (tmp_path / "plain_acl.yml").write_text(ACL)
    return PlainAcl.load(tmp_path / "plain_acl.yml")


def signed(code: int, ext: dict[str, str], key: tuple[str, str] = APP) -> RemotingCommand:
    ext = dict(ext, AccessKey=key[0])
    ext["Signature"] = sign(ext, b"", key[1])
    return RemotingCommand(code=code, ext_fields=ext, body=b"")


@pytest.mark.parametrize("code,ext", [
    (RC.SEND_MESSAGE, {"topic": "open", "b": "secret"}),           # the handler honours both names
    (RC.SEND_MESSAGE_V2, {"b": "open", "topic": "secret"}),
    (RC.SEND_MESSAGE_V2, {"topic": "secret"}),                     # 4.9 checked only "b"
    (RC.SEND_BATCH_MESSAGE, {"topic": "secret"}),
])
def test_a_send_is_checked_where_it_is_stored(acl: PlainAcl, code: int, ext: dict[str, str]) -> None:
    assert resources(signed(code, ext)) == {"secret": PUB}
    assert acl.check(signed(code, ext), "127.0.0.1") == \
        "No permission for topic secret (needs PUB) for accessKey=app-key"
    assert acl.check(signed(code, {"b": "open"} if code != RC.SEND_MESSAGE else {"topic": "open"}),
                     "127.0.0.1") is None


def test_inherited_weak_spots_are_closed(acl: PlainAcl) -> None:
    for code in (RC.VIEW_MESSAGE_BY_ID, RC.GET_ALL_TOPIC_CONFIG, RC.GET_ALL_SUBSCRIPTIONGROUP_CONFIG):
        assert "is not admin" in (acl.check(signed(code, {"offset": "0"}), "127.0.0.1") or ""), code
        assert acl.check(signed(code, {"offset": "0"}, ADMIN), "127.0.0.1") is None
    stats = {"consumerGroup": "mine", "topic": "secret"}
    assert resources(signed(RC.GET_CONSUME_STATS, stats)) == {"secret": SUB, "%RETRY%mine": SUB}
    assert acl.check(signed(RC.GET_CONSUME_STATS, stats), "127.0.0.1") is not None
    assert acl.check(signed(RC.GET_CONSUME_STATS, {"consumerGroup": "mine", "topic": "open"}), "127.0.0.1") is None
    assert acl.check(signed(RC.GET_CONSUME_STATS, {"consumerGroup": "theirs"}), "127.0.0.1") is not None
    reset = {"topic": "open", "group": "theirs", "timestamp": "0", "isForce": "true"}
    assert acl.check(signed(RC.INVOKE_BROKER_TO_RESET_OFFSET, reset), "127.0.0.1") == \
        "No permission for group theirs (needs SUB) for accessKey=app-key"
    assert acl.check(signed(RC.INVOKE_BROKER_TO_RESET_OFFSET, dict(reset, group="mine")), "127.0.0.1") is None


async def test_name_server_wipe_needs_an_admin(acl: PlainAcl) -> None:
    from rokka.gateway.rocketmq.acl import guard_namesrv

    ns = NamesrvServer()
    guard_namesrv(acl, ns.remoting.handlers)
    async with trio.open_nursery() as nursery:
        host, port = await nursery.start(ns.serve, "127.0.0.1", 0)
        addr = f"{host}:{port}"
        wipe = RemotingCommand(code=RC.WIPE_WRITE_PERM_OF_BROKER, ext_fields={"brokerName": "b"})
        with trio.fail_after(10):
            async with RemotingClient() as anon, RemotingClient(credentials=APP) as app, \
                    RemotingClient(credentials=ADMIN) as admin:
                refused = await anon.invoke(addr, RemotingCommand(code=wipe.code, ext_fields=dict(wipe.ext_fields)))
                assert refused.code == ResponseCode.SYSTEM_ERROR and "No accessKey" in (refused.remark or "")
                not_admin = await app.invoke(addr, RemotingCommand(code=wipe.code, ext_fields=dict(wipe.ext_fields)))
                assert "is not admin" in (not_admin.remark or "")
                ok = await admin.invoke(addr, RemotingCommand(code=wipe.code, ext_fields=dict(wipe.ext_fields)))
                assert ok.code == ResponseCode.SUCCESS
                assert (await anon.invoke(addr, RemotingCommand(code=RC.GET_BROKER_CLUSTER_INFO))).code == 0
        ns.stop(0)
        nursery.cancel_scope.cancel()


def test_records_named_by_offset_are_checked_against_their_topic(acl: PlainAcl) -> None:
    stored = {100: "secret", 200: "open", 300: "%RETRY%mine"}
    acl.topic_at = stored.get
    back = {"group": "mine", "delayLevel": "0", "originTopic": "open"}
    assert acl.check(signed(RC.CONSUMER_SEND_MSG_BACK, dict(back, offset="100")), "127.0.0.1") == \
        "No permission for topic secret (needs SUB) for accessKey=app-key"       # no copying secret's record
    assert acl.check(signed(RC.CONSUMER_SEND_MSG_BACK, dict(back, offset="200")), "127.0.0.1") is None
    assert acl.check(signed(RC.CONSUMER_SEND_MSG_BACK, dict(back, offset="300")), "127.0.0.1") is None
    assert acl.check(signed(RC.VIEW_MESSAGE_BY_ID, {"offset": "100"}), "127.0.0.1") is not None
    assert acl.check(signed(RC.VIEW_MESSAGE_BY_ID, {"offset": "200"}), "127.0.0.1") is None
    assert acl.check(signed(RC.VIEW_MESSAGE_BY_ID, {"offset": "999"}), "127.0.0.1") is None   # none: handler says
