"""The ACL request codes (50-54), DELETE_EXPIRED_COMMITLOG (329) and QUERY_CORRECTION_OFFSET (308) on a live
broker (name server + broker in-process, real sockets), driven by rokka's client and by ``rokka admin``.

Each code answered REQUEST_CODE_NOT_SUPPORTED before ``handlers/admin_acl.py``.
"""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import trio
import yaml
from rokka.core.config import BrokerConfig
from rokka.gateway import runtime
from rokka.gateway.namesrv.server import NamesrvServer
from rokka.net.remoting.client import Admin, NamesrvClient, OutMessage, Producer, RemotingClient
from rokka.net.remoting.client.remoting import ResponseError
from rokka.net.remoting.codec.codes import RequestCode as RC
from rokka.net.remoting.codec.codes import ResponseCode
from rokka.net.remoting.codec.remoting import RemotingCommand

ROKKA = str(Path(sys.executable).parent / "rokka")
OPS = ("ops-admin", "ops-secret-1")
APP = ("app-user", "app-secret-1")
NEW = ("new-user-1", "new-secret-1")
ACL = f"""\
accounts:
  - accessKey: {OPS[0]}
    secretKey: {OPS[1]}
    admin: true
  - accessKey: {APP[0]}
    secretKey: {APP[1]}
    admin: false
    defaultTopicPerm: PUB
    defaultGroupPerm: SUB
"""


@asynccontextmanager
async def live(root: Path, **cfg_fields: Any) -> AsyncIterator[tuple[str, str, runtime.BrokerRole]]:
    """(name server, broker address, role) of an in-process name server + broker."""
    async with trio.open_nursery() as nursery:
        host, port = await nursery.start(NamesrvServer().serve, "127.0.0.1", 0)
        cfg = BrokerConfig(listen_port=0, kafka_listen_port=0, store_path_root_dir=str(root / "store"),
                           namesrv_addr=f"{host}:{port}", **cfg_fields)
        role = runtime.BrokerRole(cfg)
        await nursery.start(role.run)
        yield f"{host}:{port}", f"{role.broker_addr[0]}:{role.broker_addr[1]}", role
        await role.shutdown()
        nursery.cancel_scope.cancel()


def acl_fields(root: Path, text: str = ACL) -> dict[str, Any]:
    (root / "plain_acl.yml").write_text(text)
    return {"acl_enable": True, "plain_acl_file": str(root / "plain_acl.yml")}


async def call(rc: RemotingClient, broker: str, code: int, **ext: str) -> RemotingCommand:
    return await rc.invoke(broker, RemotingCommand(code=code, ext_fields=dict(ext)))


def account(root: Path, access_key: str) -> dict[str, Any] | None:
    doc = yaml.safe_load((root / "plain_acl.yml").read_text())
    return next((a for a in doc.get("accounts") or [] if a["accessKey"] == access_key), None)


