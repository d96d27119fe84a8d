"""Admin calls (what ``mqadmin`` does): topics, stats, messages, transactions, locks.

Theory of operation
-------------------
Every method is one request (or one per broker/name server) with the header
and body of reference sections 4.10-4.17.  Broker bodies written by a Java
broker may use fastjson's bare or object-typed map keys; they are read with
``loads_body`` (lenient) and MessageQueue keys are turned back into
``MessageQueue`` values.  Errors raise ``ResponseError`` with the broker's
code and remark.  ``invoke`` is the escape hatch for anything else.
"""

from __future__ import annotations

import time
from typing import Any

from rokka.core.model import StoredMessage
from rokka.core.record import decode_offset_msg_id
from rokka.net.remoting.client.consumer import decode_messages
from rokka.net.remoting.client.namesrv import NamesrvClient
from rokka.net.remoting.client.remoting import ClientError, RemotingClient, ResponseError
from rokka.net.remoting.client.types import MessageQueue
from rokka.net.remoting.codec import request_headers as rh
from rokka.net.remoting.codec.bodies import dumps, loads_body, topic_config_json
from rokka.net.remoting.codec.codes import RequestCode, ResponseCode
from rokka.net.remoting.codec.header_decl import RequestHeader
from rokka.net.remoting.codec.namesrv_headers import BrokerNameRequestHeader
from rokka.net.remoting.codec.remoting import RemotingCommand

TRANSACTION_COMMIT = 8
TRANSACTION_ROLLBACK = 12


def properties_body(props: dict[str, str]) -> bytes:
    """Java ``MixAll.properties2String``: ``key=value`` lines."""
    return "".join(f"{k}={v}\n" for k, v in props.items()).encode("utf-8")


def parse_properties_text(body: bytes) -> dict[str, str]:
    """``key=value`` lines of a GET_BROKER_CONFIG / GET_NAMESRV_CONFIG body."""
    out = {}
    for line in body.decode("utf-8").splitlines():
        if "=" in line and not line.lstrip().startswith("#"):
            key, value = line.split("=", 1)
            out[key.strip()] = value.strip()
    return out


def _mq_table(table: dict[str, Any]) -> dict[MessageQueue, Any]:
    return {MessageQueue.from_json(k): v for k, v in (table or {}).items()}


