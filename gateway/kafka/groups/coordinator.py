"""The Kafka group coordinator: membership + persistence + offsets + admin queries.

Theory of operation
-------------------
``GroupCoordinator`` is the one object the Kafka request handlers talk to
for group APIs.  Membership (JoinGroup/SyncGroup/Heartbeat/LeaveGroup and
the timers) is inherited from ``GroupMembership``; this module adds:

* ``run()``: the coordinator's background task.  It must be started in a
  nursery (``await nursery.start(coordinator.run)``) before requests are
  served.  It restores the timers of groups loaded from disk, sleeps until
  the next deadline or a change, fires expired timers, and writes
  ``kafkaGroups.msgpack`` when something changed (the snapshot is encoded
  on the trio thread, the fsync'd write runs on a worker thread; writes are
  coalesced, one at a time).  When cancelled it writes a last snapshot
  synchronously, so a clean shutdown loses nothing.  A crash loses at most
  the changes since the last write; members rejoin after a restart anyway.
* OffsetCommit / OffsetFetch over the shared offset table
  (``rokka.core.offsets.ConsumerOffsetManager``): the Kafka offset *is* the
  ConsumeQueue offset and the group name is the table key, so one group
  name has one position per queue for both protocols.  Topic names pass
  through unchanged (the handler maps them first if it ever needs to).
  Commit metadata (at most ``max_metadata_bytes`` characters, counted as
  Java's ``String.length()`` as Kafka does, else OFFSET_METADATA_TOO_LARGE) and the committed leader epoch go with the
  offset into the table's side table and come back from OffsetFetch while
  the offset is still the one they were committed with ("" / -1 otherwise).
* DescribeGroups, ListGroups, FindCoordinator (this broker coordinates every
  group and every transactional id).
* DeleteGroups and OffsetDelete.  A group "exists" for them when it has Kafka
  metadata or committed offsets (a RocketMQ consumer group has only offsets);
  live consumers on either protocol make it non-empty.  DeleteGroups removes
  the metadata and every offset of the group; OffsetDelete removes offsets of
  partitions the group does not consume.

Commit validation follows Kafka's ``validateOffsetCommit`` (wire sheet
§4.2): a commit with generation -1, an empty member id and no instance id
is a "simple" commit, allowed only while the group has no members (and it
creates an Empty group if there is none); any other commit must come from
a current member of the current generation, and is refused with
REBALANCE_IN_PROGRESS while the group awaits SyncGroup.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from functools import partial

import structlog
import trio
from rokka.core.offsets import OffsetStore
from rokka.core.storage.packfile import take_ticket, write_packed_atomic
from rokka.gateway.kafka.errors import ErrorCode
from rokka.gateway.kafka.groups.group import Group
from rokka.gateway.kafka.groups.membership import GroupMembership, _allow_all
from rokka.gateway.kafka.groups.persist import encode_groups, groups_path, load_groups
from rokka.gateway.kafka.groups.state import GroupEvent, GroupState
from rokka.gateway.kafka.groups.types import (
    CommitOffset,
    CoordinatorInfo,
    CoordinatorStatistics,
    DescribedGroup,
    DescribedMember,
    FetchedOffset,
    GroupConfig,
    ListedGroup,
    OffsetFetchResult,
    PartitionError,
)

log = structlog.get_logger(__name__)

KEY_TYPE_GROUP = 0
KEY_TYPE_TRANSACTION = 1
#: OffsetFetch require_stable while a transaction holds a pending offset
UNSTABLE_OFFSET_COMMIT = ErrorCode.UNSTABLE_OFFSET_COMMIT


class GroupCoordinator(GroupMembership):
    """Kafka group coordinator; see the module docstring.

    Args:
        config: timeouts, persistence directory, and the node FindCoordinator returns.
        offsets: the shared committed-offset table.
        admit_group: cross-protocol hook, called on JoinGroup and OffsetCommit
            with the group id; returns 0 to allow, or the Kafka error code to
            answer (e.g. because the group is live on RocketMQ).
        partition_exists: False for a (topic, partition) that OffsetCommit must
            refuse with UNKNOWN_TOPIC_OR_PARTITION; default accepts everything.
        live_elsewhere: True while the group has live consumers on the other protocol
            (RocketMQ): DeleteGroups and OffsetDelete then answer NON_EMPTY_GROUP.
        on_group_deleted: called with the group id after DeleteGroups removed a group (the
            runtime drops the RocketMQ subscription group config with it).

    Raises:
        MetadataCorrupt: the persisted group file exists but cannot be read.
    """

    def __init__(self, config: GroupConfig, offsets: OffsetStore, *,
                 admit_group: Callable[[str], int] = _allow_all,
                 partition_exists: Callable[[str, int], bool] | None = None,
                 live_elsewhere: Callable[[str], bool] = lambda group: False,
                 on_group_deleted: Callable[[str], object] = lambda group: None) -> None:
        super().__init__(config, admit_group=admit_group)
        self._live_elsewhere = live_elsewhere
        self._on_group_deleted = on_group_deleted
        self._offsets = offsets
        self._partition_exists = partition_exists
        # (group, topic, partition) -> True while an open Kafka transaction holds a pending
        # TxnOffsetCommit for it; set by the runtime to the transaction coordinator's check.
        self.pending_txn_offset: Callable[[str, str, int], bool] | None = None
        if config.config_dir is not None:
            for g in load_groups(config.config_dir):
                self._groups[g.group_id] = g
            if self._groups:
                log.info("kafka.group.loaded", groups=len(self._groups))

    # ------------------------------------------------------------------ background task

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Fire timers and persist group metadata until cancelled."""
        self._restore_timers()
        task_status.started()
        try:
            while True:
                with trio.move_on_at(self.next_deadline()):
                    await self._wakeup.wait()
                self._wakeup = trio.Event()
                self.fire_timers()
                await self._persist_if_dirty()
        finally:
            if self._dirty:
                self.save()

    async def _persist_if_dirty(self) -> None:
        if not self._dirty:
            return
        self._dirty = False
        if self._config.config_dir is not None:
            data, ticket = encode_groups(self._groups.values()), take_ticket()   # a later save() wins
            await trio.to_thread.run_sync(partial(write_packed_atomic, groups_path(self._config.config_dir), data,
                                                  ticket=ticket))

    def save(self) -> None:
        """Write the group file now, synchronously (shutdown)."""
        self._dirty = False
        if self._config.config_dir is not None:
            write_packed_atomic(groups_path(self._config.config_dir), encode_groups(self._groups.values()),
                                ticket=take_ticket())

    def statistics(self) -> CoordinatorStatistics:
        members = [m for g in self._groups.values() for m in g.members.values()]
        return CoordinatorStatistics(
            groups=len(self._groups), members=len(members),
            pending_members=sum(len(g.pending) for g in self._groups.values()),
            parked_joins=sum(m.join_waiter is not None for m in members),
            parked_syncs=sum(m.sync_waiter is not None for m in members),
            groups_by_state=dict(Counter(g.state.value for g in self._groups.values())))

    # ------------------------------------------------------------------ OffsetCommit / OffsetFetch

    def offset_commit(self, group_id: str, generation_id: int, member_id: str,
                      offsets: Sequence[CommitOffset], group_instance_id: str | None = None,
                      ) -> list[PartitionError]:
        """OffsetCommit: validate the committer, then store each partition's offset.

        Returns:
            One entry per requested partition, in request order; a group-level
            failure gives every partition the same code.
        """
        error = self._validate_commit(group_id, generation_id, member_id, group_instance_id)
        if error != ErrorCode.NONE:
            log.info("kafka.group.offset_commit_refused", group=group_id, member=member_id,
                     generation=generation_id, error=int(error))
            return [PartitionError(o.topic, o.partition, error) for o in offsets]
        out: list[PartitionError] = []
        accepted: list[CommitOffset] = []
        for o in offsets:
            code = self._check_partition(o)
            out.append(PartitionError(o.topic, o.partition, code))
            if code == ErrorCode.NONE:
                accepted.append(o)
        for i, o in enumerate(accepted):
            durable = self._config.durable_commits and i == len(accepted) - 1
            self._offsets.commit(group_id, o.topic, o.partition, o.offset, durable=durable,
                                 metadata=o.metadata or "", leader_epoch=o.leader_epoch)
        return out

    def metadata_too_large(self, metadata: str | None) -> bool:
        """Kafka's ``offset.metadata.max.bytes`` check: Java's ``String.length()`` (UTF-16 code units)
        of the metadata against the limit; null passes."""
        return metadata is not None and \
            len(metadata.encode("utf-16-le")) // 2 > self._config.max_metadata_bytes

    def _check_partition(self, o: CommitOffset) -> int:
        if self.metadata_too_large(o.metadata):
            log.info("kafka.offset_metadata_too_large", topic=o.topic, partition=o.partition,
                     limit=self._config.max_metadata_bytes)
            return ErrorCode.OFFSET_METADATA_TOO_LARGE
        if o.partition < 0 or (self._partition_exists is not None
                               and not self._partition_exists(o.topic, o.partition)):
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        return ErrorCode.NONE

    def _refuse_group(self, group_id: str) -> int:
        """INVALID_GROUP_ID for an empty id, else what the admission hook says (0: admitted)."""
        return self._admit_group(group_id) if group_id else ErrorCode.INVALID_GROUP_ID

    def _validate_commit(self, group_id: str, generation_id: int, member_id: str,
                         instance_id: str | None) -> int:
        refused = self._refuse_group(group_id)
        if refused:
            return refused
        g = self._groups.get(group_id)
        if g is None:
            if generation_id >= 0:
                return ErrorCode.ILLEGAL_GENERATION
            g = self._group(group_id)
            self._changed()
        if g.state is GroupState.DEAD:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        if generation_id >= 0 or member_id or instance_id is not None:
            error = g.check_member(member_id, instance_id)
            if error != ErrorCode.NONE:
                return error
            if generation_id != g.generation:
                return ErrorCode.ILLEGAL_GENERATION
        elif g.members:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if g.state is GroupState.COMPLETING_REBALANCE:
            return ErrorCode.REBALANCE_IN_PROGRESS
        if member_id in g.members:
            g.members[member_id].touch(self._now())
        return ErrorCode.NONE

    def offset_fetch(self, group_id: str, partitions: Iterable[tuple[str, int]] | None,
                     require_stable: bool = False) -> OffsetFetchResult:
        """OffsetFetch: committed offsets (-1 when none); ``partitions`` None = all of the group.

        ``require_stable`` (v7+): a partition with a pending transactional
        offset (``pending_txn_offset``) answers UNSTABLE_OFFSET_COMMIT (88) and
        offset -1; the client retries until the transaction ends.
        """
        if not group_id:
            return OffsetFetchResult(ErrorCode.INVALID_GROUP_ID)
        g = self._groups.get(group_id)
        if g is not None and g.state is GroupState.DEAD:
            return OffsetFetchResult(ErrorCode.COORDINATOR_NOT_AVAILABLE)
        if partitions is None:
            found = [self._fetched(group_id, topic, q, off, require_stable)
                     for topic in sorted(self._offsets.topics_of_group(group_id))
                     for q, off in sorted(self._offsets.offsets(group_id, topic).items())]
            return OffsetFetchResult(ErrorCode.NONE, tuple(found))
        out = []
        for topic, q in partitions:
            off = self._offsets.query(group_id, topic, q)
            out.append(self._fetched(group_id, topic, q, -1 if off is None else off, require_stable))
        return OffsetFetchResult(ErrorCode.NONE, tuple(out))

    def _fetched(self, group_id: str, topic: str, q: int, off: int, require_stable: bool) -> FetchedOffset:
        pending = self.pending_txn_offset
        if require_stable and pending is not None and pending(group_id, topic, q):
            return FetchedOffset(topic, q, -1, UNSTABLE_OFFSET_COMMIT)
        if off < 0:
            return FetchedOffset(topic, q, off)
        metadata, epoch = self._offsets.commit_metadata(group_id, topic, q)
        return FetchedOffset(topic, q, off, metadata=metadata, leader_epoch=epoch)

    def validate_txn_commit(self, group_id: str, generation_id: int, member_id: str,
                            instance_id: str | None) -> int:
        """TxnOffsetCommit's committer check (Kafka's ``doTxnCommitOffsets``).

        Unlike OffsetCommit, generation -1 with an empty member id is accepted
        even while the group has members (a producer outside the group may
        commit for it); a named member must be current, and a generation >= 0
        must be the group's.  The offsets are stored by the transaction
        coordinator at commit time, not here.

        Returns:
            NONE or the Kafka error code for every partition of the request.
        """
        refused = self._refuse_group(group_id)
        if refused:
            return refused
        g = self._groups.get(group_id)
        if g is None:
            return ErrorCode.NONE
        if g.state is GroupState.DEAD:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        if member_id or instance_id is not None:
            error = g.check_member(member_id, instance_id)
            if error != ErrorCode.NONE:
                return error
        if generation_id >= 0 and generation_id != g.generation:
            return ErrorCode.ILLEGAL_GENERATION
        return ErrorCode.NONE

    # ------------------------------------------------------------------ admin queries

    def describe(self, group_ids: Iterable[str]) -> list[DescribedGroup]:
        """DescribeGroups: an unknown group is error 0 with state "Dead" and no members."""
        return [self._describe_one(gid) for gid in group_ids]

    def _describe_one(self, group_id: str) -> DescribedGroup:
        if not group_id:
            return DescribedGroup(ErrorCode.INVALID_GROUP_ID, group_id, GroupState.DEAD.value, "", "")
        g = self._groups.get(group_id)
        if g is None:
            return DescribedGroup(ErrorCode.NONE, group_id, GroupState.DEAD.value, "", "")
        stable = g.state is GroupState.STABLE
        members = tuple(
            DescribedMember(m.member_id, m.group_instance_id, m.client_id, m.client_host,
                            m.metadata_for(g.protocol_name) if stable else b"",
                            m.assignment if stable else b"")
            for m in g.members.values())
        return DescribedGroup(ErrorCode.NONE, group_id, g.state.value, g.protocol_type or "",
                              (g.protocol_name or "") if stable else "", members)

    def list_groups(self, states_filter: Iterable[str] | None = None) -> list[ListedGroup]:
        """ListGroups; ``states_filter`` (v4+) matches state names case-insensitively, empty = all."""
        wanted = {s.lower() for s in states_filter or ()}
        return [ListedGroup(g.group_id, g.protocol_type or "", g.state.value)
                for g in self._groups.values()
                if g.state is not GroupState.DEAD and (not wanted or g.state.value.lower() in wanted)]

    def find_coordinator(self, key: str, key_type: int = KEY_TYPE_GROUP) -> CoordinatorInfo:
        """FindCoordinator for one key: this node for any group or transactional id."""
        cfg = self._config
        if key_type not in (KEY_TYPE_GROUP, KEY_TYPE_TRANSACTION) or (
                key_type == KEY_TYPE_TRANSACTION and not key):
            return CoordinatorInfo(key, ErrorCode.INVALID_REQUEST, -1, "", -1)
        return CoordinatorInfo(key, ErrorCode.NONE, cfg.node_id, cfg.host, cfg.port)

    def _existing(self, group_id: str) -> Group | None | ErrorCode:
        """The group DeleteGroups / OffsetDelete act on: its metadata (None for a group that exists
        only as committed offsets, e.g. a RocketMQ consumer group), or the error to answer."""
        if not group_id:
            return ErrorCode.INVALID_GROUP_ID
        g = self._groups.get(group_id)
        if g is not None and g.state is not GroupState.DEAD:
            return g
        return None if self._offsets.topics_of_group(group_id) else ErrorCode.GROUP_ID_NOT_FOUND

    def check_delete(self, group_id: str) -> int:
        """What ``delete_group`` would answer, without deleting anything (a cluster forwards the
        deletion to the other brokers in between)."""
        g = self._existing(group_id)
        if isinstance(g, ErrorCode):
            return g
        if (g is not None and g.state is not GroupState.EMPTY) or self._live_elsewhere(group_id):
            return ErrorCode.NON_EMPTY_GROUP
        return ErrorCode.NONE

    def delete_group(self, group_id: str) -> int:
        """DeleteGroups for one group: a group without live members on either protocol goes,
        with every committed offset of it (Kafka deletes a group's offsets with the group).

        Returns:
            NONE, GROUP_ID_NOT_FOUND, NON_EMPTY_GROUP or INVALID_GROUP_ID.
        """
        error = self.check_delete(group_id)
        if error != ErrorCode.NONE:
            return error
        g = self._groups.get(group_id)
        if g is not None:
            g.fire(GroupEvent.UNLOAD)
            del self._groups[group_id]
            self._changed()
        self._offsets.delete_group(group_id, durable=self._config.durable_commits)
        self._on_group_deleted(group_id)
        log.info("kafka.group.deleted", group=group_id)
        return ErrorCode.NONE

    def delete_offsets(self, group_id: str, partitions: Sequence[tuple[str, int]],
                       ) -> tuple[int, list[PartitionError]]:
        """OffsetDelete (Kafka ``handleDeleteOffsets``): forget committed offsets of partitions
        the group does not consume.  An empty group loses every requested partition; a group of
        the "consumer" protocol type with members keeps the partitions of topics its members
        subscribe to (GROUP_SUBSCRIBED_TO_TOPIC); any other live group is NON_EMPTY_GROUP.

        Returns:
            (group error, one entry per partition in request order; empty when the group error
            is not NONE).
        """
        g = self._existing(group_id)
        if isinstance(g, ErrorCode):
            return g, []
        if self._live_elsewhere(group_id):
            return ErrorCode.NON_EMPTY_GROUP, []
        subscribed: set[str] | None = set()
        if g is not None and g.state is not GroupState.EMPTY:
            if g.protocol_type != "consumer":
                return ErrorCode.NON_EMPTY_GROUP, []
            subscribed = g.subscribed_topics()
        out: list[PartitionError] = []
        gone: dict[str, list[int]] = {}
        for topic, partition in partitions:
            if partition < 0 or (self._partition_exists is not None
                                 and not self._partition_exists(topic, partition)):
                code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            elif subscribed is None or topic in subscribed:
                code = ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC
            else:
                code = ErrorCode.NONE
                gone.setdefault(topic, []).append(partition)
            out.append(PartitionError(topic, partition, code))
        for topic, queue_ids in gone.items():
            self._offsets.delete_queues(group_id, topic, queue_ids, durable=self._config.durable_commits)
        if gone:
            log.info("kafka.group.offsets_deleted", group=group_id,
                     partitions=sum(len(q) for q in gone.values()))
        return ErrorCode.NONE, out
