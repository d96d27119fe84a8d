"""The work behind ``rokka admin`` commands: async functions returning JSON-able dicts.

Theory of operation
-------------------
Each ``op_*`` coroutine takes a ``Session`` (one ``RemotingClient`` with its name server client,
``Admin``, a tools producer and pull consumer) plus the command's arguments, talks to the name
server and brokers, and returns one plain ``dict`` - exactly the document ``--json`` prints.  The
human tables are rendered from the same dict by ``admin_render``, so both outputs always agree.

Failures the user must see (unknown topic, no broker in a cluster, message not found) raise
``AdminError`` with a one-line message; network and protocol errors from the client library are
turned into one line by ``admin.run``.  Nothing here prints.

Timestamps are milliseconds since the epoch everywhere in the JSON documents.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any

from rokka.core.model import (
    DLQ_PREFIX,
    PROP_KEYS,
    PROP_RETRY_TOPIC,
    PROP_TAGS,
    PROP_UNIQ_KEY,
    RETRY_PREFIX,
    StoredMessage,
)
from rokka.core.record import decode_offset_msg_id, encode_offset_msg_id
from rokka.net.remoting.client import (
    Admin,
    NamesrvClient,
    Producer,
    PullConsumer,
    RemotingClient,
    ResponseError,
    TopicRoute,
)
from rokka.net.remoting.client.tools import (
    first_offset_at_or_after,
    invoke_reset_offset,
    producer_connections,
    pull_range,
    subscription_groups,
)
from rokka.net.remoting.client.types import MessageQueue, OutMessage
from rokka.net.remoting.codec.codes import RequestCode, ResponseCode
from rokka.net.remoting.codec.remoting import RemotingCommand

TOOLS_CONSUMER = "TOOLS_CONSUMER"
TOOLS_PRODUCER = "TOOLS_PRODUCER"
# Properties the broker or the retry path adds; dropped when a DLQ message is sent again.
_RESEND_DROP = ("DELAY", "WAIT", "RETRY_TOPIC", "MAX_RECONSUME_TIMES", "REAL_TOPIC", "REAL_QID",
                "MIN_OFFSET", "MAX_OFFSET", "CLUSTER", "TRAN_MSG", "PGROUP")


class AdminError(Exception):
    """A user-facing failure; the message is printed as one line."""


@dataclass
class Session:
    rc: RemotingClient
    ns: NamesrvClient
    admin: Admin

    def consumer(self, group: str = TOOLS_CONSUMER) -> PullConsumer:
        return PullConsumer(self.rc, self.ns, group, client_id=f"rokka-admin@{time.time_ns()}")

    def producer(self, group: str = TOOLS_PRODUCER) -> Producer:
        return Producer(self.rc, self.ns, group, retries=0)


def now_ms() -> int:
    return int(time.time() * 1000)


async def route_of(s: Session, topic: str) -> TopicRoute:
    route = await s.ns.get_route(topic)
    if route is None:
        raise AdminError(f"topic {topic} does not exist (no route on the name server)")
    return route


def master_addrs(route: TopicRoute) -> dict[str, str]:
    """broker name -> master address, for brokers of the route that have a master."""
    return {b.broker_name: b.master_addr for b in sorted(route.broker_datas, key=lambda b: b.broker_name)
            if b.master_addr}


def message_doc(m: StoredMessage) -> dict[str, Any]:
    """One stored message as a JSON document (body as UTF-8 text when it decodes, else hex)."""
    try:
        body, encoding = m.body.decode("utf-8"), "utf-8"
    except UnicodeDecodeError:
        body, encoding = m.body.hex(), "hex"
    return {
        "topic": m.topic, "tags": m.tags, "keys": m.keys, "msgId": m.properties.get(PROP_UNIQ_KEY),
        "offsetMsgId": encode_offset_msg_id(m.store_host, m.commitlog_offset),
        "queueId": m.queue_id, "queueOffset": m.queue_offset, "commitLogOffset": m.commitlog_offset,
        "bornTimestamp": m.born_timestamp, "bornHost": f"{m.born_host[0]}:{m.born_host[1]}",
        "storeTimestamp": m.store_timestamp, "storeHost": f"{m.store_host[0]}:{m.store_host[1]}",
        "reconsumeTimes": m.reconsume_times, "flag": m.flag, "sysFlag": m.sysflag, "bodyCRC": m.body_crc,
        "storeSize": m.size, "properties": dict(m.properties), "bodyLength": len(m.body),
        "bodyEncoding": encoding, "body": body,
    }


# -- topics -------------------------------------------------------------------------------------

async def op_update_topic(s: Session, *, topic: str, read: int, write: int, perm: int, broker: str | None,
                          cluster: str | None, order: bool) -> dict[str, Any]:
    if broker:
        await s.admin.create_topic(broker, topic, read_queue_nums=read, write_queue_nums=write, perm=perm,
                                   order=order)
        addrs = [broker]
    else:
        assert cluster is not None
        addrs = await s.admin.master_addrs(cluster)
        if not addrs:
            raise AdminError(f"cluster {cluster} has no master broker on the name server")
        for addr in addrs:
            await s.admin.create_topic(addr, topic, read_queue_nums=read, write_queue_nums=write, perm=perm,
                                       order=order)
    return {"topic": topic, "brokers": addrs, "readQueueNums": read, "writeQueueNums": write, "perm": perm,
            "order": order, "cluster": cluster}


async def op_delete_topic(s: Session, *, topic: str, cluster: str | None) -> dict[str, Any]:
    if topic not in await s.ns.all_topics() and await s.ns.get_route(topic) is None:
        raise AdminError(f"topic {topic} does not exist")
    addrs = await s.admin.master_addrs(cluster)
    for addr in addrs:
        await s.admin.delete_topic_in_broker(addr, topic)
    await s.ns.delete_topic(topic, cluster)
    return {"topic": topic, "brokers": addrs, "namesrvs": list(s.ns.addrs), "cluster": cluster}


async def op_delete_sub_group(s: Session, *, group: str, broker: str | None, cluster: str | None,
                              remove_offset: bool) -> dict[str, Any]:
    addrs = [broker] if broker else await s.admin.master_addrs(cluster)
    if not addrs:
        raise AdminError(f"no broker in cluster {cluster}" if cluster else "no broker registered")
    for addr in addrs:
        await s.admin.delete_subscription_group(addr, group, clean_offset=remove_offset)
    return {"group": group, "brokers": addrs, "removeOffset": remove_offset}


async def op_topic_list(s: Session, *, cluster: str | None) -> dict[str, Any]:
    topics = await (s.ns.topics_by_cluster(cluster) if cluster else s.ns.all_topics())
    return {"cluster": cluster, "topics": sorted(set(topics))}


async def op_topic_route(s: Session, *, topic: str) -> dict[str, Any]:
    route = await route_of(s, topic)
    return {"topic": topic, "route": route.raw}


async def op_topic_status(s: Session, *, topic: str) -> dict[str, Any]:
    route = await route_of(s, topic)
    queues: list[dict[str, Any]] = []
    for name, addr in master_addrs(route).items():
        stats = await s.admin.topic_stats(addr, topic)
        for mq in sorted(stats):
            st = stats[mq]
            queues.append({"brokerName": mq.broker_name or name, "brokerAddr": addr, "queueId": mq.queue_id,
                           "minOffset": int(st.get("minOffset", 0)), "maxOffset": int(st.get("maxOffset", 0)),
                           "lastUpdateTimestamp": int(st.get("lastUpdateTimestamp", 0))})
    return {"topic": topic, "queues": queues,
            "totalMessages": sum(q["maxOffset"] - q["minOffset"] for q in queues)}


# -- cluster and brokers ------------------------------------------------------------------------

async def op_cluster_list(s: Session) -> dict[str, Any]:
    info = await s.ns.cluster_info()
    brokers_by_name = info.get("brokerAddrTable") or {}
    rows = []
    for cluster, names in sorted((info.get("clusterAddrTable") or {}).items()):
        for name in sorted(names):
            addrs = (brokers_by_name.get(name) or {}).get("brokerAddrs") or {}
            for bid, addr in sorted(addrs.items(), key=lambda kv: int(kv[0])):
                row: dict[str, Any] = {"cluster": cluster, "brokerName": name, "brokerId": int(bid),
                                       "addr": addr}
                try:
                    rt = await s.admin.broker_runtime_info(addr)
                    row.update(version=rt.get("brokerVersionDesc"),
                               putTotalToday=rt.get("msgPutTotalTodayNow"),
                               commitLogMaxOffset=rt.get("commitLogMaxOffset"), reachable=True)
                except Exception as exc:  # noqa: BLE001 - a dead broker is a row, not a failure
                    row.update(reachable=False, error=str(exc))
                rows.append(row)
    return {"brokers": rows}


async def op_broker_status(s: Session, *, broker: str) -> dict[str, Any]:
    return {"broker": broker, "table": dict(sorted((await s.admin.broker_runtime_info(broker)).items()))}


# -- consumer groups ----------------------------------------------------------------------------

async def _group_rows(s: Session, group: str, topic: str | None) -> list[dict[str, Any]]:
    addrs = master_addrs(await route_of(s, topic)) if topic else await _all_masters(s)
    rows = []
    for addr in addrs.values():
        stats = await s.admin.consume_stats(addr, group, topic)
        for mq, st in sorted(stats["offsetTable"].items()):
            broker_off, consumer_off = int(st.get("brokerOffset", 0)), int(st.get("consumerOffset", 0))
            rows.append({"topic": mq.topic, "brokerName": mq.broker_name, "queueId": mq.queue_id,
                         "brokerOffset": broker_off, "consumerOffset": consumer_off,
                         "diff": max(0, broker_off - consumer_off),
                         "lastTimestamp": int(st.get("lastTimestamp", 0))})
    return rows


async def _all_masters(s: Session) -> dict[str, str]:
    info = await s.ns.cluster_info()
    out: dict[str, str] = {}
    for name, data in sorted((info.get("brokerAddrTable") or {}).items()):
        addr = (data.get("brokerAddrs") or {}).get("0")
        if addr:
            out[name] = addr
    return out


async def op_consumer_progress(s: Session, *, group: str | None, topic: str | None) -> dict[str, Any]:
    if group is None:
        return await _all_groups_progress(s)
    rows = await _group_rows(s, group, topic)
    if not rows:
        raise AdminError(f"no consume stats for group {group}"
                         f"{' on topic ' + topic if topic else ''}: it has not committed any offset")
    return {"group": group, "topic": topic, "queues": rows,
            "brokerOffsetTotal": sum(r["brokerOffset"] for r in rows),
            "consumerOffsetTotal": sum(r["consumerOffset"] for r in rows),
            "diffTotal": sum(r["diff"] for r in rows)}


async def _all_groups_progress(s: Session) -> dict[str, Any]:
    groups: set[str] = set()
    for addr in (await _all_masters(s)).values():
        groups.update(await subscription_groups(s.rc, addr))
    out: list[dict[str, Any]] = []
    for g in sorted(groups):
        try:
            rows = await _group_rows(s, g, None)
        except Exception as exc:  # noqa: BLE001 - one bad group must not hide the others
            out.append({"group": g, "topics": [], "diffTotal": None, "error": str(exc)})
            continue
        out.append({"group": g, "topics": sorted({r["topic"] for r in rows}),
                    "diffTotal": sum(r["diff"] for r in rows) if rows else None})
    return {"groups": out}


# -- messages -----------------------------------------------------------------------------------

async def op_query_by_id(s: Session, *, msg_id: str) -> dict[str, Any]:
    try:
        decode_offset_msg_id(msg_id)
    except ValueError as exc:
        raise AdminError(f"bad offsetMsgId {msg_id!r}: {exc}") from None
    return {"message": message_doc(await s.admin.view_message(msg_id))}


async def _query(s: Session, topic: str, key: str, begin: int, end: int, unique: bool) -> list[StoredMessage]:
    found: dict[tuple[str, int], StoredMessage] = {}
    for addr in master_addrs(await route_of(s, topic)).values():
        for m in await s.admin.query_message(addr, topic, key, max_num=64, begin_ms=begin, end_ms=end,
                                             unique_key=unique):
            found[(addr, m.commitlog_offset)] = m
    return sorted(found.values(), key=lambda m: (m.store_timestamp, m.commitlog_offset))


async def op_query_by_key(s: Session, *, topic: str, key: str, begin: int, end: int | None) -> dict[str, Any]:
    msgs = [m for m in await _query(s, topic, key, begin, end or now_ms() + 60_000, False) if key in m.keys]
    return {"topic": topic, "key": key, "messages": [message_doc(m) for m in msgs]}


async def op_query_by_unique_key(s: Session, *, topic: str, uniq: str) -> dict[str, Any]:
    msgs = [m for m in await _query(s, topic, uniq, 0, now_ms() + 60_000, True)
            if m.properties.get(PROP_UNIQ_KEY) == uniq]
    if not msgs:
        raise AdminError(f"no message with unique key {uniq} in topic {topic}")
    return {"topic": topic, "msgId": uniq, "messages": [message_doc(m) for m in msgs]}


async def op_print_msg(s: Session, *, topic: str, begin: int | None, end: int | None, subexpr: str,
                       limit: int | None) -> dict[str, Any]:
    route = await route_of(s, topic)
    consumer = s.consumer()
    docs: list[dict[str, Any]] = []
    for mq in route.subscribe_queues(topic):
        start = (await first_offset_at_or_after(consumer, mq, begin) if begin
                 else await consumer.min_offset(mq))
        stop = await first_offset_at_or_after(consumer, mq, end + 1) if end else await consumer.max_offset(mq)
        async for m in pull_range(consumer, mq, start, stop, expression=subexpr):
            if (begin is None or m.store_timestamp >= begin) and (end is None or m.store_timestamp <= end):
                docs.append(dict(message_doc(m), brokerName=mq.broker_name))
                if limit is not None and len(docs) >= limit:
                    return {"topic": topic, "begin": begin, "end": end, "messages": docs}
    return {"topic": topic, "begin": begin, "end": end, "messages": docs}


async def op_send_message(s: Session, *, topic: str, body: bytes, keys: str | None, tags: str | None,
                          queue_id: int | None, broker_name: str | None, properties: dict[str, str],
                          group: str) -> dict[str, Any]:
    route = await route_of(s, topic)
    queue: MessageQueue | int | None = queue_id
    if broker_name is not None:
        if route.master_addr(broker_name) is None:
            raise AdminError(f"broker {broker_name} has no master in the route of {topic}")
        queue = MessageQueue(topic, broker_name, queue_id or 0)
    r = await s.producer(group).send(topic, OutMessage(body, tags, keys, properties), queue=queue)
    return {"topic": topic, "status": r.status, "msgId": r.msg_id, "offsetMsgId": r.offset_msg_id,
            "brokerName": r.queue.broker_name, "queueId": r.queue.queue_id, "queueOffset": r.queue_offset}


async def op_consume_message(s: Session, *, topic: str, group: str | None, queue_id: int | None,
                             broker_name: str | None, offset: int | None, count: int, subexpr: str,
                             commit: bool) -> dict[str, Any]:
    route = await route_of(s, topic)
    consumer = s.consumer(group or TOOLS_CONSUMER)
    queues = [mq for mq in route.subscribe_queues(topic)
              if (queue_id is None or mq.queue_id == queue_id) and (broker_name in (None, mq.broker_name))]
    if not queues:
        raise AdminError(f"topic {topic} has no readable queue matching the selection")
    docs: list[dict[str, Any]] = []
    committed = []
    for mq in queues:
        start = offset
        if start is None:
            start = (await consumer.query_offset(mq) if group else None)
            start = start if start is not None else await consumer.min_offset(mq)
        stop = await consumer.max_offset(mq)
        last = None
        async for m in pull_range(consumer, mq, start, stop, expression=subexpr):
            docs.append(dict(message_doc(m), brokerName=mq.broker_name))
            last = m.queue_offset
            if len(docs) >= count:
                break
        if commit and group and last is not None:
            await consumer.update_offset(mq, last + 1)
            committed.append({"brokerName": mq.broker_name, "queueId": mq.queue_id, "offset": last + 1})
        if len(docs) >= count:
            break
    return {"topic": topic, "group": group, "messages": docs, "committed": committed}


async def op_connections(s: Session, *, group: str, producer: bool) -> dict[str, Any]:
    """Clients of a consumer (or producer) group, as every master broker sees them."""
    rows: list[dict[str, Any]] = []
    info: dict[str, Any] = {}
    errors = []
    for name, addr in (await _all_masters(s)).items():
        try:
            body = await (producer_connections(s.rc, addr, group) if producer
                          else s.admin.consumer_connections(addr, group))
        except ResponseError as exc:  # group unknown or offline on this broker
            errors.append(f"{name}: {exc.remark or exc.code}")
            continue
        rows += [dict(c, brokerName=name) for c in body.get("connectionSet") or []]
        info.update({k: v for k, v in body.items() if k != "connectionSet"})
    if not rows:
        raise AdminError(f"{'producer' if producer else 'consumer'} group {group} has no live client"
                         f"{' (' + '; '.join(errors) + ')' if errors else ''}")
    return {"group": group, "connections": rows, **info}


async def op_reset_offset(s: Session, *, group: str, topic: str, timestamp: int,
                          force: bool) -> dict[str, Any]:
    route = await route_of(s, topic)
    consumer = s.consumer(group)
    rows = []
    for mq in route.subscribe_queues(topic):
        old = await consumer.query_offset(mq)
        new = await first_offset_at_or_after(consumer, mq, timestamp)
        await consumer.update_offset(mq, new)
        rows.append({"brokerName": mq.broker_name, "queueId": mq.queue_id, "oldOffset": old,
                     "newOffset": new})
    notified = []
    for name, addr in master_addrs(route).items():
        resp = await invoke_reset_offset(s.rc, addr, topic=topic, group=group, timestamp_ms=timestamp,
                                         force=force)
        if resp.code == ResponseCode.SUCCESS:
            status = "notified"
        elif resp.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED:
            status = "not supported: live clients were not notified"
        else:
            status = f"not notified: {resp.remark or resp.code}"
        notified.append({"brokerName": name, "brokerAddr": addr, "code": int(resp.code), "status": status})
    return {"group": group, "topic": topic, "timestamp": timestamp, "queues": rows, "clients": notified}


async def op_resend_dlq(s: Session, *, group: str, target: str, dry_run: bool, from_start: bool,
                        max_count: int | None) -> dict[str, Any]:
    """Re-send what is in ``%DLQ%<group>`` to its original topic (or ``%RETRY%<group>``).

    The group's own committed offset on its DLQ topic is the cursor: it starts there (or at the
    minimum offset) and is moved past every message re-sent, so running again only re-sends newer
    dead letters.  ``dry_run`` lists without sending or moving the cursor.
    """
    dlq = DLQ_PREFIX + group
    route = await route_of(s, dlq)
    consumer, producer = s.consumer(group), s.producer()
    out: list[dict[str, Any]] = []
    for mq in route.subscribe_queues(dlq):
        cursor = None if from_start else await consumer.query_offset(mq)
        start = max(cursor if cursor is not None else 0, await consumer.min_offset(mq))
        stop = await consumer.max_offset(mq)
        async for m in pull_range(consumer, mq, start, stop):
            if max_count is not None and len(out) >= max_count:
                break
            dest = RETRY_PREFIX + group if target == "retry" else m.properties.get(PROP_RETRY_TOPIC)
            entry = {"dlqOffset": m.queue_offset, "msgId": m.properties.get(PROP_UNIQ_KEY), "target": dest}
            if not dest:
                entry["status"] = "skipped: no RETRY_TOPIC property"
            elif dry_run:
                entry["status"] = "dry-run"
            else:
                props = {k: v for k, v in m.properties.items()
                         if k not in _RESEND_DROP and k not in (PROP_TAGS, PROP_KEYS)}
                r = await producer.send(dest, OutMessage(m.body, m.tags, m.properties.get(PROP_KEYS) or None,
                                                         props, m.flag))
                entry.update(status=r.status, newOffsetMsgId=r.offset_msg_id, brokerName=r.queue.broker_name,
                             queueId=r.queue.queue_id, queueOffset=r.queue_offset)
                await consumer.update_offset(mq, m.queue_offset + 1)
            out.append(entry)
    return {"group": group, "dlqTopic": dlq, "target": target, "dryRun": dry_run, "messages": out}


# -- ACL (plain_acl.yml on the brokers), CommitLog deletion, correction offsets -------------------

async def acl_targets(s: Session, broker: str | None, cluster: str | None) -> list[str]:
    """``-b`` broker, else every master (of ``-c`` cluster when given), as mqadmin chooses them."""
    if broker:
        return [broker]
    addrs = await s.admin.master_addrs(cluster)
    if not addrs:
        raise AdminError(f"no master broker in cluster {cluster}" if cluster else "no broker registered")
    return addrs


async def _broker_call(s: Session, addr: str, code: int, ext: dict[str, str | None]) -> RemotingCommand:
    cmd = RemotingCommand(code=code, ext_fields={k: v for k, v in ext.items() if v is not None})
    try:
        return await s.rc.invoke_ok(addr, cmd)
    except ResponseError as exc:
        raise AdminError(f"{addr}: {exc.remark or ResponseCode(exc.code).name} (code {exc.code})") from None


async def op_update_acl(s: Session, *, broker: str | None, cluster: str | None, access_key: str, secret_key: str,
                        white: str | None, topic_perm: str | None, group_perm: str | None, topic_perms: str | None,
                        group_perms: str | None, admin: bool) -> dict[str, Any]:
    ext = {"accessKey": access_key, "secretKey": secret_key, "whiteRemoteAddress": white,
           "defaultTopicPerm": topic_perm, "defaultGroupPerm": group_perm, "topicPerms": topic_perms,
           "groupPerms": group_perms, "admin": "true" if admin else "false"}
    addrs = await acl_targets(s, broker, cluster)
    for addr in addrs:
        await _broker_call(s, addr, RequestCode.UPDATE_AND_CREATE_ACL_CONFIG, ext)
    return {"brokers": addrs, "accessKey": access_key, "admin": admin}


async def op_delete_acl(s: Session, *, broker: str | None, cluster: str | None, access_key: str) -> dict[str, Any]:
    addrs = await acl_targets(s, broker, cluster)
    for addr in addrs:
        await _broker_call(s, addr, RequestCode.DELETE_ACL_CONFIG, {"accessKey": access_key})
    return {"brokers": addrs, "accessKey": access_key}


async def op_update_global_white(s: Session, *, broker: str | None, cluster: str | None, addresses: str,
                                 file: str | None) -> dict[str, Any]:
    addrs = await acl_targets(s, broker, cluster)
    for addr in addrs:
        await _broker_call(s, addr, RequestCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG,
                           {"globalWhiteAddrs": addresses, "aclFileFullPath": file})
    return {"brokers": addrs, "globalWhiteAddrs": [a for a in addresses.split(",") if a]}


async def op_acl_versions(s: Session, *, broker: str | None, cluster: str | None) -> dict[str, Any]:
    rows = []
    for addr in await acl_targets(s, broker, cluster):
        ext = (await _broker_call(s, addr, RequestCode.GET_BROKER_CLUSTER_ACL_INFO, {})).ext_fields or {}
        files = json.loads(ext.get("allAclFileVersion") or "{}")
        for path, version in sorted(files.items()):
            rows.append({"cluster": ext.get("clusterName"), "brokerName": ext.get("brokerName"),
                         "brokerAddr": ext.get("brokerAddr") or addr, "aclFile": path,
                         "counter": int(version.get("counter", 0)), "timestamp": int(version.get("timestamp", 0))})
    return {"versions": rows}


async def op_acl_config(s: Session, *, broker: str | None, cluster: str | None) -> dict[str, Any]:
    configs = {}
    for addr in await acl_targets(s, broker, cluster):
        body = (await _broker_call(s, addr, RequestCode.GET_BROKER_CLUSTER_ACL_CONFIG, {})).body
        configs[addr] = json.loads(body or b"{}")
    return {"configs": configs}


async def op_delete_expired_commitlog(s: Session, *, broker: str | None, cluster: str | None) -> dict[str, Any]:
    addrs = await acl_targets(s, broker, cluster)
    for addr in addrs:
        await _broker_call(s, addr, RequestCode.DELETE_EXPIRED_COMMITLOG, {})
    return {"brokers": addrs, "result": True}


async def op_correction_offset(s: Session, *, broker: str, topic: str, compare_group: str,
                               filter_groups: str | None) -> dict[str, Any]:
    resp = await _broker_call(s, broker, RequestCode.QUERY_CORRECTION_OFFSET,
                              {"topic": topic, "compareGroup": compare_group, "filterGroups": filter_groups})
    table = json.loads(resp.body or b"{}").get("correctionOffsets") or {}
    return {"broker": broker, "topic": topic, "compareGroup": compare_group,
            "correctionOffsets": {int(q): int(off) for q, off in sorted(table.items(), key=lambda kv: int(kv[0]))}}