async def test_acl_accounts_created_updated_deleted(tmp_path: Path) -> None:
    with trio.fail_after(60):
        async with live(tmp_path, **acl_fields(tmp_path)) as (namesrv, broker, _), \
                RemotingClient(credentials=OPS) as ops, RemotingClient(credentials=APP) as app, \
                RemotingClient(credentials=NEW) as new:
            await Admin(ops, NamesrvClient(ops, [namesrv])).create_topic(broker, "orders", read_queue_nums=1,
                                                                         write_queue_nums=1)
            create = {"accessKey": NEW[0], "secretKey": NEW[1], "defaultTopicPerm": "PUB",
                      "topicPerms": "audit=DENY,orders=PUB|SUB", "admin": "false"}
            refused = await call(app, broker, RC.UPDATE_AND_CREATE_ACL_CONFIG, **create)
            assert refused.code == ResponseCode.SYSTEM_ERROR and "is not admin" in refused.remark
            probe = RemotingCommand(code=RC.GET_MAX_OFFSET, ext_fields={"topic": "orders", "queueId": "0"})
            before = await new.invoke(broker, probe)
            assert before.code == ResponseCode.SYSTEM_ERROR and f"No acl config for {NEW[0]}" in before.remark

            assert (await call(ops, broker, RC.UPDATE_AND_CREATE_ACL_CONFIG, **create)).code == ResponseCode.SUCCESS
            probe = RemotingCommand(code=RC.GET_MAX_OFFSET, ext_fields={"topic": "orders", "queueId": "0"})
            assert (await new.invoke(broker, probe)).code == ResponseCode.SUCCESS      # live at once
            sent = await Producer(new, NamesrvClient(new, [namesrv]), "PG").send("orders", b"hello")
            assert sent.status == "SEND_OK"
            assert account(tmp_path, NEW[0])["topicPerms"] == ["audit=DENY", "orders=PUB|SUB"]

            # an update keeps what it leaves out (topicPerms) and always sets admin, like 4.9
            resp = await call(ops, broker, RC.UPDATE_AND_CREATE_ACL_CONFIG, accessKey=NEW[0], secretKey=NEW[1],
                              defaultGroupPerm="SUB", admin="true")
            assert resp.code == ResponseCode.SUCCESS
            acct = account(tmp_path, NEW[0])
            assert acct["topicPerms"] == ["audit=DENY", "orders=PUB|SUB"] and acct["admin"] is True
            assert acct["defaultGroupPerm"] == "SUB" and acct["defaultTopicPerm"] == "PUB"

            # bad input: Java's failure code and reason; the file is not touched
            text = (tmp_path / "plain_acl.yml").read_bytes()
            for bad, why in (({"accessKey": "short", "secretKey": NEW[1]}, "longer than 6"),
                             ({"accessKey": NEW[0], "secretKey": NEW[1], "topicPerms": "orders=ALL"},
                              "permission"),
                             ({"accessKey": NEW[0], "secretKey": NEW[1], "defaultTopicPerm": "MAYBE"},
                              "unknown permission")):
                resp = await call(ops, broker, RC.UPDATE_AND_CREATE_ACL_CONFIG, admin="false", **bad)
                assert resp.code == ResponseCode.UPDATE_AND_CREATE_ACL_CONFIG_FAILED and why in resp.remark, bad
            assert (tmp_path / "plain_acl.yml").read_bytes() == text

            info = await call(ops, broker, RC.GET_BROKER_CLUSTER_ACL_INFO)
            assert info.code == ResponseCode.SUCCESS
            ext = info.ext_fields
            assert (ext["brokerName"], ext["clusterName"], ext["brokerAddr"]) == ("broker-a", "DefaultCluster", broker)
            assert json.loads(ext["version"])["counter"] == 2
            assert json.loads(ext["allAclFileVersion"]) == {str(tmp_path / "plain_acl.yml"): json.loads(ext["version"])}

            config = json.loads((await call(ops, broker, RC.GET_BROKER_CLUSTER_ACL_CONFIG)).body)
            assert [a["accessKey"] for a in config["plainAccessConfigs"]] == [OPS[0], APP[0], NEW[0]]
            assert config["globalWhiteAddrs"] == []

            assert (await call(ops, broker, RC.DELETE_ACL_CONFIG, accessKey=NEW[0])).code == ResponseCode.SUCCESS
            gone = await new.invoke(broker, RemotingCommand(code=RC.GET_MAX_OFFSET,
                                                            ext_fields={"topic": "orders", "queueId": "0"}))
            assert gone.code == ResponseCode.SYSTEM_ERROR and "No acl config" in gone.remark
            again = await call(ops, broker, RC.DELETE_ACL_CONFIG, accessKey=NEW[0])
            assert again.code == ResponseCode.DELETE_ACL_CONFIG_FAILED
            assert again.remark == f"The accessKey[{NEW[0]}] corresponding to accessConfig has been deleted failed."
            assert account(tmp_path, NEW[0]) is None and account(tmp_path, OPS[0]) is not None


