"""Kafka authorization: every route wrapped by the check Kafka's broker makes for that API.

Theory of operation
-------------------
With ``kafkaAclEnable`` each route is replaced by its API's adapter (the ``authz`` field of its record in
``rokka.gateway.kafka.apis``: one of the functions below, the record cannot be declared without one) that asks the ACLs
(``rokka.gateway.kafka.acls``) what Kafka's KafkaApis asks, and answers as Kafka does: the parts of a
request that are not allowed get TOPIC_AUTHORIZATION_FAILED / GROUP_AUTHORIZATION_FAILED /
TRANSACTIONAL_ID_AUTHORIZATION_FAILED / CLUSTER_AUTHORIZATION_FAILED in their place of the response,
the handler sees only the rest (or is not called), and a request whose refusal has a top-level
error code gets it.  Metadata and the list APIs leave out what the principal may not DESCRIBE.
``super_only`` refuses an API to everyone but the super users; ``anyone`` (ApiVersions, SASL) checks nothing.

Views (``rokka.compat.views``) read and write their source topic, so a check of READ, WRITE,
DESCRIBE or DELETE (DeleteRecords; DeleteTopics only drops the view) on a view also checks the same
operation on its source: rights on a view's name alone never reach the source.  Creating a view
(CreateTopics with ``rokka.view.topic``) needs READ on the source besides CREATE, and AlterConfigs
naming ``rokka.view.topic`` needs READ on the topic it names.

Authorized operations (KIP-430): when Metadata, DescribeCluster or DescribeGroups ask for them,
the answer carries the bit field of what the principal may do with each topic / the cluster /
each group (``acls.authorized_operations``), 0 for the cluster without cluster DESCRIBE.

The principal is ``User:<SASL user>``, else ``User:<client certificate subject>`` (TLS), else
``User:ANONYMOUS``; the host is the peer address.  Refusals are logged (``kafka.authz_denied``),
except the silent filtering of listings.

What each API needs (resource: operation): Produce topic WRITE (+ transactional id WRITE);
Fetch topic READ; ListOffsets, OffsetForLeaderEpoch, Metadata topic DESCRIBE (auto-creation also
needs CREATE on the cluster or the topic); FindCoordinator group / transactional id DESCRIBE;
JoinGroup, SyncGroup, Heartbeat, LeaveGroup group READ; OffsetCommit group READ + topic READ;
OffsetFetch group DESCRIBE + topic DESCRIBE (v0/v1 have no top-level error code: a refused
group answers GROUP_AUTHORIZATION_FAILED in every requested partition); DescribeGroups group
DESCRIBE; ListGroups cluster DESCRIBE or each group DESCRIBE; DeleteGroups group DELETE;
OffsetDelete group DELETE + topic READ;
CreateTopics cluster or topic CREATE; DeleteTopics, DeleteRecords topic DELETE; CreatePartitions
topic ALTER; DescribeConfigs / AlterConfigs / IncrementalAlterConfigs topic or cluster
DESCRIBE_CONFIGS / ALTER_CONFIGS; InitProducerId transactional id WRITE, or for an idempotent
producer cluster IDEMPOTENT_WRITE or WRITE on some topic; AddPartitionsToTxn, AddOffsetsToTxn,
EndTxn, TxnOffsetCommit transactional id WRITE (+ topic WRITE / group READ / topic READ);
DescribeProducers topic READ; DescribeTransactions / ListTransactions transactional id DESCRIBE;
DescribeAcls, DescribeUserScramCredentials cluster DESCRIBE; CreateAcls, DeleteAcls,
AlterUserScramCredentials cluster ALTER; DescribeCluster anyone (its authorized operations need
cluster DESCRIBE).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, TypeVar

import structlog
from rokka.compat.views import CONFIG_TOPIC
from rokka.gateway.kafka.acls import AUTH_OPS_NOT_REQUESTED, CLUSTER_NAME, AclStore, Op, Res, authorized_operations
from rokka.gateway.kafka.codec import Struct
from rokka.gateway.kafka.context import Handler, KafkaRequestContext
from rokka.gateway.kafka.errors import ErrorCode as E
from rokka.gateway.kafka.errors import KafkaError
from rokka.gateway.kafka.sasl import SESSION

__all__ = ["Authz", "principal_of"]

log = structlog.get_logger(__name__)

TAF, GAF, CAF = E.TOPIC_AUTHORIZATION_FAILED, E.GROUP_AUTHORIZATION_FAILED, E.CLUSTER_AUTHORIZATION_FAILED
OP_NOT_ATTEMPTED, TXAF = E.OPERATION_NOT_ATTEMPTED, E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
T = TypeVar("T")
#: Operations on a view that act on its source topic as well (reading, writing, its offsets and layout,
#: DeleteRecords); DELETE in DeleteTopics only drops the view.
VIEW_SOURCE_OPS = frozenset({Op.READ, Op.WRITE, Op.DESCRIBE, Op.DELETE})


def _s(out: Any) -> Any:
    """A handler's answer as a Struct (handlers may answer a dict; nested entries may stay dicts)."""
    return Struct(**out) if isinstance(out, dict) else out


