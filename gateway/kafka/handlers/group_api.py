"""Kafka group-coordination and producer-id APIs: wire structs <-> the group coordinator.

Theory of operation
-------------------
These handlers only translate.  A request of any version is turned into the
coordinator's own request type (``rokka.gateway.kafka.groups.types``), the
coordinator decides (and may park the call: JoinGroup and SyncGroup wait for
the rebalance), and the result is laid out in the shape the request's version
needs (e.g. LeaveGroup v0-v2 answers one top-level error, v3+ per member;
OffsetFetch v8 nests by group).  InitProducerId goes to the producer-state
manager; its outcomes map to Kafka codes here.  DeleteGroups and OffsetDelete
act on the shared offset table (see ``GroupCoordinator.delete_group``).

Offsets committed for a view (``rokka.compat.views``) are stored under the view's
source topic (``resolve_topic``), and answered under the name the client used.

In a multi-broker cluster (``routed`` = ``rokka.gateway.kafka.routed_offsets.RoutedOffsets``):
FindCoordinator for a group answers the broker ``ClusterView.coordinator_for``
picks (crc32 of the group over the live brokers), so clients bootstrapped on
different brokers meet in one coordinator; transactional ids stay on the
receiving broker.  OffsetCommit stores local partitions at once and then
forwards the other brokers' partitions to their owners (a failed forward
answers COORDINATOR_NOT_AVAILABLE for that partition, which clients retry);
OffsetFetch reads remote partitions from their owners first.  DeleteGroups
first asks every other broker to drop the group (DELETE_SUBSCRIPTIONGROUP with
cleanOffset), OffsetDelete forwards remote partitions as a commit of -1.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from rokka.gateway.kafka.acls import AUTH_OPS_NOT_REQUESTED, Res, authorized_operations
from rokka.gateway.kafka.context import KafkaRequestContext
from rokka.gateway.kafka.errors import ErrorCode as E
from rokka.gateway.kafka.groups.coordinator import GroupCoordinator
from rokka.gateway.kafka.groups.types import CommitOffset, JoinRequest, LeavingMember, PartitionError, SyncRequest
from rokka.gateway.kafka.producers.state import InitOutcome, ProducerStateManager

if TYPE_CHECKING:
    from rokka.gateway.kafka.routed_offsets import RoutedOffsets

COORDINATOR_NOT_AVAILABLE = E.COORDINATOR_NOT_AVAILABLE

INIT_CODES = {InitOutcome.OK: E.NONE, InitOutcome.INVALID_REQUEST: E.INVALID_REQUEST,
              InitOutcome.INVALID_TRANSACTION_TIMEOUT: E.INVALID_TRANSACTION_TIMEOUT,
              InitOutcome.PRODUCER_FENCED: E.PRODUCER_FENCED,
              InitOutcome.CONCURRENT_TRANSACTIONS: E.CONCURRENT_TRANSACTIONS}


def _find(coord: GroupCoordinator, routed: RoutedOffsets | None, key: str, key_type: int) -> Any:
    info = coord.find_coordinator(key, key_type)
    if routed is None or info.error_code or key_type != 0:
        return info
    node = routed.view.coordinator_for(key)
    return replace(info, node_id=node.node_id, host=node.host, port=node.port)


async def find_coordinator(coord: GroupCoordinator, routed: RoutedOffsets | None, ctx: KafkaRequestContext,
                           req: Any) -> dict[str, Any]:
    if ctx.api_version >= 4:
        infos = [_find(coord, routed, k, req.key_type) for k in req.coordinator_keys]
        return {"coordinators": [{"key": i.key, "node_id": i.node_id, "host": i.host, "port": i.port,
                                  "error_code": i.error_code, "error_message": None} for i in infos]}
    i = _find(coord, routed, req.key, req.key_type)
    return {"error_code": i.error_code, "error_message": None, "node_id": i.node_id, "host": i.host,
            "port": i.port}


async def join_group(coord: GroupCoordinator, ctx: KafkaRequestContext, req: Any) -> dict[str, Any]:
    result = await coord.join(JoinRequest(
        group_id=req.group_id, member_id=req.member_id, protocol_type=req.protocol_type,
        protocols=[(p.name, p.metadata) for p in req.protocols], session_timeout_ms=req.session_timeout_ms,
        rebalance_timeout_ms=req.rebalance_timeout_ms if ctx.api_version >= 1 else -1,
        group_instance_id=req.group_instance_id, client_id=ctx.client_id, client_host=f"/{ctx.peer[0]}",
        require_known_member_id=ctx.api_version >= 4))
    nullable = ctx.api_version >= 7
    return {"error_code": result.error_code, "generation_id": result.generation_id,
            "protocol_type": result.protocol_type,
            "protocol_name": result.protocol_name if (nullable or result.protocol_name is not None) else "",
            "leader": result.leader, "member_id": result.member_id,
            "members": [{"member_id": m.member_id, "group_instance_id": m.group_instance_id,
                         "metadata": m.metadata} for m in result.members]}


async def sync_group(coord: GroupCoordinator, ctx: KafkaRequestContext, req: Any) -> dict[str, Any]:
    result = await coord.sync(SyncRequest(
        group_id=req.group_id, generation_id=req.generation_id, member_id=req.member_id,
        assignments=[(a.member_id, a.assignment) for a in req.assignments],
        group_instance_id=req.group_instance_id, protocol_type=req.protocol_type,
        protocol_name=req.protocol_name))
    return {"error_code": result.error_code, "assignment": result.assignment,
            "protocol_type": result.protocol_type, "protocol_name": result.protocol_name}


async def heartbeat(coord: GroupCoordinator, ctx: KafkaRequestContext, req: Any) -> dict[str, Any]:
    return {"error_code": coord.heartbeat(req.group_id, req.generation_id, req.member_id,
                                          req.group_instance_id)}


async def leave_group(coord: GroupCoordinator, ctx: KafkaRequestContext, req: Any) -> dict[str, Any]:
    if ctx.api_version <= 2:
        result = coord.leave(req.group_id, [LeavingMember(req.member_id)])
        return {"error_code": result.single_error}
    result = coord.leave(req.group_id, [LeavingMember(m.member_id, m.group_instance_id) for m in req.members])
    return {"error_code": result.error_code,
            "members": [{"member_id": m.member_id, "group_instance_id": m.group_instance_id,
                         "error_code": m.error_code} for m in result.members]}


async def offset_commit(coord: GroupCoordinator, resolve_topic: Callable[[str], str],
                        routed: RoutedOffsets | None, ctx: KafkaRequestContext, req: Any) -> dict[str, Any]:
    names = {resolve_topic(t.name): t.name for t in req.topics}
    offsets = [CommitOffset(resolve_topic(t.name), p.partition_index, p.committed_offset, p.committed_metadata,
                            p.committed_leader_epoch) for t in req.topics for p in t.partitions]
    if routed is not None:
        await routed.view.ensure(names)
    errors = coord.offset_commit(req.group_id, req.generation_id_or_member_epoch, req.member_id, offsets,
                                 req.group_instance_id)
    return {"topics": _by_topic(await _forwarded(routed, errors), names)}


async def _forwarded(routed: RoutedOffsets | None, errors: list[PartitionError]) -> list[PartitionError]:
    """Send the other brokers' share of an offset change (queued by the call just made, with no await
    since) to their owners; a partition whose forward failed gets COORDINATOR_NOT_AVAILABLE."""
    if routed is None:
        return errors
    failed = await routed.push(routed.take_outbox())
    return [replace(e, error_code=COORDINATOR_NOT_AVAILABLE) if (e.topic, e.partition) in failed else e
            for e in errors]


def _by_topic(errors: list[PartitionError], names: dict[str, str]) -> list[dict[str, Any]]:
    """Per-partition codes grouped by topic, under the names the client used (views)."""
    by_topic: dict[str, list[dict[str, int]]] = {}
    for e in errors:
        by_topic.setdefault(names.get(e.topic, e.topic), []).append(
            {"partition_index": e.partition, "error_code": e.error_code})
    return [{"name": t, "partitions": ps} for t, ps in by_topic.items()]


async def _fetch_one(coord: GroupCoordinator, resolve_topic: Callable[[str], str],
                     routed: RoutedOffsets | None, group_id: str, topics: Any,
                     require_stable: bool) -> tuple[Any, dict[str, str]]:
    names: dict[str, str] = {}
    wanted = None
    if topics is not None:
        names = {resolve_topic(t.name): t.name for t in topics}
        wanted = [(resolve_topic(t.name), p) for t in topics for p in t.partition_indexes]
    if routed is not None:  # remote partitions' offsets, read for the synchronous call below
        await routed.prefetch(group_id, wanted)
    result = coord.offset_fetch(group_id, wanted, require_stable)
    if routed is not None:
        routed.forget()
    return result, names


def _fetched_topics(result: Any, names: dict[str, str]) -> list[dict[str, Any]]:
    by_topic: dict[str, list[dict[str, Any]]] = {}
    for p in result.partitions:
        by_topic.setdefault(names.get(p.topic, p.topic), []).append({
            "partition_index": p.partition, "committed_offset": p.offset,
            "committed_leader_epoch": p.leader_epoch, "metadata": p.metadata, "error_code": p.error_code})
    return [{"name": t, "partitions": ps} for t, ps in by_topic.items()]


async def offset_fetch(coord: GroupCoordinator, resolve_topic: Callable[[str], str],
                       routed: RoutedOffsets | None, ctx: KafkaRequestContext, req: Any) -> dict[str, Any]:
    if ctx.api_version >= 8:
        groups = []
        for g in req.groups:
            result, names = await _fetch_one(coord, resolve_topic, routed, g.group_id, g.topics,
                                             req.require_stable)
            groups.append({"group_id": g.group_id, "topics": _fetched_topics(result, names),
                           "error_code": result.error_code})
        return {"groups": groups}
    result, names = await _fetch_one(coord, resolve_topic, routed, req.group_id, req.topics,
                                     req.require_stable)
    return {"topics": _fetched_topics(result, names), "error_code": result.error_code}


async def describe_groups(coord: GroupCoordinator, ctx: KafkaRequestContext, req: Any) -> dict[str, Any]:
    ops = authorized_operations(Res.GROUP) if getattr(req, "include_authorized_operations", False) \
        else AUTH_OPS_NOT_REQUESTED         # KIP-430 without an authorizer: every group operation
    return {"groups": [{
        "error_code": g.error_code, "group_id": g.group_id, "group_state": g.state, "authorized_operations": ops,
        "protocol_type": g.protocol_type, "protocol_data": g.protocol_data,
        "members": [{"member_id": m.member_id, "group_instance_id": m.group_instance_id,
                     "client_id": m.client_id, "client_host": m.client_host, "member_metadata": m.metadata,
                     "member_assignment": m.assignment} for m in g.members]}
        for g in coord.describe(req.groups)]}


async def list_groups(coord: GroupCoordinator, ctx: KafkaRequestContext, req: Any) -> dict[str, Any]:
    groups = coord.list_groups(req.states_filter if ctx.api_version >= 4 else None)
    return {"error_code": 0, "groups": [{"group_id": g.group_id, "protocol_type": g.protocol_type,
                                         "group_state": g.state} for g in groups]}


async def delete_groups(coord: GroupCoordinator, routed: RoutedOffsets | None, ctx: KafkaRequestContext,
                        req: Any) -> dict[str, Any]:
    results = []
    for group_id in req.groups_names:
        code = coord.check_delete(group_id)
        if code == 0 and routed is not None and routed.view.clustered:
            if not await routed.delete_group_remote(group_id):
                code = COORDINATOR_NOT_AVAILABLE   # retriable; nothing deleted here yet
        if code == 0:
            code = coord.delete_group(group_id)    # checks again: the await above may have let a member in
        results.append({"group_id": group_id, "error_code": code})
    return {"results": results}


async def offset_delete(coord: GroupCoordinator, resolve_topic: Callable[[str], str],
                        routed: RoutedOffsets | None, ctx: KafkaRequestContext, req: Any) -> dict[str, Any]:
    names = {resolve_topic(t.name): t.name for t in req.topics}
    if routed is not None:
        await routed.view.ensure(names)
    error, parts = coord.delete_offsets(req.group_id, [(resolve_topic(t.name), p.partition_index)
                                                       for t in req.topics for p in t.partitions])
    return {"error_code": error, "topics": _by_topic(await _forwarded(routed, parts), names)}


async def init_producer_id(producers: ProducerStateManager, ctx: KafkaRequestContext, req: Any) -> dict[str, Any]:
    result = await producers.init_producer_id(req.transactional_id, req.transaction_timeout_ms,
                                              req.producer_id, req.producer_epoch)
    code = INIT_CODES[result.outcome]
    if code == E.PRODUCER_FENCED and ctx.api_version < 4:
        code = E.INVALID_PRODUCER_EPOCH  # before PRODUCER_FENCED existed
    return {"error_code": code, "producer_id": result.producer_id if code == 0 else -1,
            "producer_epoch": result.epoch if code == 0 else -1}
