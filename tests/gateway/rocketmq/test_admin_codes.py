"""Broker admin request codes of mqadmin / the dashboard (issue 27), with rokka's own client."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import trio
from rokka.core.config import BrokerConfig
from rokka.core.storage.layout import decode_offset_msg_id
from rokka.gateway import runtime
from rokka.gateway.namesrv.server import NamesrvServer
from rokka.net.remoting.client import Admin, MessageQueue, NamesrvClient, Producer, PullConsumer, RemotingClient
from rokka.net.remoting.client.remoting import ResponseError
from rokka.net.remoting.codec.codes import RequestCode, ResponseCode
from rokka.net.remoting.codec.headers import to_ext
from rokka.net.remoting.codec.remoting import RemotingCommand


async def start(nursery: trio.Nursery, root: Path, conf: Path | None = None) -> tuple[str, str, object]:
    ns = NamesrvServer()
    host, port = await nursery.start(ns.serve, "127.0.0.1", 0)
    cfg = BrokerConfig(listen_port=0, kafka_listen_port=0, store_path_root_dir=str(root / "store"),
                       namesrv_addr=f"{host}:{port}")
    if conf is not None:
        cfg.kafka_ssl_key_password = "hunter2"        # as the file says (the CLI would have read it)
        cfg.extra["brokerConfigPath"] = str(conf)
    role = runtime.BrokerRole(cfg)
    await nursery.start(role.run)
    return f"{host}:{port}", f"{role.broker_addr[0]}:{role.broker_addr[1]}", role


@asynccontextmanager
async def running(root: Path, conf: Path | None = None, limit_s: float = 30,
                  ) -> AsyncIterator[tuple[str, Any, RemotingClient, NamesrvClient, Admin]]:
    """(broker address, BrokerRole, client, name server client, Admin) of a running stack, all
    bounded by ``limit_s`` seconds; the broker is shut down cleanly afterwards."""
    with trio.fail_after(limit_s):
        async with trio.open_nursery() as nursery:
            ns_addr, broker, role = await start(nursery, root, conf)
            async with RemotingClient() as rc:
                ns = NamesrvClient(rc, [ns_addr])
                yield broker, role, rc, ns, Admin(rc, ns)
            await role.shutdown()  # type: ignore[attr-defined]
            nursery.cancel_scope.cancel()


async def topic(rc: RemotingClient, ns: NamesrvClient, broker: str, name: str, queues: int = 1) -> None:
    await Admin(rc, ns).create_topic(broker, name, read_queue_nums=queues, write_queue_nums=queues)
    with trio.fail_after(5):
        while await ns.get_route(name) is None:
            await trio.sleep(0.05)


async def test_broker_config_get_update_and_conf_rewrite(tmp_path: Path) -> None:
    conf = tmp_path / "broker.conf"
    conf.write_text("# ops comment\nbrokerClusterName=DefaultCluster\nbrokerPermission=6\n"
                    "kafkaSslKeyPassword=hunter2\n")
    async with running(tmp_path, conf) as (broker, role, rc, ns, admin):
        await topic(rc, ns, broker, "CFG")
        raw = await rc.invoke(broker, RemotingCommand(RequestCode.GET_BROKER_CONFIG))
        assert raw.code == ResponseCode.SUCCESS
        assert set(json.loads(raw.ext_fields["version"])) == {"counter", "timestamp"}
        props = await admin.get_broker_config(broker)
        assert props["brokerName"] == "broker-a" and props["brokerPermission"] == "6"
        assert props["mapedFileSizeCommitLog"] == str(1 << 30)
        assert props["kafkaSslKeyPassword"] == "******" and b"hunter2" not in raw.body
        await admin.update_broker_config(broker, {"brokerPermission": "4"})
        assert (await admin.get_broker_config(broker))["brokerPermission"] == "4"
        with pytest.raises(ResponseError):       # no PERM_WRITE: sends are refused at once
            await Producer(rc, ns, "pg").send("CFG", b"x", queue=0)
        text = conf.read_text()
        assert "# ops comment" in text and "brokerPermission=4" in text and "brokerPermission=6" not in text
        assert "brokerPermission=6" in (tmp_path / "broker.conf.bak").read_text()
        for bad, code in (({"brokerConfigPath": "/tmp/evil"}, ResponseCode.NO_PERMISSION),
                          ({"storePathRootDir": "/tmp"}, ResponseCode.NO_PERMISSION),
                          ({"noSuchKey": "1"}, ResponseCode.SYSTEM_ERROR),
                          ({"brokerPermission": "lots"}, ResponseCode.SYSTEM_ERROR)):
            with pytest.raises(ResponseError) as err:
                await admin.update_broker_config(broker, bad)
            assert err.value.code == code
        assert err.value.response.remark.startswith("bad broker config value")
        assert conf.read_text() == text         # refusals change nothing
        assert (await admin.get_broker_config(broker))["brokerPermission"] == "4"
        await admin.update_broker_config(broker, {"brokerPermission": "6"})
        running_port = props["listenPort"]     # read once at start: persisted for the next start only
        await admin.update_broker_config(broker, {"listenPort": "10999"})
        assert (await admin.get_broker_config(broker))["listenPort"] == running_port
        assert "listenPort=10999" in conf.read_text()
        await Producer(rc, ns, "pg").send("CFG", b"x", queue=0)


async def test_offsets_spans_clone_stats_and_consume_queue(tmp_path: Path) -> None:
    async with running(tmp_path, limit_s=40) as (broker, role, rc, ns, admin):
        await topic(rc, ns, broker, "ST")
        producer = Producer(rc, ns, "pg")
        sent = [await producer.send("ST", b"m%d" % i, queue=0) for i in range(3)]
        await producer.send("ST", b"later", queue=0, delay_level=1)
        mq = MessageQueue("ST", "broker-a", 0)
        await PullConsumer(rc, ns, "G1").update_offset(mq, 2)
        online = PullConsumer(rc, ns, "G2", client_id="c-G2")
        await online.heartbeat({"ST": "*"})
        await online.update_offset(mq, 1)

        offsets = await admin.all_consumer_offsets(broker)
        assert offsets["ST@G1"] == {"0": 2}
        with trio.fail_after(10):        # level 1 (1 s) delivers the delayed message
            while (await admin.all_delay_offsets(broker)).get(1) != 1:
                await trio.sleep(0.1)
        assert await admin.topic_consumed_by(broker, "ST") == ["G1", "G2"]

        spans = await admin.consume_time_span(broker, "ST", "G1")
        assert [s["messageQueue"] for s in spans] == [mq]
        span = spans[0]
        assert set(span) == {"messageQueue", "minTimeStamp", "maxTimeStamp", "consumeTimeStamp", "delayTime"}
        assert 0 < span["minTimeStamp"] <= span["consumeTimeStamp"] <= span["maxTimeStamp"]
        missing = await rc.invoke(broker, RemotingCommand(RequestCode.QUERY_CONSUME_TIME_SPAN,
                                                          ext_fields=to_ext(topic="NOPE", group="G1")))
        assert (missing.code, missing.remark) == (ResponseCode.TOPIC_NOT_EXIST, "topic[NOPE] not exist")

        await admin.clone_group_offset(broker, "G1", "G3", "ST", offline=True)
        assert await PullConsumer(rc, ns, "G3").query_offset(mq) == 2

        stats = await admin.view_broker_stats(broker, "TOPIC_PUT_NUMS", "ST")
        assert set(stats) == {"statsMinute", "statsHour", "statsDay"}
        assert set(stats["statsMinute"]) == {"sum", "tps", "avgpt"}
        assert stats["statsDay"]["sum"] == 4          # 3 sent + 1 delivered from the delay queue
        group_stats = await admin.view_broker_stats(broker, "GROUP_GET_NUMS", "ST@G1")
        assert group_stats["statsDay"]["sum"] == 0    # one sample so far: no growth to report
        with pytest.raises(ResponseError) as err:
            await admin.view_broker_stats(broker, "NO_STATS", "k")
        assert err.value.response.remark == "The stats <NO_STATS> <k> not exist"

        body = await admin.broker_consume_stats(broker)      # groups of the subscription table
        assert body["brokerAddr"] == broker and body["totalDiff"] == 3
        by_group = {g: s for entry in body["consumeStatsList"] for g, s in entry.items()}
        g2 = by_group["G2"][0]["offsetTable"][mq]
        assert (g2["brokerOffset"], g2["consumerOffset"]) == (4, 1)

        resp = await admin.query_consume_queue(broker, "ST", 0, 1, 2, group="G2")
        cq = json.loads(resp.body)
        assert (cq["minQueueIndex"], cq["maxQueueIndex"]) == (0, 4)
        assert cq["subscriptionData"]["topic"] == "ST"
        first = decode_offset_msg_id(sent[1].offset_msg_id)[2]
        assert [u["physicOffset"] for u in cq["queueData"]][0] == first
        assert set(cq["queueData"][0]) == {"physicOffset", "physicSize", "tagsCode", "eval"}
        past = await admin.query_consume_queue(broker, "ST", 0, 50, 2)
        assert past.remark == "Index 50 of 0@ST is not exist!" and not past.body
        with pytest.raises(ResponseError) as err:
            await admin.query_consume_queue(broker, "ST", 7, 0, 1)
        assert err.value.response.remark == "7@ST is not exist!"


async def test_clean_unused_topic_and_expired_cq_keep_live_topics(tmp_path: Path) -> None:
    async with running(tmp_path) as (broker, role, rc, ns, admin):
        for name in ("KEEP", "GONE"):
            await topic(rc, ns, broker, name)
            await Producer(rc, ns, "pg").send(name, b"x", queue=0)
        store = role.broker.store
        role.broker.topics.delete("GONE")       # the topic config went; its queue files stayed
        await admin.clean_expired_consume_queue(broker)
        assert "KEEP" in store.queues()
        await admin.clean_unused_topic(broker)
        assert "GONE" not in store.queues() and store.max_offset("KEEP", 0) == 1


async def test_resume_check_half_message(tmp_path: Path) -> None:
    async with running(tmp_path) as (broker, role, rc, ns, admin):
        await topic(rc, ns, broker, "TX")
        producer = Producer(rc, ns, "txg")
        half = await producer.send("TX", b"half", queue=0, sys_flag=0x4,
                                   properties={"TRAN_MSG": "true", "PGROUP": "txg"})
        plain = await producer.send("TX", b"plain", queue=0)
        store = role.broker.store
        before = store.max_offset("RMQ_SYS_TRANS_HALF_TOPIC", 0)
        await admin.resume_check_half_message(broker, half.offset_msg_id)
        assert store.max_offset("RMQ_SYS_TRANS_HALF_TOPIC", 0) == before + 1
        copy = store.read_message(store.cq_units("RMQ_SYS_TRANS_HALF_TOPIC", 0, before, 1)[0].commitlog_offset)
        assert copy.body == b"half" and copy.properties["TRANSACTION_CHECK_TIMES"] == "0"
        with pytest.raises(ResponseError) as err:
            await admin.resume_check_half_message(broker, plain.offset_msg_id)
        assert err.value.response.remark == \
            "Exception was thrown when putting message back to RMQ_SYS_TRANS_HALF_TOPIC."


async def test_running_info_and_consume_directly_reach_the_client(tmp_path: Path) -> None:
    seen: list[RemotingCommand] = []

    async def running_info(channel: object, cmd: RemotingCommand) -> RemotingCommand:
        seen.append(cmd)
        body = {"properties": {"PROP_CONSUME_TYPE": "CONSUME_ACTIVELY"}, "subscriptionSet": [],
                "mqTable": {}, "statusTable": {}, "jstack": None}
        return cmd.make_response(ResponseCode.SUCCESS, body=json.dumps(body).encode())

    async def consume_directly(channel: object, cmd: RemotingCommand) -> RemotingCommand:
        seen.append(cmd)
        body = {"order": False, "autoCommit": True, "consumeResult": "CR_SUCCESS", "remark": None,
                "spentTimeMills": 1}
        return cmd.make_response(ResponseCode.SUCCESS, body=json.dumps(body).encode())

    async def consumer_status(channel: object, cmd: RemotingCommand) -> RemotingCommand:
        seen.append(cmd)
        body = {"messageQueueTable": {'{"brokerName":"broker-a","queueId":0,"topic":"DI"}': 1}}
        return cmd.make_response(ResponseCode.SUCCESS, body=json.dumps(body).encode())

    handlers = {RequestCode.GET_CONSUMER_RUNNING_INFO: running_info,
                RequestCode.CONSUME_MESSAGE_DIRECTLY: consume_directly,
                RequestCode.GET_CONSUMER_STATUS_FROM_CLIENT: consumer_status}
    with trio.fail_after(30):
        async with trio.open_nursery() as nursery:
            ns_addr, broker, role = await start(nursery, tmp_path)
            async with RemotingClient(handlers=handlers) as crc, RemotingClient() as rc:
                ns = NamesrvClient(rc, [ns_addr])
                admin = Admin(rc, ns)
                await topic(rc, ns, broker, "DI")
                sent = await Producer(rc, ns, "pg").send("DI", b"direct", queue=0)
                await PullConsumer(crc, NamesrvClient(crc, [ns_addr]), "DG", client_id="c-1").heartbeat({"DI": "*"})
                info = await admin.consumer_running_info(broker, "DG", "c-1", jstack=True)
                assert info["properties"]["PROP_CONSUME_TYPE"] == "CONSUME_ACTIVELY"
                assert seen[0].code == RequestCode.GET_CONSUMER_RUNNING_INFO
                assert seen[0].ext_fields["jstackEnable"] == "true"
                result = await admin.consume_message_directly(broker, "DG", "c-1", sent.offset_msg_id)
                assert result["consumeResult"] == "CR_SUCCESS"
                forwarded = seen[1]
                assert forwarded.ext_fields["brokerName"] == "broker-a"
                assert forwarded.ext_fields["msgId"] == sent.offset_msg_id
                assert b"direct" in forwarded.body      # the stored record travels in the body
                with pytest.raises(ResponseError) as err:
                    await admin.consumer_running_info(broker, "DG", "nobody")
                assert err.value.response.remark == "The Consumer <DG> <nobody> not online"
                status = await rc.invoke(broker, RemotingCommand(RequestCode.INVOKE_BROKER_TO_GET_CONSUMER_STATUS,
                                                                 ext_fields=to_ext(topic="DI", group="DG")))
                assert status.code == ResponseCode.SUCCESS
                assert list(json.loads(status.body)["consumerTable"]["c-1"].values()) == [1]
                assert seen[2].code == RequestCode.GET_CONSUMER_STATUS_FROM_CLIENT
                assert seen[2].ext_fields == {"topic": "DI", "group": "DG"}
                none = await rc.invoke(broker, RemotingCommand(RequestCode.INVOKE_BROKER_TO_GET_CONSUMER_STATUS,
                                                               ext_fields=to_ext(topic="DI", group="Nobody")))
                assert none.remark == "No Any Consumer online in the consumer group: [Nobody]"
                heartbeat = {"clientID": "p-1", "consumerDataSet": [], "producerDataSet": [{"groupName": "PGX"}]}
                await rc.invoke(broker, RemotingCommand(RequestCode.HEART_BEAT, body=json.dumps(heartbeat).encode()))
                producers = json.loads((await rc.invoke(broker, RemotingCommand(
                    RequestCode.GET_ALL_PRODUCER_INFO))).body)["data"]
                assert [(p["clientId"], p["version"]) for p in producers["PGX"]] == [("p-1", 407)]
                assert set(producers["PGX"][0]) == {"clientId", "remoteIP", "language", "version",
                                                    "lastUpdateTimestamp"}
                system = json.loads((await rc.invoke(broker, RemotingCommand(
                    RequestCode.GET_SYSTEM_TOPIC_LIST_FROM_BROKER))).body)["topicList"]
                assert {"SCHEDULE_TOPIC_XXXX", "RMQ_SYS_TRANS_HALF_TOPIC", "TBW102"} <= set(system)
            await role.shutdown()
            nursery.cancel_scope.cancel()


ISSUE27_BROKER_CODES = (RequestCode.GET_BROKER_CONFIG, RequestCode.UPDATE_BROKER_CONFIG,
                        RequestCode.GET_ALL_CONSUMER_OFFSET, RequestCode.GET_ALL_DELAY_OFFSET,
                        RequestCode.QUERY_TOPIC_CONSUME_BY_WHO, RequestCode.QUERY_CONSUME_TIME_SPAN,
                        RequestCode.CLEAN_EXPIRED_CONSUMEQUEUE, RequestCode.GET_CONSUMER_RUNNING_INFO,
                        RequestCode.CONSUME_MESSAGE_DIRECTLY, RequestCode.CLONE_GROUP_OFFSET,
                        RequestCode.VIEW_BROKER_STATS_DATA, RequestCode.CLEAN_UNUSED_TOPIC,
                        RequestCode.GET_BROKER_CONSUME_STATS, RequestCode.QUERY_CONSUME_QUEUE,
                        RequestCode.RESUME_CHECK_HALF_MESSAGE, RequestCode.INVOKE_BROKER_TO_GET_CONSUMER_STATUS,
                        RequestCode.GET_ALL_PRODUCER_INFO)


def test_acl_makes_the_operations_codes_admin_only(tmp_path: Path) -> None:
    from rokka.gateway.rocketmq.acl import PlainAcl

    from tests.gateway.rocketmq.test_acl import ACL, command

    (tmp_path / "plain_acl.yml").write_text(ACL)
    acl = PlainAcl.load(tmp_path / "plain_acl.yml")
    for code in ISSUE27_BROKER_CODES:
        ext = {"topic": "orders", "consumerGroup": "billing", "group": "billing"}
        refusal = acl.check(command(code, ext), "127.0.0.1")
        assert refusal is not None and refusal.startswith("Need admin permission"), code
        assert acl.check(command(code, ext, key=("admin-key", "admin-secret")), "127.0.0.1") is None


async def test_namesrv_write_perm_and_config_updates_need_an_admin_under_acl(tmp_path: Path) -> None:
    from rokka.gateway.rocketmq.acl import PlainAcl, guard_namesrv

    from tests.gateway.rocketmq.test_acl import ACL, command

    (tmp_path / "plain_acl.yml").write_text(ACL)
    server = NamesrvServer()
    guard_namesrv(PlainAcl.load(tmp_path / "plain_acl.yml"), server.remoting.handlers)
    with trio.fail_after(20):
        async with trio.open_nursery() as nursery, RemotingClient() as rc:
            host, port = await nursery.start(server.serve, "127.0.0.1", 0)
            addr = f"{host}:{port}"
            for code, ext, body in ((RequestCode.ADD_WRITE_PERM_OF_BROKER, {"brokerName": "b"}, b""),
                                    (RequestCode.UPDATE_NAMESRV_CONFIG, {}, b"clusterTest=true\n")):
                refused = await rc.invoke(addr, command(code, ext, body))
                assert refused.code == ResponseCode.SYSTEM_ERROR and "AclException" in str(refused.remark)
                ok = await rc.invoke(addr, command(code, ext, body, key=("admin-key", "admin-secret")))
                assert ok.code == ResponseCode.SUCCESS
            nursery.cancel_scope.cancel()
