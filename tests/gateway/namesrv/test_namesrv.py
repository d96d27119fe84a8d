"""Name server end to end: NamesrvServer on 127.0.0.1:0, driven by our client library.

Rules: real sockets on loopback; each test bounded by ``trio.fail_after``;
the broker side is ``rokka.net.remoting.client.namesrv.register_broker`` /
``BrokerRegistrar`` (what the real broker uses).
"""

from __future__ import annotations

import json
import zlib

import trio
from rokka.gateway.namesrv.server import NamesrvServer
from rokka.net.remoting.client.namesrv import BrokerRegistrar, NamesrvClient, dumps_wrapper, register_broker
from rokka.net.remoting.client.remoting import RemotingClient
from rokka.net.remoting.client.types import MessageQueue
from rokka.net.remoting.codec import RemotingCommand, RequestCode, ResponseCode
from rokka.net.remoting.codec.bodies import RegisterBrokerBody, body_crc32, topic_config_json


class Clock:
    def __init__(self) -> None:
        self.now = 5_000_000

    def __call__(self) -> int:
        return self.now


def wrapper(counter: int, **topics: tuple[int, int]) -> bytes:
    return dumps_wrapper({"counter": counter, "timestamp": 1},
                         {t: topic_config_json(t, r, w) for t, (r, w) in topics.items()})


async def start(nursery: trio.Nursery, **kw: object) -> tuple[NamesrvServer, str]:
    ns = NamesrvServer(**kw)  # type: ignore[arg-type]
    host, port = await nursery.start(ns.serve, "127.0.0.1", 0)
    return ns, f"{host}:{port}"


async def test_two_brokers_routes_span_and_expire() -> None:
    clock = Clock()
    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            ns, addr = await start(nursery, clock=clock, scan_interval_s=3600)
            async with RemotingClient() as rc:
                nsc = NamesrvClient(rc, [addr])
                assert await nsc.get_route("T") is None
                for name, port, cluster in (("broker-a", 10911, "C1"), ("broker-b", 20911, "C2")):
                    res = await register_broker(
                        rc, [addr], cluster=cluster, broker_name=name, broker_addr=f"127.0.0.1:{port}",
                        ha_addr=f"127.0.0.1:{port + 1}",
                        topic_config_wrapper=wrapper(1, T=(4, 4), TBW102=(8, 8)))
                    assert res[addr] == (None, None)
                route = await nsc.get_route("T")
                assert route is not None
                assert route.publish_queues()[4] == MessageQueue("T", "broker-b", 0)
                assert len(route.publish_queues()) == 8 and len(route.subscribe_queues()) == 8
                assert route.master_addr("broker-b") == "127.0.0.1:20911"
                info = await nsc.cluster_info()
                assert info["clusterAddrTable"] == {"C1": ["broker-a"], "C2": ["broker-b"]}
                assert info["brokerAddrTable"]["broker-a"]["brokerAddrs"] == {"0": "127.0.0.1:10911"}
                assert await nsc.all_topics() == ["T", "TBW102"]
                assert await nsc.topics_by_cluster("C2") == ["T", "TBW102"]
                # broker-b goes silent for more than 120 s; broker-a re-registers in time.
                clock.now += 100_000
                await register_broker(rc, [addr], cluster="C1", broker_name="broker-a",
                                      broker_addr="127.0.0.1:10911",
                                      topic_config_wrapper=wrapper(1, T=(4, 4), TBW102=(8, 8)))
                clock.now += 30_000
                assert ns.scan_once() == ["127.0.0.1:20911"]
                route = await nsc.get_route("T")
                assert route is not None and [b.broker_name for b in route.broker_datas] == ["broker-a"]
            ns.stop()


async def test_route_not_found_remark_and_raw_json() -> None:
    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            ns, addr = await start(nursery)
            async with RemotingClient() as rc:
                resp = await rc.invoke(addr, RemotingCommand(RequestCode.GET_ROUTEINFO_BY_TOPIC,
                                                             ext_fields={"topic": "nope"}))
                assert resp.code == ResponseCode.TOPIC_NOT_EXIST
                assert resp.remark is not None
                assert resp.remark.startswith("No topic route info in name server for the topic: nope")
                await register_broker(rc, [addr], cluster="C", broker_name="b", broker_addr="127.0.0.1:1",
                                      topic_config_wrapper=wrapper(1, T=(2, 2)))
                resp = await rc.invoke(addr, RemotingCommand(RequestCode.GET_ROUTEINFO_BY_TOPIC,
                                                             ext_fields={"topic": "T"}))
                body = json.loads(resp.body)  # standard JSON, quoted broker ids
                assert body["brokerDatas"][0]["brokerAddrs"] == {"0": "127.0.0.1:1"}
                assert "orderTopicConf" not in body
                resp = await rc.invoke(addr, RemotingCommand(RequestCode.GET_ROUTEINFO_BY_TOPIC))
                assert resp.code == ResponseCode.SYSTEM_ERROR
            ns.stop()