class Admin:
    """Administrative requests to brokers and name servers."""

    def __init__(self, client: RemotingClient, namesrv: NamesrvClient | None = None, *,
                 timeout_s: float = 5.0) -> None:
        self.client = client
        self.namesrv = namesrv
        self.timeout_s = timeout_s

    async def invoke(self, addr: str, cmd: RemotingCommand, timeout_s: float | None = None) -> RemotingCommand:
        """Send any command to ``addr`` and return the raw response."""
        return await self.client.invoke(addr, cmd, timeout_s or self.timeout_s)

    async def _ok(self, addr: str, code: int, ext: RequestHeader | dict[str, str] | None = None, body: bytes = b"",
                  ok: tuple[int, ...] = (ResponseCode.SUCCESS,)) -> RemotingCommand:
        if isinstance(ext, RequestHeader):
            ext = ext.encode()
        return await self.client.invoke_ok(addr, RemotingCommand(code, ext_fields=ext or {}, body=body),
                                           self.timeout_s, ok)

    def _ns(self) -> NamesrvClient:
        if self.namesrv is None:
            raise ClientError("this Admin has no name server client")
        return self.namesrv

    # -- topics -----------------------------------------------------------------------------
    async def create_topic(self, broker_addr: str, topic: str, *, read_queue_nums: int = 8,
                           write_queue_nums: int = 8, perm: int = 6, filter_type: str = "SINGLE_TAG",
                           sys_flag: int = 0, order: bool = False, default_topic: str = "TBW102") -> None:
        """UPDATE_AND_CREATE_TOPIC on one broker (the broker re-registers with the name server)."""
        await self._ok(broker_addr, RequestCode.UPDATE_AND_CREATE_TOPIC, rh.CreateTopicRequestHeader(
            topic=topic, default_topic=default_topic, read_queue_nums=read_queue_nums,
            write_queue_nums=write_queue_nums, perm=perm, topic_filter_type=filter_type, topic_sys_flag=sys_flag,
            order=order))

    async def master_addrs(self, cluster: str | None = None) -> list[str]:
        """Master addresses of every broker (of ``cluster`` if given), from the name server."""
        info = await self._ns().cluster_info()
        names = (info.get("clusterAddrTable") or {}).get(cluster, []) if cluster else None
        out = []
        for name, data in (info.get("brokerAddrTable") or {}).items():
            if names is None or name in names:
                addr = (data.get("brokerAddrs") or {}).get("0")
                if addr:
                    out.append(addr)
        return sorted(out)

    async def create_topic_in_cluster(self, cluster: str, topic: str, **kw: Any) -> list[str]:
        """Create the topic on every master of ``cluster``; returns the broker addresses."""
        addrs = await self.master_addrs(cluster)
        for addr in addrs:
            await self.create_topic(addr, topic, **kw)
        return addrs

    async def delete_topic(self, topic: str, cluster: str | None = None) -> None:
        """DELETE_TOPIC_IN_BROKER on every master (of ``cluster``), then DELETE_TOPIC_IN_NAMESRV."""
        for addr in await self.master_addrs(cluster):
            await self.delete_topic_in_broker(addr, topic)
        await self._ns().delete_topic(topic, cluster)

    async def delete_subscription_group(self, broker_addr: str, group: str, *, clean_offset: bool = False) -> None:
        """DELETE_SUBSCRIPTIONGROUP: the group's config on one broker (and its offsets with ``clean_offset``)."""
        await self._ok(broker_addr, RequestCode.DELETE_SUBSCRIPTIONGROUP,
                       rh.DeleteSubscriptionGroupRequestHeader(group_name=group, clean_offset=clean_offset))

    async def delete_topic_in_broker(self, broker_addr: str, topic: str) -> None:
        await self._ok(broker_addr, RequestCode.DELETE_TOPIC_IN_BROKER, rh.TopicRequestHeader(topic=topic))

    async def get_all_topic_config(self, broker_addr: str) -> dict[str, Any]:
        """TopicConfigSerializeWrapper: ``{"dataVersion":..., "topicConfigTable": {...}}``."""
        return dict(loads_body((await self._ok(broker_addr, RequestCode.GET_ALL_TOPIC_CONFIG)).body))

    async def topic_stats(self, broker_addr: str, topic: str) -> dict[MessageQueue, dict[str, Any]]:
        """GET_TOPIC_STATS_INFO: queue -> {minOffset, maxOffset, lastUpdateTimestamp}."""
        resp = await self._ok(broker_addr, RequestCode.GET_TOPIC_STATS_INFO, rh.TopicRequestHeader(topic=topic))
        return _mq_table(loads_body(resp.body).get("offsetTable") or {})

    async def consume_stats(self, broker_addr: str, group: str, topic: str | None = None) -> dict[str, Any]:
        """GET_CONSUME_STATS: ``{"consumeTps": x, "offsetTable": {MessageQueue: {...}}}``."""
        resp = await self._ok(broker_addr, RequestCode.GET_CONSUME_STATS,
                              rh.GetConsumeStatsRequestHeader(consumer_group=group, topic=topic))
        body = dict(loads_body(resp.body))
        body["offsetTable"] = _mq_table(body.get("offsetTable") or {})
        return body

    async def broker_runtime_info(self, broker_addr: str) -> dict[str, str]:
        resp = await self._ok(broker_addr, RequestCode.GET_BROKER_RUNTIME_INFO)
        return {str(k): str(v) for k, v in (loads_body(resp.body).get("table") or {}).items()}

    async def consumer_connections(self, broker_addr: str, group: str) -> dict[str, Any]:
        resp = await self._ok(broker_addr, RequestCode.GET_CONSUMER_CONNECTION_LIST,
                              rh.GetConsumerConnectionListRequestHeader(consumer_group=group))
        return dict(loads_body(resp.body))

    # -- messages -----------------------------------------------------------------------------
    async def view_message(self, offset_msg_id: str) -> StoredMessage:
        """VIEW_MESSAGE_BY_ID at the store host encoded in ``offset_msg_id``."""
        host, port, offset = decode_offset_msg_id(offset_msg_id)
        addr = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
        resp = await self._ok(addr, RequestCode.VIEW_MESSAGE_BY_ID, rh.ViewMessageRequestHeader(offset=offset))
        msgs = decode_messages(resp.body)
        if not msgs:
            raise ClientError(f"empty VIEW_MESSAGE_BY_ID body for {offset_msg_id}")
        return msgs[0]

    async def query_message(self, broker_addr: str, topic: str, key: str, *, max_num: int = 32,
                            begin_ms: int = 0, end_ms: int | None = None,
                            unique_key: bool = False) -> list[StoredMessage]:
        """QUERY_MESSAGE by KEYS entry (or UNIQ_KEY with ``unique_key``); [] when nothing matches."""
        ext = rh.QueryMessageRequestHeader(
            topic=topic, key=key, max_num=max_num, begin_timestamp=begin_ms,
            end_timestamp=end_ms if end_ms is not None else int(time.time() * 1000) + 60_000,
            unique_key_query="true" if unique_key else None).encode()
        resp = await self._ok(broker_addr, RequestCode.QUERY_MESSAGE, ext,
                              ok=(ResponseCode.SUCCESS, ResponseCode.QUERY_NOT_FOUND))
        return list(decode_messages(resp.body)) if resp.code == ResponseCode.SUCCESS else []

    async def send_msg_back(self, broker_addr: str, *, offset: int, group: str, delay_level: int = 0,
                            origin_msg_id: str | None = None, origin_topic: str | None = None,
                            max_reconsume_times: int | None = None) -> None:
        """CONSUMER_SEND_MSG_BACK for the message at commit-log ``offset``."""
        await self._ok(broker_addr, RequestCode.CONSUMER_SEND_MSG_BACK, rh.ConsumerSendMsgBackRequestHeader(
            offset=offset, group=group, delay_level=delay_level, origin_msg_id=origin_msg_id,
            origin_topic=origin_topic, unit_mode=False, max_reconsume_times=max_reconsume_times))

    async def end_transaction(self, broker_addr: str, *, producer_group: str, tran_state_table_offset: int,
                              commit_log_offset: int, commit_or_rollback: int, msg_id: str,
                              transaction_id: str | None = None, from_transaction_check: bool = False,
                              oneway: bool = True) -> RemotingCommand | None:
        """END_TRANSACTION (8 = commit, 12 = rollback); oneway like clients unless ``oneway=False``."""
        cmd = RemotingCommand(RequestCode.END_TRANSACTION, ext_fields=rh.EndTransactionRequestHeader(
            producer_group=producer_group, tran_state_table_offset=tran_state_table_offset,
            commit_log_offset=commit_log_offset, commit_or_rollback=commit_or_rollback, msg_id=msg_id,
            transaction_id=transaction_id, from_transaction_check=from_transaction_check).encode())
        if oneway:
            await self.client.invoke_oneway(broker_addr, cmd)
            return None
        return await self.client.invoke(broker_addr, cmd, self.timeout_s)

    # -- broker configuration and diagnostics (mqadmin getBrokerConfig, cloneGroupOffset, ...) -------
    async def get_broker_config(self, broker_addr: str) -> dict[str, str]:
        """GET_BROKER_CONFIG: the broker's properties (``key=value`` lines of the body)."""
        return parse_properties_text((await self._ok(broker_addr, RequestCode.GET_BROKER_CONFIG)).body)

    async def update_broker_config(self, broker_addr: str, props: dict[str, str]) -> None:
        """UPDATE_BROKER_CONFIG; ResponseError (NO_PERMISSION for black-listed keys) on refusal."""
        await self._ok(broker_addr, RequestCode.UPDATE_BROKER_CONFIG, body=properties_body(props))

    async def all_consumer_offsets(self, broker_addr: str) -> dict[str, dict[str, int]]:
        """GET_ALL_CONSUMER_OFFSET: ``"topic@group" -> {queueId: offset}``."""
        body = loads_body((await self._ok(broker_addr, RequestCode.GET_ALL_CONSUMER_OFFSET)).body)
        return {str(k): {str(q): int(o) for q, o in v.items()} for k, v in (body.get("offsetTable") or {}).items()}

    async def all_delay_offsets(self, broker_addr: str) -> dict[int, int]:
        """GET_ALL_DELAY_OFFSET: delay level -> offset in SCHEDULE_TOPIC_XXXX."""
        body = loads_body((await self._ok(broker_addr, RequestCode.GET_ALL_DELAY_OFFSET)).body)
        return {int(k): int(v) for k, v in (body.get("offsetTable") or {}).items()}

    async def topic_consumed_by(self, broker_addr: str, topic: str) -> list[str]:
        """QUERY_TOPIC_CONSUME_BY_WHO: the groups consuming ``topic`` on this broker."""
        resp = await self._ok(broker_addr, RequestCode.QUERY_TOPIC_CONSUME_BY_WHO, rh.TopicRequestHeader(topic=topic))
        return sorted(loads_body(resp.body).get("groupList") or [])

    async def consume_time_span(self, broker_addr: str, topic: str, group: str) -> list[dict[str, Any]]:
        """QUERY_CONSUME_TIME_SPAN: QueueTimeSpan per queue (``messageQueue`` as a MessageQueue)."""
        resp = await self._ok(broker_addr, RequestCode.QUERY_CONSUME_TIME_SPAN,
                              rh.QueryConsumeTimeSpanRequestHeader(topic=topic, group=group))
        spans = [dict(s) for s in loads_body(resp.body).get("consumeTimeSpanSet") or []]
        for s in spans:
            s["messageQueue"] = MessageQueue.from_json(s["messageQueue"])
        return spans

    async def clean_expired_consume_queue(self, broker_addr: str) -> None:
        await self._ok(broker_addr, RequestCode.CLEAN_EXPIRED_CONSUMEQUEUE)

    async def clean_unused_topic(self, broker_addr: str) -> None:
        await self._ok(broker_addr, RequestCode.CLEAN_UNUSED_TOPIC)

    async def clone_group_offset(self, broker_addr: str, src_group: str, dest_group: str,
                                 topic: str | None = None, *, offline: bool = False) -> None:
        """CLONE_GROUP_OFFSET: copy ``src_group``'s committed offsets to ``dest_group``."""
        await self._ok(broker_addr, RequestCode.CLONE_GROUP_OFFSET, rh.CloneGroupOffsetRequestHeader(
            src_group=src_group, dest_group=dest_group, topic=topic, offline=offline))

    async def view_broker_stats(self, broker_addr: str, stats_name: str, stats_key: str) -> dict[str, Any]:
        """VIEW_BROKER_STATS_DATA: ``{"statsMinute"|"statsHour"|"statsDay": {"sum", "tps", "avgpt"}}``."""
        resp = await self._ok(broker_addr, RequestCode.VIEW_BROKER_STATS_DATA,
                              rh.ViewBrokerStatsDataRequestHeader(stats_name=stats_name, stats_key=stats_key))
        return dict(loads_body(resp.body))

    async def broker_consume_stats(self, broker_addr: str, *, is_order: bool = False) -> dict[str, Any]:
        """GET_BROKER_CONSUME_STATS: ConsumeStatsList (``brokerAddr``, ``consumeStatsList``, ``totalDiff``)."""
        resp = await self._ok(broker_addr, RequestCode.GET_BROKER_CONSUME_STATS,
                              rh.GetConsumeStatsInBrokerHeader(is_order=is_order))
        body = dict(loads_body(resp.body))
        for entry in body.get("consumeStatsList") or []:
            for stats in entry.values():
                for cs in stats:
                    cs["offsetTable"] = _mq_table(cs.get("offsetTable") or {})
        return body

    async def query_consume_queue(self, broker_addr: str, topic: str, queue_id: int, index: int, count: int,
                                  group: str | None = None) -> RemotingCommand:
        """QUERY_CONSUME_QUEUE; the raw response (an index out of range is SUCCESS with a remark, no body)."""
        return await self._ok(broker_addr, RequestCode.QUERY_CONSUME_QUEUE, rh.QueryConsumeQueueRequestHeader(
            topic=topic, queue_id=queue_id, index=index, count=count, consumer_group=group))

    async def resume_check_half_message(self, broker_addr: str, msg_id: str) -> None:
        await self._ok(broker_addr, RequestCode.RESUME_CHECK_HALF_MESSAGE,
                       rh.ResumeCheckHalfMessageRequestHeader(msg_id=msg_id))

    async def consumer_running_info(self, broker_addr: str, group: str, client_id: str, *,
                                    jstack: bool = False) -> dict[str, Any]:
        """GET_CONSUMER_RUNNING_INFO, answered by the client through the broker (ConsumerRunningInfo)."""
        header = rh.GetConsumerRunningInfoRequestHeader(consumer_group=group, client_id=client_id, jstack_enable=jstack)
        resp = await self._ok(broker_addr, RequestCode.GET_CONSUMER_RUNNING_INFO, header)
        return dict(loads_body(resp.body))

    async def consume_message_directly(self, broker_addr: str, group: str, client_id: str,
                                       msg_id: str) -> dict[str, Any]:
        """CONSUME_MESSAGE_DIRECTLY through the broker (ConsumeMessageDirectlyResult)."""
        header = rh.ConsumeMessageDirectlyResultRequestHeader(consumer_group=group, client_id=client_id, msg_id=msg_id)
        resp = await self._ok(broker_addr, RequestCode.CONSUME_MESSAGE_DIRECTLY, header)
        return dict(loads_body(resp.body))

    # -- name server (mqadmin getNamesrvConfig, addWritePerm, ...) ---------------------------------
    async def _ns_ok(self, cmd: RemotingCommand, addr: str | None = None) -> RemotingCommand:
        if addr is not None:
            return await self.client.invoke_ok(addr, cmd, self.timeout_s)
        resp = await self._ns().invoke(cmd, self.timeout_s)
        if resp.code != ResponseCode.SUCCESS:
            raise ResponseError(resp, f"request {cmd.code}")
        return resp

    async def get_namesrv_config(self, namesrv_addr: str | None = None) -> dict[str, str]:
        """GET_NAMESRV_CONFIG of one name server (``namesrv_addr``, else the client's first)."""
        return parse_properties_text((await self._ns_ok(RemotingCommand(RequestCode.GET_NAMESRV_CONFIG),
                                                        namesrv_addr)).body)

    async def update_namesrv_config(self, props: dict[str, str], namesrv_addr: str | None = None) -> None:
        await self._ns_ok(RemotingCommand(RequestCode.UPDATE_NAMESRV_CONFIG, body=properties_body(props)),
                          namesrv_addr)

    async def namesrv_topic_list(self, code: int) -> dict[str, Any]:
        """GET_SYSTEM_TOPIC_LIST_FROM_NS / GET_UNIT_TOPIC_LIST / ...: TopicList ``{"topicList", "brokerAddr"}``."""
        return dict(loads_body((await self._ns_ok(RemotingCommand(code))).body))

    async def add_write_perm(self, broker_name: str, namesrv_addr: str | None = None) -> int:
        """ADD_WRITE_PERM_OF_BROKER; returns ``addTopicCount``."""
        cmd = RemotingCommand(RequestCode.ADD_WRITE_PERM_OF_BROKER,
                              ext_fields=BrokerNameRequestHeader(broker_name=broker_name).encode())
        return int((await self._ns_ok(cmd, namesrv_addr)).ext_fields.get("addTopicCount", 0))

    # -- orderly locks ----------------------------------------------------------------------------
    async def lock_batch_mq(self, broker_addr: str, group: str, client_id: str,
                            mqs: list[MessageQueue]) -> list[MessageQueue]:
        """LOCK_BATCH_MQ; returns the queues now locked by ``client_id``."""
        body = dumps({"clientId": client_id, "consumerGroup": group, "mqSet": [m.to_json() for m in mqs]})
        resp = await self._ok(broker_addr, RequestCode.LOCK_BATCH_MQ, body=body)
        return sorted(MessageQueue.from_json(m) for m in loads_body(resp.body).get("lockOKMQSet") or [])

    async def unlock_batch_mq(self, broker_addr: str, group: str, client_id: str, mqs: list[MessageQueue]) -> None:
        body = dumps({"clientId": client_id, "consumerGroup": group, "mqSet": [m.to_json() for m in mqs]})
        await self._ok(broker_addr, RequestCode.UNLOCK_BATCH_MQ, body=body)


__all__ = ["TRANSACTION_COMMIT", "TRANSACTION_ROLLBACK", "Admin", "topic_config_json"]
