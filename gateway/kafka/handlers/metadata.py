"""Metadata, DescribeCluster and topic administration.

CreateTopics, DeleteTopics, CreatePartitions, DescribeConfigs.

Theory of operation
-------------------
A single node: every partition's leader, replica and ISR is this node, leader
epoch 0, controller = this node (never -1: kafka-python loops on -1).  A broker
set with slaves (``rokka.gateway.ha``) shows them as the partitions' other
replicas, in the ISR while caught up (``rokka.gateway.kafka.replicas``); the
brokers list names each set's leader only, and for a set whose master is down the
slave that leads its partitions meanwhile (reads only).
Metadata auto-creation (v4+ flag, always on before v4) creates the topic with
``kafka_num_partitions`` and answers it with error 0.  Topic names follow
Kafka's rules; RocketMQ system/retry/DLQ topics are hidden from listings but
retry, DLQ and schedule topics answer when asked for by their RocketMQ names.
Views (``rokka.compat.views``) are listed like topics, with their source's
partitions; CreateTopics with ``rokka.view.*`` configs creates one,
DeleteTopics removes it, DescribeConfigs shows its configs.  Other topic
configs are checked by ``topic_configs`` (compaction and unknown names
refused, the configs rokka keeps per topic applied, the rest logged as not
applied); DescribeConfigs shows every kept config, its own value or the default.

CreateTopics with a manual replica assignment (``assignments``) is checked as
Kafka's controller does (num_partitions and replication_factor must be -1, else
INVALID_REQUEST; partitions 0..n-1 once each, non-empty replica lists of one
length, no broker twice, every broker registered, else
INVALID_REPLICA_ASSIGNMENT).  rokka keeps one replica per partition (the first
listed: the others are logged and ignored) and creates a topic on the
receiving broker only, so each partition's first replica must be this broker
(INVALID_REPLICA_ASSIGNMENT for a partition led by another live broker).

In a cluster (``env.cluster``, see ``rokka.gateway.kafka.cluster``) Metadata and
DescribeCluster list every live broker that published a Kafka endpoint;
each partition's leader is the broker owning the queue (partitions of a
broker that died stay listed with leader -1 and LEADER_NOT_AVAILABLE, so
numbers never shift).  A full listing adds the topics the name servers
know.  The controller is the lowest node id.  Auto-creation and
CreateTopics spread the new topic over the live brokers (``_create_topic``,
``cluster.spread_counts``: as many leaders per broker as Kafka's round robin
gives, each broker's as one block of partitions) and answer once the name
servers route it to every owner; a topic that exists on any broker is
TOPIC_ALREADY_EXISTS.  A CreateTopics carrying kept topic configs
(retention and the like, which live per broker) creates the topic on the
receiving broker only (``kafka.create_topic_local``).  DeleteTopics
removes a topic from every broker and the name servers.
"""

from __future__ import annotations

import uuid

import structlog
from rokka.compat.views import view_from_configs
from rokka.core.topics import MAX_QUEUE_NUMS, TopicConfig, is_system_topic
from rokka.gateway.kafka.acls import Res, authorized_operations
from rokka.gateway.kafka.cluster_topics import await_route, create_spread, delete_everywhere, spread_counts
from rokka.gateway.kafka.codec import Struct
from rokka.gateway.kafka.context import KafkaRequestContext
from rokka.gateway.kafka.errors import ErrorCode as E
from rokka.gateway.kafka.handlers.alter_configs import apply_topic_config
from rokka.gateway.kafka.handlers.common import (
    LEADER_EPOCH,
    KafkaEnv,
    ensure_routes,
    invalid_topic_name,
    is_rocketmq_readable,
    kafka_topics,
    partition_count,
    refused_topic_name,
    resolve,
    topic_config,
)
from rokka.gateway.kafka.handlers.topic_configs import APPLIED, RETENTION_MS, check_topic_configs

log = structlog.get_logger(__name__)