async def test_global_white_list_and_refusals(tmp_path: Path) -> None:
    with trio.fail_after(60):
        async with live(tmp_path, **acl_fields(tmp_path)) as (_, broker, _), \
                RemotingClient(credentials=OPS) as ops, RemotingClient() as anon:
            probe = {"topic": "TBW102", "queueId": "0"}
            assert (await call(anon, broker, RC.GET_MAX_OFFSET, **probe)).code == ResponseCode.SYSTEM_ERROR
            other = str(tmp_path / "other.yml")
            resp = await call(ops, broker, RC.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG, globalWhiteAddrs="127.0.0.1",
                              aclFileFullPath=other)
            assert resp.code == ResponseCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG_FAILED and "other.yml" in resp.remark
            resp = await call(ops, broker, RC.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG, globalWhiteAddrs="10.1.2.*,127.0.0.1")
            assert resp.code == ResponseCode.SUCCESS
            assert (await call(anon, broker, RC.GET_MAX_OFFSET, **probe)).code == ResponseCode.SUCCESS
            doc = yaml.safe_load((tmp_path / "plain_acl.yml").read_text())
            assert doc["globalWhiteRemoteAddresses"] == ["10.1.2.*", "127.0.0.1"]
            assert doc["dataVersion"][0]["counter"] == 1
            assert (tmp_path / "plain_acl.yml").stat().st_mode & 0o077 == 0      # secrets stay private
            resp = await call(ops, broker, RC.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG, globalWhiteAddrs="")
            assert resp.code == ResponseCode.SUCCESS
            assert (await call(anon, broker, RC.GET_MAX_OFFSET, **probe)).code == ResponseCode.SYSTEM_ERROR


async def test_acl_codes_without_acl_enable(tmp_path: Path) -> None:
    with trio.fail_after(60):
        async with live(tmp_path) as (_, broker, _), RemotingClient() as rc:
            resp = await call(rc, broker, RC.UPDATE_AND_CREATE_ACL_CONFIG, accessKey=NEW[0], secretKey=NEW[1],
                              admin="false")
            assert resp.code == ResponseCode.UPDATE_AND_CREATE_ACL_CONFIG_FAILED and "aclEnable" in resp.remark
            resp = await call(rc, broker, RC.DELETE_ACL_CONFIG, accessKey=NEW[0])
            assert resp.code == ResponseCode.DELETE_ACL_CONFIG_FAILED and "aclEnable" in resp.remark
            for code in (RC.GET_BROKER_CLUSTER_ACL_INFO, RC.GET_BROKER_CLUSTER_ACL_CONFIG):
                resp = await call(rc, broker, code)
                assert resp.code == ResponseCode.SYSTEM_ERROR and "aclEnable" in resp.remark
            assert not (tmp_path / "plain_acl.yml").exists()


async def test_delete_expired_commitlog_ignores_delete_when(tmp_path: Path) -> None:
    # every segment is expired at once (fileReservedTime=0) but deleteWhen names no hour of the day
    fields = {"mapped_file_size_commit_log": 64 * 1024, "file_reserved_time": 0, "delete_when": "99",
              "clean_resource_interval": 100, "disk_max_used_space_ratio": 95}
    with trio.fail_after(60):
        async with live(tmp_path, **fields) as (namesrv, broker, role), RemotingClient() as rc:
            ns = NamesrvClient(rc, [namesrv])
            await Admin(rc, ns).create_topic(broker, "big", read_queue_nums=1, write_queue_nums=1)
            producer = Producer(rc, ns, "PG")
            for _ in range(10):
                await producer.send_batch("big", [OutMessage(b"x" * 4000) for _ in range(8)], queue=0)
            store = role.broker.store
            assert store.commitlog_min_offset == 0
            resp = await call(rc, broker, RC.DELETE_EXPIRED_COMMITLOG)
            assert resp.code == ResponseCode.SUCCESS
            while store.commitlog_min_offset == 0:  # noqa: ASYNC110 - the retention loop runs on its interval
                await trio.sleep(0.05)
            assert store.commitlog_min_offset < store.commitlog_max_offset      # the newest segment stays
            assert (await producer.send("big", b"after")).status == "SEND_OK"