def _a(x: Any, name: str) -> Any:
    """Field ``name`` of a Struct or dict entry."""
    return x.get(name) if isinstance(x, dict) else getattr(x, name, None)


def _set(x: Any, name: str, value: Any) -> None:
    if isinstance(x, dict):
        x[name] = value
    else:
        setattr(x, name, value)


def view_source(configs: Iterable[Any] | None) -> str | None:
    """The source topic a CreateTopics / AlterConfigs config list names with ``rokka.view.topic``."""
    for c in configs or ():
        if _a(c, "name") == CONFIG_TOPIC:
            return str(_a(c, "value") or "")
    return None


def principal_of(ctx: KafkaRequestContext) -> str:
    sasl = ctx.conn_state.get(SESSION)
    if sasl is not None and sasl.principal:
        return str(sasl.principal)                      # "User:<name>"
    if ctx.conn_state.get("tls_principal"):
        return f"User:{ctx.conn_state['tls_principal']}"
    return "User:ANONYMOUS"


class Authz:
    """The ACL decisions for one broker; ``views`` (a ``ViewRegistry``) maps a view to its source."""

    def __init__(self, store: AclStore, views: Any = None) -> None:
        self.store = store
        self.views = views

    def source_of(self, name: str) -> str | None:
        view = self.views.get(name) if self.views is not None else None
        return None if view is None else str(view.topic)

    def ok(self, ctx: KafkaRequestContext, rtype: int, name: str | None, op: int, *, quiet: bool = False,
           through_view: bool = True) -> bool:
        """Whether the principal may ``op`` the resource (refusals logged unless ``quiet``); on a view,
        the same right on its source topic is needed too unless ``through_view`` is False."""
        principal = principal_of(ctx)
        allowed = name is not None and self.store.allowed(principal, ctx.peer[0], rtype, name, op)
        through = through_view and rtype == Res.TOPIC and op in VIEW_SOURCE_OPS
        source = self.source_of(name) if allowed and through and name else None
        if source is not None:
            allowed = self.store.allowed(principal, ctx.peer[0], Res.TOPIC, source, op)
        if not allowed and not quiet:
            log.info("kafka.authz_denied", principal=principal, host=ctx.peer[0], resource_type=rtype,
                     resource=name, operation=op, api=ctx.api_key, **({"view_source": source} if source else {}))
        return allowed

    def operations(self, ctx: KafkaRequestContext, rtype: int, name: str) -> int:
        """KIP-430's bit field of what the principal may do with the resource."""
        return authorized_operations(rtype, lambda op: self.ok(ctx, rtype, name, op, quiet=True))

    def split(self, ctx: KafkaRequestContext, items: Iterable[T], name: Callable[[T], str | None], rtype: int,
              op: int, *, through_view: bool = True) -> tuple[list[T], list[T]]:
        kept: list[T] = []
        denied: list[T] = []
        for it in items or ():
            (kept if self.ok(ctx, rtype, name(it), op, through_view=through_view) else denied).append(it)
        return kept, denied

    def cluster(self, ctx: KafkaRequestContext, op: int, *, quiet: bool = False) -> bool:
        return self.ok(ctx, Res.CLUSTER, CLUSTER_NAME, op, quiet=quiet)


async def anyone(az: Authz, h: Handler, ctx: KafkaRequestContext, body: Struct) -> Any:
    """No check (the APIs a client needs before it has a principal: ApiVersions, SASL)."""
    return await h(ctx, body)


