"""``rokka admin`` operations commands: broker / name server config, write permission, maintenance.

Theory of operation
-------------------
mqadmin's getBrokerConfig, updateBrokerConfig, getNamesrvConfig, updateNamesrvConfig,
wipeWritePerm, addWritePerm, cloneGroupOffset, cleanExpiredCQ, cleanUnusedTopic,
consumerStatus, brokerConsumeStats, queryCq, producer, statsAll, updateKvConfig,
deleteKvConfig and getConsumerConfig, with mqadmin's options.
Each is a click command on the ``admin`` group (imported at the end of ``admin.py``), one ``op_*`` coroutine over a
``Session`` returning a dict (``--json`` prints it), and a text renderer shaped like mqadmin's
output (``============addr============`` blocks and ``key  =  value`` lines for configs).
Brokers are chosen by ``-b`` address or ``-c`` cluster (every master), as mqadmin does.
"""

from __future__ import annotations

import json
from typing import Any

import click
from rokka.gateway.cli import admin_render as render
from rokka.gateway.cli.admin_group import _json_option, admin, run
from rokka.gateway.cli.admin_ops import AdminError, Session, _all_masters, master_addrs, route_of
from rokka.net.remoting.client import NamesrvClient
from rokka.net.remoting.client.tools import subscription_groups
from rokka.net.remoting.codec.codes import RequestCode
from rokka.net.remoting.codec.remoting import RemotingCommand


async def _targets(s: Session, broker: str | None, cluster: str | None) -> list[str]:
    if broker:
        return [broker]
    addrs = await s.admin.master_addrs(cluster)
    if not addrs:
        raise AdminError(f"no master broker in cluster {cluster}")
    return addrs


def _need_one(broker: str | None, cluster: str | None) -> None:
    if bool(broker) == bool(cluster):
        raise click.UsageError("give exactly one of -b broker address or -c cluster")


def _config_blocks(d: dict[str, Any]) -> str:
    out = []
    for addr, props in d["configs"].items():
        out.append(f"============{'Master: ' if d.get('cluster') else ''}{addr}============")
        out += [f"{k:<50s}=  {v}" for k, v in props.items()]
    return "\n".join(out)


# -- operations ---------------------------------------------------------------------------------

async def op_get_broker_config(s: Session, *, broker: str | None, cluster: str | None) -> dict[str, Any]:
    configs = {a: await s.admin.get_broker_config(a) for a in await _targets(s, broker, cluster)}
    return {"cluster": cluster, "configs": configs}


async def op_update_broker_config(s: Session, *, broker: str | None, cluster: str | None, key: str,
                                  value: str) -> dict[str, Any]:
    addrs = await _targets(s, broker, cluster)
    for a in addrs:
        await s.admin.update_broker_config(a, {key: value})
    return {"brokers": addrs, "key": key, "value": value}


async def op_get_namesrv_config(s: Session) -> dict[str, Any]:
    return {"configs": {a: await s.admin.get_namesrv_config(a) for a in s.ns.addrs}}


async def op_update_namesrv_config(s: Session, *, key: str, value: str) -> dict[str, Any]:
    for a in s.ns.addrs:
        await s.admin.update_namesrv_config({key: value}, a)
    return {"namesrvs": list(s.ns.addrs), "key": key, "value": value}


async def op_write_perm(s: Session, *, broker_name: str, add: bool) -> dict[str, Any]:
    counts = {}
    for a in s.ns.addrs:
        if add:
            counts[a] = await s.admin.add_write_perm(broker_name, a)
        else:
            counts[a] = await NamesrvClient(s.rc, [a]).wipe_write_perm(broker_name)
    return {"brokerName": broker_name, "action": "add" if add else "wipe", "topicCounts": counts}


async def op_clone_group_offset(s: Session, *, src: str, dest: str, topic: str, offline: bool) -> dict[str, Any]:
    addrs = list(master_addrs(await route_of(s, topic)).values())
    for a in addrs:
        await s.admin.clone_group_offset(a, src, dest, topic, offline=offline)
    return {"srcGroup": src, "destGroup": dest, "topic": topic, "offline": offline, "brokers": addrs}


async def op_clean(s: Session, *, broker: str | None, cluster: str | None, what: str) -> dict[str, Any]:
    addrs = await _targets(s, broker, cluster)
    for a in addrs:
        if what == "cleanExpiredCQ":
            await s.admin.clean_expired_consume_queue(a)
        else:
            await s.admin.clean_unused_topic(a)
    return {"command": what, "brokers": addrs, "result": True}