_NS = uuid.UUID("6f1c2b7e-0000-4000-8000-726f6b6b6121")


def topic_id(name: str) -> uuid.UUID:
    """A stable per-name topic id (uuid5), so Metadata v10+ answers are consistent."""
    return uuid.uuid5(_NS, name)


Placement = tuple[int, list[int], list[int]]     # a partition's leader, replicas and ISR


def _partition(index: int, placed: Placement) -> Struct:
    leader, replicas, isr = placed
    if leader < 0:
        return Struct(error_code=E.LEADER_NOT_AVAILABLE, partition_index=index, leader_id=-1,
                      leader_epoch=LEADER_EPOCH, replica_nodes=[], isr_nodes=[], offline_replicas=[])
    return Struct(error_code=0, partition_index=index, leader_id=leader, leader_epoch=LEADER_EPOCH,
                  replica_nodes=replicas, isr_nodes=isr, offline_replicas=[])


def _placements(env: KafkaEnv, name: str, tc: TopicConfig | None) -> list[Placement]:
    """Each partition's leader node id (-1: its broker is down), replicas and ISR, in partition order
    (replicas of a broker set: ``rokka.gateway.kafka.replicas``)."""
    view = env.cluster
    if view is None:
        alone = [env.node_id]
        return [(env.node_id, alone, alone)] * partition_count(tc) if tc is not None else []
    lay = view.layout(resolve(env, name)[0])
    if lay is None:
        return []
    out: list[Placement] = []
    for o in lay.owners:
        out.extend([view.replica_set(o.broker)] * o.queues)     # a set without a live master: -1 or its slave
    return out


def _topic_entry(env: KafkaEnv, name: str, tc: TopicConfig | None, error: int) -> Struct:
    placed = _placements(env, name, tc) if tc is not None or env.cluster is not None else []
    known = bool(placed) or tc is not None
    return Struct(error_code=error, name=name, topic_id=topic_id(name) if known else uuid.UUID(int=0),
                  is_internal=False, partitions=[_partition(i, p) for i, p in enumerate(placed)])


def _brokers(env: KafkaEnv) -> list[tuple[int, str, int]]:
    if env.cluster is None:
        return [(env.node_id, env.host, env.port)]
    return [(n.node_id, n.host, n.port) for n in env.cluster.broker_nodes()]


def _controller(env: KafkaEnv) -> int:
    """The lowest node id of the live sets' leaders (never a slave standing in: it takes no writes)."""
    return min(n.node_id for n in env.cluster.nodes().values()) if env.cluster is not None else env.node_id


async def _cluster_topics(env: KafkaEnv, visible: dict[str, TopicConfig | None]) -> None:
    """Add the Kafka-visible topics other brokers own to a full listing, and refresh routes."""
    if env.cluster is None:
        return
    for name in await env.cluster.all_topics():
        if name not in visible and not is_system_topic(name) and not invalid_topic_name(name):
            visible[name] = None
    await ensure_routes(env, visible)
    for name in [n for n, tc in visible.items() if tc is None and env.cluster.layout(n) is None]:
        del visible[name]