async def super_only(az: Authz, h: Handler, ctx: KafkaRequestContext, body: Struct) -> Any:
    if principal_of(ctx) not in az.store.super_users:
        log.info("kafka.authz_denied", principal=principal_of(ctx), api=ctx.api_key, reason="super users only")
        raise KafkaError(CAF, "only super users may use this API")
    return await h(ctx, body)


async def _filtered(az: Authz, h: Handler, ctx: KafkaRequestContext, body: Struct, *, field: str,
                    name: Callable[[Any], str | None], rtype: int, op: int, answer: str,
                    refused: Callable[[Any], Struct], empty: dict[str, Any] | None = None,
                    through_view: bool = True) -> Any:
    """The usual adapter: the items of ``body.<field>`` whose resource does not allow ``op`` are taken
    out; the handler answers for the rest (or is not called when none is left: ``empty`` + an empty
    ``answer`` list), and each refused item gets ``refused(item)`` appended to the ``answer`` list."""
    kept, denied = az.split(ctx, getattr(body, field), name, rtype, op, through_view=through_view)
    setattr(body, field, kept)
    out = _s(await h(ctx, body)) if kept else Struct(throttle_time_ms=0, **(empty or {}), **{answer: []})
    setattr(out, answer, list(getattr(out, answer)) + [refused(x) for x in denied])
    return out


def _topic_parts(t: Any, code: int, topic_field: str = "name", index: str = "partition_index",
                 **fields: Any) -> Struct:
    """A refused topic's entry: every requested partition with ``code`` (and ``fields``)."""
    return Struct(**{topic_field: getattr(t, topic_field)}, partitions=[
        Struct(**{index: getattr(p, index)}, error_code=code, **fields) for p in t.partitions])


# -- data plane ------------------------------------------------------------------------------------

async def produce(az: Authz, h: Handler, ctx: KafkaRequestContext, body: Struct) -> Any:
    txn_ok = body.transactional_id is None or az.ok(ctx, Res.TRANSACTIONAL_ID, body.transactional_id, Op.WRITE)
    if txn_ok:
        kept, denied = az.split(ctx, body.topic_data, lambda t: t.name, Res.TOPIC, Op.WRITE)
    else:
        kept, denied = [], list(body.topic_data)
    body.topic_data = kept
    out = _s(await h(ctx, body)) if kept else (None if body.acks == 0 else Struct(responses=[], throttle_time_ms=0))
    if out is None:
        return None
    code = TAF if txn_ok else TXAF
    out.responses = list(out.responses) + [Struct(name=t.name, partition_responses=[Struct(
        index=p.index, error_code=code, base_offset=-1, log_append_time_ms=-1, log_start_offset=-1,
        record_errors=[], error_message=None) for p in t.partition_data]) for t in denied]
    return out


async def fetch(az: Authz, h: Handler, ctx: KafkaRequestContext, body: Struct) -> Any:
    return await _filtered(
        az, h, ctx, body, field="topics", name=lambda t: t.topic, rtype=Res.TOPIC, op=Op.READ, answer="responses",
        empty={"error_code": 0, "session_id": 0},
        refused=lambda t: Struct(topic=t.topic, partitions=[Struct(
            partition_index=p.partition, error_code=TAF, high_watermark=-1, last_stable_offset=-1,
            log_start_offset=-1, aborted_transactions=None, preferred_read_replica=-1, records=None)
            for p in t.partitions]))


async def list_offsets(az: Authz, h: Handler, ctx: KafkaRequestContext, body: Struct) -> Any:
    return await _filtered(az, h, ctx, body, field="topics", name=lambda t: t.name, rtype=Res.TOPIC, op=Op.DESCRIBE,
                           answer="topics",
                           refused=lambda t: _topic_parts(t, TAF, timestamp=-1, offset=-1, leader_epoch=-1))


async def offset_for_leader_epoch(az: Authz, h: Handler, ctx: KafkaRequestContext, body: Struct) -> Any:
    return await _filtered(az, h, ctx, body, field="topics", name=lambda t: t.topic, rtype=Res.TOPIC, op=Op.DESCRIBE,
                           answer="topics", refused=lambda t: _topic_parts(t, TAF, "topic", "partition",
                                                                         leader_epoch=-1, end_offset=-1))