async def test_query_correction_offset(tmp_path: Path) -> None:
    with trio.fail_after(60):
        async with live(tmp_path) as (namesrv, broker, _), RemotingClient() as rc:
            ns = NamesrvClient(rc, [namesrv])
            await Admin(rc, ns).create_topic(broker, "t", read_queue_nums=2, write_queue_nums=2)
            producer = Producer(rc, ns, "PG")
            for q in (0, 1):
                await producer.send_batch("t", [OutMessage(b"m") for _ in range(10)], queue=q)
            for group, offsets in {"g1": (5, 7), "g2": (3, 9), "g3": (1, 1), "g4": (2, 8)}.items():
                for q, off in enumerate(offsets):
                    resp = await call(rc, broker, RC.UPDATE_CONSUMER_OFFSET, consumerGroup=group, topic="t",
                                      queueId=str(q), commitOffset=str(off))
                    assert resp.code == ResponseCode.SUCCESS
            resp = await call(rc, broker, RC.QUERY_CORRECTION_OFFSET, topic="t", compareGroup="g4",
                              filterGroups="g3,g4")
            assert resp.code == ResponseCode.SUCCESS
            # min over g1, g2: q0 3, q1 7; g4 is behind on q0 (2 < 3): Long.MAX_VALUE there
            assert json.loads(resp.body) == {"correctionOffsets": {"0": (1 << 63) - 1, "1": 7}}
            resp = await call(rc, broker, RC.QUERY_CORRECTION_OFFSET, topic="t", compareGroup="g2")
            assert json.loads(resp.body) == {"correctionOffsets": {"0": 1, "1": 1}}
            with pytest.raises(ResponseError):
                await rc.invoke_ok(broker, RemotingCommand(code=RC.QUERY_CORRECTION_OFFSET,
                                                           ext_fields={"compareGroup": "g2"}))


async def rokka_admin(namesrv: str, *args: str, key: tuple[str, str] | None = OPS) -> trio.CompletedProcess:
    creds = ["--access-key", key[0], "--secret-key", key[1]] if key else []
    return await trio.run_process([ROKKA, "admin", "-n", namesrv, *creds, *args],
                                  capture_stdout=True, capture_stderr=True, check=False)


async def test_rokka_admin_acl_commands(tmp_path: Path) -> None:
    with trio.fail_after(120):
        async with live(tmp_path, **acl_fields(tmp_path)) as (namesrv, broker, _), RemotingClient() as rc:
            ns = NamesrvClient(rc, [namesrv])
            while not await Admin(rc, ns).master_addrs():     # noqa: ASYNC110 - the broker registers
                await trio.sleep(0.05)
            out = await rokka_admin(namesrv, "updateAclConfig", "-c", "DefaultCluster", "-a", NEW[0], "-s", NEW[1],
                                    "-t", "orders=PUB", "-m", "false")
            assert out.returncode == 0, out.stderr
            assert out.stdout.decode().strip() == f"create or update plain access config to {broker} success."
            out = await rokka_admin(namesrv, "clusterAclConfigVersion", "--json")
            (row,) = json.loads(out.stdout)["versions"]
            assert (row["brokerAddr"], row["counter"], row["aclFile"]) == (broker, 1, str(tmp_path / "plain_acl.yml"))
            out = await rokka_admin(namesrv, "clusterAclConfigVersion")
            assert "#AclConfigVersionNum" in out.stdout.decode() and broker in out.stdout.decode()
            out = await rokka_admin(namesrv, "getAclConfig", "-b", broker, "--json")
            accounts = json.loads(out.stdout)["configs"][broker]["plainAccessConfigs"]
            assert accounts[-1]["accessKey"] == NEW[0] and accounts[-1]["topicPerms"] == ["orders=PUB"]
            out = await rokka_admin(namesrv, "updateGlobalWhiteAddr", "-b", broker, "-g", "10.0.0.*")
            assert out.returncode == 0 and "update global white remote addresses" in out.stdout.decode()
            out = await rokka_admin(namesrv, "deleteAclConfig", "-b", broker, "-a", NEW[0], key=APP)
            assert out.returncode == 1 and "is not admin" in out.stderr.decode()
            out = await rokka_admin(namesrv, "deleteAclConfig", "-b", broker, "-a", NEW[0])
            assert out.returncode == 0 and f"account's accesskey is:{NEW[0]}" in out.stdout.decode()
            out = await rokka_admin(namesrv, "deleteAclConfig", "-b", broker, "-a", NEW[0])
            assert out.returncode == 1 and "has been deleted failed" in out.stderr.decode()
            out = await rokka_admin(namesrv, "deleteExpiredCommitLog")
            assert out.returncode == 0 and out.stdout.decode().strip() == "success"
            assert account(tmp_path, NEW[0]) is None
