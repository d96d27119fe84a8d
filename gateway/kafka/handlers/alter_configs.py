"""AlterConfigs (33) and IncrementalAlterConfigs (44): change what rokka can change per topic.

Theory of operation
-------------------
The per-topic configs rokka keeps (``topic_configs.APPLIED``: retention.ms, retention.bytes,
max.message.bytes, message.timestamp.type, min.insync.replicas, segment.bytes, segment.ms,
cleanup.policy, delete.retention.ms, min.compaction.lag.ms; kept in ``rokka.core.topic_retention``)
can be set, reset (AlterConfigs without them, IncrementalAlterConfigs DELETE, or -1 for the
retentions) and changed at any time; turning ``compact`` on compacts the topic from the next
retention pass on, turning it off stops compacting (holes already made stay).  Every config a
request names is checked by ``topic_configs.alter_refusal``: any other config rokka does not keep is
refused with INVALID_CONFIG and the reason, and a resource is changed only when all its configs pass
(as Kafka validates a resource before applying it).
``validate_only`` checks without changing.

AlterConfigs replaces a topic's whole config set, so the kept configs a request leaves out are reset;
IncrementalAlterConfigs SETs or DELETEs single names (APPEND / SUBTRACT apply to list configs only:
INVALID_CONFIG).  Broker resources are refused (rokka's broker settings come from broker.conf and
are not dynamic), other resource types are INVALID_REQUEST.  In a cluster a topic with partitions
on other brokers is refused: each broker keeps its own retention table, and a client sends a topic
AlterConfigs to one broker only.
"""

from __future__ import annotations

from collections.abc import Sequence

import structlog
from rokka.gateway.kafka.codec import Struct
from rokka.gateway.kafka.context import KafkaRequestContext
from rokka.gateway.kafka.errors import ErrorCode as E
from rokka.gateway.kafka.handlers.common import KafkaEnv, resolve, topic_config
from rokka.gateway.kafka.handlers.topic_configs import (
    APPLIED,
    RETENTION_MS,
    alter_refusal,
    parse_config,
    parse_retention_ms,
)

__all__ = ["apply_topic_config", "handle_alter_configs", "handle_incremental_alter_configs", "set_topic_retention"]

log = structlog.get_logger(__name__)

RESOURCE_TOPIC, RESOURCE_BROKER = 2, 4
OP_SET, OP_DELETE, OP_APPEND, OP_SUBTRACT = 0, 1, 2, 3
Change = tuple[str, int, str | None]     # (config name, operation, value)


def set_topic_retention(env: KafkaEnv, topic: str, retention_ms: int | None) -> None:
    """Apply a topic's ``retention.ms`` (None: none of its own); warn when the store-wide retention
    will remove records first."""
    env.broker.retention.set(topic, retention_ms)
    store_ms = env.broker.cfg.file_reserved_time * 3600 * 1000
    if retention_ms is None or retention_ms > store_ms:
        log.warning("kafka.topic_retention_outlasts_store_retention", topic=topic,
                    retention_ms=retention_ms if retention_ms is not None else -1, store_wide_ms=store_ms)


def apply_topic_config(env: KafkaEnv, topic: str, name: str, value: str | None) -> None:
    """Set (``value``, already checked by ``topic_configs``) or reset (None) one kept config of a topic;
    configs rokka does not keep are left alone."""
    if name == RETENTION_MS:
        set_topic_retention(env, topic, parse_retention_ms(value))
    elif name in APPLIED:
        env.broker.retention.set_config(topic, name, parse_config(name, value))


async def handle_alter_configs(env: KafkaEnv, ctx: KafkaRequestContext, req: Struct) -> Struct:
    out = []
    for r in req.resources:
        changes = [(c.name, OP_SET, c.value) for c in r.configs]
        named = {c.name for c in r.configs}
        changes += [(n, OP_DELETE, None) for n in sorted(APPLIED - named)]  # a full replace resets the rest
        out.append(_alter(env, r.resource_type, r.resource_name, changes, req.validate_only))
    return Struct(throttle_time_ms=0, responses=out)


async def handle_incremental_alter_configs(env: KafkaEnv, ctx: KafkaRequestContext, req: Struct) -> Struct:
    out = [_alter(env, r.resource_type, r.resource_name, [(c.name, c.config_operation, c.value) for c in r.configs],
                  req.validate_only) for r in req.resources]
    return Struct(throttle_time_ms=0, responses=out)


def _alter(env: KafkaEnv, rtype: int, name: str, changes: Sequence[Change],
           validate_only: bool) -> Struct:
    code, why = _check(env, rtype, name, changes)
    if code:
        log.info("kafka.alter_configs_refused", resource_type=rtype, resource=name, error=int(code), reason=why)
        return Struct(error_code=code, error_message=why, resource_type=rtype, resource_name=name)
    if not validate_only:
        for cname, op, value in changes:
            apply_topic_config(env, name, cname, None if op == OP_DELETE else value)
    return Struct(error_code=0, error_message=None, resource_type=rtype, resource_name=name)


def _check(env: KafkaEnv, rtype: int, name: str, changes: Sequence[Change]) -> tuple[int, str | None]:
    if rtype == RESOURCE_BROKER:
        return E.INVALID_CONFIG, "rokka has no dynamic broker configs: they are read from broker.conf at start"
    if rtype != RESOURCE_TOPIC:
        return E.INVALID_REQUEST, f"resource type {rtype} cannot be altered (only topics)"
    if topic_config(env, name) is None:
        return E.UNKNOWN_TOPIC_OR_PARTITION, f"Topic {name} does not exist on this broker"
    if resolve(env, name)[0] != name or env.views.get(name) is not None:
        return E.INVALID_CONFIG, "a view's configs are fixed when it is created"
    lay = env.cluster.layout(name) if env.cluster is not None else None
    if lay is not None and any(o.broker != env.cluster.broker_name for o in lay.owners):   # type: ignore[union-attr]
        return E.INVALID_REQUEST, ("the topic has partitions on other brokers; per-topic configs are kept per "
                                   "broker in rokka: set them on each broker's own topic")
    seen: set[str] = set()
    for cname, op, value in changes:
        if cname in seen:
            return E.INVALID_REQUEST, f"config {cname} appears twice"
        seen.add(cname)
        if op in (OP_APPEND, OP_SUBTRACT):
            return E.INVALID_CONFIG, f"APPEND / SUBTRACT apply to list configs; {cname} is not one"
        if op not in (OP_SET, OP_DELETE):
            return E.INVALID_REQUEST, f"unknown config operation {op}"
        why = alter_refusal(cname, None if op == OP_DELETE else value)
        if why is not None:
            return E.INVALID_CONFIG, why
    return 0, None