async def metadata(az: Authz, h: Handler, ctx: KafkaRequestContext, body: Struct) -> Any:
    denied: list[Any] = []
    if body.topics is not None:
        kept, denied = az.split(ctx, body.topics, lambda t: t.name, Res.TOPIC, Op.DESCRIBE)
        if body.allow_auto_topic_creation and not (az.cluster(ctx, Op.CREATE, quiet=True) or all(
                az.ok(ctx, Res.TOPIC, t.name, Op.CREATE, quiet=True) for t in kept)):
            body.allow_auto_topic_creation = False
        if denied and not kept and ctx.api_version == 0:
            body.topics = [Struct(name="", topic_id=None)]      # v0: an empty list would mean every topic
        else:
            body.topics = kept
    out = _s(await h(ctx, body))
    out.topics = [t for t in out.topics if _a(t, 'name') and az.ok(ctx, Res.TOPIC, _a(t, 'name'), Op.DESCRIBE,
                                                                     quiet=True)]
    if getattr(body, "include_topic_authorized_operations", False):
        for t in out.topics:
            _set(t, "topic_authorized_operations", az.operations(ctx, Res.TOPIC, _a(t, "name")))
    if ctx.api_version <= 10 and getattr(body, "include_cluster_authorized_operations", False):
        out.cluster_authorized_operations = _cluster_operations(az, ctx)
    out.topics += [Struct(error_code=TAF, name=t.name, is_internal=False, partitions=[],
                          topic_authorized_operations=AUTH_OPS_NOT_REQUESTED) for t in denied]
    return out


def _cluster_operations(az: Authz, ctx: KafkaRequestContext) -> int:
    """The cluster's authorized operations; 0 without cluster DESCRIBE (as Kafka)."""
    return az.operations(ctx, Res.CLUSTER, CLUSTER_NAME) if az.cluster(ctx, Op.DESCRIBE, quiet=True) else 0


async def describe_cluster(az: Authz, h: Handler, ctx: KafkaRequestContext, body: Struct) -> Any:
    out = _s(await h(ctx, body))
    if body.include_cluster_authorized_operations:
        out.cluster_authorized_operations = _cluster_operations(az, ctx)
    return out


# -- groups ----------------------------------------------------------------------------------------

async def group_read(az: Authz, h: Handler, ctx: KafkaRequestContext, body: Struct) -> Any:
    if not az.ok(ctx, Res.GROUP, body.group_id, Op.READ):
        raise KafkaError(GAF, f"not authorized to use group {body.group_id}")
    return await h(ctx, body)


async def find_coordinator(az: Authz, h: Handler, ctx: KafkaRequestContext, body: Struct) -> Any:
    rtype, code = (Res.TRANSACTIONAL_ID, TXAF) if body.key_type == 1 else (Res.GROUP, GAF)
    if ctx.api_version < 4:
        if not az.ok(ctx, rtype, body.key, Op.DESCRIBE):
            raise KafkaError(code)
        return await h(ctx, body)
    return await _filtered(az, h, ctx, body, field="coordinator_keys", name=lambda k: k, rtype=rtype, op=Op.DESCRIBE,
                           answer="coordinators", refused=lambda k: Struct(
                               key=k, node_id=-1, host="", port=-1, error_code=code, error_message="not authorized"))


async def offset_commit(az: Authz, h: Handler, ctx: KafkaRequestContext, body: Struct) -> Any:
    if not az.ok(ctx, Res.GROUP, body.group_id, Op.READ):
        return Struct(throttle_time_ms=0, topics=[_topic_parts(t, GAF) for t in body.topics])
    return await _filtered(az, h, ctx, body, field="topics", name=lambda t: t.name, rtype=Res.TOPIC, op=Op.READ,
                           answer="topics", refused=lambda t: _topic_parts(t, TAF))


def _fetched(az: Authz, ctx: KafkaRequestContext,
             requested: list[Any] | None) -> tuple[list[Any] | None, Callable[[list[Any]], list[Any]]]:
    """OffsetFetch topics: (what the handler may see, how to complete what it answered)."""
    denied: list[Any] = []
    kept = requested
    if requested is not None:
        kept, denied = az.split(ctx, requested, lambda t: t.name, Res.TOPIC, Op.DESCRIBE)

    def complete(topics: list[Any]) -> list[Any]:
        shown = [t for t in topics if az.ok(ctx, Res.TOPIC, _a(t, 'name'), Op.DESCRIBE, quiet=True)]
        return shown + [Struct(name=t.name, partitions=[Struct(
            partition_index=i, committed_offset=-1, committed_leader_epoch=-1, metadata="", error_code=TAF)
            for i in t.partition_indexes]) for t in denied]
    return kept, complete