async def handle_metadata(env: KafkaEnv, ctx: KafkaRequestContext, req: Struct) -> Struct:
    cfg = env.broker.cfg
    visible: dict[str, TopicConfig | None] = dict(kafka_topics(env))
    for view_name in env.views.all():
        if (vtc := topic_config(env, view_name)) is not None:
            visible[view_name] = vtc
    if req.topics is None or (ctx.api_version == 0 and not req.topics):
        await _cluster_topics(env, visible)
        topics = [_topic_entry(env, n, tc, 0) for n, tc in sorted(visible.items())]
    else:
        auto = (req.allow_auto_topic_creation or ctx.api_version < 4) and cfg.kafka_auto_create_topics_enable
        topics = []
        await ensure_routes(env, [t.name for t in req.topics if t.name and not invalid_topic_name(t.name)])
        for t in req.topics:
            name = t.name
            if name and is_rocketmq_readable(name):
                tc = topic_config(env, name)
                topics.append(_topic_entry(env, name, tc, 0 if tc else E.UNKNOWN_TOPIC_OR_PARTITION))
                continue
            if refused_topic_name(name, "Metadata"):
                topics.append(_topic_entry(env, name or "", None, E.INVALID_TOPIC_EXCEPTION))
                continue
            tc = visible.get(name)
            remote = tc is None and env.cluster is not None and env.cluster.layout(name) is not None
            if tc is None and not remote and auto and env.views.get(name) is None:
                tc = await _create_topic(env, name, cfg.kafka_num_partitions)
                remote = tc is None and env.cluster is not None and env.cluster.layout(name) is not None
            topics.append(_topic_entry(env, name, tc, 0 if tc or remote else E.UNKNOWN_TOPIC_OR_PARTITION))
    brokers = [Struct(node_id=n, host=h, port=p, rack=None) for n, h, p in _brokers(env)]
    out = Struct(brokers=brokers, cluster_id=env.cluster_id, controller_id=_controller(env), topics=topics)
    if getattr(req, "include_topic_authorized_operations", False):      # KIP-430 (no authorizer: all)
        for t in topics:
            t.topic_authorized_operations = authorized_operations(Res.TOPIC)
    if ctx.api_version <= 10 and getattr(req, "include_cluster_authorized_operations", False):
        out.cluster_authorized_operations = authorized_operations(Res.CLUSTER)
    return out


async def handle_describe_cluster(env: KafkaEnv, ctx: KafkaRequestContext, req: Struct) -> Struct:
    out = Struct(error_code=0, cluster_id=env.cluster_id, controller_id=_controller(env),
                 brokers=[Struct(broker_id=n, host=h, port=p, rack=None) for n, h, p in _brokers(env)])
    if req.include_cluster_authorized_operations:
        out.cluster_authorized_operations = authorized_operations(Res.CLUSTER)
    return out


async def _create_topic(env: KafkaEnv, name: str, n: int, spread: bool = True) -> TopicConfig | None:
    """Create ``name`` with ``n`` partitions: here alone, or spread over the live brokers of a cluster
    (module docstring).  This broker's TopicConfig (None when it got no partition)."""
    view = env.cluster
    if view is not None and spread and view.clustered:
        await view.refresh_brokers()        # the live brokers now, not as of the last 3 s refresh
    if view is None or not spread or len(view.nodes()) < 2:
        return env.broker.topics.ensure(name, n)
    made = await create_spread(view, name, spread_counts(name, n, view.nodes()))
    local = n - sum(made.values())
    tc = env.broker.topics.ensure(name, local) if local else None
    owners = {**made, **({view.broker_name: local} if local else {})}
    await await_route(view, name, owners)
    log.info("kafka.topic_spread", topic=name, partitions=n, owners=owners)
    return tc


