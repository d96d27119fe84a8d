"""RocketMQ plain ACL: the rule checks on commands (unit), then a live broker with ``aclEnable`` driven by
the project's own client with and without credentials (the RocketMQ C++ client's signing is checked in
interop/test_rocketmq_cpp_acl.py).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import trio
from rokka.core.config import BrokerConfig
from rokka.gateway import runtime
from rokka.gateway.namesrv.server import NamesrvServer
from rokka.gateway.rocketmq.acl import AclConfigError, PlainAcl, resources, sign
from rokka.net.remoting.client import Admin, NamesrvClient, Producer, RemotingClient
from rokka.net.remoting.client.remoting import ResponseError
from rokka.net.remoting.codec.codes import RequestCode as RC
from rokka.net.remoting.codec.codes import ResponseCode
from rokka.net.remoting.codec.remoting import RemotingCommand

ACL = """\
globalWhiteRemoteAddresses:
  - 10.9.2.*
  - 10.8.0.{1,2}
  - 10.7.0.10-12
accounts:
  - accessKey: admin-key
    secretKey: admin-secret
    admin: true
    defaultTopicPerm: PUB|SUB
    defaultGroupPerm: PUB|SUB
  - accessKey: app-key
    secretKey: app-secret
    whiteRemoteAddress: 192.168.0.7
    defaultTopicPerm: SUB
    defaultGroupPerm: DENY
    topicPerms: [orders=PUB|SUB, audit=DENY]
    groupPerms: [billing=SUB]