async def offset_fetch(az: Authz, h: Handler, ctx: KafkaRequestContext, body: Struct) -> Any:
    if ctx.api_version < 8:
        if not az.ok(ctx, Res.GROUP, body.group_id, Op.DESCRIBE):
            if ctx.api_version >= 2:
                raise KafkaError(GAF)
            return Struct(throttle_time_ms=0, error_code=GAF, topics=[Struct(name=t.name, partitions=[Struct(
                partition_index=i, committed_offset=-1, committed_leader_epoch=-1, metadata="", error_code=GAF)
                for i in t.partition_indexes]) for t in body.topics or []])     # v0/v1: no top-level code
        body.topics, complete = _fetched(az, ctx, body.topics)
        out = _s(await h(ctx, body))
        out.topics = complete(list(out.topics))
        return out
    kept, denied = az.split(ctx, body.groups, lambda g: g.group_id, Res.GROUP, Op.DESCRIBE)
    completions = {}
    for g in kept:
        g.topics, completions[g.group_id] = _fetched(az, ctx, g.topics)
    body.groups = kept
    out = _s(await h(ctx, body)) if kept else Struct(throttle_time_ms=0, groups=[])
    groups = []
    for g in out.groups:
        gid = _a(g, "group_id")
        if gid in completions:
            g = Struct(**g) if isinstance(g, dict) else g
            g.topics = completions[gid](list(g.topics or []))
        groups.append(g)
    out.groups = groups + [Struct(group_id=g.group_id, topics=[], error_code=GAF) for g in denied]
    return out


async def describe_groups(az: Authz, h: Handler, ctx: KafkaRequestContext, body: Struct) -> Any:
    out = await _filtered(az, h, ctx, body, field="groups", name=lambda g: g, rtype=Res.GROUP, op=Op.DESCRIBE,
                          answer="groups", refused=lambda g: Struct(
                              error_code=GAF, group_id=g, group_state="", protocol_type="", protocol_data="",
                              members=[], authorized_operations=AUTH_OPS_NOT_REQUESTED))
    if getattr(body, "include_authorized_operations", False):
        for g in out.groups:
            if _a(g, "error_code") != GAF:
                _set(g, "authorized_operations", az.operations(ctx, Res.GROUP, _a(g, "group_id")))
    return out


async def list_groups(az: Authz, h: Handler, ctx: KafkaRequestContext, body: Struct) -> Any:
    out = _s(await h(ctx, body))
    if not az.cluster(ctx, Op.DESCRIBE, quiet=True):
        out.groups = [g for g in out.groups if az.ok(ctx, Res.GROUP, _a(g, 'group_id'), Op.DESCRIBE, quiet=True)]
    return out


async def delete_groups(az: Authz, h: Handler, ctx: KafkaRequestContext, body: Struct) -> Any:
    return await _filtered(az, h, ctx, body, field="groups_names", name=lambda g: g, rtype=Res.GROUP, op=Op.DELETE,
                           answer="results", refused=lambda g: Struct(group_id=g, error_code=GAF))


async def offset_delete(az: Authz, h: Handler, ctx: KafkaRequestContext, body: Struct) -> Any:
    if not az.ok(ctx, Res.GROUP, body.group_id, Op.DELETE):
        raise KafkaError(GAF)
    return await _filtered(az, h, ctx, body, field="topics", name=lambda t: t.name, rtype=Res.TOPIC, op=Op.READ,
                           answer="topics", empty={"error_code": 0}, refused=lambda t: _topic_parts(t, TAF))


# -- admin -----------------------------------------------------------------------------------------

def _create_refused(t: Any, why: str) -> Struct:
    return Struct(name=t.name, error_code=TAF, error_message=why, num_partitions=-1, replication_factor=-1,
                  configs=None)


