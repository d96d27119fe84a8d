"""Name server calls and the broker's periodic registration.

Theory of operation
-------------------
``NamesrvClient`` talks to a list of name servers over a shared
``RemotingClient``.  Reads go to one name server at a time (the last one
that worked first; on a connection error or timeout the next is tried, as
Java clients do); writes that must reach every name server
(``delete_topic``, KV changes, broker registration) go to all of them.

``BrokerRegistrar`` is what the broker runs: REGISTER_BROKER to every name
server now and every ``interval_s`` (30 s), plus whenever ``trigger()`` is
called (topic created or deleted).  The topic table comes from a supplier
called each round, returning the TopicConfigSerializeWrapper as JSON bytes,
``str`` or a dict (``{"dataVersion":..., "topicConfigTable":...}``).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

import structlog
import trio
from rokka.core.namesrv.routes import RegisterResult
from rokka.net.remoting.channel import ChannelClosedError, RequestTimeoutError
from rokka.net.remoting.client.remoting import ClientError, ConnectError, RemotingClient, ResponseError
from rokka.net.remoting.client.types import TopicRoute
from rokka.net.remoting.codec import namesrv_headers as nh
from rokka.net.remoting.codec.bodies import RegisterBrokerBody, body_crc32, loads_body
from rokka.net.remoting.codec.codes import RequestCode, ResponseCode
from rokka.net.remoting.codec.remoting import RemotingCommand

log = structlog.get_logger(__name__)

_NET_ERRORS = (ConnectError, RequestTimeoutError, ChannelClosedError)
TopicConfigSupplier = Callable[[], bytes | str | Mapping[str, Any]]


class NamesrvClient:
    """Requests to one or more name servers (``"host:port"`` strings)."""

    def __init__(self, client: RemotingClient, addrs: list[str] | str) -> None:
        self.client = client
        self.addrs = [a.strip() for a in (addrs.split(";") if isinstance(addrs, str) else addrs) if a.strip()]
        if not self.addrs:
            raise ValueError("no name server address")
        self._preferred = 0

    async def invoke(self, cmd: RemotingCommand, timeout_s: float | None = None) -> RemotingCommand:
        """Send to one name server, failing over on network errors; returns any response code."""
        last: Exception | None = None
        n = len(self.addrs)
        for i in range(n):
            idx = (self._preferred + i) % n
            try:
                resp = await self.client.invoke(self.addrs[idx], _copy(cmd), timeout_s)
            except _NET_ERRORS as exc:
                last = exc
                continue
            self._preferred = idx
            return resp
        assert last is not None
        raise last

    async def invoke_all(self, cmd: RemotingCommand, timeout_s: float | None = None) -> list[RemotingCommand]:
        """Send to every name server; raises the first error after trying all."""
        results: list[RemotingCommand] = []
        errors: list[Exception] = []
        for addr in self.addrs:
            try:
                results.append(await self.client.invoke(addr, _copy(cmd), timeout_s))
            except _NET_ERRORS as exc:
                errors.append(exc)
        if errors and not results:
            raise errors[0]
        for resp in results:
            if resp.code != ResponseCode.SUCCESS:
                raise ResponseError(resp, f"name server request {cmd.code}")
        return results

    async def _ok(self, cmd: RemotingCommand) -> RemotingCommand:
        resp = await self.invoke(cmd)
        if resp.code != ResponseCode.SUCCESS:
            raise ResponseError(resp, f"name server request {cmd.code}")
        return resp

    # -- routes -------------------------------------------------------------------------
    async def get_route(self, topic: str) -> TopicRoute | None:
        """TopicRouteData of ``topic``; ``None`` when the name server says TOPIC_NOT_EXIST."""
        header = nh.GetRouteInfoRequestHeader(topic=topic, accept_standard_json_only=True)
        resp = await self.invoke(header.command(RequestCode.GET_ROUTEINFO_BY_TOPIC))
        if resp.code == ResponseCode.TOPIC_NOT_EXIST:
            return None
        if resp.code != ResponseCode.SUCCESS:
            raise ResponseError(resp, f"route of {topic}")
        return TopicRoute.from_json(topic, loads_body(resp.body))

    async def cluster_info(self) -> dict[str, Any]:
        """ClusterInfo: ``{"brokerAddrTable": {...}, "clusterAddrTable": {...}}``."""
        resp = await self._ok(RemotingCommand(RequestCode.GET_BROKER_CLUSTER_INFO))
        return dict(loads_body(resp.body))

    async def all_topics(self) -> list[str]:
        resp = await self._ok(RemotingCommand(RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER))
        return list(loads_body(resp.body).get("topicList") or [])

    async def topics_by_cluster(self, cluster: str) -> list[str]:
        resp = await self._ok(nh.GetTopicsByClusterRequestHeader(cluster=cluster).command(
            RequestCode.GET_TOPICS_BY_CLUSTER))
        return list(loads_body(resp.body).get("topicList") or [])

    async def delete_topic(self, topic: str, cluster: str | None = None) -> None:
        await self.invoke_all(nh.DeleteTopicFromNamesrvRequestHeader(topic=topic, cluster_name=cluster).command(
            RequestCode.DELETE_TOPIC_IN_NAMESRV))

    async def wipe_write_perm(self, broker_name: str) -> int:
        """Clear write permission of a broker on every name server; returns the summed topic count."""
        resps = await self.invoke_all(nh.BrokerNameRequestHeader(broker_name=broker_name).command(
            RequestCode.WIPE_WRITE_PERM_OF_BROKER))
        return sum(int(r.ext_fields.get("wipeTopicCount", "0")) for r in resps)

    # -- KV config ------------------------------------------------------------------------
    async def put_kv(self, namespace: str, key: str, value: str) -> None:
        await self.invoke_all(nh.PutKVConfigRequestHeader(namespace=namespace, key=key, value=value).command(
            RequestCode.PUT_KV_CONFIG))

    async def get_kv(self, namespace: str, key: str) -> str | None:
        resp = await self.invoke(nh.KVConfigRequestHeader(namespace=namespace, key=key).command(
            RequestCode.GET_KV_CONFIG))
        if resp.code == ResponseCode.QUERY_NOT_FOUND:
            return None
        if resp.code != ResponseCode.SUCCESS:
            raise ResponseError(resp, "GET_KV_CONFIG")
        return resp.ext_fields.get("value")

    async def delete_kv(self, namespace: str, key: str) -> None:
        await self.invoke_all(nh.KVConfigRequestHeader(namespace=namespace, key=key).command(
            RequestCode.DELETE_KV_CONFIG))

    async def kv_list(self, namespace: str) -> dict[str, str]:
        resp = await self.invoke(nh.GetKVListByNamespaceRequestHeader(namespace=namespace).command(
            RequestCode.GET_KVLIST_BY_NAMESPACE))
        if resp.code == ResponseCode.QUERY_NOT_FOUND:
            return {}
        if resp.code != ResponseCode.SUCCESS:
            raise ResponseError(resp, "GET_KVLIST_BY_NAMESPACE")
        return {str(k): str(v) for k, v in (loads_body(resp.body).get("table") or {}).items()}


def _copy(cmd: RemotingCommand) -> RemotingCommand:
    # invoke() assigns the opaque in place; each send needs its own command object.
    return RemotingCommand(code=cmd.code, remark=cmd.remark, ext_fields=dict(cmd.ext_fields), body=cmd.body,
                           serialize_type=cmd.serialize_type)


def _wrapper_dict(raw: bytes | str | Mapping[str, Any]) -> dict[str, Any]:
    if isinstance(raw, bytes | str):
        return dict(loads_body(raw.encode("utf-8") if isinstance(raw, str) else raw))
    return dict(raw)


async def register_broker(client: RemotingClient, namesrv_addrs: list[str], *, cluster: str, broker_name: str,
                          broker_addr: str, broker_id: int = 0, ha_addr: str = "",
                          topic_config_wrapper: bytes | str | Mapping[str, Any],
                          compressed: bool = False, timeout_s: float = 6.0,
                          filter_server_list: list[str] | None = None) -> dict[str, RegisterResult | Exception]:
    """REGISTER_BROKER to every name server once.

    Args:
        topic_config_wrapper: TopicConfigSerializeWrapper (``dataVersion`` + ``topicConfigTable``).
    Returns:
        name server address -> ``RegisterResult`` (master / HA address for slaves) or the
        exception that request raised.  Never raises for a single name server failing.
    """
    wrapper = _wrapper_dict(topic_config_wrapper)
    body = RegisterBrokerBody(dict(wrapper.get("dataVersion") or {}), dict(wrapper.get("topicConfigTable") or {}),
                              list(filter_server_list or [])).encode(compressed=compressed)
    ext = nh.RegisterBrokerRequestHeader(broker_name=broker_name, broker_addr=broker_addr, cluster_name=cluster,
                                         ha_server_addr=ha_addr, broker_id=broker_id, compressed=compressed,
                                         body_crc32=body_crc32(body)).encode()
    out: dict[str, RegisterResult | Exception] = {}

    async def one(addr: str) -> None:
        try:
            resp = await client.invoke_ok(addr, RemotingCommand(RequestCode.REGISTER_BROKER, ext_fields=dict(ext),
                                                                body=body), timeout_s)
            out[addr] = RegisterResult(resp.ext_fields.get("masterAddr"), resp.ext_fields.get("haServerAddr"))
        except (ClientError, RequestTimeoutError, ChannelClosedError) as exc:
            log.warning("rocketmq.client.register_failed", namesrv=addr, error=str(exc))
            out[addr] = exc

    async with trio.open_nursery() as nursery:
        for addr in namesrv_addrs:
            nursery.start_soon(one, addr)
    return out


async def unregister_broker(client: RemotingClient, namesrv_addrs: list[str], *, cluster: str,
                            broker_name: str, broker_addr: str, broker_id: int = 0) -> None:
    """UNREGISTER_BROKER on every name server (errors logged, not raised)."""
    ext = nh.UnRegisterBrokerRequestHeader(broker_name=broker_name, broker_addr=broker_addr, cluster_name=cluster,
                                           broker_id=broker_id).encode()
    for addr in namesrv_addrs:
        try:
            await client.invoke_ok(addr, RemotingCommand(RequestCode.UNREGISTER_BROKER, ext_fields=dict(ext)))
        except (ClientError, RequestTimeoutError, ChannelClosedError) as exc:
            log.warning("rocketmq.client.unregister_failed", namesrv=addr, error=str(exc))


class BrokerRegistrar:
    """Keeps one broker registered with its name servers.

    Args:
        topic_configs: called each round; returns the TopicConfigSerializeWrapper.
        interval_s: period of re-registration (Java ``registerNameServerPeriod`` 30 s).
    """

    def __init__(self, client: RemotingClient, namesrv_addrs: list[str], *, cluster: str, broker_name: str,
                 broker_addr: str, topic_configs: TopicConfigSupplier, broker_id: int = 0, ha_addr: str = "",
                 interval_s: float = 30.0, compressed: bool = False) -> None:
        self.client = client
        self.namesrv_addrs = list(namesrv_addrs)
        self.cluster, self.broker_name, self.broker_addr = cluster, broker_name, broker_addr
        self.broker_id, self.ha_addr = broker_id, ha_addr
        self.topic_configs = topic_configs
        self.interval_s = interval_s
        self.compressed = compressed
        self.rounds = 0
        self.last_results: dict[str, RegisterResult | Exception] = {}
        self._wake = trio.Event()

    def trigger(self) -> None:
        """Register again as soon as possible (after a topic change)."""
        self._wake.set()

    async def register_once(self) -> dict[str, RegisterResult | Exception]:
        self.last_results = await register_broker(
            self.client, self.namesrv_addrs, cluster=self.cluster, broker_name=self.broker_name,
            broker_addr=self.broker_addr, broker_id=self.broker_id, ha_addr=self.ha_addr,
            topic_config_wrapper=self.topic_configs(), compressed=self.compressed)
        self.rounds += 1
        return self.last_results

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Register now (then report started), then every ``interval_s`` or on ``trigger()``."""
        await self.register_once()
        task_status.started()
        while True:
            with trio.move_on_after(self.interval_s):
                await self._wake.wait()
            self._wake = trio.Event()
            await self.register_once()

    async def unregister(self) -> None:
        await unregister_broker(self.client, self.namesrv_addrs, cluster=self.cluster,
                                broker_name=self.broker_name, broker_addr=self.broker_addr,
                                broker_id=self.broker_id)


def dumps_wrapper(data_version: Mapping[str, Any], topic_config_table: Mapping[str, Any]) -> bytes:
    """TopicConfigSerializeWrapper JSON bytes (helper for callers and tests)."""
    return json.dumps({"dataVersion": dict(data_version), "topicConfigTable": dict(topic_config_table)},
                      separators=(",", ":")).encode("utf-8")
