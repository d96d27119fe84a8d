"""Name server request handlers (REGISTER_BROKER, GET_ROUTEINFO_BY_TOPIC, KV ...).

Theory of operation
-------------------
Each handler decodes the custom header with its declaration
(``codec/namesrv_headers.py``: a missing required field or a bad number raises
``HeaderFieldError`` -> SYSTEM_ERROR), calls the pure
``RouteInfoManager`` and builds the response.  Bodies are standard JSON with
quoted keys; every client (C++ with allowNumericKeys, ali-ons JSON2, Java
fastjson) accepts that, so the ``acceptStandardJsonOnly`` switch and the
request version are irrelevant here.

Remarks copied from the Java name server: TOPIC_NOT_EXIST "No topic route
info in name server for the topic: <t>" + FAQ hint; GET_KV_CONFIG
QUERY_NOT_FOUND "No config item, Namespace: <ns> Key: <k>"; REGISTER_BROKER
"crc32 not match".

Names: GET_ROUTEINFO_BY_TOPIC with a name no protocol allows is answered
TOPIC_NOT_EXIST (the route cannot exist) and DELETE_TOPIC_IN_NAMESRV with one
SYSTEM_ERROR with TopicValidator's remark, each with one ``rocketmq.bad_name``
log line (``rokka.core.names.store_topic_problem``: RocketMQ or Kafka names).
The name server keeps routes in memory only: no name ever becomes a path here.

Operations codes (Java 4.9.7 ``DefaultRequestProcessor``): ADD_WRITE_PERM_OF_BROKER
(header ``addTopicCount``), GET_SYSTEM_TOPIC_LIST_FROM_NS (cluster and broker
names plus one broker address), GET_UNIT_TOPIC_LIST /
GET_HAS_UNIT_SUB_TOPIC_LIST / GET_HAS_UNIT_SUB_UNUNIT_TOPIC_LIST (by the first
queue data's topicSysFlag), GET_NAMESRV_CONFIG (properties text) and
UPDATE_NAMESRV_CONFIG (properties text; the path keys get NO_PERMISSION "Can not
update config path"; an unknown key or bad value SYSTEM_ERROR; changes are
rewritten into ``configStorePath`` when the server persists).  4.9.7 has no
GET_KV_CONFIG_BY_VALUE (217 is 5.x's REGISTER_TOPIC_IN_NAMESRV), so it stays
unsupported.

Editing rule: no state here; everything lives in the manager.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path

import structlog
import trio
from rokka.core import names
from rokka.core.namesrv.config import PATH_KEYS, PATH_REMARK, NamesrvConfig, rewrite_properties_file
from rokka.core.namesrv.controller import Controller
from rokka.core.namesrv.routes import KVTableFull, RouteInfoManager
from rokka.net.logs import limited
from rokka.net.remoting.channel import Channel, Handler
from rokka.net.remoting.codec import namesrv_headers as nh
from rokka.net.remoting.codec.bodies import RegisterBrokerBody, body_crc32, dumps, kv_table_json, loads_body
from rokka.net.remoting.codec.codes import RequestCode, ResponseCode
from rokka.net.remoting.codec.remoting import RemotingCommand

log = structlog.get_logger(__name__)

FAQ_SUFFIX = "\nSee http://rocketmq.apache.org/docs/faq/ for further details."
ORDER_TOPIC_CONFIG_NS = "ORDER_TOPIC_CONFIG"
FLAG_UNIT, FLAG_UNIT_SUB = 0x1, 0x2      # TopicSysFlag bits


def route_not_found_remark(topic: str) -> str:
    return f"No topic route info in name server for the topic: {topic}{FAQ_SUFFIX}"


async def _nothing() -> None:
    return None


class NamesrvHandlers:
    """Binds the name server request codes to one ``RouteInfoManager``."""

    def __init__(self, routes: RouteInfoManager, config: NamesrvConfig | None = None, *,
                 persist_config: bool = False) -> None:
        self.routes = routes
        self.config = config if config is not None else NamesrvConfig()
        self.persist_config = persist_config
        self.controller: Controller | None = None      # controller mode: it decides which id is the master
        self.persist_kv: Callable[[], Awaitable[None]] = _nothing     # the server's kvConfig.json writer

    def table(self) -> dict[int, Handler]:
        return {
            RequestCode.REGISTER_BROKER: self.register_broker,
            RequestCode.UNREGISTER_BROKER: self.unregister_broker,
            RequestCode.QUERY_DATA_VERSION: self.query_data_version,
            RequestCode.GET_ROUTEINFO_BY_TOPIC: self.get_route,
            RequestCode.GET_BROKER_CLUSTER_INFO: self.cluster_info,
            RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER: self.all_topics,
            RequestCode.GET_TOPICS_BY_CLUSTER: self.topics_by_cluster,
            RequestCode.DELETE_TOPIC_IN_NAMESRV: self.delete_topic,
            RequestCode.WIPE_WRITE_PERM_OF_BROKER: self.wipe_write_perm,
            RequestCode.PUT_KV_CONFIG: self.put_kv,
            RequestCode.GET_KV_CONFIG: self.get_kv,
            RequestCode.DELETE_KV_CONFIG: self.delete_kv,
            RequestCode.GET_KVLIST_BY_NAMESPACE: self.kv_list,
            RequestCode.ADD_WRITE_PERM_OF_BROKER: self.add_write_perm,
            RequestCode.GET_SYSTEM_TOPIC_LIST_FROM_NS: self.system_topics,
            RequestCode.GET_UNIT_TOPIC_LIST: self.unit_topics,
            RequestCode.GET_HAS_UNIT_SUB_TOPIC_LIST: self.unit_sub_topics,
            RequestCode.GET_HAS_UNIT_SUB_UNUNIT_TOPIC_LIST: self.unit_sub_ununit_topics,
            RequestCode.GET_NAMESRV_CONFIG: self.get_config,
            RequestCode.UPDATE_NAMESRV_CONFIG: self.update_config,
        }

    # -- brokers -----------------------------------------------------------------------
    async def register_broker(self, channel: Channel, cmd: RemotingCommand) -> RemotingCommand:
        h = nh.RegisterBrokerRequestHeader.decode(cmd)
        cluster, name, addr, broker_id = h.cluster_name, h.broker_name, h.broker_addr, h.broker_id
        ha_addr, crc = h.ha_server_addr, h.body_crc32
        if crc and body_crc32(cmd.body) != crc:
            log.warning("namesrv.register_body_crc_mismatch", broker=name, addr=addr)
            return cmd.make_response(ResponseCode.SYSTEM_ERROR, "crc32 not match")
        body = RegisterBrokerBody.decode(cmd.body, compressed=h.compressed)
        if self.controller is not None and self.controller.manages(name):
            broker_id = self.controller.route_id(name, addr, broker_id)
        result = self.routes.register_broker(
            cluster, name, addr, broker_id, ha_addr, body.topic_config_table, body.data_version,
            channel.id, body.filter_server_list)
        log.debug("broker registered", cluster=cluster, broker=name, addr=addr, id=broker_id,
                  topics=len(body.topic_config_table))
        order = self.routes.kv_list(ORDER_TOPIC_CONFIG_NS)
        return cmd.make_response(
            ResponseCode.SUCCESS, ext_fields=nh.RegisterBrokerResponseHeader(
                ha_server_addr=result.ha_addr, master_addr=result.master_addr).encode(),
            body=kv_table_json(order) if order else b"")

    async def unregister_broker(self, channel: Channel, cmd: RemotingCommand) -> RemotingCommand:
        h = nh.UnRegisterBrokerRequestHeader.decode(cmd)
        self.routes.unregister_broker(h.cluster_name, h.broker_name, h.broker_addr, h.broker_id)
        return cmd.make_response(ResponseCode.SUCCESS)

    async def query_data_version(self, channel: Channel, cmd: RemotingCommand) -> RemotingCommand:
        addr = nh.QueryDataVersionRequestHeader.decode(cmd).broker_addr
        version = loads_body(cmd.body) if cmd.body else {}
        live = self.routes.live.get(addr)
        changed = live is None or live.data_version != version
        if live is not None:
            live.last_update_ms = self.routes.clock()
        return cmd.make_response(ResponseCode.SUCCESS,
                                 ext_fields=nh.QueryDataVersionResponseHeader(changed=changed).encode(),
                                 body=dumps(live.data_version) if live is not None else b"")

    async def wipe_write_perm(self, channel: Channel, cmd: RemotingCommand) -> RemotingCommand:
        count = self.routes.wipe_write_perm(nh.BrokerNameRequestHeader.decode(cmd).broker_name)
        return cmd.make_response(ResponseCode.SUCCESS,
                                 ext_fields=nh.WipeWritePermOfBrokerResponseHeader(wipe_topic_count=count).encode())

    # -- routes and topics -------------------------------------------------------------
    async def get_route(self, channel: Channel, cmd: RemotingCommand) -> RemotingCommand:
        topic = nh.GetRouteInfoRequestHeader.decode(cmd).topic
        if (bad := names.store_topic_problem(topic)) is not None:
            names.refused("rocketmq", "topic", topic, bad, op="get_route", peer=str(getattr(channel, "peer", "")))
            return cmd.make_response(ResponseCode.TOPIC_NOT_EXIST, route_not_found_remark(topic))
        route = self.routes.get_route(topic)
        if route is None:
            return cmd.make_response(ResponseCode.TOPIC_NOT_EXIST, route_not_found_remark(topic))
        return cmd.make_response(ResponseCode.SUCCESS, body=dumps(route))

    async def cluster_info(self, channel: Channel, cmd: RemotingCommand) -> RemotingCommand:
        return cmd.make_response(ResponseCode.SUCCESS, body=dumps(self.routes.cluster_info()))

    async def all_topics(self, channel: Channel, cmd: RemotingCommand) -> RemotingCommand:
        return cmd.make_response(ResponseCode.SUCCESS, body=dumps({"topicList": self.routes.all_topics()}))

    async def topics_by_cluster(self, channel: Channel, cmd: RemotingCommand) -> RemotingCommand:
        topics = self.routes.topics_by_cluster(nh.GetTopicsByClusterRequestHeader.decode(cmd).cluster)
        return cmd.make_response(ResponseCode.SUCCESS, body=dumps({"topicList": topics}))

    async def delete_topic(self, channel: Channel, cmd: RemotingCommand) -> RemotingCommand:
        h = nh.DeleteTopicFromNamesrvRequestHeader.decode(cmd)
        topic = h.topic
        if (bad := names.store_topic_problem(topic)) is not None and topic not in self.routes.topic_queues:
            names.refused("rocketmq", "topic", topic, bad, op="delete_topic_in_namesrv")
            return cmd.make_response(ResponseCode.SYSTEM_ERROR, bad)
        self.routes.delete_topic(topic, h.cluster_name)
        return cmd.make_response(ResponseCode.SUCCESS)

    # -- KV config ---------------------------------------------------------------------------
    async def put_kv(self, channel: Channel, cmd: RemotingCommand) -> RemotingCommand:
        h = nh.PutKVConfigRequestHeader.decode(cmd)
        try:
            self.routes.put_kv(h.namespace, h.key, h.value)
        except KVTableFull as exc:
            peer = getattr(channel, "peer", ("", 0))
            limited(log, "warning", "namesrv.kv_config_full", str(peer[0]), peer=str(peer), error=str(exc))
            return cmd.make_response(ResponseCode.SYSTEM_ERROR, str(exc))
        await self.persist_kv()
        return cmd.make_response(ResponseCode.SUCCESS)

    async def get_kv(self, channel: Channel, cmd: RemotingCommand) -> RemotingCommand:
        h = nh.KVConfigRequestHeader.decode(cmd)
        ns, key = h.namespace, h.key
        value = self.routes.get_kv(ns, key)
        if value is None:
            return cmd.make_response(ResponseCode.QUERY_NOT_FOUND, f"No config item, Namespace: {ns} Key: {key}")
        return cmd.make_response(ResponseCode.SUCCESS, ext_fields={"value": value})

    async def delete_kv(self, channel: Channel, cmd: RemotingCommand) -> RemotingCommand:
        h = nh.KVConfigRequestHeader.decode(cmd)
        self.routes.delete_kv(h.namespace, h.key)
        await self.persist_kv()
        return cmd.make_response(ResponseCode.SUCCESS)

    async def kv_list(self, channel: Channel, cmd: RemotingCommand) -> RemotingCommand:
        ns = nh.GetKVListByNamespaceRequestHeader.decode(cmd).namespace
        table = self.routes.kv_list(ns)
        if table is None:
            return cmd.make_response(ResponseCode.QUERY_NOT_FOUND, f"No config item, Namespace: {ns}")
        return cmd.make_response(ResponseCode.SUCCESS, body=kv_table_json(table))

    # -- operations ------------------------------------------------------------------------------
    async def add_write_perm(self, channel: Channel, cmd: RemotingCommand) -> RemotingCommand:
        name = nh.BrokerNameRequestHeader.decode(cmd).broker_name
        count = self.routes.add_write_perm(name)
        log.info("namesrv.add_write_perm", broker=name, topics=count, peer=str(getattr(channel, "peer", "")))
        return cmd.make_response(ResponseCode.SUCCESS,
                                 ext_fields=nh.AddWritePermOfBrokerResponseHeader(add_topic_count=count).encode())

    async def system_topics(self, channel: Channel, cmd: RemotingCommand) -> RemotingCommand:
        topics, addr = self.routes.system_topic_list()
        body = {"topicList": topics} if addr is None else {"brokerAddr": addr, "topicList": topics}
        return cmd.make_response(ResponseCode.SUCCESS, body=dumps(body))

    def _by_flag(self, cmd: RemotingCommand, want: object) -> RemotingCommand:
        return cmd.make_response(ResponseCode.SUCCESS, body=dumps({"topicList": self.routes.topics_by_sys_flag(want)}))

    async def unit_topics(self, channel: Channel, cmd: RemotingCommand) -> RemotingCommand:
        return self._by_flag(cmd, lambda f: bool(f & FLAG_UNIT))

    async def unit_sub_topics(self, channel: Channel, cmd: RemotingCommand) -> RemotingCommand:
        return self._by_flag(cmd, lambda f: bool(f & FLAG_UNIT_SUB))

    async def unit_sub_ununit_topics(self, channel: Channel, cmd: RemotingCommand) -> RemotingCommand:
        return self._by_flag(cmd, lambda f: not f & FLAG_UNIT and bool(f & FLAG_UNIT_SUB))

    async def get_config(self, channel: Channel, cmd: RemotingCommand) -> RemotingCommand:
        text = "".join(f"{k}={v}\n" for k, v in self.config.to_properties().items())
        return cmd.make_response(ResponseCode.SUCCESS, body=text.encode("utf-8"))

    async def update_config(self, channel: Channel, cmd: RemotingCommand) -> RemotingCommand:
        peer = str(getattr(channel, "peer", ""))
        if not cmd.body:
            return cmd.make_response(ResponseCode.SUCCESS)
        try:
            props = parse_properties(cmd.body)
        except Exception as exc:  # noqa: BLE001 - jproperties' and decoding errors alike
            log.warning("namesrv.update_config_refused", peer=peer, reason=f"string2Properties error: {exc}")
            return cmd.make_response(ResponseCode.SYSTEM_ERROR, "string2Properties error")
        if PATH_KEYS.intersection(props) or "rocketmqHome" in props:
            log.warning("namesrv.update_config_refused", peer=peer, keys=sorted(props), reason=PATH_REMARK)
            return cmd.make_response(ResponseCode.NO_PERMISSION, PATH_REMARK)
        try:
            self.config.apply(props)
        except ValueError as exc:
            log.warning("namesrv.update_config_refused", peer=peer, keys=sorted(props), reason=str(exc))
            return cmd.make_response(ResponseCode.SYSTEM_ERROR, str(exc))
        log.info("namesrv.update_config", peer=peer, config=props)
        if self.persist_config:
            try:
                await trio.to_thread.run_sync(rewrite_properties_file, Path(self.config.config_store_path), props)
            except OSError as exc:
                log.error("namesrv.config_persist_failed", path=self.config.config_store_path, error=str(exc))
                return cmd.make_response(ResponseCode.SYSTEM_ERROR, f"config applied but not persisted: {exc}")
        return cmd.make_response(ResponseCode.SUCCESS)


def parse_properties(body: bytes) -> dict[str, str]:
    """Java ``MixAll.string2Properties`` of a request body."""
    from jproperties import Properties

    props = Properties()
    props.load(body.decode("utf-8").encode("utf-8"), "utf-8")
    return {str(k): str(v.data) for k, v in props.items()}
