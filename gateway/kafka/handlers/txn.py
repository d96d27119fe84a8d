"""Kafka transaction APIs: wire structs <-> ``rokka.gateway.kafka.txn.coordinator.KafkaTxnCoordinator``.

Theory of operation
-------------------
These handlers only translate (wire sheet §5.1 and §5.3).  The coordinator
decides and answers with a ``TxnOutcome``; ``CODES`` maps it to the Kafka
code.  PRODUCER_FENCED (90) becomes INVALID_PRODUCER_EPOCH (47) for the
versions that predate it (AddPartitionsToTxn/AddOffsetsToTxn/EndTxn/
TxnOffsetCommit < v2, InitProducerId < v4), as Kafka does.  An unknown
transactional id is answered with 49 INVALID_PRODUCER_ID_MAPPING, which is
what Kafka's coordinator returns for these APIs (105
TRANSACTIONAL_ID_NOT_FOUND only exists for DescribeTransactions).

InitProducerId (api 22) is wrapped here: with a transactional id, an
Ongoing transaction of that id is aborted first (synchronously, records
never become visible), then ``group_api.init_producer_id`` bumps the epoch
(fencing the old instance), then the coordinator learns the new
(pid, epoch).  While a commit/abort of the id is being completed the
answer is 51 CONCURRENT_TRANSACTIONS (the client retries).  A v3+ request
whose (producer_id, epoch) is stale goes straight to the producer-state
manager, which fences it, without touching the live transaction.

AddPartitionsToTxn: an unknown partition gets 3 and every other partition
of the request 55 OPERATION_NOT_ATTEMPTED (nothing is added).  In a cluster a
partition led by another broker (or a group coordinated there) is a share of
the transaction opened on that broker (``rokka.gateway.kafka.txn.peers``,
``rokka.gateway.kafka.txn.participants``); TxnOffsetCommit reaching a group
coordinator that holds a share is answered from the share.  FindCoordinator
for a transactional id names ``ClusterView.txn_coordinator_for`` (stable across
restarts; 15 COORDINATOR_NOT_AVAILABLE while that broker is down).
TxnOffsetCommit: the committer is validated by the group coordinator
(``validate_txn_commit``); the offsets wait in the transaction and are
applied by EndTxn(commit); their metadata and leader epochs wait in the
offset table (staged) and take effect with them.

Admin views: DescribeTransactions (105 TRANSACTIONAL_ID_NOT_FOUND for an
unknown id), ListTransactions v0-1 (v2's regular-expression filter is not
offered: Java and Python regexes differ) and DescribeProducers (producer
state of this broker's partitions; a transaction's records enter their
partition only at commit, so current_txn_start_offset is always -1).
"""

from __future__ import annotations

import time
from functools import partial
from typing import Any

import structlog
from rokka.core.topics import is_system_topic
from rokka.gateway.kafka.context import KafkaRequestContext
from rokka.gateway.kafka.errors import ErrorCode as E
from rokka.gateway.kafka.groups.coordinator import GroupCoordinator
from rokka.gateway.kafka.handlers import group_api
from rokka.gateway.kafka.handlers.common import (
    KafkaEnv,
    ensure_routes,
    has_partition,
    local_queue,
    partition_error,
    resolve,
)
from rokka.gateway.kafka.producers.state import MAX_TXN_TIMEOUT_MS, NO_PRODUCER_ID, ProducerStateManager
from rokka.gateway.kafka.routed_offsets import RoutedOffsets
from rokka.gateway.kafka.txn.coordinator import KafkaTxnCoordinator, TxnOutcome, TxnState

log = structlog.get_logger(__name__)

CODES: dict[TxnOutcome, int] = {
    TxnOutcome.OK: E.NONE,
    TxnOutcome.INVALID_TXN_STATE: E.INVALID_TXN_STATE,
    TxnOutcome.CONCURRENT_TRANSACTIONS: E.CONCURRENT_TRANSACTIONS,
    TxnOutcome.PRODUCER_FENCED: E.PRODUCER_FENCED,
    TxnOutcome.INVALID_PRODUCER_EPOCH: E.INVALID_PRODUCER_EPOCH,
    TxnOutcome.INVALID_PRODUCER_ID_MAPPING: E.INVALID_PRODUCER_ID_MAPPING,
    TxnOutcome.UNKNOWN_TRANSACTIONAL_ID: E.INVALID_PRODUCER_ID_MAPPING,
}
FENCED_SINCE = 2      # first AddPartitions/AddOffsets/EndTxn/TxnOffsetCommit version that knows 90


