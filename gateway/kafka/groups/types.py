"""Requests, results and configuration of the group coordinator (frozen dataclasses).

These are the coordinator's own vocabulary, independent of the wire codec:
the Kafka handler decodes a request of any version into one of these, and
encodes the result into the version it must answer.  Version-specific
quirks that are purely presentational (null vs "" protocol name, top-level
vs per-member LeaveGroup errors) are left to the handler and noted on the
result types.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from rokka.gateway.kafka.errors import ErrorCode

NO_GENERATION = -1


@dataclass(frozen=True, slots=True)
class GroupConfig:
    """Coordinator settings (Kafka's ``group.*`` broker configs).

    ``config_dir`` None keeps group metadata in memory only.  The node fields
    are what FindCoordinator answers: this broker coordinates every group and
    every transactional id.
    """

    config_dir: Path | None = None
    initial_rebalance_delay_ms: int = 3000      # group.initial.rebalance.delay.ms
    min_session_timeout_ms: int = 6000          # group.min.session.timeout.ms
    max_session_timeout_ms: int = 1_800_000     # group.max.session.timeout.ms
    max_metadata_bytes: int = 4096              # offset.metadata.max.bytes
    durable_commits: bool = True                # fsync consumerOffset.json on each OffsetCommit
    node_id: int = 0
    host: str = "127.0.0.1"
    port: int = 9092


@dataclass(frozen=True, slots=True)
class JoinRequest:
    """A JoinGroup of any version.

    ``rebalance_timeout_ms`` is -1 for v0 (the session timeout is used).
    ``require_known_member_id`` is True for JoinGroup v4+ (MEMBER_ID_REQUIRED).
    """

    group_id: str
    member_id: str
    protocol_type: str
    protocols: Sequence[tuple[str, bytes]]
    session_timeout_ms: int
    rebalance_timeout_ms: int = -1
    group_instance_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    require_known_member_id: bool = True


@dataclass(frozen=True, slots=True)
class JoinedMember:
    member_id: str
    group_instance_id: str | None
    metadata: bytes


@dataclass(frozen=True, slots=True)
class JoinResult:
    """JoinGroup answer.  ``members`` is filled for the leader only.

    On error ``generation_id`` is -1 and ``protocol_name``/``protocol_type``
    are None (answer "" for versions where they are not nullable);
    ``member_id`` is the id the client must use next (the new id with
    MEMBER_ID_REQUIRED, else the one it sent).
    """

    error_code: int
    member_id: str
    generation_id: int = NO_GENERATION
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader: str = ""
    members: tuple[JoinedMember, ...] = ()


@dataclass(frozen=True, slots=True)
class SyncRequest:
    """A SyncGroup; ``protocol_type``/``protocol_name`` are None before v5."""

    group_id: str
    generation_id: int
    member_id: str
    assignments: Sequence[tuple[str, bytes]] = ()
    group_instance_id: str | None = None
    protocol_type: str | None = None
    protocol_name: str | None = None


@dataclass(frozen=True, slots=True)
class SyncResult:
    error_code: int
    assignment: bytes = b""
    protocol_type: str | None = None
    protocol_name: str | None = None


@dataclass(frozen=True, slots=True)
class LeavingMember:
    member_id: str
    group_instance_id: str | None = None


@dataclass(frozen=True, slots=True)
class LeftMember:
    member_id: str
    group_instance_id: str | None
    error_code: int


@dataclass(frozen=True, slots=True)
class LeaveResult:
    """LeaveGroup answer: a group-level code plus one code per member (v3+).

    For v0-v2 (one member) answer ``single_error``.
    """

    error_code: int
    members: tuple[LeftMember, ...] = ()

    @property
    def single_error(self) -> int:
        if self.error_code != ErrorCode.NONE or not self.members:
            return self.error_code
        return self.members[0].error_code


@dataclass(frozen=True, slots=True)
class CommitOffset:
    topic: str
    partition: int
    offset: int
    metadata: str | None = ""
    leader_epoch: int = -1


@dataclass(frozen=True, slots=True)
class PartitionError:
    topic: str
    partition: int
    error_code: int


@dataclass(frozen=True, slots=True)
class FetchedOffset:
    """One OffsetFetch partition: offset -1 when nothing is committed.

    ``metadata`` and ``leader_epoch`` are what the commit of this offset
    carried ("" and -1 when nothing was committed, when the committer sent
    none, or when a RocketMQ consumer committed the queue since).
    """

    topic: str
    partition: int
    offset: int
    error_code: int = ErrorCode.NONE
    metadata: str = ""
    leader_epoch: int = -1


@dataclass(frozen=True, slots=True)
class OffsetFetchResult:
    error_code: int
    partitions: tuple[FetchedOffset, ...] = ()


@dataclass(frozen=True, slots=True)
class DescribedMember:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    metadata: bytes
    assignment: bytes


@dataclass(frozen=True, slots=True)
class DescribedGroup:
    """DescribeGroups entry; an unknown group is error 0, state "Dead", no members."""

    error_code: int
    group_id: str
    state: str
    protocol_type: str
    protocol_data: str
    members: tuple[DescribedMember, ...] = ()


@dataclass(frozen=True, slots=True)
class ListedGroup:
    group_id: str
    protocol_type: str
    state: str


@dataclass(frozen=True, slots=True)
class CoordinatorInfo:
    """FindCoordinator answer for one key."""

    key: str
    error_code: int
    node_id: int
    host: str
    port: int


@dataclass(frozen=True, slots=True)
class CoordinatorStatistics:
    groups: int
    members: int
    pending_members: int
    parked_joins: int
    parked_syncs: int
    groups_by_state: dict[str, int] = field(default_factory=dict)
