"""The broker core: the one facade both protocol gateways talk to.

Theory of operation
-------------------
``Broker`` owns the store and the domain tables (topics, subscription
groups, consumer offsets, live consumers/producers, arrival notifications).
Gateways translate their wire requests into calls here (through ``compat``
for Kafka) and translate the outcomes back into wire codes.

Writes go through ``put``: each message is first *prepared* (``prepare``),
the RocketMQ broker's send pipeline that both protocols share: the broker
drops ``WAIT`` (a parked half or delay copy keeps it, as Java re-serializes
their properties) and stamps ``CLUSTER`` (as Java's SendMessageProcessor does;
callers storing Kafka records pass ``stamp_cluster=False``: a Kafka record
keeps only the properties its mapping gives it); a transactional half message
(``TRAN_MSG=true``) is parked in RMQ_SYS_TRANS_HALF_TOPIC; a delayed message
(``DELAY``>0) is parked in SCHEDULE_TOPIC_XXXX queue level-1; both keep
their destination in REAL_TOPIC/REAL_QID.  Then the store appends, and under
SYNC_FLUSH ``put`` returns only after the bytes are fsynced (group commit)
or reports FLUSH_DISK_TIMEOUT.

Everything here is synchronous except ``put`` (it may wait for fsync) and
``run`` (background upkeep: flushing, periodic persistence, retention).
"""

from __future__ import annotations

import dataclasses
import functools
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from pathlib import Path

import structlog
import trio
from rokka.core.arrivals import ArrivalHub
from rokka.core.config import BrokerConfig
from rokka.core.delay import ScheduleService
from rokka.core.groups import ConsumerRegistry, ProducerRegistry, SubscriptionGroupManager
from rokka.core.model import (
    PROP_CLUSTER,
    PROP_DELAY,
    PROP_REAL_QID,
    PROP_REAL_TOPIC,
    PROP_TRAN_MSG,
    PROP_WAIT,
    TOPIC_SCHEDULE,
    TOPIC_TRANS_HALF,
    TRANSACTION_COMMIT_TYPE,
    TRANSACTION_MASK,
    TRANSACTION_NOT_TYPE,
    TRANSACTION_PREPARED_TYPE,
    TRANSACTION_ROLLBACK_TYPE,
    BatchBody,
    Message,
    UniformBatch,
)
from rokka.core.offsets import ConsumerOffsetManager
from rokka.core.ports import ServicePorts
from rokka.core.storage.api import FlushDiskType, MessageStore, PutResult, PutStatus
from rokka.core.topic_retention import TopicRetention
from rokka.core.topics import TopicManager
from rokka.core.txn import TransactionService

log = structlog.get_logger(__name__)

PERSIST_INTERVAL_S = 5.0


def now_ms() -> int:
    return int(time.time() * 1000)


