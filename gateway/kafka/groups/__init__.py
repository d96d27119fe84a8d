"""Kafka consumer-group coordination, independent of the wire codec.

The handler layer builds a ``GroupCoordinator(config, offsets)``, starts
``coordinator.run`` in its nursery, and maps decoded requests onto
``join`` / ``sync`` (async, may park), ``heartbeat`` / ``leave`` /
``offset_commit`` / ``offset_fetch`` / ``describe`` / ``list_groups`` /
``find_coordinator`` (sync).  Results carry Kafka error codes (``ErrorCode``).
"""

from rokka.gateway.kafka.errors import ErrorCode
from rokka.gateway.kafka.groups.coordinator import (
    KEY_TYPE_GROUP,
    KEY_TYPE_TRANSACTION,
    GroupCoordinator,
    OffsetStore,
)
from rokka.gateway.kafka.groups.state import TRANSITIONS, GroupEvent, GroupState, IllegalTransition
from rokka.gateway.kafka.groups.types import (
    CommitOffset,
    CoordinatorInfo,
    CoordinatorStatistics,
    DescribedGroup,
    DescribedMember,
    FetchedOffset,
    GroupConfig,
    JoinedMember,
    JoinRequest,
    JoinResult,
    LeaveResult,
    LeavingMember,
    LeftMember,
    ListedGroup,
    OffsetFetchResult,
    PartitionError,
    SyncRequest,
    SyncResult,
)

__all__ = [
    "KEY_TYPE_GROUP", "KEY_TYPE_TRANSACTION", "TRANSITIONS", "CommitOffset", "CoordinatorInfo",
    "CoordinatorStatistics", "DescribedGroup", "DescribedMember", "ErrorCode", "FetchedOffset",
    "GroupConfig", "GroupCoordinator", "GroupEvent", "GroupState", "IllegalTransition", "JoinRequest",
    "JoinResult", "JoinedMember", "LeaveResult", "LeavingMember", "LeftMember", "ListedGroup",
    "OffsetFetchResult", "OffsetStore", "PartitionError", "SyncRequest", "SyncResult",
]
