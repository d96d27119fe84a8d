"""One consumer group's data: members, generation, chosen protocol, timers.

Theory of operation
-------------------
``Group`` and ``Member`` are plain mutable records owned by the
coordinator; they never await and never look at the clock themselves (times
are trio-clock seconds passed in).  ``Waiter`` is the parking spot of a
JoinGroup or SyncGroup whose answer is decided later by another request or
by a timer: the coordinator fills it exactly once with ``fire`` and the
parked request returns that value.

Invariants (checked by the coordinator, relied on here):

* ``members`` keeps join order; the leader is a key of ``members`` or None.
* ``static`` maps group_instance_id -> member_id for static members only.
* a member id is in at most one of ``members`` and ``pending``.
* a member with a ``join_waiter`` or ``sync_waiter`` is never expired by its
  session timer (Kafka's "awaiting join/sync satisfies the heartbeat").

Protocol selection (wire sheet §4.4): keep the assignor names every member
lists; each member votes for the first surviving name in its own list;
most votes wins, ties going to the name that comes first in the leader's
list (deterministic, and what a single member would pick).
"""

from __future__ import annotations

import struct
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Generic, TypeVar

import trio
from rokka.gateway.kafka.errors import ErrorCode
from rokka.gateway.kafka.groups.state import GroupEvent, GroupState, next_state
from rokka.gateway.kafka.groups.types import JoinResult, SyncResult

T = TypeVar("T")


def subscription_topics(metadata: bytes) -> set[str] | None:
    """The topic list that leads every version of ConsumerProtocolSubscription (int16 version,
    then an int32 count of int16-length strings); None when ``metadata`` is not one."""
    try:
        if len(metadata) < 6:
            return None
        (count,) = struct.unpack_from(">i", metadata, 2)
        if count < 0 or count > len(metadata):
            return None
        pos, topics = 6, set()
        for _ in range(count):
            (n,) = struct.unpack_from(">h", metadata, pos)
            if n < 0 or pos + 2 + n > len(metadata):
                return None
            topics.add(metadata[pos + 2:pos + 2 + n].decode("utf-8"))
            pos += 2 + n
        return topics
    except (struct.error, UnicodeDecodeError):
        return None


class Waiter(Generic[T]):
    """A one-shot slot a parked request waits on."""

    __slots__ = ("_event", "_value")

    def __init__(self) -> None:
        self._event = trio.Event()
        self._value: T | None = None

    @property
    def fired(self) -> bool:
        return self._event.is_set()

    def fire(self, value: T) -> None:
        """Deliver ``value``; later calls are ignored (the first answer wins)."""
        if not self._event.is_set():
            self._value = value
            self._event.set()

    async def wait(self) -> T:
        await self._event.wait()
        assert self._value is not None
        return self._value


@dataclass(eq=False)
class Member:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocol_type: str
    protocols: list[tuple[str, bytes]]
    assignment: bytes = b""
    session_deadline: float = 0.0
    join_waiter: Waiter[JoinResult] | None = None
    sync_waiter: Waiter[SyncResult] | None = None

    @property
    def protocol_names(self) -> list[str]:
        return [name for name, _ in self.protocols]

    def metadata_for(self, protocol: str | None) -> bytes:
        for name, meta in self.protocols:
            if name == protocol:
                return meta
        return b""

    def same_protocols(self, protocols: Sequence[tuple[str, bytes]]) -> bool:
        return self.protocols == [(n, bytes(m)) for n, m in protocols]

    def touch(self, now: float) -> None:
        self.session_deadline = now + self.session_timeout_ms / 1000

    @property
    def parked(self) -> bool:
        return self.join_waiter is not None or self.sync_waiter is not None


@dataclass(eq=False)
class Group:
    group_id: str
    state: GroupState = GroupState.EMPTY
    protocol_type: str | None = None
    protocol_name: str | None = None
    generation: int = 0
    leader: str | None = None
    members: dict[str, Member] = field(default_factory=dict)
    pending: dict[str, float] = field(default_factory=dict)   # MEMBER_ID_REQUIRED id -> expiry
    static: dict[str, str] = field(default_factory=dict)      # group_instance_id -> member_id
    join_deadline: float | None = None
    initial_delay_until: float | None = None
    sync_deadline: float | None = None
    synced: set[str] = field(default_factory=set)

    def fire(self, event: GroupEvent) -> GroupState:
        """Apply ``event`` through the transition table and return the new state."""
        self.state = next_state(self.state, event)
        return self.state

    def common_protocols(self) -> set[str]:
        names: set[str] | None = None
        for m in self.members.values():
            names = set(m.protocol_names) if names is None else names & set(m.protocol_names)
        return names or set()

    def supports(self, protocol_type: str, protocols: Sequence[tuple[str, bytes]]) -> bool:
        """Would a member with these protocols fit the group (Kafka ``supportsProtocols``)?"""
        names = {n for n, _ in protocols}
        if not self.members:
            return bool(protocol_type) and bool(names)
        return protocol_type == self.protocol_type and bool(names & self.common_protocols())

    def select_protocol(self) -> str:
        """Pick the assignor for the next generation (see the module docstring)."""
        common = self.common_protocols()
        votes: Counter[str] = Counter()
        for m in self.members.values():
            votes[next(n for n in m.protocol_names if n in common)] += 1
        best = max(votes.values())
        order = self.members[self.leader].protocol_names if self.leader in self.members else []
        candidates = [n for n in order if votes.get(n) == best]
        return candidates[0] if candidates else next(n for n, v in votes.items() if v == best)

    def max_rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    def check_member(self, member_id: str, instance_id: str | None) -> ErrorCode:
        """Kafka's ``validateCurrentMember`` without the generation check: an instance id must be
        known (else UNKNOWN_MEMBER_ID) and mapped to ``member_id`` (else FENCED_INSTANCE_ID: an
        older incarnation of a restarted static member); without one the member id must exist."""
        if instance_id is not None:
            current = self.static.get(instance_id)
            if current is None:
                return ErrorCode.UNKNOWN_MEMBER_ID
            return ErrorCode.NONE if current == member_id else ErrorCode.FENCED_INSTANCE_ID
        if member_id not in self.members:
            return ErrorCode.UNKNOWN_MEMBER_ID
        return ErrorCode.NONE

    def subscribed_topics(self) -> set[str] | None:
        """Topics the members subscribe to (Kafka ``Group.subscribedTopics``): parsed from each
        member's ConsumerProtocolSubscription for the chosen assignor; None when the group does
        not use the "consumer" protocol type or a subscription does not parse (callers must then
        assume every topic is subscribed)."""
        if self.protocol_type != "consumer":
            return None
        topics: set[str] = set()
        for m in self.members.values():
            parsed = subscription_topics(m.metadata_for(self.protocol_name))
            if parsed is None:
                return None
            topics |= parsed
        return topics

    def all_joined(self) -> bool:
        return not self.pending and all(m.join_waiter is not None for m in self.members.values())

    def joined_leader(self) -> str | None:
        """Kafka's ``maybeElectNewJoinedLeader``: the leader if it rejoined, else the first member
        that did; None when nobody rejoined (only absent static members are left)."""
        if self.leader in self.members and self.members[self.leader].join_waiter is not None:
            return self.leader
        return next((mid for mid, m in self.members.items() if m.join_waiter is not None), None)