async def create_topics(az: Authz, h: Handler, ctx: KafkaRequestContext, body: Struct) -> Any:
    """CREATE on the cluster or the topic; a view also needs READ on its source."""
    kept, blind = [], []
    for t in body.topics:
        source = view_source(t.configs)
        (kept if source is None or az.ok(ctx, Res.TOPIC, source, Op.READ) else blind).append(t)
    body.topics = kept
    if az.cluster(ctx, Op.CREATE, quiet=True):
        out = _s(await h(ctx, body)) if kept else Struct(throttle_time_ms=0, topics=[])
    else:
        out = await _filtered(az, h, ctx, body, field="topics", name=lambda t: t.name, rtype=Res.TOPIC,
                              op=Op.CREATE, answer="topics",
                              refused=lambda t: _create_refused(t, "not authorized to create it"))
    out.topics = list(out.topics) + [_create_refused(
        t, f"not authorized to read the view's source topic {view_source(t.configs)}") for t in blind]
    return out


async def delete_topics(az: Authz, h: Handler, ctx: KafkaRequestContext, body: Struct) -> Any:
    # DELETE on a view only drops the view: its source is untouched, so only the view's name is checked
    return await _filtered(az, h, ctx, body, field="topic_names", name=lambda t: t, rtype=Res.TOPIC, op=Op.DELETE,
                           answer="responses", through_view=False,
                           refused=lambda t: Struct(name=t, error_code=TAF, error_message="not authorized"))


async def delete_records(az: Authz, h: Handler, ctx: KafkaRequestContext, body: Struct) -> Any:
    return await _filtered(az, h, ctx, body, field="topics", name=lambda t: t.name, rtype=Res.TOPIC, op=Op.DELETE,
                           answer="topics", refused=lambda t: _topic_parts(t, TAF, low_watermark=-1))


async def create_partitions(az: Authz, h: Handler, ctx: KafkaRequestContext, body: Struct) -> Any:
    return await _filtered(az, h, ctx, body, field="topics", name=lambda t: t.name, rtype=Res.TOPIC, op=Op.ALTER,
                           answer="results",
                           refused=lambda t: Struct(name=t.name, error_code=TAF, error_message="not authorized"))


def _config_resource_ok(az: Authz, ctx: KafkaRequestContext, r: Any, op: int) -> bool:
    if r.resource_type == Res.TOPIC:
        source = view_source(getattr(r, "configs", None)) if op == Op.ALTER_CONFIGS else None
        return az.ok(ctx, Res.TOPIC, r.resource_name, op) and (source is None
                                                                 or az.ok(ctx, Res.TOPIC, source, Op.READ))
    return az.cluster(ctx, op)                  # BROKER (4) and the rest: the cluster


async def configs(az: Authz, h: Handler, ctx: KafkaRequestContext, body: Struct, *, op: int, field: str) -> Any:
    kept, denied = [], []
    for r in body.resources:
        (kept if _config_resource_ok(az, ctx, r, op) else denied).append(r)
    body.resources = kept
    out = _s(await h(ctx, body)) if kept else Struct(throttle_time_ms=0, **{field: []})
    setattr(out, field, list(getattr(out, field)) + [Struct(
        error_code=TAF if r.resource_type == Res.TOPIC else CAF, error_message="not authorized",
        resource_type=r.resource_type, resource_name=r.resource_name, configs=[]) for r in denied])
    return out


# -- transactions ----------------------------------------------------------------------------------

async def init_producer_id(az: Authz, h: Handler, ctx: KafkaRequestContext, body: Struct) -> Any:
    if body.transactional_id is not None:
        if not az.ok(ctx, Res.TRANSACTIONAL_ID, body.transactional_id, Op.WRITE):
            raise KafkaError(TXAF)
    elif not (az.cluster(ctx, Op.IDEMPOTENT_WRITE, quiet=True)
              or az.store.allowed_anywhere(principal_of(ctx), ctx.peer[0], Res.TOPIC, Op.WRITE)):
        log.info("kafka.authz_denied", principal=principal_of(ctx), api=ctx.api_key, reason="idempotent write")
        raise KafkaError(CAF)
    return await h(ctx, body)


async def txn_write(az: Authz, h: Handler, ctx: KafkaRequestContext, body: Struct) -> Any:
    """EndTxn, AddOffsetsToTxn (+ group READ): a top-level error code."""
    if not az.ok(ctx, Res.TRANSACTIONAL_ID, body.transactional_id, Op.WRITE):
        raise KafkaError(TXAF)
    if getattr(body, "group_id", None) is not None and not az.ok(ctx, Res.GROUP, body.group_id, Op.READ):
        raise KafkaError(GAF)
    return await h(ctx, body)