async def op_consumer_status(s: Session, *, group: str, client_id: str | None, jstack: bool) -> dict[str, Any]:
    clients: dict[str, Any] = {}
    for addr in (await _all_masters(s)).values():
        try:
            conns = await s.admin.consumer_connections(addr, group)
        except Exception:  # noqa: BLE001 - the group is not online on this broker
            continue
        for c in conns.get("connectionSet") or []:
            cid = c.get("clientId")
            if cid in clients or (client_id and cid != client_id):
                continue
            clients[cid] = {"clientAddr": c.get("clientAddr"), "version": c.get("version"), "broker": addr,
                            "runningInfo": await s.admin.consumer_running_info(addr, group, cid, jstack=jstack)}
    if not clients:
        raise AdminError(f"consumer group {group} is not online" + (f" with client {client_id}" if client_id else ""))
    return {"group": group, "clients": clients}


async def op_broker_consume_stats(s: Session, *, broker: str, order: bool) -> dict[str, Any]:
    body = await s.admin.broker_consume_stats(broker, is_order=order)
    rows = []
    for entry in body.get("consumeStatsList") or []:
        for group, stats in entry.items():
            for cs in stats:
                for mq, o in sorted(cs["offsetTable"].items()):
                    rows.append({"group": group, "topic": mq.topic, "brokerName": mq.broker_name,
                                 "queueId": mq.queue_id, "brokerOffset": o.get("brokerOffset", 0),
                                 "consumerOffset": o.get("consumerOffset", 0),
                                 "diff": o.get("brokerOffset", 0) - o.get("consumerOffset", 0),
                                 "lastTimestamp": o.get("lastTimestamp", 0)})
    return {"brokerAddr": body.get("brokerAddr"), "totalDiff": body.get("totalDiff", 0), "queues": rows}


async def op_query_cq(s: Session, *, topic: str, queue_id: int, index: int, count: int, broker: str | None,
                      group: str | None) -> dict[str, Any]:
    if broker is None:
        addrs = master_addrs(await route_of(s, topic))
        if not addrs:
            raise AdminError("No topic route data!")
        broker = next(iter(addrs.values()))
    resp = await s.admin.query_consume_queue(broker, topic, queue_id, index, count, group)
    if not resp.body:
        raise AdminError(resp.remark or f"Index {index} of {queue_id}@{topic} is not exist!")
    body = json.loads(resp.body)
    return {"broker": broker, "index": index, **body}


async def op_producer(s: Session, *, broker: str) -> dict[str, Any]:
    resp = await s.rc.invoke_ok(broker, RemotingCommand(RequestCode.GET_ALL_PRODUCER_INFO), s.admin.timeout_s)
    return {"broker": broker, "data": json.loads(resp.body).get("data") or {}}


def _day_sum(bsd: dict[str, Any]) -> int:
    """mqadmin's compute24HourSum: the day's sum, else the hour's, else the minute's."""
    for window in ("statsDay", "statsHour", "statsMinute"):
        if (bsd.get(window) or {}).get("sum"):
            return int(bsd[window]["sum"])
    return 0


async def _stats_of(s: Session, addrs: list[str], name: str, key: str) -> tuple[float, int]:
    tps, total = 0.0, 0
    for addr in addrs:
        try:
            bsd = await s.admin.view_broker_stats(addr, name, key)
        except Exception:  # noqa: BLE001 - mqadmin skips a broker without these stats
            continue
        tps += float((bsd.get("statsMinute") or {}).get("tps") or 0)
        total += _day_sum(bsd)
    return tps, total


async def _topic_rows(s: Session, topic: str, active: bool) -> list[dict[str, Any]]:
    addrs = list(master_addrs(await route_of(s, topic)).values())
    groups = await s.admin.topic_consumed_by(addrs[0], topic) if addrs else []
    in_tps, in_day = await _stats_of(s, addrs, "TOPIC_PUT_NUMS", topic)
    rows = []
    for group in groups:
        out_tps, out_day = await _stats_of(s, addrs, "GROUP_GET_NUMS", f"{topic}@{group}")
        accumulate = 0
        for addr in addrs:
            try:
                stats = await s.admin.consume_stats(addr, group, topic)
            except Exception:  # noqa: BLE001 - as mqadmin: no stats, no accumulation
                continue
            accumulate += sum(int(o.get("brokerOffset", 0)) - int(o.get("consumerOffset", 0))
                              for o in stats["offsetTable"].values())
        if not active or in_day > 0 or out_day > 0:
            rows.append({"topic": topic, "group": group, "accumulation": max(accumulate, 0), "inTPS": in_tps,
                         "outTPS": out_tps, "inMsg24Hour": in_day, "outMsg24Hour": out_day})
    if not groups and (not active or in_day > 0):
        rows.append({"topic": topic, "group": "", "accumulation": 0, "inTPS": in_tps, "outTPS": None,
                     "inMsg24Hour": in_day, "outMsg24Hour": "NO_CONSUMER"})
    return rows