def code_for(outcome: TxnOutcome, api_version: int, fenced_since: int = FENCED_SINCE) -> int:
    code = CODES[outcome]
    if code == E.PRODUCER_FENCED and api_version < fenced_since:
        return int(E.INVALID_PRODUCER_EPOCH)
    return int(code)


def _log_refusal(api: str, tid: str, outcome: TxnOutcome, **kw: Any) -> None:
    if outcome is not TxnOutcome.OK:
        log.info("kafka.txn_refused", api=api, transactional_id=tid, outcome=outcome.value, **kw)


def _stale_init(producers: ProducerStateManager, req: Any) -> bool:
    """A v3+ InitProducerId naming a (pid, epoch) that is neither current nor the previous one."""
    entry = producers.transactional_entry(req.transactional_id)
    if entry is None or req.producer_id == NO_PRODUCER_ID:
        return False
    pair = (req.producer_id, req.producer_epoch)
    return pair not in ((entry.producer_id, entry.epoch), (entry.last_producer_id, entry.last_epoch))


async def init_producer_id(txns: KafkaTxnCoordinator, producers: ProducerStateManager,
                           ctx: KafkaRequestContext, req: Any) -> dict[str, Any]:
    tid = req.transactional_id
    valid = bool(tid) and 0 < req.transaction_timeout_ms <= MAX_TXN_TIMEOUT_MS
    if valid and not _stale_init(producers, req):
        outcome = await txns.before_init(tid)
        if outcome is not TxnOutcome.OK:
            _log_refusal("InitProducerId", tid, outcome)
            return {"error_code": code_for(outcome, ctx.api_version, 4), "producer_id": -1,
                    "producer_epoch": -1}
    out = await group_api.init_producer_id(producers, ctx, req)
    if valid and out["error_code"] == 0:
        txns.after_init(tid, out["producer_id"], out["producer_epoch"], req.transaction_timeout_ms)
    return out


def _kafka_partition(env: KafkaEnv, topic: str, partition: int) -> bool:
    """A Kafka partition of the cluster: here, or led by another broker (``txn.participants``)."""
    if is_system_topic(topic):
        return False
    if has_partition(env, topic, partition):
        return True
    lay = env.cluster.layout(resolve(env, topic)[0]) if env.cluster is not None else None
    return lay is not None and 0 <= partition < lay.total


async def add_partitions_to_txn(env: KafkaEnv, txns: KafkaTxnCoordinator, ctx: KafkaRequestContext,
                                req: Any) -> dict[str, Any]:
    tid = req.v3_and_below_transactional_id
    wanted = [(t.name, p) for t in req.v3_and_below_topics for p in t.partitions]
    await ensure_routes(env, {t for t, _ in wanted})
    missing = {tp for tp in wanted if not _kafka_partition(env, *tp)}
    if missing:
        log.info("kafka.txn_refused", api="AddPartitionsToTxn", transactional_id=tid,
                 unknown_partitions=sorted(missing))
        codes = {tp: int(E.UNKNOWN_TOPIC_OR_PARTITION if tp in missing else E.OPERATION_NOT_ATTEMPTED)
                 for tp in wanted}
    else:
        outcome = await txns.add_partitions(tid, req.v3_and_below_producer_id,
                                            req.v3_and_below_producer_epoch, wanted)
        _log_refusal("AddPartitionsToTxn", tid, outcome)
        code = code_for(outcome, ctx.api_version)
        codes = {tp: code for tp in wanted}
    by_topic: dict[str, list[dict[str, int]]] = {}
    for (topic, partition), code in codes.items():
        by_topic.setdefault(topic, []).append({"partition_index": partition, "partition_error_code": code})
    return {"results_by_topic_v3_and_below": [{"name": t, "results_by_partition": ps}
                                              for t, ps in by_topic.items()]}


async def add_offsets_to_txn(txns: KafkaTxnCoordinator, ctx: KafkaRequestContext, req: Any) -> dict[str, Any]:
    if not req.group_id:
        return {"error_code": int(E.INVALID_GROUP_ID)}
    outcome = await txns.add_partitions(req.transactional_id, req.producer_id, req.producer_epoch, (),
                                        groups=[req.group_id])
    _log_refusal("AddOffsetsToTxn", req.transactional_id, outcome, group=req.group_id)
    return {"error_code": code_for(outcome, ctx.api_version)}