async def add_partitions_to_txn(az: Authz, h: Handler, ctx: KafkaRequestContext, body: Struct) -> Any:
    topics = body.v3_and_below_topics
    if not az.ok(ctx, Res.TRANSACTIONAL_ID, body.v3_and_below_transactional_id, Op.WRITE):
        codes = {t.name: TXAF for t in topics}
    else:
        _, denied = az.split(ctx, topics, lambda t: t.name, Res.TOPIC, Op.WRITE)
        if not denied:
            return await h(ctx, body)
        codes = {t.name: OP_NOT_ATTEMPTED for t in topics} | {t.name: TAF for t in denied}
    return Struct(throttle_time_ms=0, results_by_topic_v3_and_below=[Struct(name=t.name, results_by_partition=[
        Struct(partition_index=p, partition_error_code=codes[t.name]) for p in t.partitions]) for t in topics])


async def txn_offset_commit(az: Authz, h: Handler, ctx: KafkaRequestContext, body: Struct) -> Any:
    if not az.ok(ctx, Res.TRANSACTIONAL_ID, body.transactional_id, Op.WRITE):
        return Struct(throttle_time_ms=0, topics=[_topic_parts(t, TXAF) for t in body.topics])
    if not az.ok(ctx, Res.GROUP, body.group_id, Op.READ):
        return Struct(throttle_time_ms=0, topics=[_topic_parts(t, GAF) for t in body.topics])
    return await _filtered(az, h, ctx, body, field="topics", name=lambda t: t.name, rtype=Res.TOPIC, op=Op.READ,
                           answer="topics", refused=lambda t: _topic_parts(t, TAF))


async def describe_producers(az: Authz, h: Handler, ctx: KafkaRequestContext, body: Struct) -> Any:
    return await _filtered(az, h, ctx, body, field="topics", name=lambda t: t.name, rtype=Res.TOPIC, op=Op.READ,
                           answer="topics", refused=lambda t: Struct(name=t.name, partitions=[Struct(
                               partition_index=i, error_code=TAF, error_message=None, active_producers=[])
                               for i in t.partition_indexes]))


async def describe_transactions(az: Authz, h: Handler, ctx: KafkaRequestContext, body: Struct) -> Any:
    return await _filtered(az, h, ctx, body, field="transactional_ids", name=lambda t: t, rtype=Res.TRANSACTIONAL_ID,
                           op=Op.DESCRIBE, answer="transaction_states", refused=lambda t: Struct(
                               error_code=TXAF, transactional_id=t, transaction_state="", transaction_timeout_ms=0,
                               transaction_start_time_ms=-1, producer_id=-1, producer_epoch=-1, topics=[]))


async def list_transactions(az: Authz, h: Handler, ctx: KafkaRequestContext, body: Struct) -> Any:
    out = _s(await h(ctx, body))
    out.transaction_states = [s for s in out.transaction_states
                              if az.ok(ctx, Res.TRANSACTIONAL_ID, _a(s, "transactional_id"), Op.DESCRIBE, quiet=True)]
    return out


# -- ACL APIs and the cluster ------------------------------------------------------------------------

async def cluster_op(az: Authz, h: Handler, ctx: KafkaRequestContext, body: Struct, *, op: int,
                      refused: Callable[[Struct], Struct]) -> Any:
    if not az.cluster(ctx, op):
        return refused(body)
    return await h(ctx, body)


def describe_acls_refused(body: Struct) -> Struct:
    raise KafkaError(CAF, "not authorized to describe the cluster's security settings")


def create_acls_refused(body: Struct) -> Struct:
    return Struct(throttle_time_ms=0, results=[Struct(error_code=CAF, error_message="not authorized to alter ACLs")
                                               for _ in body.creations])


def alter_users_refused(body: Struct) -> Struct:
    users = dict.fromkeys([d.name for d in body.deletions] + [u.name for u in body.upsertions])
    return Struct(throttle_time_ms=0, results=[Struct(user=u, error_code=CAF, error_message="not authorized")
                                               for u in users])


def delete_acls_refused(body: Struct) -> Struct:
    return Struct(throttle_time_ms=0, filter_results=[Struct(
        error_code=CAF, error_message="not authorized to alter ACLs", matching_acls=[]) for _ in body.filters])