async def op_stats_all(s: Session, *, topic: str | None, active: bool) -> dict[str, Any]:
    rows: list[dict[str, Any]] = []
    for t in await s.ns.all_topics():
        if t.startswith(("%RETRY%", "%DLQ%")) or (topic and t != topic):
            continue
        try:
            rows += await _topic_rows(s, t, active)
        except Exception:  # noqa: BLE001 - mqadmin prints the topics it can
            continue
    return {"rows": rows}


# -- renderers ----------------------------------------------------------------------------------

def _render_perm(d: dict[str, Any]) -> str:
    return "\n".join(f"{d['action']} write perm of broker[{d['brokerName']}] in name server[{a}] OK, {n}"
                     for a, n in d["topicCounts"].items())


def _render_consumer_status(d: dict[str, Any]) -> str:
    rows = []
    for cid, c in d["clients"].items():
        props = (c["runningInfo"].get("properties") or {})
        rows.append((cid, c["clientAddr"], c["version"], props.get("PROP_CONSUME_TYPE", "-"),
                     len(c["runningInfo"].get("mqTable") or {})))
    return render.table(["#ClientId", "#Addr", "#Version", "#ConsumeType", "#Queues"], rows)


def _render_broker_consume_stats(d: dict[str, Any]) -> str:
    rows = [(q["topic"], q["group"], q["brokerName"], q["queueId"], q["brokerOffset"], q["consumerOffset"],
             q["diff"], render.fmt_ms(q["lastTimestamp"])) for q in d["queues"]]
    text = render.table(["#Topic", "#Group", "#Broker Name", "#QID", "#Broker Offset", "#Consumer Offset",
                         "#Diff", "#LastTime"], rows)
    return f"{text}\nDiff Total: {d['totalDiff']}"


def _render_query_cq(d: dict[str, Any]) -> str:
    sep = "======================================"
    out = []
    if d.get("subscriptionData") is not None:
        out += ["Subscription data: ", json.dumps(d["subscriptionData"], indent=2), sep]
    if d.get("filterData") is not None:
        out += ["Filter data: ", str(d["filterData"]), sep]
    out += ["Queue data: ", f"max: {d['maxQueueIndex']}, min: {d['minQueueIndex']}", sep]
    for i, q in enumerate(d.get("queueData") or [], start=d["index"]):
        out += [f"idx: {i}", (f"ConsumeQueueData{{physicOffset={q['physicOffset']}, physicSize={q['physicSize']}, "
                              f"tagsCode={q['tagsCode']}, extendDataJson='{q.get('extendDataJson')}', "
                              f"bitMap='{q.get('bitMap')}', eval={str(q.get('eval', False)).lower()}, "
                              f"msg='{q.get('msg')}'}}"), sep]
    return "\n".join(out)


def _render_producer(d: dict[str, Any]) -> str:
    out = []
    for group, producers in d["data"].items():
        if not producers:
            out.append(f"producer group ({group}) instances are empty")
        for p in producers:
            ip = str(p["remoteIP"]).lstrip("/")     # Java's "/host:port"
            out.append(f"producer group ({group}) instance : clientId={p['clientId']},remoteIP={ip}, "
                       f"language={p['language']}, version={p['version']}, "
                       f"lastUpdateTimestamp={p['lastUpdateTimestamp']}")
    return "\n".join(out)


def _render_stats_all(d: dict[str, Any]) -> str:
    out = [f"{'#Topic':<64s}  {'#Consumer Group':<64s} {'#Accumulation':>12s} {'#InTPS':>11s} {'#OutTPS':>11s} "
           f"{'#InMsg24Hour':>14s} {'#OutMsg24Hour':>14s}"]
    for r in d["rows"]:
        out_tps = "" if r["outTPS"] is None else f"{r['outTPS']:.2f}"
        out.append(f"{r['topic']:<64s}  {r['group']:<64s} {r['accumulation']:>12d} {r['inTPS']:>11.2f} "
                   f"{out_tps:>11s} {r['inMsg24Hour']:>14d} {str(r['outMsg24Hour']):>14s}")
    return "\n".join(out)


# -- commands -----------------------------------------------------------------------------------