async def handle_create_topics(env: KafkaEnv, ctx: KafkaRequestContext, req: Struct) -> Struct:
    results = []
    await ensure_routes(env, [t.name for t in req.topics if t.name and not invalid_topic_name(t.name)], force=True)
    for t in req.topics:
        n = env.broker.cfg.kafka_num_partitions if t.num_partitions == -1 else t.num_partitions
        err, msg = 0, None
        configs = {c.name: c.value for c in (t.configs or [])}
        refused, ignored = check_topic_configs(configs)
        try:
            view = view_from_configs(t.name, configs)
        except ValueError as exc:
            view, err, msg = None, E.INVALID_CONFIG, str(exc)
        if refused is not None and not err:
            err, msg = E.INVALID_CONFIG, refused
        if err:
            log.info("kafka.create_topic_refused", topic=t.name, error=int(err), reason=msg)
        elif (why := refused_topic_name(t.name, "CreateTopics")) is not None:
            err, msg = E.INVALID_TOPIC_EXCEPTION, why
        elif (t.name in env.broker.topics or env.views.get(t.name) is not None
              or (env.cluster is not None and env.cluster.layout(t.name) is not None)):
            err, msg = E.TOPIC_ALREADY_EXISTS, f"Topic '{t.name}' already exists."
        elif view is not None:
            source = env.broker.topics.get(view.topic)
            if source is None:
                err, msg = E.INVALID_CONFIG, f"view source topic '{view.topic}' does not exist"
            else:
                n = partition_count(source)
                if not req.validate_only:
                    env.views.put(view)
        elif t.name in env.broker.topics:
            err, msg = E.TOPIC_ALREADY_EXISTS, f"Topic '{t.name}' already exists."
        elif t.assignments:
            err, msg, n = _manual_assignment(env, t)
        elif n < 1:
            err, msg = E.INVALID_PARTITIONS, "number of partitions must be at least 1"
        elif n > MAX_QUEUE_NUMS:
            err, msg = E.INVALID_PARTITIONS, f"number of partitions must be at most {MAX_QUEUE_NUMS}"
        elif t.replication_factor not in (-1, 1):
            err, msg = E.INVALID_REPLICATION_FACTOR, "replication factor must be 1 on a single node"
        if not err and view is None and not req.validate_only:
            kept = sorted(APPLIED & configs.keys())
            if kept and env.cluster is not None and len(env.cluster.nodes()) > 1:
                log.warning("kafka.create_topic_local", topic=t.name, configs=kept,
                            reason="topic configs are kept per broker: created on the receiving broker only")
            await _create_topic(env, t.name, n, spread=not kept and not t.assignments)
            for name in APPLIED & configs.keys():
                apply_topic_config(env, t.name, name, configs[name])
            if ignored:
                log.warning("kafka.topic_configs_not_applied",
                            topic=t.name, configs=ignored)
        ok = err == 0
        results.append(Struct(name=t.name, topic_id=topic_id(t.name) if ok else uuid.UUID(int=0),
                              error_code=err, error_message=msg, num_partitions=n if ok else -1,
                              replication_factor=1 if ok else -1, configs=[] if ok else None))
    return Struct(topics=results)


def _manual_assignment(env: KafkaEnv, t: Struct) -> tuple[int, str | None, int]:
    """(error, message, partitions) for CreateTopics with a manual replica assignment (module doc)."""
    if t.replication_factor != -1:
        return E.INVALID_REQUEST, ("A manual partition assignment was specified, but replication factor was "
                                   "not set to -1."), -1
    if t.num_partitions != -1:
        return E.INVALID_REQUEST, ("A manual partition assignment was specified, but numPartitions was not "
                                   "set to -1."), -1
    if len(t.assignments) > MAX_QUEUE_NUMS:
        return E.INVALID_PARTITIONS, f"number of partitions must be at most {MAX_QUEUE_NUMS}", -1
    registered = {b[0] for b in _brokers(env)}
    by_index: dict[int, list[int]] = {}
    for a in t.assignments:
        if len(a.broker_ids or []) > MAX_QUEUE_NUMS:    # hostile lengths stop here (no broker has so many)
            return E.INVALID_REPLICA_ASSIGNMENT, (f"The manual partition assignment lists {len(a.broker_ids)} "
                                                  f"replicas, but only {len(registered)} brokers are registered."), -1
        if a.partition_index in by_index:
            return E.INVALID_REPLICA_ASSIGNMENT, f"Found multiple manual partition assignments for partition " \
                                                 f"{a.partition_index}", -1
        replicas = list(a.broker_ids or [])
        if not replicas:
            return E.INVALID_REPLICA_ASSIGNMENT, "The manual partition assignment includes an empty replica list.", -1
        if len(set(replicas)) != len(replicas):
            seen: set[int] = set()
            dup = next(r for r in replicas if r in seen or seen.add(r))
            return E.INVALID_REPLICA_ASSIGNMENT, f"The manual partition assignment includes the broker {dup} more " \
                                                 f"than once.", -1
        if (unknown := next((r for r in replicas if r not in registered), None)) is not None:
            return E.INVALID_REPLICA_ASSIGNMENT, f"The manual partition assignment includes broker {unknown}, but " \
                                                 f"no such broker is registered.", -1
        first = next(iter(by_index.values()), replicas)
        if len(replicas) != len(first):
            return E.INVALID_REPLICA_ASSIGNMENT, (
                f"The manual partition assignment includes a partition with {len(replicas)} replica(s), but this is "
                f"not consistent with previous partitions, which have {len(first)} replica(s)."), -1
        by_index[a.partition_index] = replicas
    if sorted(by_index) != list(range(len(by_index))):
        return E.INVALID_REPLICA_ASSIGNMENT, "partitions should be a consecutive 0-based integer sequence", -1
    if any(len(r) > 1 for r in by_index.values()):
        log.warning("kafka.create_topic_replicas_ignored", topic=t.name, replicas=len(first),
                    reason="rokka keeps one replica per partition, on its first listed broker")
    if (other := next((r[0] for r in by_index.values() if r[0] != env.node_id), None)) is not None:
        return E.INVALID_REPLICA_ASSIGNMENT, (
            f"rokka creates a topic on the receiving broker only: broker {other} cannot lead a partition of it "
            f"(send CreateTopics to that broker, or use 'rokka admin updateTopic -c')"), -1
    return 0, None, len(by_index)