async def end_txn(txns: KafkaTxnCoordinator, ctx: KafkaRequestContext, req: Any) -> dict[str, Any]:
    outcome = await txns.end_txn(req.transactional_id, req.producer_id, req.producer_epoch, req.committed)
    _log_refusal("EndTxn", req.transactional_id, outcome, committed=req.committed)
    return {"error_code": code_for(outcome, ctx.api_version)}


def _offset_codes(env: KafkaEnv, coord: GroupCoordinator, ctx: KafkaRequestContext, req: Any,
                  ) -> dict[tuple[str, int], int]:
    """Per-partition codes before the transaction is consulted (group, partition, metadata checks)."""
    if ctx.api_version >= 3:
        group_code = coord.validate_txn_commit(req.group_id, req.generation_id, req.member_id,
                                               req.group_instance_id)
    else:
        group_code = 0 if req.group_id else int(E.INVALID_GROUP_ID)
    out: dict[tuple[str, int], int] = {}
    for t in req.topics:
        for p in t.partitions:
            if group_code:
                out[(t.name, p.partition_index)] = int(group_code)
            elif not _kafka_partition(env, t.name, p.partition_index):
                out[(t.name, p.partition_index)] = int(E.UNKNOWN_TOPIC_OR_PARTITION)
            elif coord.metadata_too_large(p.committed_metadata):
                out[(t.name, p.partition_index)] = int(E.OFFSET_METADATA_TOO_LARGE)
            else:
                out[(t.name, p.partition_index)] = 0
    return out


def _stage_metadata(env: KafkaEnv, req: Any, codes: dict[tuple[str, int], int]) -> None:
    """The accepted partitions' metadata and leader epochs (v2+), kept by the offset table until
    EndTxn(commit) applies these offsets (``ConsumerOffsetManager.stage_metadata``), under this
    broker's queue id as the commit stores it; a partition led by another broker gets its offset
    at commit without them (not forwarded)."""
    for t in req.topics:
        for p in (p for p in t.partitions if codes[(t.name, p.partition_index)] == 0):
            queue = local_queue(env, t.name, p.partition_index)
            if queue is not None:
                env.broker.offsets.stage_metadata(req.group_id, t.name, queue, p.committed_offset,
                                                  p.committed_metadata, getattr(p, "committed_leader_epoch", -1))


async def txn_offset_commit(env: KafkaEnv, txns: KafkaTxnCoordinator, coord: GroupCoordinator,
                            ctx: KafkaRequestContext, req: Any) -> dict[str, Any]:
    await ensure_routes(env, {t.name for t in req.topics})
    codes = _offset_codes(env, coord, ctx, req)
    accepted = [(t.name, p.partition_index, p.committed_offset) for t in req.topics for p in t.partitions
                if codes[(t.name, p.partition_index)] == 0]
    if accepted:
        outcome = await txns.txn_offset_commit(req.transactional_id, req.producer_id, req.producer_epoch,
                                               req.group_id, accepted)
        _log_refusal("TxnOffsetCommit", req.transactional_id, outcome, group=req.group_id)
        code = code_for(outcome, ctx.api_version)
        for topic, partition, _ in accepted:
            codes[(topic, partition)] = code
        if code == 0:
            _stage_metadata(env, req, codes)
    elif any(codes.values()):
        log.info("kafka.txn_refused", api="TxnOffsetCommit", transactional_id=req.transactional_id,
                 group=req.group_id, codes=sorted(set(codes.values())))
    by_topic: dict[str, list[dict[str, int]]] = {}
    for (topic, partition), c in codes.items():
        by_topic.setdefault(topic, []).append({"partition_index": partition, "error_code": c})
    return {"topics": [{"name": t, "partitions": ps} for t, ps in by_topic.items()]}


async def describe_transactions(txns: KafkaTxnCoordinator, ctx: KafkaRequestContext, req: Any) -> dict[str, Any]:
    out = []
    for tid in req.transactional_ids:
        txn = txns.get(tid)
        if txn is None:
            out.append({"error_code": int(E.TRANSACTIONAL_ID_NOT_FOUND), "transactional_id": tid,
                        "transaction_state": "", "transaction_timeout_ms": 0, "transaction_start_time_ms": -1,
                        "producer_id": -1, "producer_epoch": -1, "topics": []})
            continue
        by_topic: dict[str, list[int]] = {}
        for topic, partition in sorted(txn.partitions):
            by_topic.setdefault(topic, []).append(partition)
        out.append({"error_code": 0, "transactional_id": tid, "transaction_state": txn.state.value,
                    "transaction_timeout_ms": txn.timeout_ms, "transaction_start_time_ms": txn.start_ms,
                    "producer_id": txn.producer_id, "producer_epoch": txn.epoch,
                    "topics": [{"topic": t, "partitions": ps} for t, ps in by_topic.items()]})
    return {"transaction_states": out}