@admin.command("getBrokerConfig")
@click.option("-b", "--broker", help="Broker address H:P.")
@click.option("-c", "--cluster", help="Every master of this cluster.")
@_json_option
def get_broker_config(broker: str | None, cluster: str | None, as_json: bool) -> None:
    """A broker's configuration (GET_BROKER_CONFIG)."""
    _need_one(broker, cluster)
    run(op_get_broker_config, _config_blocks, as_json, broker=broker, cluster=cluster)


@admin.command("updateBrokerConfig")
@click.option("-b", "--broker", help="Broker address H:P.")
@click.option("-c", "--cluster", help="Every master of this cluster.")
@click.option("-k", "--key", required=True)
@click.option("-v", "--value", required=True)
@_json_option
def update_broker_config(broker: str | None, cluster: str | None, key: str, value: str, as_json: bool) -> None:
    """Change one broker config key at runtime; the broker rewrites its broker.conf."""
    _need_one(broker, cluster)
    run(op_update_broker_config,
        lambda d: "\n".join(f"update broker config success, {a}" for a in d["brokers"]),
        as_json, broker=broker, cluster=cluster, key=key, value=value)


@admin.command("getNamesrvConfig")
@_json_option
def get_namesrv_config(as_json: bool) -> None:
    """Every name server's configuration (GET_NAMESRV_CONFIG)."""
    run(op_get_namesrv_config, _config_blocks, as_json)


@admin.command("updateNamesrvConfig")
@click.option("-k", "--key", required=True)
@click.option("-v", "--value", required=True)
@_json_option
def update_namesrv_config(key: str, value: str, as_json: bool) -> None:
    """Change one name server config key on every name server (UPDATE_NAMESRV_CONFIG)."""
    run(op_update_namesrv_config,
        lambda d: f"update name server config success!{d['namesrvs']}\n{d['key']} : {d['value']}",
        as_json, key=key, value=value)


@admin.command("wipeWritePerm")
@click.option("-b", "--broker-name", required=True, help="Broker name.")
@_json_option
def wipe_write_perm(broker_name: str, as_json: bool) -> None:
    """Remove the broker's write permission from the routes of every name server."""
    run(op_write_perm, _render_perm, as_json, broker_name=broker_name, add=False)


@admin.command("addWritePerm")
@click.option("-b", "--broker-name", required=True, help="Broker name.")
@_json_option
def add_write_perm(broker_name: str, as_json: bool) -> None:
    """Give the broker's routes read+write permission again on every name server."""
    run(op_write_perm, _render_perm, as_json, broker_name=broker_name, add=True)


@admin.command("cloneGroupOffset")
@click.option("-s", "--src-group", "src", required=True)
@click.option("-d", "--dest-group", "dest", required=True)
@click.option("-t", "--topic", required=True)
@click.option("-o", "--offline", is_flag=True, help="Clone even if the source group's consumers are online.")
@_json_option
def clone_group_offset(src: str, dest: str, topic: str, offline: bool, as_json: bool) -> None:
    """Copy a group's committed offsets of a topic to another group (CLONE_GROUP_OFFSET)."""
    run(op_clone_group_offset,
        lambda d: f"clone group offset success. srcGroup[{d['srcGroup']}], destGroup=[{d['destGroup']}], "
                  f"topic[{d['topic']}]",
        as_json, src=src, dest=dest, topic=topic, offline=offline)


def _clean_command(name: str, doc: str) -> None:
    @admin.command(name, help=doc)
    @click.option("-b", "--broker", help="Broker address H:P.")
    @click.option("-c", "--cluster", help="Every master of this cluster.")
    @_json_option
    def command(broker: str | None, cluster: str | None, as_json: bool) -> None:
        if broker and cluster:
            raise click.UsageError("give -b broker address, -c cluster, or neither (every master)")
        run(op_clean, lambda d: "success", as_json, broker=broker, cluster=cluster, what=name)


_clean_command("cleanExpiredCQ", "Delete ConsumeQueues whose messages the CommitLog no longer holds.")
_clean_command("cleanUnusedTopic", "Delete ConsumeQueues of topics no longer in the broker's topic table.")


@admin.command("consumerStatus")
@click.option("-g", "--group", required=True)
@click.option("-i", "--client-id", default=None, help="Only this client.")
@click.option("-s", "--jstack", is_flag=True, help="Ask the clients for their thread stacks.")
@_json_option
def consumer_status(group: str, client_id: str | None, jstack: bool, as_json: bool) -> None:
    """Running info of the group's live clients, asked through the broker (GET_CONSUMER_RUNNING_INFO)."""
    run(op_consumer_status, _render_consumer_status, as_json, group=group, client_id=client_id, jstack=jstack)