async def handle_delete_topics(env: KafkaEnv, ctx: KafkaRequestContext, req: Struct) -> Struct:
    out = []
    view = env.cluster
    await ensure_routes(env, [n for n in req.topic_names if n and not invalid_topic_name(n)], force=True)
    for name in req.topic_names:
        elsewhere = (view is not None and view.clustered and not invalid_topic_name(name)
                     and not is_system_topic(name) and view.layout(name) is not None)
        if env.views.delete(name):
            out.append(Struct(name=name, error_code=0))
        elif name in kafka_topics(env) or elsewhere:
            if name in kafka_topics(env):
                env.broker.topics.delete(name)
                env.broker.store.delete_topic(name)
                env.broker.retention.delete(name)
            if elsewhere and view is not None:
                await delete_everywhere(view, name)
            out.append(Struct(name=name, error_code=0))
        else:
            out.append(Struct(name=name, error_code=E.UNKNOWN_TOPIC_OR_PARTITION))
    return Struct(responses=out)


async def handle_create_partitions(env: KafkaEnv, ctx: KafkaRequestContext, req: Struct) -> Struct:
    out = []
    for t in req.topics:
        tc = kafka_topics(env).get(t.name)
        err, msg = 0, None
        if tc is None:
            err, msg = E.UNKNOWN_TOPIC_OR_PARTITION, None
        elif t.count <= partition_count(tc):
            err, msg = E.INVALID_PARTITIONS, f"Topic currently has {partition_count(tc)} partitions"
        elif t.count > MAX_QUEUE_NUMS:
            err, msg = E.INVALID_PARTITIONS, f"number of partitions must be at most {MAX_QUEUE_NUMS}"
        elif t.assignments and (why := _new_partitions_assignment(env, t, partition_count(tc))) is not None:
            err, msg = E.INVALID_REPLICA_ASSIGNMENT, why
        elif not req.validate_only:
            env.broker.topics.put(TopicConfig(tc.topic_name, t.count, t.count, tc.perm, tc.topic_filter_type,
                                              tc.topic_sys_flag, tc.order))
        out.append(Struct(name=t.name, error_code=err, error_message=msg))
    return Struct(results=out)