class Broker:
    def __init__(self, cfg: BrokerConfig, store: MessageStore | None = None) -> None:
        self.cfg = cfg
        self.store_config = cfg.store_config()
        config_dir = Path(cfg.store_path_root_dir) / "config"
        if store is None:
            from rokka.core.storage.engine import DiskStore

            store = DiskStore(self.store_config, repair=cfg.store_repair).open()
        self.store: MessageStore = store
        self._manual_delete_passes = 0      # DELETE_EXPIRED_COMMITLOG: retention passes that ignore deleteWhen
        self.delay_levels_ms = cfg.delay_levels_ms
        self.topics = TopicManager(
            config_dir, cluster=cfg.broker_cluster_name, broker_name=cfg.broker_name,
            auto_create=cfg.auto_create_topic_enable, default_queue_nums=cfg.default_topic_queue_nums,
            delay_levels=len(self.delay_levels_ms), broker_perm=cfg.broker_permission,
            cluster_topic=cfg.cluster_topic_enable, broker_topic=cfg.broker_topic_enable)
        if cfg.trace_topic_enable:      # traceTopicEnable: the message trace topic, 1 queue (as Java)
            self.topics.ensure(cfg.msg_trace_topic_name, 1)
        self.sub_groups = SubscriptionGroupManager(config_dir, auto_create=cfg.auto_create_subscription_group)
        self.offsets = ConsumerOffsetManager(config_dir)
        self.retention = TopicRetention(config_dir)             # per-topic retention (core.topic_retention)
        self.consumers = ConsumerRegistry()
        self.producers = ProducerRegistry()
        self.arrivals = ArrivalHub()
        self.store.add_arrival_listener(self.arrivals.notify)
        self.sync_flush = self.store_config.flush_disk_type is FlushDiskType.SYNC_FLUSH
        self._flush_service = None
        self.replica_wait: Callable[[int], Awaitable[PutStatus | None]] | None = None   # set by the HA service
        self._background: trio.CancelScope | None = None
        self._background_done = trio.Event()
        self._closed = False
        ports = ServicePorts(
            store=self.store, offsets=self.offsets, arrivals=self.arrivals, prepare=self.prepare,
            put_prepared=functools.partial(self.put, prepared=True), wait_durable=self._flushed_to,
            store_host=self.store_config.store_host)
        self.schedule = ScheduleService(ports, self.delay_levels_ms, config_dir)  # delayed delivery (core.delay)
        self.transactions = TransactionService(ports, cfg)   # END_TRANSACTION + check-back (core.txn)

    # -- the send pipeline ---------------------------------------------------
    def prepare(self, msg: Message, *, stamp_cluster: bool = True) -> Message:
        """Apply the broker-side send rules shared by both protocols (see module doc).

        Takes ownership of ``msg.properties`` (edited in place: the hot path avoids copies); a new
        Message is built only when the destination changes (transaction half, delay).
        """
        props = msg.properties
        wait = props.pop(PROP_WAIT, None)   # kept only where Java re-serializes the properties (half, delay)
        if stamp_cluster:
            props[PROP_CLUSTER] = self.cfg.broker_cluster_name
        tran_type = msg.sysflag & TRANSACTION_MASK
        if _is_half(props, msg.sysflag):
            _keep_destination(props, msg.topic, msg.queue_id, wait)
            return dataclasses.replace(msg, topic=TOPIC_TRANS_HALF, queue_id=0,
                                       sysflag=msg.sysflag & ~TRANSACTION_MASK)
        if tran_type in (TRANSACTION_NOT_TYPE, TRANSACTION_COMMIT_TYPE) and PROP_DELAY in props:
            level = _int(props.get(PROP_DELAY))
            if level > 0:
                level = min(level, len(self.delay_levels_ms))
                props[PROP_DELAY] = str(level)
                _keep_destination(props, msg.topic, msg.queue_id, wait)
                return dataclasses.replace(msg, topic=TOPIC_SCHEDULE, queue_id=level - 1)
        return msg

    def stays_in_place(self, props: Mapping[str, str], sysflag: int) -> bool:
        """True when ``prepare`` leaves a message with these properties where it was sent (no transaction
        half, no delay level) and the store keeps it as sent (no half or rollback of a transaction): such
        a send may take ``append_batch_body`` as a one-element batch (the same CommitLog bytes)."""
        return PROP_DELAY not in props and PROP_TRAN_MSG not in props and not sysflag & TRANSACTION_MASK

    def append(self, messages: Sequence[Message], *, prepared: bool = False,
               stamp_cluster: bool = True) -> PutResult:
        """Validate, prepare and append synchronously (no durability wait; see ``wait_durable``)."""
        if self._closed:
            return PutResult(PutStatus.SERVICE_NOT_AVAILABLE, remark="broker is shutting down")
        msgs = list(messages) if prepared else [self.prepare(m, stamp_cluster=stamp_cluster) for m in messages]
        for m in msgs:
            if len(m.body) > self.cfg.max_message_size:
                return PutResult(PutStatus.MESSAGE_ILLEGAL,
                                 remark=f"message body size {len(m.body)} exceeds maxMessageSize "
                                        f"{self.cfg.max_message_size}")
        return self.store.put_messages(msgs)

    def append_uniform(self, batch: UniformBatch, *, stamp_cluster: bool = True) -> PutResult:
        """``append(batch.messages())`` for a run sharing its properties, prepared once.

        A run whose properties ask for a transaction half or a delay takes the general path (its
        destination changes per the rules in ``prepare``)."""
        routed = self._uniform_route(batch, stamp_cluster)
        if routed is None:
            return self.append(batch.messages(), stamp_cluster=stamp_cluster)
        if isinstance(routed, PutResult):
            return routed
        return self.store.put_uniform(routed)

    def append_uniforms(self, batches: Sequence[UniformBatch], *, stamp_cluster: bool = True) -> list[PutResult]:
        """``append_uniform`` of each batch, each to a queue of its own (a Kafka Produce request's
        partitions): the runs the store takes go to it together (``MessageStore.put_uniforms``: one
        CommitLog write), the others as ``append_uniform`` sends them."""
        if len(batches) == 1:
            return [self.append_uniform(batches[0], stamp_cluster=stamp_cluster)]
        results: list[PutResult | None] = [None] * len(batches)
        stored: list[int] = []
        runs: list[UniformBatch] = []
        general: list[int] = []
        for i, batch in enumerate(batches):
            routed = self._uniform_route(batch, stamp_cluster)
            if routed is None:
                general.append(i)
            elif isinstance(routed, PutResult):
                results[i] = routed
            else:
                stored.append(i)
                runs.append(routed)
        for i, result in zip(stored, self.store.put_uniforms(runs) if runs else (), strict=True):
            results[i] = result
        for i in general:
            results[i] = self.append(batches[i].messages(), stamp_cluster=stamp_cluster)
        return results  # type: ignore[return-value]

    def _uniform_route(self, batch: UniformBatch, stamp_cluster: bool) -> UniformBatch | PutResult | None:
        """The send rules for a run: the run as the store takes it (its properties stamped as
        ``prepare`` stamps them; a transaction half moved to the half topic as ``prepare`` moves each
        message: its shared properties gain the real destination after the records' own), a refusal,
        or None for the general path (a delay, or a TRAN_MSG that makes no half)."""
        if self._closed:
            return PutResult(PutStatus.SERVICE_NOT_AVAILABLE, remark="broker is shutting down")
        props = batch.properties
        half = PROP_TRAN_MSG in props and _is_half(props, batch.sysflag)
        if PROP_DELAY in props or (PROP_TRAN_MSG in props and not half):
            return None
        longest = batch.longest()
        if longest > self.cfg.max_message_size:
            return PutResult(PutStatus.MESSAGE_ILLEGAL,
                             remark=f"message body size {longest} exceeds maxMessageSize "
                                    f"{self.cfg.max_message_size}")
        if half:
            moved = self._stamped(props, stamp_cluster)
            _keep_destination(moved, batch.topic, batch.queue_id, props.get(PROP_WAIT))
            return dataclasses.replace(batch, topic=TOPIC_TRANS_HALF, queue_id=0,
                                       sysflag=batch.sysflag & ~TRANSACTION_MASK, properties=moved)
        if not stamp_cluster and PROP_WAIT not in props:    # nothing to stamp (a Kafka batch): as it is
            return batch
        return dataclasses.replace(batch, properties=self._stamped(props, stamp_cluster))

    def append_batch_body(self, batch: BatchBody) -> PutResult | None:
        """A RocketMQ batch in wire form (``MessageStore.put_batch_body``), or None: decode it and use
        ``append``.  The batch-level properties get the send rules: CLUSTER stamped, WAIT dropped
        (elements keep their own, as in Java).  Delayed or transactional batches are refused by the
        gateway before this point, as Java refuses them."""
        if self._closed:
            return PutResult(PutStatus.SERVICE_NOT_AVAILABLE, remark="broker is shutting down")
        return self.store.put_batch_body(batch, self._stamped(batch.properties))

    def _stamped(self, props: dict[str, str], stamp_cluster: bool = True) -> dict[str, str]:
        """A copy of run-level properties with ``prepare``'s stamping: WAIT dropped, CLUSTER set."""
        out = {k: v for k, v in props.items() if k != PROP_WAIT}
        if stamp_cluster:
            out[PROP_CLUSTER] = self.cfg.broker_cluster_name
        return out

    @property
    def answers_at_once(self) -> bool:
        """True when ``wait_durable`` has nothing to wait for: ASYNC_FLUSH (or no flush service) and no
        SYNC_MASTER slave wait.  A caller may then answer a put without awaiting it."""
        return not (self.sync_flush and self._flush_service is not None) and self.replica_wait is None

    async def wait_durable(self, result: PutResult) -> PutResult:
        """Under SYNC_FLUSH, wait until ``result``'s bytes are fsynced (FLUSH_DISK_TIMEOUT otherwise)."""
        if result.ok and self.sync_flush and self._flush_service is not None:
            if not await self._flush_service.wait_durable(result.end_offset):
                return dataclasses.replace(result, status=PutStatus.FLUSH_DISK_TIMEOUT)
        if result.ok and self.replica_wait is not None:     # SYNC_MASTER (gateway/ha/service.py)
            if (status := await self.replica_wait(result.end_offset)) is not None:
                return dataclasses.replace(result, status=status)
        return result

    def store_busy_s(self) -> float:
        """Seconds the CommitLog write-back in progress has run, when sends wait for it (SYNC_FLUSH);
        0.0 otherwise (none runs, no flush service, or ASYNC_FLUSH: a slow fsync delays no send)."""
        if not self.sync_flush or self._flush_service is None:
            return 0.0
        return self._flush_service.busy_s()

    @property
    def flush_running(self) -> bool:
        return self._flush_service is not None

    async def wait_flushed(self, offset: int) -> bool:
        """Wait until the CommitLog is fsynced up to ``offset`` whatever the flush policy; False on timeout.

        Requires ``run`` (the flush service) to be running; see ``flush_running``."""
        if self._flush_service is None:
            return self.store.flushed_offset >= offset
        return bool(await self._flush_service.wait_durable(offset))

    async def _flushed_to(self, offset: int) -> None:
        """``ServicePorts.wait_durable``: the CommitLog on disk up to ``offset``, whatever the flush policy
        (without the flush service, as in embedded use, the store is flushed here)."""
        if self._flush_service is not None:
            await self.wait_flushed(offset)
        else:
            await trio.to_thread.run_sync(self.store.flush)

    async def put(self, messages: Sequence[Message], *, prepared: bool = False) -> PutResult:
        """Store messages (already validated by the gateway) and honour the flush policy."""
        return await self.wait_durable(self.append(messages, prepared=prepared))

    def is_transactional_final(self, sysflag: int) -> bool:
        return (sysflag & TRANSACTION_MASK) in (TRANSACTION_PREPARED_TYPE, TRANSACTION_ROLLBACK_TYPE)

    # -- upkeep ----------------------------------------------------------------
    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Background upkeep until cancelled: flush service, periodic persistence, retention."""
        from rokka.core.storage.flush import FlushService

        self._background_done = trio.Event()
        try:
            async with trio.open_nursery() as nursery:
                self._background = nursery.cancel_scope
                self._flush_service = FlushService(self.store)
                await nursery.start(self._flush_service.run)
                nursery.start_soon(self._persist_loop)
                nursery.start_soon(self._retention_loop)
                nursery.start_soon(self.retention.compaction_loop, self.store, self.topics)   # compacted topics
                await nursery.start(self.schedule.run)
                task_status.started()
        finally:
            self._background_done.set()

    async def stop_background(self) -> None:
        """Cancel ``run`` (flush, delay delivery, retention) and wait until it has finished.

        Call before ``close`` so no background task writes to a closing store."""
        if self._background is not None:
            self._background.cancel()
            await self._background_done.wait()

    async def _persist_loop(self) -> None:
        while True:
            await trio.sleep(PERSIST_INTERVAL_S)
            snapshot = self.offsets.take_snapshot()  # copied on the trio thread; fsync off it
            if snapshot is not None:
                try:
                    await trio.to_thread.run_sync(self.offsets.write_snapshot, snapshot)
                except OSError as exc:      # a full disk: keep serving; the next change and close() write it
                    log.error("broker.offsets_persist_failed", error=str(exc))

    def delete_expired_files_manually(self, passes: int = 20) -> None:
        """RocketMQ's ``executeDeleteFilesManually`` (DELETE_EXPIRED_COMMITLOG): the next ``passes`` retention
        passes delete expired files whatever ``deleteWhen`` says."""
        self._manual_delete_passes = passes

    async def _retention_loop(self) -> None:
        while True:
            await trio.sleep(max(self.cfg.clean_resource_interval, 100) / 1000)
            manual = self._manual_delete_passes
            self._manual_delete_passes = max(0, manual - 1)
            removed = await trio.to_thread.run_sync(self.store.run_retention, now_ms(), manual > 0)
            if removed:
                log.info("broker.retention_removed_files", count=removed)
            self.retention.apply(self.store, now_ms(), self.topics)

    def close(self) -> None:
        """Persist tables, flush and close the store (idempotent)."""
        if self._closed:
            return
        self._closed = True
        self.offsets.persist()
        self.store.close()
        log.info("broker.closed", flushed_offset=self.store.flushed_offset)


def _int(value: str | None) -> int:
    try:
        return int(value) if value else 0
    except ValueError:
        return 0


def _is_half(props: Mapping[str, str], sysflag: int) -> bool:
    """Does a send with these properties make a transaction half (Java's ``TRAN_MSG``, not yet decided)?"""
    return props.get(PROP_TRAN_MSG) == "true" and (sysflag & TRANSACTION_MASK) in (TRANSACTION_NOT_TYPE,
                                                                                   TRANSACTION_PREPARED_TYPE)


def _keep_destination(props: dict[str, str], topic: str, queue_id: int, wait: str | None) -> None:
    """A half or delayed message moves: its real destination is kept in its properties (last, then
    WAIT again, where Java re-serializes them), edited in place."""
    props[PROP_REAL_TOPIC], props[PROP_REAL_QID] = topic, str(queue_id)
    if wait is not None:
        props[PROP_WAIT] = wait