@admin.command("brokerConsumeStats")
@click.option("-b", "--broker", required=True, help="Broker address H:P.")
@click.option("-o", "--order", is_flag=True, help="Only order topics.")
@_json_option
def broker_consume_stats(broker: str, order: bool, as_json: bool) -> None:
    """Every group's progress on one broker (GET_BROKER_CONSUME_STATS)."""
    run(op_broker_consume_stats, _render_broker_consume_stats, as_json, broker=broker, order=order)



@admin.command("queryCq")
@click.option("-t", "--topic", required=True)
@click.option("-q", "--queue", "queue_id", type=click.IntRange(0), required=True)
@click.option("-i", "--index", type=click.IntRange(0), required=True, help="Start queue index.")
@click.option("-c", "--count", type=click.IntRange(1, 256), default=10, show_default=True)
@click.option("-b", "--broker", default=None, help="Broker address (default: the topic's first master).")
@click.option("-g", "--consumer", "group", default=None, help="Consumer group (shows its subscription).")
@_json_option
def query_cq(topic: str, queue_id: int, index: int, count: int, broker: str | None, group: str | None,
             as_json: bool) -> None:
    """Raw ConsumeQueue entries of one queue (QUERY_CONSUME_QUEUE)."""
    run(op_query_cq, _render_query_cq, as_json, topic=topic, queue_id=queue_id, index=index, count=count,
        broker=broker, group=group)


@admin.command("producer")
@click.option("-b", "--broker", required=True, help="Broker address H:P.")
@_json_option
def producer(broker: str, as_json: bool) -> None:
    """Producer instances known to a broker (GET_ALL_PRODUCER_INFO)."""
    run(op_producer, _render_producer, as_json, broker=broker)


@admin.command("statsAll")
@click.option("-a", "--active-topic", "active", is_flag=True, help="Only topics with traffic in the last 24 h.")
@click.option("-t", "--topic", default=None, help="Only this topic.")
@_json_option
def stats_all(active: bool, topic: str | None, as_json: bool) -> None:
    """Per topic and consumer group: accumulation, TPS and 24-hour counts (VIEW_BROKER_STATS_DATA)."""
    run(op_stats_all, _render_stats_all, as_json, topic=topic, active=active)


async def op_kv(s: Session, *, namespace: str, key: str, value: str | None) -> dict[str, Any]:
    """PUT_KV_CONFIG / DELETE_KV_CONFIG on every name server (mqadmin does the same)."""
    if value is None:
        await s.ns.delete_kv(namespace, key)
    else:
        await s.ns.put_kv(namespace, key, value)
    return {"namespace": namespace, "key": key, "value": value, "namesrvs": list(s.ns.addrs)}


@admin.command("updateKvConfig")
@click.option("-s", "--namespace", required=True)
@click.option("-k", "--key", required=True)
@click.option("-v", "--value", required=True)
@_json_option
def update_kv_config(namespace: str, key: str, value: str, as_json: bool) -> None:
    """Create or update a KV config entry on every name server (persisted in kvConfig.json)."""
    run(op_kv, lambda d: "create or update kv config to namespace success.", as_json, namespace=namespace,
        key=key, value=value)


@admin.command("deleteKvConfig")
@click.option("-s", "--namespace", required=True)
@click.option("-k", "--key", required=True)
@_json_option
def delete_kv_config(namespace: str, key: str, as_json: bool) -> None:
    """Delete a KV config entry on every name server."""
    run(op_kv, lambda d: "delete kv config from namespace success.", as_json, namespace=namespace, key=key,
        value=None)


async def op_consumer_config(s: Session, *, group: str) -> dict[str, Any]:
    info = await s.ns.cluster_info()
    cluster_of = {b: c for c, names in (info.get("clusterAddrTable") or {}).items() for b in names}
    configs = []
    for name, addr in (await _all_masters(s)).items():
        cfg = (await subscription_groups(s.rc, addr, s.admin.timeout_s)).get(group)
        if cfg is not None:
            configs.append({"clusterName": cluster_of.get(name), "brokerName": name, "config": cfg})
    return {"group": group, "configs": configs}


def _render_consumer_config(d: dict[str, Any]) -> str:
    out = []
    for c in d["configs"]:
        out.append(f"============================={c['clusterName']}:{c['brokerName']}=============================")
        out += [f"{k:<40s}=  {'' if v is None else (str(v).lower() if isinstance(v, bool) else v)}"
                for k, v in c["config"].items()]
    return "\n".join(out)


@admin.command("getConsumerConfig")
@click.option("-g", "--group", required=True)
@_json_option
def get_consumer_config(group: str, as_json: bool) -> None:
    """The subscription group's config on every master that has it."""
    run(op_consumer_config, _render_consumer_config, as_json, group=group)