def _new_partitions_assignment(env: KafkaEnv, t: Struct, current: int) -> str | None:
    """Why CreatePartitions' manual assignment of the new partitions is refused (None: accepted).

    Kafka's rules: one replica list per new partition, none empty, no broker twice, every broker
    registered; rokka keeps one replica per partition, on the receiving broker (as CreateTopics)."""
    if len(t.assignments) != t.count - current:
        return (f"Increasing the number of partitions by {t.count - current} but {len(t.assignments)} "
                f"assignments provided.")
    registered = {b[0] for b in _brokers(env)}
    for a in t.assignments:
        replicas = list(a.broker_ids or [])
        if not replicas:
            return "The manual partition assignment includes an empty replica list."
        if len(replicas) > MAX_QUEUE_NUMS or len(set(replicas)) != len(replicas):
            return "The manual partition assignment includes a broker more than once."
        if (unknown := next((r for r in replicas if r not in registered), None)) is not None:
            return f"The manual partition assignment includes broker {unknown}, but no such broker is registered."
        if replicas[0] != env.node_id:
            return (f"rokka adds partitions on the receiving broker only: broker {replicas[0]} cannot lead one "
                    f"(send CreatePartitions to that broker)")
    return None


RESOURCE_TOPIC, RESOURCE_BROKER = 2, 4


def _configs(env: KafkaEnv, resource_type: int, name: str = "") -> dict[str, str]:
    cfg = env.broker.cfg
    view = env.views.get(name) if resource_type == RESOURCE_TOPIC else None
    if view is not None:
        return view.configs()
    if resource_type == RESOURCE_TOPIC:
        return {"cleanup.policy": "delete", "retention.ms": str(cfg.file_reserved_time * 3600 * 1000),
                "retention.bytes": "-1", "max.message.bytes": str(cfg.max_message_size),
                "message.timestamp.type": "CreateTime", "min.insync.replicas": "1",
                "segment.bytes": str(cfg.mapped_file_size_commit_log), "segment.ms": str(7 * 24 * 3600 * 1000),
                "delete.retention.ms": "86400000", "min.compaction.lag.ms": "0"}
    return {"num.partitions": str(cfg.kafka_num_partitions),
            "auto.create.topics.enable": str(cfg.kafka_auto_create_topics_enable).lower(),
            "message.max.bytes": str(cfg.max_message_size)}


def _config_entry(env: KafkaEnv, rtype: int, resource: str, name: str, value: str) -> Struct:
    """One DescribeConfigs entry: a topic's kept configs (``topic_configs.APPLIED``) are alterable (their
    own value: source DYNAMIC_TOPIC_CONFIG); everything else is read-only, from broker.conf or rokka's
    defaults (segment.bytes shows the CommitLog's segment size)."""
    own: str | int | None = None
    alterable = rtype == RESOURCE_TOPIC and name in APPLIED and env.views.get(resource) is None
    if alterable and name == RETENTION_MS:
        own = env.broker.retention.get(resource)
    elif alterable:
        own = (env.broker.retention.configs(resource) or {}).get(name)
    return Struct(name=name, value=value if own is None else str(own), read_only=not alterable,
                  is_default=own is None, config_source=5 if own is None else 1, is_sensitive=False,
                  synonyms=[], config_type=0, documentation=None)


async def handle_describe_configs(env: KafkaEnv, ctx: KafkaRequestContext, req: Struct) -> Struct:
    results = []
    for r in req.resources:
        base = Struct(resource_type=r.resource_type, resource_name=r.resource_name, error_message=None)
        if r.resource_type == RESOURCE_TOPIC and topic_config(env, r.resource_name) is None:
            results.append(Struct(**base.__dict__, error_code=E.UNKNOWN_TOPIC_OR_PARTITION, configs=[]))
            continue
        if r.resource_type not in (RESOURCE_TOPIC, RESOURCE_BROKER):
            results.append(Struct(**base.__dict__, error_code=E.INVALID_REQUEST, configs=[]))
            continue
        wanted = r.configuration_keys
        configs = [_config_entry(env, r.resource_type, r.resource_name, k, v)
                   for k, v in _configs(env, r.resource_type, r.resource_name).items()
                   if wanted is None or k in wanted]
        results.append(Struct(**base.__dict__, error_code=0, configs=configs))
    return Struct(results=results)