async def list_transactions(txns: KafkaTxnCoordinator, ctx: KafkaRequestContext, req: Any) -> dict[str, Any]:
    """Kafka ``listTransactionStates``: state and producer-id filters (empty = all), v1's duration
    filter (only transactions running at least that long; an idle id has none running)."""
    known = {s.value for s in TxnState}
    states = set(req.state_filters)
    pids = set(req.producer_id_filters)
    now = int(time.time() * 1000)
    listed = [{"transactional_id": t.tid, "producer_id": t.producer_id, "transaction_state": t.state.value}
              for t in txns.transactions()
              if (not states or t.state.value in states) and (not pids or t.producer_id in pids)
              and (req.duration_filter < 0 or (t.start_ms >= 0 and now - t.start_ms >= req.duration_filter))]
    return {"error_code": 0, "unknown_state_filters": sorted(states - known), "transaction_states": listed}


async def describe_producers(env: KafkaEnv, ctx: KafkaRequestContext, req: Any) -> dict[str, Any]:
    """Idempotent/transactional producers that wrote each partition (their records reach the real
    queue only at commit, so no partition has an open transaction's start offset: -1)."""
    producers = env.producers
    topics = []
    await ensure_routes(env, [t.name for t in req.topics])
    for t in req.topics:
        parts = []
        for index in t.partition_indexes:
            queue = None if is_system_topic(t.name) else local_queue(env, t.name, index)
            if queue is None:
                parts.append({"partition_index": index, "error_code": partition_error(env, t.name, index),
                              "active_producers": []})
                continue
            active = producers.producers_of(resolve(env, t.name)[0], queue) if producers is not None else []
            parts.append({"partition_index": index, "error_code": 0, "active_producers": [
                {"producer_id": pid, "producer_epoch": epoch, "last_sequence": seq, "last_timestamp": ts,
                 "coordinator_epoch": -1, "current_txn_start_offset": -1} for pid, epoch, seq, ts in active]})
        topics.append({"name": t.name, "partitions": parts})
    return {"topics": topics}


def _txn_coordinator(routed: RoutedOffsets | None, entry: dict[str, Any], key: str) -> dict[str, Any]:
    """A FindCoordinator answer for a transactional id: its stable coordinator in a cluster."""
    if routed is None or entry["error_code"] or not routed.view.clustered:
        return entry
    node = routed.view.txn_coordinator_for(key)
    if node is None:
        return {**entry, "error_code": int(E.COORDINATOR_NOT_AVAILABLE), "node_id": -1, "host": "", "port": -1}
    return {**entry, "node_id": node.node_id, "host": node.host, "port": node.port}


async def find_coordinator(coord: GroupCoordinator, routed: RoutedOffsets | None, ctx: KafkaRequestContext,
                           req: Any) -> dict[str, Any]:
    """FindCoordinator: groups as ``group_api`` answers; a transactional id (key type 1) in a cluster
    goes to ``ClusterView.txn_coordinator_for``, which never moves while a broker restarts."""
    out = await group_api.find_coordinator(coord, routed, ctx, req)
    if req.key_type != 1:
        return out
    if ctx.api_version >= 4:
        return {**out, "coordinators": [_txn_coordinator(routed, c, c["key"]) for c in out["coordinators"]]}
    return _txn_coordinator(routed, out, req.key)


def _marker_queue(env: KafkaEnv, topic: str, partition: int) -> tuple[str, int] | None:
    """Where a transaction's marker for ``partition`` goes: this broker's queue of the stored topic
    (a view's source), or None when the partition is not here."""
    queue = local_queue(env, topic, partition)
    return None if queue is None else (resolve(env, topic)[0], queue)


def attach(env: KafkaEnv, txns: KafkaTxnCoordinator) -> None:
    """Send the transaction coordinator's markers to this broker's queue of each partition
    (``local_queue``; a view's markers go to its source topic)."""
    txns.queue_of = partial(_marker_queue, env)