"""


@pytest.fixture
def acl(tmp_path: Path) -> PlainAcl:
    (tmp_path / "plain_acl.yml").write_text(ACL)
    return PlainAcl.load(tmp_path / "plain_acl.yml")


def command(code: int, ext: dict[str, str], body: bytes = b"", key: tuple[str, str] | None = ("app-key", "app-secret"),
            ) -> RemotingCommand:
    ext = dict(ext)
    if key is not None:
        ext["AccessKey"] = key[0]
        ext["Signature"] = sign(ext, body, key[1])
    return RemotingCommand(code=code, ext_fields=ext, body=body)


def test_signature_and_accounts(acl: PlainAcl) -> None:
    send = {"b": "orders", "a": "PG"}
    assert acl.check(command(RC.SEND_MESSAGE_V2, send), "127.0.0.1") is None
    assert acl.check(command(RC.SEND_MESSAGE_V2, send, key=None), "127.0.0.1") == "No accessKey is configured"
    assert acl.check(command(RC.SEND_MESSAGE_V2, send, key=None), "10.9.2.44") is None        # global white list
    assert acl.check(command(RC.SEND_MESSAGE_V2, send, key=None), "10.9.3.44") is not None
    for addr, white in (("10.8.0.2", True), ("10.8.0.3", False), ("10.7.0.11", True), ("10.7.0.13", False),
                        ("10.8.0.22", False)):
        assert (acl.check(command(RC.SEND_MESSAGE_V2, send, key=None), addr) is None) == white, addr
    assert acl.check(command(RC.SEND_MESSAGE_V2, send, key=("ghost", "x")), "127.0.0.1") == "No acl config for ghost"
    wrong = command(RC.SEND_MESSAGE_V2, send, key=("app-key", "guess"))
    assert acl.check(wrong, "127.0.0.1") == "Check signature failed for accessKey=app-key"
    assert acl.check(wrong, "192.168.0.7") is None                                            # account white list
    tampered = command(RC.SEND_MESSAGE_V2, send, b"body")
    tampered.body = b"other body"
    assert acl.check(tampered, "127.0.0.1") == "Check signature failed for accessKey=app-key"


def test_permissions(acl: PlainAcl) -> None:
    def check(code: int, ext: dict[str, str], body: bytes = b"", key: tuple[str, str] = ("app-key", "app-secret"),
              ) -> str | None:
        return acl.check(command(code, ext, body, key), "127.0.0.1")

    assert check(RC.SEND_MESSAGE_V2, {"b": "news"}) == \
        "No permission for topic news (needs PUB) for accessKey=app-key"                   # default SUB only
    assert check(RC.PULL_MESSAGE, {"topic": "news", "consumerGroup": "billing"}) is None
    assert check(RC.PULL_MESSAGE, {"topic": "audit", "consumerGroup": "billing"}) is not None   # explicit DENY
    assert check(RC.PULL_MESSAGE, {"topic": "news", "consumerGroup": "other"}) == \
        "No permission for group other (needs SUB) for accessKey=app-key"
    assert check(RC.UPDATE_CONSUMER_OFFSET, {"topic": "orders", "consumerGroup": "billing"}) is None
    assert check(RC.CONSUMER_SEND_MSG_BACK, {"group": "other"}) is not None
    heartbeat = json.dumps({"clientID": "c", "consumerDataSet": [{"groupName": "billing", "subscriptionDataSet": [
        {"topic": "audit"}, {"topic": "%RETRY%billing"}]}]}).encode()
    assert resources(command(RC.HEART_BEAT, {}, heartbeat)) == {"%RETRY%billing": 4, "audit": 4}
    assert check(RC.HEART_BEAT, {}, heartbeat) == "No permission for topic audit (needs SUB) for accessKey=app-key"
    assert check(RC.UPDATE_AND_CREATE_TOPIC, {"topic": "x"}) == \
        "Need admin permission for request code=17, but accessKey=app-key is not admin"
    assert check(RC.UPDATE_AND_CREATE_TOPIC, {"topic": "x"}, key=("admin-key", "admin-secret")) is None
    assert check(RC.SEND_MESSAGE, {"topic": "%RETRY%billing"}) is None                   # retry topic = group SUB


def test_admin_without_permission_lists_and_broker_credentials(tmp_path: Path) -> None:
    (tmp_path / "plain_acl.yml").write_text(
        "accounts:\n"
        "  - {accessKey: z-admin, secretKey: zs, admin: true}\n"
        "  - {accessKey: b-admin, secretKey: bs, admin: true, topicPerms: [audit=SUB]}\n"
        "  - {accessKey: a-app, secretKey: as}\n")
    acl = PlainAcl.load(tmp_path / "plain_acl.yml")
    pull = {"topic": "news", "consumerGroup": "billing"}
    # RocketMQ 4.9: an admin account with no topicPerms/groupPerms may use everything ...
    assert acl.check(command(RC.PULL_MESSAGE, pull, key=("z-admin", "zs")), "127.0.0.1") is None
    # ... one with a list falls back to its (default DENY) defaults elsewhere
    assert acl.check(command(RC.PULL_MESSAGE, pull, key=("b-admin", "bs")), "127.0.0.1") == \
        "No permission for topic news (needs SUB) for accessKey=b-admin"
    assert acl.broker_credentials() == ("z-admin", "zs")           # an admin account that may use everything
    (tmp_path / "plain_acl.yml").write_text("accounts: [{accessKey: a, secretKey: b}]\n")
    assert PlainAcl.load(tmp_path / "plain_acl.yml").broker_credentials() is None


@pytest.mark.parametrize("text", ["accounts: [{accessKey: a}]", "accounts:\n  - {accessKey: a, secretKey: b, "
                                  "defaultTopicPerm: WRITE}", "[1, 2]", "accounts: [{accessKey: a, secretKey: b, "
                                  "topicPerms: [nonsense]}]"])
def test_bad_files_are_refused(tmp_path: Path, text: str) -> None:
    (tmp_path / "acl.yml").write_text(text)
    with pytest.raises(AclConfigError):
        PlainAcl.load(tmp_path / "acl.yml")


async def test_live_broker_with_acl(tmp_path: Path) -> None:
    (tmp_path / "plain_acl.yml").write_text(ACL)
    with trio.fail_after(30):
        async with trio.open_nursery() as nursery:
            ns = NamesrvServer()
            host, port = await nursery.start(ns.serve, "127.0.0.1", 0)
            cfg = BrokerConfig(listen_port=0, kafka_listen_port=0, store_path_root_dir=str(tmp_path / "store"),
                               namesrv_addr=f"{host}:{port}", acl_enable=True,
                               plain_acl_file=str(tmp_path / "plain_acl.yml"))
            role = runtime.BrokerRole(cfg)
            await nursery.start(role.run)
            broker = f"{role.broker_addr[0]}:{role.broker_addr[1]}"
            async with RemotingClient(credentials=("admin-key", "admin-secret")) as admin_rc, \
                    RemotingClient(credentials=("app-key", "app-secret")) as app_rc, RemotingClient() as anon_rc:
                names = NamesrvClient(admin_rc, [f"{host}:{port}"])
                await Admin(admin_rc, names).create_topic(broker, "orders", read_queue_nums=1, write_queue_nums=1)
                with pytest.raises(ResponseError, match="not admin"):
                    await Admin(app_rc, NamesrvClient(app_rc, [f"{host}:{port}"])).create_topic(broker, "x")
                while await names.get_route("orders") is None:  # noqa: ASYNC110 - polling the name server
                    await trio.sleep(0.05)
                sent = await Producer(app_rc, NamesrvClient(app_rc, [f"{host}:{port}"]), "PG").send("orders", b"m")
                assert sent.status == "SEND_OK"
                with pytest.raises(ResponseError) as refused:
                    await Producer(anon_rc, NamesrvClient(anon_rc, [f"{host}:{port}"]), "PG").send("orders", b"m")
                assert refused.value.code == ResponseCode.SYSTEM_ERROR
                assert "AclException: No accessKey is configured" in refused.value.remark
            nursery.cancel_scope.cancel()
