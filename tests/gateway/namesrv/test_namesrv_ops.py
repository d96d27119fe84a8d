"""Name server operations codes (issue 27): persisted KV config, config get/update, write perm, topic lists."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import trio
from rokka.core.namesrv.config import NamesrvConfig, load_namesrv_conf
from rokka.gateway.namesrv.server import NamesrvServer
from rokka.net.remoting.client import Admin, NamesrvClient, RemotingClient
from rokka.net.remoting.client.namesrv import register_broker
from rokka.net.remoting.client.remoting import ResponseError
from rokka.net.remoting.codec.codes import RequestCode, ResponseCode
from rokka.net.remoting.codec.remoting import RemotingCommand


async def _serve(nursery: trio.Nursery, config: NamesrvConfig | None = None) -> tuple[NamesrvServer, str]:
    server = NamesrvServer(config=config)
    host, port = await nursery.start(server.serve, "127.0.0.1", 0)
    return server, f"{host}:{port}"


async def test_kv_config_survives_a_restart(tmp_path: Path) -> None:
    cfg = NamesrvConfig.under(tmp_path / "ns")
    with trio.fail_after(20):
        async with trio.open_nursery() as nursery, RemotingClient() as rc:
            server, addr = await _serve(nursery, cfg)
            ns = NamesrvClient(rc, [addr])
            await ns.put_kv("ORDER_TOPIC_CONFIG", "OT", "broker-a:4")
            await ns.put_kv("NS2", "k", "v")
            await ns.delete_kv("NS2", "k")
            await ns.put_kv("ROKKA_KAFKA", "broker-a", '{"nodeId":1,"host":"127.0.0.1","port":1}')
            server.stop(0)
            rc.close_all()
            stored = json.loads((tmp_path / "ns" / "kvConfig.json").read_text())
            assert stored == {"configTable": {"ORDER_TOPIC_CONFIG": {"OT": "broker-a:4"}}}
            _, addr2 = await _serve(nursery, NamesrvConfig.under(tmp_path / "ns"))
            ns2 = NamesrvClient(rc, [addr2])
            assert await ns2.get_kv("ORDER_TOPIC_CONFIG", "OT") == "broker-a:4"
            assert await ns2.get_kv("NS2", "k") is None
            # Kafka endpoints are re-registered by live brokers every round: never kept across restarts.
            assert await ns2.get_kv("ROKKA_KAFKA", "broker-a") is None
            nursery.cancel_scope.cancel()


def test_damaged_kv_config_refuses_to_start(tmp_path: Path) -> None:
    (tmp_path / "kvConfig.json").write_text("{not json")
    with pytest.raises(ValueError, match="kvConfig.json"):
        NamesrvServer(config=NamesrvConfig.under(tmp_path))


async def test_get_and_update_namesrv_config_rewrites_the_file(tmp_path: Path) -> None:
    conf = tmp_path / "namesrv.properties"
    conf.write_text(f"# ops\nkvConfigPath={tmp_path / 'kv.json'}\nlistenPort=9877\n"
                    "serverChannelMaxIdleTimeSeconds=7\n")
    cfg = load_namesrv_conf(conf)
    assert cfg.listen_port == 9877 and cfg.config_store_path == str(conf.resolve())
    assert NamesrvServer(config=cfg).remoting._idle_timeout_s == 7.0
    with trio.fail_after(20):
        async with trio.open_nursery() as nursery, RemotingClient() as rc:
            _, addr = await _serve(nursery, cfg)
            admin = Admin(rc, NamesrvClient(rc, [addr]))
            props = await admin.get_namesrv_config(addr)
            assert props["kvConfigPath"] == str(tmp_path / "kv.json")
            assert (props["productEnvName"], props["orderMessageEnable"], props["clusterTest"]) == \
                ("center", "false", "false")
            await admin.update_namesrv_config({"orderMessageEnable": "true"}, addr)
            assert (await admin.get_namesrv_config(addr))["orderMessageEnable"] == "true"
            text = conf.read_text()
            assert "# ops" in text and "orderMessageEnable=true" in text and "listenPort=9877" in text
            for bad, code, remark in (({"kvConfigPath": "/tmp/x"}, ResponseCode.NO_PERMISSION,
                                       "Can not update config path"),
                                      ({"configStorePath": "/tmp/x"}, ResponseCode.NO_PERMISSION,
                                       "Can not update config path"),
                                      ({"nope": "1"}, ResponseCode.SYSTEM_ERROR,
                                       "unknown name server config key: nope"),
                                      ({"clusterTest": "maybe"}, ResponseCode.SYSTEM_ERROR, None)):
                with pytest.raises(ResponseError) as err:
                    await admin.update_namesrv_config(bad, addr)
                assert err.value.code == code
                assert remark is None or err.value.response.remark == remark
            assert conf.read_text() == text
            nursery.cancel_scope.cancel()


async def test_add_write_perm_system_and_unit_topic_lists() -> None:
    topics = {"dataVersion": {"counter": 1, "timestamp": 1}, "topicConfigTable": {
        "Plain": {"topicName": "Plain", "readQueueNums": 2, "writeQueueNums": 2, "perm": 6, "topicSysFlag": 0},
        "Unit": {"topicName": "Unit", "readQueueNums": 1, "writeQueueNums": 1, "perm": 6, "topicSysFlag": 1},
        "UnitSub": {"topicName": "UnitSub", "readQueueNums": 1, "writeQueueNums": 1, "perm": 6,
                    "topicSysFlag": 2},
        "Both": {"topicName": "Both", "readQueueNums": 1, "writeQueueNums": 1, "perm": 6, "topicSysFlag": 3}}}
    with trio.fail_after(20):
        async with trio.open_nursery() as nursery, RemotingClient() as rc:
            _, addr = await _serve(nursery)
            ns = NamesrvClient(rc, [addr])
            admin = Admin(rc, ns)
            await register_broker(rc, [addr], cluster="C1", broker_name="bk-1", broker_addr="127.0.0.1:10911",
                                  topic_config_wrapper=topics)
            assert await ns.wipe_write_perm("bk-1") == 4
            assert (await ns.get_route("Plain")).queue_datas[0].perm == 4
            assert await admin.add_write_perm("bk-1") == 4
            assert (await ns.get_route("Plain")).queue_datas[0].perm == 6
            assert await admin.add_write_perm("no-such-broker") == 0

            system = await admin.namesrv_topic_list(RequestCode.GET_SYSTEM_TOPIC_LIST_FROM_NS)
            assert system == {"brokerAddr": "127.0.0.1:10911", "topicList": ["C1", "bk-1"]}
            lists = {code: (await admin.namesrv_topic_list(code))["topicList"] for code in (
                RequestCode.GET_UNIT_TOPIC_LIST, RequestCode.GET_HAS_UNIT_SUB_TOPIC_LIST,
                RequestCode.GET_HAS_UNIT_SUB_UNUNIT_TOPIC_LIST)}
            assert lists == {RequestCode.GET_UNIT_TOPIC_LIST: ["Both", "Unit"],
                             RequestCode.GET_HAS_UNIT_SUB_TOPIC_LIST: ["Both", "UnitSub"],
                             RequestCode.GET_HAS_UNIT_SUB_UNUNIT_TOPIC_LIST: ["UnitSub"]}
            # 217 is not a 4.9.7 name server code (5.x reuses it): still not supported
            resp = await rc.invoke(addr, RemotingCommand(RequestCode.GET_KV_CONFIG_BY_VALUE))
            assert resp.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED
            nursery.cancel_scope.cancel()