async def test_compressed_register_body_and_crc() -> None:
    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            ns, addr = await start(nursery)
            async with RemotingClient() as rc:
                nsc = NamesrvClient(rc, addr)
                res = await register_broker(rc, [addr], cluster="C", broker_name="z", broker_addr="127.0.0.1:7",
                                            topic_config_wrapper=wrapper(3, Z=(3, 5)), compressed=True)
                assert res[addr] == (None, None)
                route = await nsc.get_route("Z")
                assert route is not None and route.queue_datas[0].write_queue_nums == 5
                # Hand-built compressed body (the Java layout), checked against our decoder.
                dv = b'{"counter":9,"timestamp":2}'
                topic = b"Y 1 2 6 SINGLE_TAG"
                raw = (len(dv).to_bytes(4, "big") + dv + (1).to_bytes(4, "big") + len(topic).to_bytes(4, "big")
                       + topic + (2).to_bytes(4, "big") + b"[]")
                body = zlib.compress(raw)
                decoded = RegisterBrokerBody.decode(body, compressed=True)
                assert decoded.topic_config_table["Y"]["writeQueueNums"] == 2
                ext = {"brokerName": "y", "brokerAddr": "127.0.0.1:8", "clusterName": "C",
                       "haServerAddr": "", "brokerId": "0", "compressed": "true",
                       "bodyCrc32": str(body_crc32(body))}
                ok = await rc.invoke(addr, RemotingCommand(RequestCode.REGISTER_BROKER, ext_fields=ext, body=body))
                assert ok.code == 0
                assert (await nsc.get_route("Y")) is not None
                ext["bodyCrc32"] = str(body_crc32(body) ^ 1)
                bad = await rc.invoke(addr, RemotingCommand(RequestCode.REGISTER_BROKER, ext_fields=ext,
                                                            body=body))
                assert (bad.code, bad.remark) == (ResponseCode.SYSTEM_ERROR, "crc32 not match")
                ext["bodyCrc32"] = "0"
                junk = await rc.invoke(addr, RemotingCommand(RequestCode.REGISTER_BROKER, ext_fields=ext,
                                                             body=b"not zlib"))
                assert junk.code == ResponseCode.SYSTEM_ERROR
            ns.stop()


async def test_kv_delete_topic_wipe_and_channel_close() -> None:
    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            ns, addr = await start(nursery)
            async with RemotingClient() as rc:
                nsc = NamesrvClient(rc, [addr])
                await nsc.put_kv("NS", "k1", "v1")
                await nsc.put_kv("NS", "k2", "v2")
                assert await nsc.get_kv("NS", "k1") == "v1"
                assert await nsc.get_kv("NS", "zz") is None
                resp = await rc.invoke(addr, RemotingCommand(RequestCode.GET_KV_CONFIG,
                                                             ext_fields={"namespace": "NS", "key": "zz"}))
                assert resp.code == ResponseCode.QUERY_NOT_FOUND
                assert resp.remark == "No config item, Namespace: NS Key: zz"
                await nsc.delete_kv("NS", "k1")
                assert await nsc.kv_list("NS") == {"k2": "v2"}
                assert await nsc.kv_list("none") == {}
                await register_broker(rc, [addr], cluster="C", broker_name="b", broker_addr="127.0.0.1:1",
                                      topic_config_wrapper=wrapper(1, T=(2, 2), U=(1, 1)))
                assert await nsc.wipe_write_perm("b") == 2
                route = await nsc.get_route("U")
                assert route is not None and route.publish_queues() == []
                await nsc.delete_topic("U")
                assert await nsc.get_route("U") is None
            # The client (and so the broker's connection) is gone: its brokers are dropped.
            with trio.fail_after(5):
                while ns.routes.brokers:
                    await trio.sleep(0.01)
            ns.stop()


async def test_registrar_and_unknown_code() -> None:
    tables = [wrapper(1, A=(1, 1))]
    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            ns, addr = await start(nursery)
            async with RemotingClient() as rc:
                reg = BrokerRegistrar(rc, [addr, "127.0.0.1:1"], cluster="C", broker_name="r",
                                      broker_addr="127.0.0.1:3", topic_configs=lambda: tables[-1],
                                      interval_s=3600)
                await nursery.start(reg.run)
                assert isinstance(reg.last_results["127.0.0.1:1"], Exception)
                nsc = NamesrvClient(rc, ["127.0.0.1:1", addr])  # first one is down: fail over
                assert await nsc.all_topics() == ["A"]
                tables.append(wrapper(2, B=(1, 1)))
                reg.trigger()
                while reg.rounds < 2:
                    await trio.sleep(0.01)
                assert await nsc.all_topics() == ["B"]
                await reg.unregister()
                assert await nsc.all_topics() == []
                resp = await rc.invoke(addr, RemotingCommand(code=12345))
                assert resp.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED
                nursery.cancel_scope.cancel()
